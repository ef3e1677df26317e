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
  ``final_latency_s`` to the final call. ``tool_pass_rows`` and ``final_pass_rows`` are the
  passes each of them covers (what a cost table re-costs them from), by their rows.

Every strategy keeps these the same way, through one :class:`CallAttempt`: it is started before
the first token of the call, costs and times what follows, rolls back to the prompt, and builds
the :class:`CallResult`, with the call's time account (:class:`CallAccount`: passes, masks, the
selector, the rest).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from weavehost.decode.calibration import decode_state
from weavehost.engine import Engine, EngineStats
from weavehost.errors import FormatError
from weavehost.formats.base import ModelFormat, ToolCall

if TYPE_CHECKING:
    from weavehost.decode.constraint import MaskClock
    from weavehost.decode.drafts import DraftSource
    from weavehost.decode.state import DecodeState

__all__ = [
    "CallAccount",
    "CallAttempt",
    "CallRequest",
    "CallResult",
    "DecodeStrategy",
    "StatefulStrategy",
    "ToolSchema",
    "read_calls",
]


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
    constrained strategies start with it forced by their grammar. ``drafts`` is where
    drafted values come from (the conversation's texts), for strategies that verify drafts.
    """

    engine: Engine
    format: ModelFormat
    tools: Sequence[ToolSchema]
    max_tokens: int = 256
    on_provisional: Callable[[ToolCall], None] | None = None
    forced: bool = True
    drafts: DraftSource | None = None


@dataclass(frozen=True, slots=True)
class CallAccount:
    """Where one call's time went, in seconds, over the span whose work ``stats`` counts: from
    the attempt's ``started`` (where ``tool_latency_s`` and ``final_latency_s`` count from) to
    the moment :meth:`CallAttempt.finish` built the result. So ``total_s`` is at least
    ``final_latency_s``: it also holds what ran after the final call's text was known (a last
    pass of closer text the grammar alone decides, the parse, a roll back). The prompt's
    prefill is outside it. A reply's (:class:`~weavehost.decode.several.Reply`) is the same
    over the whole reply (:meth:`over` its calls' accounts). The parts are disjoint and add up
    to ``total_s``:

    - ``passes_s``: inside ``llama_decode`` passes (the engine's ``decode_s + prefill_s``),
      ``passes`` of them;
    - ``mask_s``: computing constraint masks (``masks`` of them; llguidance's bitmask and its
      unpacking: :meth:`~weavehost.decode.constraint.Constraint.allowed`);
    - ``selector_s``: ``weave``'s tool selector, its own Python (the selector's time less the
      passes and masks run in it, which are counted above); 0 for a strategy without one;
    - ``other_s``: the rest, Python between passes (``total_s`` less the three above).
    """

    total_s: float
    passes_s: float
    mask_s: float
    selector_s: float
    other_s: float
    passes: int
    masks: int

    @classmethod
    def over(
        cls, total_s: float, stats: EngineStats, parts: Sequence[CallAccount] = ()
    ) -> CallAccount:
        """The account of ``total_s`` seconds whose work ``stats`` counts, its masks and
        selector time those of ``parts`` (the calls run in it)."""
        passes = stats.decode_s + stats.prefill_s
        mask = sum(part.mask_s for part in parts)
        selector = sum(part.selector_s for part in parts)
        return cls(
            total_s=total_s,
            passes_s=passes,
            mask_s=mask,
            selector_s=selector,
            # The parts are timed apart and disjoint: a negative rest is float rounding only.
            other_s=max(0.0, total_s - passes - mask - selector),
            passes=stats.passes,
            masks=sum(part.masks for part in parts),
        )


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
    # The passes that ended by the tool start and by the final call, by their rows (as
    # ``stats.pass_rows``); ``None``: all of ``stats.pass_rows`` (a writer without the engine's
    # timeline, the stock peers, whose call is ready when its generation ends).
    tool_pass_rows: dict[int, int] | None = None
    final_pass_rows: dict[int, int] | None = None
    # Where the call's time went (``None``: a writer that does not account, the stock peers).
    account: CallAccount | None = None


class CallAttempt:
    """One strategy's attempt at a call: what it cost, how long each phase took, how to undo it.

    :meth:`start` snapshots the engine's counters, the prompt (sequence 0's length and its
    next-token logits) and the clock, before the strategy writes anything. Everything the
    result reports is measured from there: ``stats`` is the work since the snapshot, latencies
    and :meth:`lap` times count from ``started``. :meth:`roll_back` puts the KV cache back as
    it was found (for sequence 0) and empty (for every other sequence), so a failed call leaves
    no trace in the conversation.

    ``masks``: the clock of the constraint factory the call's constraints come from (what the
    account's ``mask_s`` reads; ``None``: a call that computes no mask). :meth:`selecting`
    times the tool selector. The account costs a few ``perf_counter`` reads a pass and a mask.
    """

    __slots__ = (
        "_clock",
        "_masks_before",
        "before",
        "engine",
        "masks",
        "phases",
        "prompt_len",
        "prompt_logits",
        "selector_s",
        "started",
        "strategy",
    )

    def __init__(self, strategy: str, engine: Engine, masks: MaskClock | None = None) -> None:
        self.strategy = strategy
        self.engine = engine
        self.masks = masks
        self._masks_before = (masks.seconds, masks.masks) if masks is not None else (0.0, 0)
        self.selector_s = 0.0
        self.before: EngineStats = engine.stats.snapshot()
        self.prompt_len = engine.seq_len(0)
        # A prompt read without next-token logits gets none back on a roll back either.
        self.prompt_logits: np.ndarray | None = (
            engine.last_logits(0) if engine.has_next_logits(0) else None
        )
        self.started = time.perf_counter()
        self.phases: dict[str, float] = {}
        self._clock = self.started

    @classmethod
    def start(cls, strategy: str, engine: Engine, masks: MaskClock | None = None) -> CallAttempt:
        """An attempt by ``strategy`` on ``engine``, whose sequence 0 now holds the prompt;
        ``masks``: the clock of the constraints it uses."""
        return cls(strategy, engine, masks)

    def _mask_seconds(self) -> float:
        return self.masks.seconds if self.masks is not None else 0.0

    def _pass_seconds(self) -> float:
        stats = self.engine.stats
        return stats.decode_s + stats.prefill_s

    @contextlib.contextmanager
    def selecting(self) -> Iterator[None]:
        """Time the block as the tool selector's: its own Python time (the block's, less the
        passes and masks run in it) is added to the account's ``selector_s``."""
        passes, masks, started = self._pass_seconds(), self._mask_seconds(), time.perf_counter()
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            inside = (self._pass_seconds() - passes) + (self._mask_seconds() - masks)
            self.selector_s += max(0.0, elapsed - inside)

    def account(self, stats: EngineStats, at: float) -> CallAccount:
        """The account from ``started`` to ``at`` (now), ``stats`` the work since ``started``."""
        seconds_before, masks_before = self._masks_before
        own = CallAccount(
            total_s=0.0,
            passes_s=0.0,
            mask_s=self._mask_seconds() - seconds_before,
            selector_s=self.selector_s,
            other_s=0.0,
            passes=0,
            masks=(self.masks.masks if self.masks is not None else 0) - masks_before,
        )
        return CallAccount.over(at - self.started, stats, [own])

    def lap(self, phase: str, at: float | None = None) -> float:
        """Record ``phase`` as the time from the previous lap (or the start) to ``at`` (now by
        default), and return that instant."""
        now = time.perf_counter() if at is None else at
        self.phases[phase] = now - self._clock
        self._clock = now
        return now

    def roll_back(self) -> None:
        """Back to the prompt alone: every other sequence emptied, sequence 0 cut back to the
        prompt with the prompt's next-token logits."""
        engine = self.engine
        for seq in range(1, engine.n_seq_max):
            if engine.seq_len(seq):
                engine.drop(seq, 0)
        engine.drop(0, self.prompt_len, next_logits=self.prompt_logits)

    def finish(
        self,
        *,
        calls: Sequence[ToolCall],
        text: str,
        tokens: Sequence[int],
        provisional: ToolCall | None = None,
        error: str | None = None,
        final_at: float | None = None,
        tool_at: float | None = None,
    ) -> CallResult:
        """The result, as the engine is now: ``final_at`` is when the final call was ready (now
        by default), ``tool_at`` when the call whose result is used could start (``final_at``
        by default). Nothing is rolled back: a strategy that keeps a failed text says so."""
        now = time.perf_counter()
        final_at = now if final_at is None else final_at
        tool_at = final_at if tool_at is None else tool_at
        engine = self.engine
        stats = engine.stats.since(self.before)
        return CallResult(
            strategy=self.strategy,
            calls=list(calls),
            provisional=provisional,
            text=text,
            stats=stats,
            tool_latency_s=tool_at - self.started,
            final_latency_s=final_at - self.started,
            phases=self.phases,
            error=error,
            tokens=list(tokens),
            tool_pass_rows=engine.pass_rows_between(self.started, tool_at),
            final_pass_rows=engine.pass_rows_between(self.started, final_at),
            account=self.account(stats, now),
        )

    def failed(
        self,
        error: str,
        *,
        text: str = "",
        tokens: Sequence[int] = (),
        provisional: ToolCall | None = None,
    ) -> CallResult:
        """Roll back, then no call and why; ``text`` (and ``tokens``) keep what was written,
        for the message; ``provisional``: the provisional call made before the failure (the
        caller may run it: every required value was decided)."""
        self.roll_back()
        return self.finish(calls=[], text=text, tokens=tokens, error=error, provisional=provisional)


class DecodeStrategy(Protocol):
    """``serial``, ``constrained``, ``jump_forward``, ``weave``: one call per :meth:`run`,
    each made for one model's :class:`~weavehost.decode.state.DecodeState`."""

    name: str

    def state_for(self, engine: Engine) -> DecodeState:
        """The decode state of the model ``engine`` runs (what this strategy and the reply
        driver learn and cache about it)."""
        ...

    def prepare(self, engine: Engine) -> None:
        """Builds now what this strategy's calls on ``engine`` read and build only once per
        engine (the constraint factory: reading the vocabulary, ~0.3–0.6 s), so the first call
        does not pay it. Called before the engine decodes anything, from any one thread."""
        ...

    def run(self, request: CallRequest) -> CallResult: ...


class StatefulStrategy:
    """What every strategy shares: the :class:`~weavehost.decode.state.DecodeState` of the
    model it writes for. Given by whoever opened the model
    (:func:`~weavehost.decode.calibration.open_calibrated`); a strategy made without one makes
    its own for the first engine it serves (the stored calibration's plans for that model),
    so two strategies made alone never share what they learn."""

    def __init__(self, state: DecodeState | None = None) -> None:
        self._state = state

    def state_for(self, engine: Engine) -> DecodeState:
        if self._state is None:
            self._state = decode_state(engine)
        return self._state.serve(engine)

    def prepare(self, engine: Engine) -> None:
        """Builds now what this strategy's calls read and build only once per model (the
        constraint factory, the vocabulary by bytes a closer is spelled from), so the first
        call does not pay it."""
        state = self.state_for(engine)
        state.constraints(engine)
        state.spelling_index(engine)


def read_calls(
    fmt: ModelFormat, text: str, writer: str = "the model"
) -> tuple[list[ToolCall], str | None]:
    """The calls in ``text`` and ``None``, or no calls and why (malformed, or none written)."""
    try:
        calls = fmt.parse_calls(text)
    except FormatError as exc:
        return [], str(exc)
    return calls, None if calls else f"{writer} wrote no tool call"
