"""The agent: a resident conversation in which the model writes calls and reads their results.

It joins the decoder (a strategy writes each call) and the MCP side (the executor runs it):

- :mod:`~weavehost.agent.session` — :class:`Session`, the bounded loop of one conversation;
- :mod:`~weavehost.agent.events` — :class:`Event`, what a turn reports;
- :mod:`~weavehost.agent.cache` — :class:`ResultCache`, runs of trusted read-only calls;
- :mod:`~weavehost.agent.tools` — which tools a large catalog offers a request;
- :mod:`~weavehost.agent.lock` — :class:`ModelLock`, who may enter the model, and how;
- :mod:`~weavehost.agent.model` — the model seam and the engine-backed model;
- :mod:`~weavehost.agent.scripted` — a scripted model for tests;
- :mod:`~weavehost.agent.context` — what of a long conversation the model is shown;
- :mod:`~weavehost.agent.thermal` — threads and pacing on a hot phone.
"""

from weavehost.agent.cache import ResultCache
from weavehost.agent.events import Event
from weavehost.agent.lock import ModelLock
from weavehost.agent.model import AgentModel, EngineModel
from weavehost.agent.scripted import ScriptedCall, ScriptedModel
from weavehost.agent.session import DEFAULT_MAX_STEPS, TOOL_CHOICES, Session, ToolChoice

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
