"""Several calls in one reply: the one driver that writes them, for the agent and the bench.

Stage: decoding (after the prompt prefill, around a strategy's single calls). A strategy writes
one call per :meth:`~weavehost.decode.base.DecodeStrategy.run`; :func:`write_calls` writes a
reply's calls: the first in the layout it began in, then, after each call's closer, **one
greedy decision** says whether another follows, and the strategy writes that one too (its
selector runs after the first call's closer). The decision is the model's own greedy choice
among the continuations the format allows after a call
(:meth:`~weavehost.formats.several.SeveralCalls.after_call`: whitespace, then another
opener, or the reply's close and the end of generation): no strategy decides it, so every
strategy writes the same number of calls where the model wants them.

Guarantees:

* On return sequence 0 holds the prompt followed by :attr:`Reply.tokens` (the calls, what
  separates them, and the format's ``close`` after the last call of a several-call layout),
  which :func:`~weavehost.formats.several.render_calls` renders, so a conversation that
  records the calls keeps every token. What the model wrote while deciding not to go on is
  dropped. A first call that failed is left as its strategy left it (a constrained one rolled
  back, ``serial``'s text kept); a later one that failed is rolled back with the decision
  before it, and the calls before it are kept.
* **Bounded.** At most ``max_calls`` calls; the reply never takes more than ``budget`` tokens
  of sequence 0: each call's ``max_tokens`` leaves room for the close, and a decision (at most
  :data:`DECISION_TOKENS` tokens) is made only where it fits with the close.
* A call equal to one the reply already holds ends the reply and is not kept (a model in a
  loop). Only a call written exactly in its layout (its text ends with the layout's tail) can
  be followed by another; a free-writing strategy's own list ends the reply. So does a first
  call equal to one made earlier in the turn (``made``).
* A call begun by a trigger with a layout of its own (Qwen's bare or fenced JSON) is held
  again, once written, in the layout the format writes a reply's first call in (the form the
  conversation renders it in at the next step anyway), and the decision after it is the
  format's own. Asked for one call only (``max_calls=1``), it stays as the model began it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace

import numpy as np

from weavehost.decode.base import CallAccount, CallRequest, CallResult, DecodeStrategy
from weavehost.decode.call_tokens import respell_closer, tokenize_call_text
from weavehost.engine import Engine, EngineStats
from weavehost.formats.base import ModelFormat, ToolCall, Trigger, call_format, call_parts
from weavehost.formats.several import SeveralCalls, first_call_format

__all__ = ["DECISION_TOKENS", "MAX_CALLS", "Decision", "Reply", "decide_more", "write_calls"]

MAX_CALLS = 8  # calls one reply may hold unless the caller says otherwise
# Tokens the decision after a call may write before it must have decided: a separator and the
# opener spelled in pieces (Qwen2.5-Coder writes ``<tool_call>`` as ``<`` ``tool`` ``_call``
# ``>``, not as its added token).
DECISION_TOKENS = 8
# The decision scans the vocabulary from the best logit down; past this many it sorts it all.
_TOP_K = 64

IndexedProvisional = Callable[[int, ToolCall], None]


@dataclass(frozen=True, slots=True)
class Decision:
    """What the model chose after a call: another call or not, the tokens it wrote (kept on
    sequence 0 before the next call's opener when ``more``) and, at each step, the best logit of
    a legal token that leads to another call and of one that ends the reply (``None``: none
    legal), for reports."""

    more: bool
    kept: list[int] = field(default_factory=list)
    steps: list[tuple[str, float | None, float | None]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply's calls: one :class:`CallResult` per call the strategy wrote (a failed one
    last), what sequence 0 now holds after the prompt (``text``, ``tokens``), the work and time
    of the whole reply, and each decision taken."""

    results: list[CallResult]
    text: str
    tokens: list[int]
    stats: EngineStats
    final_latency_s: float
    decisions: list[Decision] = field(default_factory=list)
    # The passes that ended by the last final call, by their rows: ``stats`` less what came
    # after it (the closer spelled again and the decision that no call follows).
    final_pass_rows: dict[int, int] | None = None
    # Where the whole reply's time went (its calls' masks and selectors, every pass, the
    # rest); ``None`` when a call's strategy keeps no account.
    account: CallAccount | None = None

    @property
    def calls(self) -> list[ToolCall]:
        return [call for result in self.results for call in result.calls]

    def combined(self) -> CallResult:
        """The whole reply as one :class:`CallResult` (what ``weavehost bench`` scores): every
        call, the first call's provisional call and tool latency (with the passes it covers),
        the time from the first call's start to the last final call (with the passes it
        covers), the reply's text, tokens and work, the phases summed over the calls;
        ``error`` only when no call was made."""
        first = self.results[0]
        phases: dict[str, float] = {}
        for result in self.results:
            for phase, seconds in result.phases.items():
                phases[phase] = phases.get(phase, 0.0) + seconds
        calls = self.calls
        return CallResult(
            strategy=first.strategy,
            calls=calls,
            provisional=first.provisional,
            text=self.text,
            stats=self.stats,
            tool_latency_s=first.tool_latency_s,
            final_latency_s=self.final_latency_s,
            phases=phases,
            error=None if calls else first.error,
            tokens=list(self.tokens),
            tool_pass_rows=first.tool_pass_rows,
            final_pass_rows=self.final_pass_rows,
            account=self.account,
        )


def write_calls(
    request: CallRequest,
    strategy: DecodeStrategy,
    *,
    first: Trigger | None = None,
    max_calls: int = MAX_CALLS,
    budget: int | None = None,
    on_provisional: IndexedProvisional | None = None,
    made: Collection[str] = (),
    on_final: IndexedProvisional | None = None,
) -> Reply:
    """Write a reply's calls with ``strategy`` from sequence 0 (the prompt, or a conversation
    and the free text before the call).

    ``request.format`` is the model's format and ``request.max_tokens`` one call's budget;
    ``first`` the trigger the first call began with (its layout; ``None``: the format's own).
    ``budget``: tokens the whole reply may take (default: what is left of the context).
    ``on_provisional(index, call)``: each call's provisional call with its place in the reply
    (default: ``request.on_provisional`` for every call). ``made``: the canonical texts
    (:meth:`~weavehost.formats.base.ToolCall.canonical`) of calls made earlier in the turn; a
    call equal to one of them ends the reply like a call the reply already holds (a first call
    is kept: the caller decides what a repeat means). ``on_final(index, call)``: each call
    the reply keeps, as soon as it is written (before the decision after it), so the caller may
    run it while the reply goes on; not for a first call in ``made``."""
    engine, fmt = request.engine, request.format
    several = fmt.several
    before = engine.stats.snapshot()
    started = time.perf_counter()
    start = engine.seq_len(0)
    budget = engine.n_ctx - start if budget is None else budget
    call_fmt, layered = _first_format(fmt, first, more=max_calls > 1)
    # A call begun by a trigger with a layout of its own is held again in the format's own
    # layout once written, where more calls may follow it (see _rehold).
    rehold = not layered and max_calls > 1 and several is not None and call_fmt is not fmt
    close_text = several.close if several is not None and (layered or rehold) else ""
    close = engine.tokenize(close_text, special=True) if close_text else []
    results: list[CallResult] = []
    decisions: list[Decision] = []
    tokens: list[int] = []  # the reply so far: calls and what separates them
    texts: list[str] = []
    # After the last call written (its closer as the model spells it, where it was spelled
    # again for the decision): sequence 0's length and the reply's tokens and texts.
    good: tuple[int, list[int], list[str]] = (start, [], [])
    seen: set[str] = set(made)  # the turn's and the reply's calls, canonical
    final_at = started
    final_rows: dict[int, int] = {}
    accounts: list[CallAccount | None] = []  # every call's, a dropped one's too
    while True:
        index = len(results)
        position = engine.seq_len(0)
        room = budget - (position - start) - len(close)
        call_request = replace(
            request, format=call_fmt, max_tokens=max(1, min(request.max_tokens, room)),
            on_provisional=_sink(request, on_provisional, index),
        )  # fmt: skip
        call_started = time.perf_counter()
        result = strategy.run(call_request)
        accounts.append(result.account)
        written = engine.seq_len(0) == position + len(result.tokens)
        results.append(result)
        # A call the turn or the reply already holds: a later one is dropped, a first one kept
        # (the caller decides what a repeat means) and the reply ends after it.
        again = any(call.canonical() in seen for call in result.calls)
        if index and (not result.calls or not written or again):
            # A later call that failed, or that repeats one of the reply (a loop: SmolLM2-135M
            # writes the same call eight times over): back to the calls before it, as their
            # strategy wrote them; a repeat is not kept.
            engine.drop(0, good[0])
            tokens, texts = list(good[1]), list(good[2])
            if again:
                results.pop()
            break
        if not written:  # a free-writing strategy that failed: what it wrote is unknown here
            engine.drop(0, position)
            break
        final_at = call_started + result.final_latency_s
        # The passes before this call (earlier calls, decisions) and this call's own up to its
        # final call: a latency counts from its call's attempt, after the strategy's set-up.
        before_call = Counter(engine.pass_rows_between(started, call_started))
        final_rows = dict(before_call + Counter(result.final_pass_rows or {}))
        seen.update(call.canonical() for call in result.calls)
        if on_final is not None and len(result.calls) == 1 and not again:
            on_final(index, result.calls[0])  # before anything more is written
        if rehold and len(result.calls) == 1 and not again:
            rehold = False
            held = _rehold(engine, fmt, position, result)
            if held is not None:
                result, call_fmt, layered = held, first_call_format(fmt), True
                results[-1] = result
        tokens.extend(result.tokens)
        texts.append(result.text)
        good = (engine.seq_len(0), list(tokens), list(texts))
        if not result.calls or again:
            break
        # Only a call written exactly in its layout can be followed by another.
        layered = layered and result.text.endswith(call_fmt.layout.tail)
        room = budget - (good[0] - start) - len(close)
        if several is None or not layered or index + 1 >= max_calls or room <= DECISION_TOKENS:
            break
        respelled = respell_closer(
            strategy.state_for(engine), engine, call_fmt.layout.closer, result.tokens
        )
        after = b""
        if respelled is not None:  # the reply holds the closer as the model spells it
            del tokens[len(tokens) - respelled.replaced :]
            tokens.extend(respelled.tokens)
            after = respelled.past
            texts[-1] += after.decode("utf-8", errors="replace")
            good = (engine.seq_len(0), list(tokens), list(texts))
        last = respelled.tokens[-1] if respelled is not None else result.tokens[-1]
        decision = decide_more(engine, several, last, written=after)
        decisions.append(decision)
        if not decision.more:
            break
        tokens.extend(decision.kept)
        texts.append(engine.detokenize(decision.kept))
        call_fmt = call_format(fmt, several.more)
    if not any(result.calls for result in results):  # the first call failed: as it was left
        tokens, texts = list(results[0].tokens), [results[0].text]
    elif layered and close:
        engine.prefill(0, close, logits_last=False)
        tokens.extend(close)
        texts.append(close_text)
    stats = engine.stats.since(before)
    calls_accounted = [account for account in accounts if account is not None]
    return Reply(
        results=results,
        text="".join(texts),
        tokens=tokens,
        stats=stats,
        final_latency_s=final_at - started,
        decisions=decisions,
        final_pass_rows=final_rows,
        account=CallAccount.over(time.perf_counter() - started, stats, calls_accounted)
        if len(calls_accounted) == len(accounts)
        else None,
    )


def _rehold(
    engine: Engine, fmt: ModelFormat, position: int, result: CallResult
) -> CallResult | None:
    """``result``'s one call, written from ``position`` on sequence 0 in a trigger's layout of
    its own (Qwen's fenced ``json`` block), held again in the layout the format writes a
    reply's first call in, with the result's text and tokens now that call's (``None``, nothing
    done: the format does not write it from its layout).

    The conversation records a call, not its text, and renders it in the format's own form, so
    the next step's prefill rewrites the call so anyway; done now, the decision after the call
    is the format's own. A fenced block is a reply's last word for Qwen2.5-Coder-0.5B
    (``<|im_end|>`` 18.71 after it against 12.21 for a line break); after the same call in a
    ``<tool_call>`` block it goes on with another (``docs/agent.md``)."""
    own = first_call_format(fmt)
    parts = call_parts(own, result.calls[0])
    text = "".join(part for part, _fixed in parts)
    if text != own.render_call(result.calls[0]):
        return None
    tokens = tokenize_call_text(engine, parts)
    engine.drop(0, position)
    engine.prefill(0, tokens)
    return replace(result, text=text, tokens=tokens)


def _first_format(
    fmt: ModelFormat, trigger: Trigger | None, *, more: bool
) -> tuple[ModelFormat, bool]:
    """The format the first call is written in, and whether more calls may follow it (never
    when ``more`` is false: the call is then written whole in its own layout, as one call)."""
    several = fmt.several
    if trigger is not None and trigger.layout is not None:
        return call_format(fmt, trigger), more and several is not None and trigger == several.more
    if not more or several is None:
        return fmt, False
    return first_call_format(fmt), True


def _sink(
    request: CallRequest, on_provisional: IndexedProvisional | None, index: int
) -> Callable[[ToolCall], None] | None:
    if on_provisional is None:
        return request.on_provisional
    return lambda call: on_provisional(index, call)


def decide_more(
    engine: Engine, several: SeveralCalls, last: int, *, written: bytes = b""
) -> Decision:
    """After a call (``last``: its last token, on sequence 0): whether the model writes another.
    ``written``: what that token already wrote past the call's closer (``>\\n``).

    Greedy among the tokens :meth:`~SeveralCalls.after_call` allows, at most
    :data:`DECISION_TOKENS` of them. ``more``: sequence 0 is cut back to where the next call's
    opener begins (with its next-token logits), the separator before it kept. Otherwise it is
    cut back to the call's end: what the model wrote after the call is dropped."""
    start = engine.seq_len(0)
    if not engine.has_next_logits(0):
        _reread(engine, start, last)
    logits = engine.last_logits(0)
    past = len(written)  # bytes of the closer's last token past the closer: not undone here
    if several.after_call(written) != "open":
        return Decision(False, [], [])
    offsets: list[int] = []
    decoded: list[int] = []
    steps: list[tuple[str, float | None, float | None]] = []
    for _ in range(DECISION_TOKENS):
        token, best_more, best_end = _choose(engine, several, logits, written)
        piece = b"" if token is None else engine.token_bytes(token)
        steps.append((piece.decode("utf-8", errors="replace"), best_more, best_end))
        if token is None or engine.is_end_of_generation(token):
            break
        state = several.after_call(written + piece)
        if state == "more":
            data = written + piece
            at = len(data) - len(data.lstrip())  # where the opener begins
            if at >= len(written):  # the opener begins in this token: all before it stays
                return Decision(True, decoded, steps)
            if at < past:  # it began in the closer's own token: not a call written after it
                break
            # Back to the token holding the opener's first byte; the strategy writes it again.
            kept = sum(1 for offset in offsets if offset <= at) - 1
            _reread(engine, start + kept, decoded[kept - 1] if kept else last)
            return Decision(True, decoded[:kept], steps)
        if state != "open":
            break
        offsets.append(len(written))
        decoded.append(token)
        written += piece
        logits = engine.decode_one(0, token)
    engine.drop(0, start)
    return Decision(False, [], steps)


def _reread(engine: Engine, length: int, token: int) -> None:
    """Sequence 0 cut to ``length`` tokens, its last one (``token``) read again for its
    next-token logits."""
    engine.drop(0, length - 1)
    engine.prefill(0, [token])


def _choose(
    engine: Engine, several: SeveralCalls, logits: np.ndarray, written: bytes
) -> tuple[int | None, float | None, float | None]:
    """The best legal token after ``written`` (``None``: none is), and, among the
    :data:`_TOP_K` best tokens, the best logit of a legal one that leads only to another call
    and of one that only ends the reply (``None``: none there)."""
    ws_only = not written.strip()
    close = several.close.encode("utf-8")
    best: int | None = None
    best_more: float | None = None
    best_end: float | None = None
    order = np.argpartition(-logits, _TOP_K)[:_TOP_K]
    for token in order[np.argsort(-logits[order])]:
        kind = _kind(engine, several, close, written, ws_only, int(token))
        if kind == "no":
            continue
        value = float(logits[token])
        best = int(token) if best is None else best
        if kind == "more" and best_more is None:
            best_more = value
        if kind == "end" and best_end is None:
            best_end = value
    if best is None:  # nothing legal among the best: the whole vocabulary, best first
        for token in np.argsort(-logits):
            if _kind(engine, several, close, written, ws_only, int(token)) != "no":
                return int(token), best_more, best_end
    return best, best_more, best_end


def _kind(
    engine: Engine, several: SeveralCalls, close: bytes, written: bytes, ws_only: bool, token: int
) -> str:
    """What ``token`` after ``written`` leads to: ``more``, ``end``, ``both`` (whitespace, or a
    text both may begin with) or ``no`` (not allowed)."""
    if engine.is_end_of_generation(token):
        return "end" if ws_only else "no"
    piece = engine.token_bytes(token)
    if not piece:
        return "no"
    state = several.after_call(written + piece)
    if state == "open":
        rest = (written + piece).lstrip()
        return "both" if not rest or close.startswith(rest) else "more"
    return state
