"""``constrained`` and ``jump_forward``: the whole call constrained by the schema.

``constrained`` decodes every token of the call in its own pass, the tool name among the offered
tools and each argument by its schema (the paper's "Constrained decoding" row). ``jump_forward``
is the same constraint, but every run of tokens the constraint forces is prefilled instead of
decoded (SGLang's jump-forward decoding): in the same pass as the chosen token before it, as
SGLang extends a request by the chosen token and the forced text at once, and shaped by the
engine's decode plan as ``weave``'s passes are (:meth:`DecodePlan.shape_for`: padded where a
wider pass is cheaper). Both write the same text for the same model (greedy, same constraint),
up to the rounding of other pass shapes; only passes and time differ.

A schema that cannot be constrained (llguidance refuses it, or its grammar passes the caps in
:mod:`weavehost.decode.grammar`) is decoded under a looser grammar, or freely, and the call is
validated against the schema before it is returned (:mod:`weavehost.decode.fallback`).

:func:`guided_decode` is the plain loop both run. ``weave`` runs the same constraint through
:class:`~weavehost.decode.verify.Verifier`, which verifies forced runs instead of trusting
their canonical tokens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from weavehost.decode.base import (
    CallAttempt,
    CallRequest,
    CallResult,
    StatefulStrategy,
    read_calls,
)
from weavehost.decode.constraint import Constraint
from weavehost.decode.fallback import invalid_reason, loosened
from weavehost.decode.padding import DecodePlan, Shape, run_shaped
from weavehost.decode.state import DecodeState
from weavehost.engine import Engine, Row
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
    shape: Shape | None = None,
) -> GuidedOutcome:
    """Greedy decoding of ``seq`` under ``constraint``, from the logits of its last token.

    Every chosen token is fed back, so the sequence ends holding all of them. With
    ``jump_forward``, a forced run is read in the pass of the chosen token before it (or alone,
    when nothing was chosen before it), that pass shaped by ``shape``. ``stop`` is checked on
    the text so far after each chosen token and each forced run; it ends the run early.
    """
    tokens: list[int] = []
    text = b""
    completed_at = time.perf_counter()

    def ended() -> str | bool:
        if constraint.failed:
            return "constraint failed"
        return stop is not None and stop(text)

    while len(tokens) < max_tokens:
        if constraint.stopped:
            break
        chosen: list[int] = []
        forced = constraint.forced() if jump_forward else []
        if not forced:
            token = constraint.best(engine.last_logits(seq))
            if token is None:
                return GuidedOutcome(tokens, _text(text), completed_at, False, "no token allowed")
            constraint.consume(token)
            tokens.append(token)
            text += engine.token_bytes(token)
            completed_at = time.perf_counter()
            chosen = [token]
            end = ended()
            if not end and jump_forward and not constraint.stopped:
                forced = constraint.forced()[: engine.n_batch - 1]
        else:
            end = False
        for token in forced:
            constraint.consume(token)
        tokens.extend(forced)
        if forced:
            text += b"".join(engine.token_bytes(t) for t in forced)
            completed_at = time.perf_counter()
            end = end or ended()
        _read(engine, seq, chosen, forced, shape)
        if end:
            error = end if isinstance(end, str) else None
            return GuidedOutcome(tokens, _text(text), completed_at, False, error)
    finished = constraint.stopped or constraint.accepting
    error = None if finished else f"the call did not finish within {max_tokens} tokens"
    return GuidedOutcome(tokens, _text(text), completed_at, finished, error)


def _read(
    engine: Engine, seq: int, chosen: list[int], forced: list[int], shape: Shape | None
) -> None:
    """Read the chosen token and the forced run after it into ``seq`` in one pass (a run
    longer than a pass holds is prefilled in several), logits on the last row only."""
    if len(chosen) + len(forced) > engine.n_batch:
        engine.prefill(seq, [*chosen, *forced])
        return
    rows = [Row(t, (seq,)) for t in chosen] + [Row(t, (seq,), forced=True) for t in forced]
    rows[-1] = Row(rows[-1].token, (seq,), logits=True, forced=rows[-1].forced)
    run_shaped(engine, rows, shape)


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class _WholeCallStrategy(StatefulStrategy):
    name = ""
    jump_forward = False

    def __init__(self, state: DecodeState | None = None, plan: DecodePlan | None = None) -> None:
        super().__init__(state)
        self._plan = plan

    def with_plan(self, plan: DecodePlan) -> _WholeCallStrategy:
        """The same strategy on the same state with a fixed decode plan (``bench
        --cost-model``)."""
        return type(self)(self._state, plan)

    def run(self, request: CallRequest) -> CallResult:
        engine, fmt = request.engine, request.format
        state = self.state_for(engine)
        factory = state.constraints(engine)  # built once per model, not part of a call's cost
        attempt = CallAttempt.start(self.name, engine, factory.clock)
        grammars = factory.grammars(fmt)
        loose = False
        try:
            constraint = factory.new(grammars.call([(t.name, t.parameters) for t in request.tools]))
        except ConstraintError as exc:
            if not request.tools:
                return attempt.failed(str(exc))
            # Too large or not expressible: decode loosely, validate after (row 16, row 24).
            names = ", ".join(t.name for t in request.tools)
            try:
                constraint = factory.new(
                    grammars.call([(t.name, loosened(t.parameters)) for t in request.tools])
                )
                logger.warning(
                    "no constraint for %s (%s): any value per argument, validated after", names, exc
                )
                loose = True
            except ConstraintError as loose_exc:
                logger.warning(
                    "no constraint for %s (%s; %s): decoding freely, validated after",
                    names,
                    exc,
                    loose_exc,
                )
                return _free_then_validated(state, attempt, request)
        shape = None
        if self.jump_forward:
            shape = (self._plan if self._plan is not None else state.plan(engine)).shape_for
        outcome = guided_decode(
            engine,
            constraint,
            jump_forward=self.jump_forward,
            max_tokens=request.max_tokens,
            shape=shape,
        )
        completed_at = attempt.lap("call", at=outcome.completed_at)
        if loose:
            attempt.phases["loose"] = attempt.phases["call"]
        calls, error = [], outcome.error
        if error is None:
            calls, error = read_calls(fmt, outcome.text)
        if error is None and loose:
            error = invalid_reason(calls, request.tools)
            calls = [] if error else calls
        if error is not None:
            attempt.roll_back()  # a failed call leaves no trace in the conversation
        return attempt.finish(
            calls=calls,
            text=outcome.text,
            tokens=outcome.tokens,
            error=error,
            final_at=completed_at,
        )


def _free_then_validated(
    state: DecodeState, attempt: CallAttempt, request: CallRequest
) -> CallResult:
    """The call written freely (``serial`` from the opener), passed on only if it validates;
    otherwise sequence 0 goes back to the prompt."""
    from weavehost.decode.serial import SerialStrategy

    free = SerialStrategy(state).run(replace(request, forced=True))
    calls, tokens, error = free.calls, free.tokens, free.error
    if error is None:
        error = invalid_reason(calls, request.tools)
    if error is not None:
        attempt.roll_back()
        calls, tokens = [], []
    done_at = attempt.lap("free")
    return attempt.finish(calls=calls, text=free.text, tokens=tokens, error=error, final_at=done_at)


class ConstrainedStrategy(_WholeCallStrategy):
    name = "constrained"
    jump_forward = False


class JumpForwardStrategy(_WholeCallStrategy):
    name = "jump_forward"
    jump_forward = True
