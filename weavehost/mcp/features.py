"""Client features: what weavehost offers MCP servers beyond calling their tools.

Stage: servers. :class:`~weavehost.mcp.servers.ServerPool` declares these capabilities to every
server and routes the servers' requests to the objects in :class:`ClientFeatures`; the agent (the
local model answers sampling) and the console (a person answers elicitation) implement them.

Invariants:

* No SDK type crosses this seam: the pool converts ``sampling/createMessage``,
  ``elicitation/create``, ``roots/list``, ``notifications/message`` and
  ``notifications/progress`` (in either protocol era) into the records below, and the replies
  back. Whoever implements a :class:`Sampler` or :class:`Elicitor` never imports ``mcp``.
* A capability is declared only when its object is present: no sampler, no ``sampling``; no
  elicitor, no ``elicitation``. Roots are always declared, and empty unless the host is given
  directories: a server started with its own directories keeps them (``docs/host.md``).
* A :class:`Sampler` or :class:`Elicitor` that refuses raises
  :class:`~weavehost.errors.ClientFeatureError`; the pool answers the server with an error
  carrying that message, never a traceback, and the host goes on.
* :class:`Roots` are absolute directories. Changing them through :meth:`Roots.set` tells every
  listener (the pool sends ``notifications/roots/list_changed`` to each running server).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

__all__ = [
    "ClientFeatures",
    "ElicitationReply",
    "ElicitationRequest",
    "Elicitor",
    "LogMessage",
    "Progress",
    "PromptArgument",
    "PromptInfo",
    "PromptMessage",
    "ResourceInfo",
    "ResourceText",
    "Roots",
    "Sampler",
    "SamplingMessage",
    "SamplingReply",
    "SamplingRequest",
    "ToolUse",
]


# --------------------------------------------------------------------------- sampling


@dataclass(frozen=True, slots=True)
class ToolUse:
    """A tool call inside a sampling exchange (``tool_use`` content)."""

    id: str
    name: str
    arguments: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SamplingMessage:
    """One message of a sampling request: its text, and any tool calls or tool results in it.

    ``tool_results`` pairs a ``tool_use`` id with the result's text.
    """

    role: Literal["user", "assistant"]
    text: str
    tool_uses: tuple[ToolUse, ...] = ()
    tool_results: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class SamplingRequest:
    """A server's ``sampling/createMessage``, as weavehost's model is asked it.

    ``tools`` are MCP tool dicts (``name``, ``description``, ``inputSchema``) the server offers
    the model; ``tool_choice`` is ``auto``, ``required`` or ``none`` (``None``: not given).
    Image and audio content never reaches here: the pool refuses it with a clear error.
    """

    server: str
    messages: tuple[SamplingMessage, ...]
    max_tokens: int
    system_prompt: str | None = None
    stop_sequences: tuple[str, ...] = ()
    temperature: float | None = None
    tools: tuple[Mapping[str, Any], ...] = ()
    tool_choice: str | None = None

    def describe(self) -> str:
        """What an approver is shown: the server, the system prompt and every message."""
        lines = [f"server {self.server!r} asks the model (max {self.max_tokens} tokens)"]
        if self.system_prompt:
            lines.append(f"  system: {self.system_prompt}")
        lines.extend(f"  {m.role}: {m.text}" for m in self.messages)
        if self.tools:
            lines.append("  tools: " + ", ".join(str(t.get("name")) for t in self.tools))
        return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class SamplingReply:
    """The model's answer: text, or tool calls (``stop_reason`` ``toolUse``)."""

    text: str
    model: str
    stop_reason: Literal["endTurn", "maxTokens", "stopSequence", "toolUse"]
    tool_uses: tuple[ToolUse, ...] = ()


class Sampler(Protocol):
    """Answers sampling requests (the agent's local model implements it)."""

    async def sample(self, request: SamplingRequest) -> SamplingReply: ...


# --------------------------------------------------------------------------- elicitation


@dataclass(frozen=True, slots=True)
class ElicitationRequest:
    """A server's ``elicitation/create``: a form (``schema``) or a URL to visit (``url``)."""

    server: str
    message: str
    mode: Literal["form", "url"]
    schema: Mapping[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None


@dataclass(frozen=True, slots=True)
class ElicitationReply:
    """``accept`` (with ``content`` for a form), ``decline`` or ``cancel``."""

    action: Literal["accept", "decline", "cancel"]
    content: Mapping[str, Any] | None = None


class Elicitor(Protocol):
    """Answers elicitation requests (the console asks a person; embedders bring their own)."""

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply: ...


# --------------------------------------------------------------------------- roots


RootsListener = Callable[[], None]


class Roots:
    """The directories offered to servers (none by default); listeners hear every change."""

    def __init__(self, paths: Iterable[str | os.PathLike[str]] = ()) -> None:
        self._paths = _absolute(paths)
        self._listeners: list[RootsListener] = []

    @property
    def paths(self) -> tuple[Path, ...]:
        return self._paths

    def uris(self) -> tuple[str, ...]:
        """Each root as the ``file://`` URI MCP sends."""
        return tuple(p.as_uri() for p in self._paths)

    def set(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        """Replace the roots and tell every listener (once, even if nothing changed)."""
        self._paths = _absolute(paths)
        for listener in list(self._listeners):
            listener()

    def on_change(self, listener: RootsListener) -> None:
        self._listeners.append(listener)


def _absolute(paths: Iterable[str | os.PathLike[str]]) -> tuple[Path, ...]:
    return tuple(Path(p).expanduser().resolve() for p in paths)


# --------------------------------------------------------------------------- notifications


@dataclass(frozen=True, slots=True)
class Progress:
    """One ``notifications/progress`` for a running call."""

    server: str
    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class LogMessage:
    """One ``notifications/message`` (a server's log line); ``data`` is as the server sent it."""

    server: str
    level: str
    data: Any
    logger: str | None = None


ProgressListener = Callable[[Progress], None]
LogListener = Callable[[LogMessage], None]


# --------------------------------------------------------------------------- resources, prompts


@dataclass(frozen=True, slots=True)
class ResourceInfo:
    """One entry of ``resources/list`` (or a template of ``resources/templates/list``)."""

    server: str
    uri: str
    name: str
    title: str | None = None
    description: str | None = None
    mime_type: str | None = None
    template: bool = False


@dataclass(frozen=True, slots=True)
class ResourceText:
    """One content of ``resources/read`` as text: a blob is described, never decoded blindly."""

    uri: str
    text: str
    mime_type: str | None = None


@dataclass(frozen=True, slots=True)
class PromptArgument:
    name: str
    description: str | None = None
    required: bool = False


@dataclass(frozen=True, slots=True)
class PromptInfo:
    """One entry of ``prompts/list``."""

    server: str
    name: str
    title: str | None = None
    description: str | None = None
    arguments: tuple[PromptArgument, ...] = ()


@dataclass(frozen=True, slots=True)
class PromptMessage:
    """One message of ``prompts/get``, as text (embedded resources inlined, images described)."""

    role: Literal["user", "assistant"]
    text: str


# --------------------------------------------------------------------------- the bundle


@dataclass(slots=True)
class ClientFeatures:
    """What the pool offers servers. Absent objects mean undeclared capabilities."""

    sampler: Sampler | None = None
    elicitor: Elicitor | None = None
    roots: Roots = field(default_factory=Roots)
    on_log: LogListener | None = None
