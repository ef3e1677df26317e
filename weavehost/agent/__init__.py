"""The agent: a resident conversation in which the model writes calls and reads their results.

It joins the decoder (a strategy writes each call) and the MCP side (the executor runs it):

- :mod:`~weavehost.agent.session` — :class:`Session`, the bounded loop of one conversation;
- :mod:`~weavehost.agent.model` — the model seam: the engine-backed model and a scripted one;
- :mod:`~weavehost.agent.context` — what of a long conversation the model is shown;
- :mod:`~weavehost.agent.thermal` — threads and pacing on a hot phone.
"""

from weavehost.agent.model import AgentModel, EngineModel, ScriptedCall, ScriptedModel
from weavehost.agent.session import (
    DEFAULT_MAX_STEPS,
    TOOL_CHOICES,
    Event,
    ModelLock,
    ResultCache,
    Session,
    ToolChoice,
)

__all__ = [
    "DEFAULT_MAX_STEPS",
    "TOOL_CHOICES",
    "AgentModel",
    "EngineModel",
    "Event",
    "ModelLock",
    "ResultCache",
    "ScriptedCall",
    "ScriptedModel",
    "Session",
    "ToolChoice",
]
