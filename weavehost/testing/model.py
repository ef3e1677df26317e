"""The scripted model: the calls and answers a test gives it, instead of weights.

Stage: agent (the test double behind the :class:`~weavehost.agent.model.AgentModel` seam),
published by the test kit (:mod:`weavehost.testing`). A test writes the model's part of the
conversation as a list of steps and the host runs it through the same agent loop, executor,
approvals and events as a real model, so a test of a server or of an app's integration needs no
GGUF file and is deterministic (as ``llm``'s ``MockModel`` does for its tool loop)::

    ScriptedModel([
        call("get_forecast", city="Oslo"),                      # one call
        [call("get_forecast", city="Oslo"), call("get_time")],   # several calls in one reply
        "It is sunny in Oslo.",                                  # the answer
    ])

Invariants: replies come in the order given (a ``str`` answers, a :class:`ScriptedCall` opens a
call, a list of them is one reply with several calls); when the script runs dry the model
answers :data:`SCRIPT_DONE`. A scripted call is handed to the loop as written, as a model's
decoded call: one naming an unknown tool or carrying bad arguments is refused by the executor
(a ``tool_result`` with status ``unknown_tool`` or ``invalid_arguments``) and never reaches a
server. Every sync, offer, free decode, hold and thread change is recorded for the test to read;
:meth:`ScriptedModel.abort` is honoured at every call, as the engine honours it between passes.
A bad script (a step that is neither text, a call nor a list of calls) is a
:class:`~weavehost.errors.ConfigError` naming the step.
"""

from __future__ import annotations

import functools
import json
import threading
from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from weavehost.agent.model import (
    FreeText,
    IndexedProvisionalSink,
    ProvisionalSink,
    Sampling,
    SyncReport,
    TextSink,
)
from weavehost.decode import MAX_CALLS, CallResult, ToolSchema
from weavehost.engine import EngineStats
from weavehost.errors import AbortedError, ConfigError
from weavehost.formats import ToolCall, tool_to_openai

__all__ = ["SCRIPT_DONE", "ScriptedCall", "ScriptedModel", "Step", "call"]

SCRIPT_DONE = "(no more scripted replies)"  # the answer once the script has run dry


@dataclass(frozen=True, slots=True)
class ScriptedCall:
    """A scripted call: text before it, the provisional call (if any) and the final call.

    ``hold`` (when set) is waited on after the provisional call was handed over and before the
    final call is returned, so a test can check that a tool started while the call was still
    being written. ``error`` scripts a call that failed to decode.
    """

    final: ToolCall | None
    provisional: ToolCall | None = None
    text: str = ""
    hold: threading.Event | None = None
    error: str | None = None


Step = str | ScriptedCall | list[ScriptedCall]
"""One reply of the script: answer text, one call, or several calls in one reply."""


def call(tool: str, /, **arguments: Any) -> ScriptedCall:
    """A scripted call of ``tool`` with ``arguments``, written as a model writes one: the call
    is announced provisionally, then final, with the same arguments (so a trusted read-only tool
    starts early, as it does under a real model). An argument whose name is not a Python
    identifier goes in a dict: ``call("search", **{"max-results": 3})``."""
    written = ToolCall(tool, arguments)
    return ScriptedCall(final=written, provisional=written)


def _checked_step(index: int, step: Any) -> Step:
    """``step`` as a reply, or a :class:`ConfigError` naming it (steps count from 1)."""
    if isinstance(step, str | ScriptedCall):
        return step
    if isinstance(step, list | tuple) and step and all(isinstance(c, ScriptedCall) for c in step):
        return list(step)
    raise ConfigError(
        f"scripted model, step {index + 1}: expected answer text, call(...) or a non-empty "
        f"list of call(...), got {step!r}"
    )


@dataclass
class ScriptedModel:
    """A model with a queue of replies: ``str`` answers, :func:`call` s (or
    :class:`ScriptedCall` s), or a list of calls for a reply that makes several.

    Records every conversation it was synced to (``synced``) and the tools offered each time.
    When the queue runs dry it answers :data:`SCRIPT_DONE`.
    """

    replies: Sequence[Step]
    writes_forced_calls: ClassVar[bool] = True  # as a local model: the host may force a call
    avoids_tokens: ClassVar[bool] = False  # its text is its script: nothing is written again
    n_ctx: int = 4096
    hold_timeout_s: float = 5.0
    synced: list[list[dict[str, Any]]] = field(default_factory=list)
    offered: list[list[str]] = field(default_factory=list)
    holds: list[bool] = field(default_factory=list)  # whether each hold was released in time
    allowed_calls: list[bool] = field(default_factory=list)  # allow_call of each free decode
    refused: list[frozenset[str]] = field(default_factory=list)  # refused tools of each one
    made: list[frozenset[str]] = field(default_factory=list)  # the turn's calls at each one
    avoided: list[frozenset[int]] = field(default_factory=list)  # avoid of each one
    samplings: list[Sampling | None] = field(default_factory=list)  # sampling of each one
    resets: int = 0  # times the loop reset the model's KV cache after a decode failure
    threads: int = 4
    thread_changes: list[int] = field(default_factory=list)  # every set_threads, in order
    _queue: deque[Step] = field(init=False)
    _pending: deque[ScriptedCall] = field(default_factory=deque, init=False)  # this reply's
    written: list[int] = field(default_factory=list)  # calls written in each reply with calls
    _abort: threading.Event = field(default_factory=threading.Event, init=False)

    def __post_init__(self) -> None:
        if isinstance(self.replies, str | ScriptedCall):
            raise ConfigError("scripted model: pass a list of steps, not a single step")
        self._queue = deque(_checked_step(i, step) for i, step in enumerate(self.replies))

    @property
    def remaining(self) -> int:
        """Replies of the script not yet given (a test can check the script was used up)."""
        return len(self._queue)

    def count_tokens(self, text: str) -> int:
        return len(text) // 4 + 1

    def prompt_tokens(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
    ) -> int:
        offered = [tool_to_openai(t.name, t.description, t.parameters) for t in tools]
        return self.count_tokens(json.dumps([list(messages), offered], default=str))

    def reset(self) -> None:
        self.resets += 1

    def set_threads(self, n_threads: int) -> None:
        self.thread_changes.append(n_threads)
        self.threads = n_threads

    def stats(self) -> EngineStats:
        return EngineStats()

    def abort(self) -> None:
        self._abort.set()

    def clear_abort(self) -> None:
        self._abort.clear()

    def _check(self) -> None:
        if self._abort.is_set():
            raise AbortedError("decoding was stopped")

    def sync(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
    ) -> SyncReport:
        self._check()
        self.synced.append([dict(m) for m in messages])
        self.offered.append([t.name for t in tools])
        return SyncReport(total=len(messages), reused=0, prefilled=len(messages))

    def free_decode(
        self,
        on_text: TextSink,
        max_tokens: int,
        allow_call: bool = True,
        *,
        sampling: Sampling | None = None,
        refused: Collection[str] = (),
        made: Collection[str] = (),
        avoid: Collection[int] = (),
    ) -> FreeText:
        """The next scripted reply; a text answer is cut before the first of ``sampling``'s
        stop sequences, as the engine cuts it. ``refused`` and ``made`` are recorded; a
        scripted call to a refused tool, or an exact repeat, is still written (as a remote
        server writes it). Its tokens are the text's UTF-8 bytes; ``avoid`` is recorded."""
        self._check()
        self.allowed_calls.append(allow_call)
        self.refused.append(frozenset(refused))
        self.made.append(frozenset(made))
        self.avoided.append(frozenset(avoid))
        self.samplings.append(sampling)
        reply = self._queue.popleft() if self._queue else SCRIPT_DONE
        calls = [reply] if isinstance(reply, ScriptedCall) else reply
        if not isinstance(calls, str) and not allow_call:
            calls = calls[0].text or "(a call was not allowed)"
        if isinstance(calls, str):
            stop = "end"
            for sequence in sampling.stop if sampling else ():
                if sequence and sequence in calls:
                    calls, stop = calls[: calls.index(sequence)], "stop_sequence"
            if calls:
                on_text(calls)
            return FreeText(text=calls, call=False, stop=stop, token_ids=tuple(calls.encode()))
        if calls[0].text:
            on_text(calls[0].text)
        self._pending = deque(calls)
        self.written.append(0)
        return FreeText(text=calls[0].text, call=True, stop="call")

    def resume_free(
        self,
        on_text: TextSink,
        max_tokens: int,
        *,
        refused: Collection[str] = (),
        made: Collection[str] = (),
    ) -> FreeText | None:
        """``None``: a scripted reply is its script, not a text that goes on; the loop asks
        for an answer in a new step, the script's next reply."""
        return None

    def write_calls(
        self,
        tools: Sequence[ToolSchema],
        on_provisional: IndexedProvisionalSink,
        max_tokens: int,
        *,
        budget: int,
        max_calls: int = MAX_CALLS,
        made: Collection[str] = (),
        on_final: IndexedProvisionalSink | None = None,
    ) -> list[CallResult]:
        """The reply's scripted calls, one :meth:`write_call` each, at most ``max_calls``; a
        call that failed, or one equal to a call in ``made`` (the turn's earlier calls,
        canonical), ends the reply; ``on_final`` hears each other call when it is returned (as
        the decoder's driver does)."""
        results: list[CallResult] = []
        while self._pending and len(results) < max_calls:
            sink = functools.partial(on_provisional, len(results))
            result = self.write_call(tools, sink, max_tokens)
            results.append(result)
            if not result.calls or any(c.canonical() in made for c in result.calls):
                break
            if on_final is not None:
                on_final(len(results) - 1, result.calls[0])
        self._pending.clear()
        return results

    def write_call(
        self, tools: Sequence[ToolSchema], on_provisional: ProvisionalSink, max_tokens: int
    ) -> CallResult:
        """One scripted call of the reply."""
        self._check()
        assert self._pending, "write_call without a scripted call"
        script = self._pending.popleft()
        self.written[-1] += 1
        if script.provisional is not None:
            on_provisional(script.provisional)
        if script.hold is not None:
            self.holds.append(script.hold.wait(self.hold_timeout_s))
        self._check()
        if script.final is None:
            self._pending.clear()  # a call that failed ends the reply
        calls = [script.final] if script.final is not None else []
        return CallResult(
            strategy="scripted",
            calls=calls,
            provisional=script.provisional,
            text="",
            stats=EngineStats(),
            tool_latency_s=0.0,
            final_latency_s=0.0,
            error=script.error if script.final is None else None,
        )
