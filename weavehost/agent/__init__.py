"""The agent: a resident conversation in which the model writes calls and reads their results.

It joins the decoder (a strategy writes each call) and the MCP side (the executor runs it):

- :mod:`~weavehost.agent.session` — :class:`Session`, the bounded loop of one conversation;
- :mod:`~weavehost.agent.options` — tool choices and the step bound (names only);
- :mod:`~weavehost.agent.events` — :class:`Event`, what a turn reports;
- :mod:`~weavehost.agent.cache` — :class:`ResultCache`, runs of trusted read-only calls;
- :mod:`~weavehost.agent.tools` — which tools a large catalog offers a request;
- :mod:`~weavehost.agent.lock` — :class:`ModelLock`, who may enter the model, and how;
- :mod:`~weavehost.agent.model` — the model seam and the engine-backed model;
- :mod:`~weavehost.agent.remote` — :class:`RemoteModel`, a model on an OpenAI-compatible server
  (:mod:`~weavehost.agent.remote_http` its HTTP, :mod:`~weavehost.agent.openai_stream` its
  streamed chunks and arguments);
- :mod:`~weavehost.agent.sampling` — :class:`ModelSampler`, servers' sampling answered by the model;
- :mod:`~weavehost.agent.context` — what of a long conversation the model is shown;
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from weavehost.agent.options import DEFAULT_MAX_STEPS, TOOL_CHOICES, ToolChoice

if TYPE_CHECKING:
    from weavehost.agent.cache import ResultCache
    from weavehost.agent.events import Event
    from weavehost.agent.lock import ModelLock
    from weavehost.agent.model import AgentModel, EngineModel
    from weavehost.agent.sampling import ModelSampler
    from weavehost.agent.session import Session

__all__ = [
    "DEFAULT_MAX_STEPS",
    "TOOL_CHOICES",
    "AgentModel",
    "EngineModel",
    "Event",
    "ModelLock",
    "ModelSampler",
    "ResultCache",
    "Session",
    "ToolChoice",
]

# The classes pull in the MCP SDK and llama.cpp; they load on first use, so the command line
# can read the options above quickly (as ``weavehost/__init__.py`` does for ``Host``).
_LAZY = {
    "AgentModel": "model",
    "EngineModel": "model",
    "Event": "events",
    "ModelLock": "lock",
    "ModelSampler": "sampling",
    "ResultCache": "cache",
    "Session": "session",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'weavehost.agent' has no attribute {name!r}")
    return getattr(import_module(f"weavehost.agent.{module}"), name)
