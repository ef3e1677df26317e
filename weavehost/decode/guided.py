"""``constrained`` and ``jump_forward``: the whole call constrained by the schema.

``constrained`` decodes every token of the call in its own pass, the tool name among the offered
tools and each argument by its schema (the paper's "Constrained decoding" row). ``jump_forward``
is the same constraint, but every run of tokens the constraint forces is prefilled in one pass
instead of decoded (SGLang's jump-forward decoding). Both write the same text for the same model
(greedy, same constraint), so their correctness is the same; only passes and time differ.

:func:`guided_decode` is also the loop the ``weave`` strategy uses to pick the tool name and to
decide optional arguments.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from weavehost.constrain import Constraint, constraints_for
from weavehost.decode.base import CallRequest, CallResult, read_calls
from weavehost.engine import Engine
from weavehost.errors import ConstraintError

__all__ = ["ConstrainedStrategy", "GuidedOutcome", "JumpForwardStrategy", "guided_decode"]


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
        try:
            grammar = factory.grammars(fmt).call([(t.name, t.parameters) for t in request.tools])
            constraint = factory.new(grammar)
        except ConstraintError as exc:
            return _failed(self.name, engine, before, started, str(exc))
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
            phases={"call": latency},
            error=error,
            tokens=outcome.tokens,
        )


def _failed(name: str, engine: Engine, before, started: float, error: str) -> CallResult:
    elapsed = time.perf_counter() - started
    return CallResult(name, [], None, "", engine.stats.since(before), elapsed, elapsed, {}, error)


class ConstrainedStrategy(_WholeCallStrategy):
    name = "constrained"
    jump_forward = False


class JumpForwardStrategy(_WholeCallStrategy):
    name = "jump_forward"
    jump_forward = True
