"""``constrained`` and ``jump_forward``: the whole call constrained by the schema.

``constrained`` decodes every token of the call in its own pass, the tool name among the offered
tools and each argument by its schema (the paper's "Constrained decoding" row). ``jump_forward``
is the same constraint, but every run of tokens the constraint forces is prefilled in one pass
instead of decoded (SGLang's jump-forward decoding). Both write the same text for the same model
(greedy, same constraint), so their correctness is the same; only passes and time differ.

A schema that cannot be constrained (llguidance refuses it, or its grammar passes the caps in
:mod:`weavehost.decode.grammar`) is decoded under a looser grammar, or freely, and the call is
validated against the schema before it is returned (:mod:`weavehost.decode.fallback`).

:func:`guided_decode` is also the loop the ``weave`` strategy uses to pick the tool name and to
decide optional arguments.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from weavehost.decode.base import CallRequest, CallResult, read_calls
from weavehost.decode.constraint import Constraint, constraints_for
from weavehost.decode.fallback import invalid_reason, loosened
from weavehost.engine import Engine, EngineStats
from weavehost.errors import ConstraintError

__all__ = ["ConstrainedStrategy", "GuidedOutcome", "JumpForwardStrategy", "guided_decode"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GuidedOutcome:
    """What a guided run wrote on its sequence, and when its text was complete."""

    tokens: list[int]
    text: str
    completed_at: float
    finished: bool
    error: str | None = None


def guided_decode(
    engine: Engine,
    constraint: Constraint,
    *,
    seq: int = 0,
    jump_forward: bool,
    max_tokens: int,
    stop: Callable[[bytes], bool] | None = None,
) -> GuidedOutcome:
    """Greedy decoding of ``seq`` under ``constraint``, from the logits of its last token.

    Every chosen token is fed back, so the sequence ends holding all of them. With
    ``jump_forward``, forced runs are prefilled in one pass. ``stop`` is checked on the text so
    far after each step; it ends the run early (the selector uses it).
    """
    tokens: list[int] = []
    text = b""
    completed_at = time.perf_counter()
    while len(tokens) < max_tokens:
        if constraint.stopped:
            break
        forced = constraint.forced() if jump_forward else []
        if forced:
            for token in forced:
                constraint.consume(token)
            tokens.extend(forced)
            text += b"".join(engine.token_bytes(t) for t in forced)
            completed_at = time.perf_counter()
            engine.prefill(seq, forced)
        else:
            token = constraint.best(engine.last_logits(seq))
            if token is None:
                return GuidedOutcome(tokens, _text(text), completed_at, False, "no token allowed")
            constraint.consume(token)
            tokens.append(token)
            text += engine.token_bytes(token)
            completed_at = time.perf_counter()
            engine.decode_one(seq, token)
        if constraint.failed:
            return GuidedOutcome(tokens, _text(text), completed_at, False, "constraint failed")
        if stop is not None and stop(text):
            return GuidedOutcome(tokens, _text(text), completed_at, False)
    finished = constraint.stopped or constraint.accepting
    error = None if finished else f"the call did not finish within {max_tokens} tokens"
    return GuidedOutcome(tokens, _text(text), completed_at, finished, error)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class _WholeCallStrategy:
    name = ""
    jump_forward = False

    def run(self, request: CallRequest) -> CallResult:
        engine, fmt = request.engine, request.format
        factory = constraints_for(engine)  # built once per engine, not part of a call's cost
        before = engine.stats.snapshot()
        prompt_len = engine.seq_len(0)
        prompt_logits = engine.last_logits(0)
        started = time.perf_counter()
        grammars = factory.grammars(fmt)
        loose = False
        try:
            constraint = factory.new(grammars.call([(t.name, t.parameters) for t in request.tools]))
        except ConstraintError as exc:
            if not request.tools:
                return _failed(self.name, engine, before, started, str(exc))
            # Too large or not expressible: decode loosely, validate after (row 16, row 24).
            names = ", ".join(t.name for t in request.tools)
            try:
                constraint = factory.new(
                    grammars.call([(t.name, loosened(t.parameters)) for t in request.tools])
                )
                logger.warning(
                    "no constraint for %s (%s): any value per argument, validated after",
                    names, exc,
                )  # fmt: skip
                loose = True
            except ConstraintError as loose_exc:
                logger.warning(
                    "no constraint for %s (%s; %s): decoding freely, validated after",
                    names, exc, loose_exc,
                )  # fmt: skip
                return _free_then_validated(self.name, request, before, started, prompt_logits)
        outcome = guided_decode(
            engine,
            constraint,
            jump_forward=self.jump_forward,
            max_tokens=request.max_tokens,
        )
        latency = outcome.completed_at - started
        calls, error = [], outcome.error
        if error is None:
            calls, error = read_calls(fmt, outcome.text)
        if error is None and loose:
            error = invalid_reason(calls, request.tools)
            calls = [] if error else calls
        if error is not None:
            # A failed call leaves no trace in the conversation.
            engine.drop(0, prompt_len, next_logits=prompt_logits)
        return CallResult(
            strategy=self.name,
            calls=calls,
            provisional=None,
            text=outcome.text,
            stats=engine.stats.since(before),
            tool_latency_s=latency,
            final_latency_s=latency,
            phases={"call": latency, **({"loose": latency} if loose else {})},
            error=error,
            tokens=outcome.tokens,
        )


def _free_then_validated(
    name: str,
    request: CallRequest,
    before: EngineStats,
    started: float,
    prompt_logits: np.ndarray,
) -> CallResult:
    """The call written freely (``serial`` from the opener), passed on only if it validates;
    otherwise sequence 0 goes back to the prompt."""
    from weavehost.decode.serial import SerialStrategy

    engine = request.engine
    prompt_len = engine.seq_len(0)
    free = SerialStrategy().run(replace(request, forced=True))
    calls, error = free.calls, free.error
    if error is None:
        error = invalid_reason(calls, request.tools)
    if error is not None:
        calls = []
        engine.drop(0, prompt_len, next_logits=prompt_logits)
    elapsed = time.perf_counter() - started
    return CallResult(
        name, calls, None, free.text, engine.stats.since(before), elapsed, elapsed,
        {"free": elapsed}, error, free.tokens if error is None else [],
    )  # fmt: skip


def _failed(
    name: str, engine: Engine, before: EngineStats, started: float, error: str
) -> CallResult:
    elapsed = time.perf_counter() - started
    return CallResult(name, [], None, "", engine.stats.since(before), elapsed, elapsed, {}, error)


class ConstrainedStrategy(_WholeCallStrategy):
    name = "constrained"
    jump_forward = False


class JumpForwardStrategy(_WholeCallStrategy):
    name = "jump_forward"
    jump_forward = True
