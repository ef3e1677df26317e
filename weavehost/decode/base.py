"""The one interface every decoding strategy implements, and what a decoded call reports.

Stage: decoding (between the prompt prefill and execution). A strategy receives a
:class:`CallRequest` — an engine whose sequence 0 holds the prompt, the model format, the tools
on offer — and writes one tool call greedily. It returns a :class:`CallResult`: the call(s),
the provisional call where it has one, the exact text it left on sequence 0, and what it cost.

Guarantees shared by all strategies:

- On return, sequence 0 holds the prompt followed by the call text (as if decoded serially) and
  every other sequence is empty.
- A call is returned only if it parsed; ``calls`` is empty and ``error`` says why otherwise.
  A constrained strategy that fails leaves sequence 0 holding the prompt only (``text`` keeps
  what it had written, for the message); ``serial`` keeps what the model wrote, which may be a
  plain answer rather than a call.
- ``stats`` counts only the work done for this call (not the prompt prefill).
- Latencies are measured from the start of generating the call text: ``tool_latency_s`` to the
  moment the first executable call (the provisional one where sent) was ready,
  ``final_latency_s`` to the final call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from weavehost.engine import Engine, EngineStats
from weavehost.errors import FormatError
from weavehost.formats.base import ModelFormat, ToolCall

__all__ = ["CallRequest", "CallResult", "DecodeStrategy", "ToolSchema", "read_calls"]


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """A tool as the decoder needs it: its name and normalised JSON schema of arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]

    @property
    def required(self) -> tuple[str, ...]:
        props = self.parameters.get("properties", {})
        return tuple(k for k in self.parameters.get("required", []) if k in props)

    @property
    def optional(self) -> tuple[str, ...]:
        required = set(self.required)
        return tuple(k for k in self.parameters.get("properties", {}) if k not in required)


@dataclass(frozen=True, slots=True)
class CallRequest:
    """What a strategy gets: the engine (prompt on sequence 0), format and tools on offer.

    ``on_provisional`` is called (from the decoding thread) the moment a provisional call is
    ready, before write-back; the executor starts read-only tools from it. ``forced`` says a
    call must be made now (the agent saw the format's opener, or the benchmark asks for a
    call): the free-writing ``serial`` strategy then starts with the opener prefilled, as the
    constrained strategies start with it forced by their grammar.
    """

    engine: Engine
    format: ModelFormat
    tools: Sequence[ToolSchema]
    max_tokens: int = 256
    on_provisional: Callable[[ToolCall], None] | None = None
    forced: bool = True


@dataclass(frozen=True, slots=True)
class CallResult:
    """A decoded call and its cost. ``text`` is what sequence 0 now holds after the prompt."""

    strategy: str
    calls: list[ToolCall]
    provisional: ToolCall | None
    text: str
    stats: EngineStats
    tool_latency_s: float
    final_latency_s: float
    phases: dict[str, float] = field(default_factory=dict)
    error: str | None = None
    # The call's tokens as sequence 0 now holds them after the prompt.
    tokens: list[int] = field(default_factory=list)


class DecodeStrategy(Protocol):
    """``serial``, ``constrained``, ``jump_forward``, ``weave``: one call per :meth:`run`."""

    name: str

    def run(self, request: CallRequest) -> CallResult: ...


def read_calls(
    fmt: ModelFormat, text: str, writer: str = "the model"
) -> tuple[list[ToolCall], str | None]:
    """The calls in ``text`` and ``None``, or no calls and why (malformed, or none written)."""
    try:
        calls = fmt.parse_calls(text)
    except FormatError as exc:
        return [], str(exc)
    return calls, None if calls else f"{writer} wrote no tool call"
