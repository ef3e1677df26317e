"""Verified decoding: greedy constrained decoding that reads drafted tokens many per pass.

Stage: decoding (the loop under ``weave``'s selector, its write-back and everything after it).
:func:`verified_decode` writes exactly the tokens that greedy token-by-token constrained
decoding (the ``constrained`` strategy) writes on the same sequence under the same constraint,
up to floating-point differences between a pass of one row and a pass of many. It only changes
how many passes that takes:

- Each pass holds the *pending* tokens (chosen already as the constrained argmax, not yet read
  into the KV cache) followed by a *draft*: tokens proposed before the pass. A drafted token is
  accepted when it equals the masked argmax of the logits of the row before it; the first one
  that does not is rejected with everything after it, and that argmax becomes the next pending
  token. A drafted token that is the only one the grammar allows at its place
  (:meth:`~weavehost.decode.constraint.Constraint.certain`: the mask is checked, so this holds
  by construction) is the masked argmax whatever the logits, so the row before it reads none:
  a logits row costs a pass about 1.3 ms on Qwen's 151,936-token vocabulary (AVX-512, 2
  threads), and llguidance's forced tokens are such tokens (all 3,002 forced positions of 40
  Qwen and 60 SmolLM2 bench-200 calls were). Every pass therefore advances the sequence by at
  least one token, and a draft that is wrong costs rows, never the call.
- Drafts come, in this order: from an explicit draft given by the caller (the call ``weave``
  assembled from its parallel values — verified at write-back), from the tokens the grammar
  forces (jump-forward's canonical tokens — verified too, so a forced run whose canonical
  split differs from the model's own split is caught), and from a ``drafter`` (prompt lookup,
  :mod:`weavehost.decode.drafts`), as many rows as ``draft_rows`` allows on a
  pass that already carries the pending and forced rows.
- On return the sequence holds every written token (the last one read with logits) and nothing
  rejected; the constraint has consumed exactly the written tokens.

``mismatch`` records where an explicit draft first differed from the argmax, with the logit
gap there (the model's argmax logit minus the drafted token's), so a rejected parallel value
can be told apart as a near-tie or a real difference.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from weavehost.decode.constraint import Constraint
from weavehost.engine import Engine, Row

__all__ = ["DraftMismatch", "Drafter", "VerifiedOutcome", "verified_decode"]

# Proposes draft tokens from the text this run has written so far (its bytes).
Drafter = Callable[[bytes], list[int]]


@dataclass(frozen=True, slots=True)
class DraftMismatch:
    """Where an explicit draft first lost to the model's own choice."""

    index: int  # position in the run's tokens
    drafted: int
    chosen: int
    logit_gap: float


@dataclass(frozen=True, slots=True)
class VerifiedOutcome:
    """What a verified run wrote on its sequence, and when its text was complete."""

    tokens: list[int]
    text: str
    completed_at: float
    finished: bool
    error: str | None = None
    drafted: int = 0
    accepted: int = 0
    mismatch: DraftMismatch | None = None
    # Of the drafted tokens, those the drafter proposed (not explicit, not forced).
    looked_up: int = 0
    looked_up_accepted: int = 0


def verified_decode(
    engine: Engine,
    constraint: Constraint,
    *,
    seq: int = 0,
    max_tokens: int,
    pending: Sequence[int] = (),
    draft: Sequence[int] = (),
    drafter: Drafter | None = None,
    draft_rows: Callable[[int], int] = lambda base_rows: 0,
    stop: Callable[[bytes], bool] | None = None,
    watch: Callable[[bytes], None] | None = None,
    forced: bool = True,
) -> VerifiedOutcome:
    """Greedy decoding of ``seq`` under ``constraint``, drafts verified in each pass.

    ``pending`` are tokens the constraint has already consumed and the caller already chose
    (verified), which ``seq`` does not hold yet; without them the run starts from ``seq``'s
    next-token logits. ``pending`` tokens are not part of the returned ``tokens``. ``draft`` is
    an explicit proposal for the tokens that follow; ``drafter`` proposes more as the text
    grows. ``stop`` is checked on the written text after each token and ends the run there;
    ``watch`` is shown the written text after each token (the token is verified by then).
    ``forced=False`` drafts no grammar-forced tokens (the ``weave:no_forced`` ablation): they
    are then decoded like any other token, one pass each unless another draft carries them.
    """
    tokens: list[int] = []
    text = b""
    explicit = list(draft)
    queue = list(pending)  # chosen, consumed, not yet in the KV cache
    drafted = accepted = looked_up = looked_up_accepted = 0
    mismatch: DraftMismatch | None = None
    completed_at = time.perf_counter()
    error: str | None = None
    halted = False  # stop() said so, or the constraint stopped or failed

    def take(token: int) -> None:
        nonlocal text, completed_at, halted, error
        tokens.append(token)
        text += engine.token_bytes(token)
        completed_at = time.perf_counter()
        if watch is not None:
            watch(text)
        if constraint.failed:
            error, halted = "constraint failed", True
        elif constraint.stopped or (stop is not None and stop(text)):
            halted = True

    while True:
        if not queue:
            if halted or len(tokens) >= max_tokens or constraint.stopped:
                break
            token = constraint.best(engine.last_logits(seq))
            if token is None:
                error = "no token allowed"
                break
            constraint.consume(token)
            queue.append(token)
            if explicit:
                if explicit[0] != token:
                    drafted_token = explicit[0]
                    explicit, differs = _follow(engine, explicit, token)
                    if differs and mismatch is None:
                        logits = engine.last_logits(seq)
                        mismatch = _mismatch(logits, len(tokens), drafted_token, token)
                else:
                    explicit.pop(0)
            take(token)
        proposal: list[int] = []
        looked_from = 0  # proposal[looked_from:] came from the drafter
        from_explicit = bool(explicit)
        if not halted:
            room = max(0, max_tokens - len(tokens))
            proposal, looked_from = _proposal(
                engine, constraint, explicit, drafter, text, room, len(queue), draft_rows, forced
            )
        # The mask before each drafted token, computed once and used again to verify it; a
        # drafted token the mask alone allows needs no logits on the row before it.
        masks = constraint.masks_along(proposal)
        certain = [int(m.sum()) == 1 for m in masks] + [False] * (len(proposal) - len(masks))
        before = len(queue) - 1  # proposal[i] is verified by the logits after row before + i
        wanted = [False] * (len(queue) + len(proposal))
        wanted[-1] = True  # the next token's
        for index, sure in enumerate(certain):
            wanted[before + index] = wanted[before + index] or not sure
        rows = [Row(token, (seq,), logits=wanted[i]) for i, token in enumerate(queue)] + [
            Row(token, (seq,), logits=wanted[len(queue) + i], draft=True)
            for i, token in enumerate(proposal)
        ]
        start = engine.seq_len(seq)
        out = iter(engine.run_pass(rows))
        # The logits after each row that asked for them, by the row's place in the pass.
        after = {i: next(out) for i in range(len(rows)) if wanted[i]}
        queue = []
        drafted += len(proposal)
        looked_up += len(proposal) - looked_from
        kept = 0
        for index, token in enumerate(proposal):
            if certain[index]:
                choice: int | None = token
            else:
                mask = masks[index] if index < len(masks) else None
                choice = constraint.best(after[before + index], mask)
            if choice != token:
                if choice is None:
                    error = "no token allowed"
                    halted = True
                else:
                    if from_explicit:
                        explicit, differs = _follow(engine, explicit[index:], choice)
                        if differs and mismatch is None:
                            logits = after[before + index]
                            mismatch = _mismatch(logits, len(tokens), token, choice)
                    constraint.consume(choice)
                    queue.append(choice)
                    take(choice)
                break
            constraint.consume(token)
            kept += 1
            take(token)
            if halted:
                break
        if kept < len(proposal):
            # Only the verified rows stay; the first rejected one and all after it go. A run
            # stopped inside certain tokens read no logits after its last kept row: the
            # sequence then has no next-token logits (the caller reads its last token again).
            engine.drop(seq, start + before + 1 + kept, next_logits=after.get(before + kept))
        if from_explicit and kept == len(proposal):
            explicit = explicit[kept:]
        accepted += kept
        looked_up_accepted += max(0, kept - looked_from)
        engine.count_accepted(kept)
        if halted and not queue:
            break
    finished = error is None and (constraint.stopped or constraint.accepting)
    if error is None and not finished and not halted:
        error = f"the call did not finish within {max_tokens} tokens"
    return VerifiedOutcome(
        tokens,
        text.decode("utf-8", errors="replace"),
        completed_at,
        finished,
        error,
        drafted,
        accepted,
        mismatch,
        looked_up,
        looked_up_accepted,
    )


def _proposal(
    engine: Engine,
    constraint: Constraint,
    explicit: list[int],
    drafter: Drafter | None,
    text: bytes,
    room: int,
    pending: int,
    draft_rows: Callable[[int], int],
    forced: bool = True,
) -> tuple[list[int], int]:
    """The draft for the next pass and where the drafter's part of it starts: the rest of the
    explicit draft (whole), else the forced tokens and then the drafter's, the drafter's
    as many as ``draft_rows`` allows beside the pending and forced rows; only what the grammar
    accepts from here, at most ``room``."""
    if explicit:
        proposal = explicit[:room]
        looked_from = len(proposal)
    else:
        proposal = constraint.forced()[:room] if forced else []
        looked_from = len(proposal)
        base = pending + len(proposal)
        cap = 0 if drafter is None else min(draft_rows(base), room - len(proposal))
        if drafter is not None and cap > 0:
            forced_text = b"".join(engine.token_bytes(t) for t in proposal)
            proposal += drafter(text + forced_text)[:cap]
    valid = constraint.valid_prefix(proposal)
    return proposal[:valid], min(looked_from, valid)


def _follow(engine: Engine, explicit: list[int], chosen: int) -> tuple[list[int], bool]:
    """The explicit draft after the model chose ``chosen`` where it had ``explicit[0]``, and
    whether that is a real difference. When ``chosen`` spells the start of the draft's text
    (the same text split another way, ``"`` where the draft had ``",``), the rest of the text
    stays the draft, tokenized afresh; otherwise the draft is given up."""
    rest = b"".join(engine.token_bytes(t) for t in explicit)
    piece = engine.token_bytes(chosen)
    if not rest.startswith(piece):
        return [], True
    try:
        tail = rest[len(piece) :].decode("utf-8")
    except UnicodeDecodeError:
        return [], False
    return (engine.tokenize(tail) if tail else []), False


def _mismatch(logits: np.ndarray, index: int, drafted: int, chosen: int) -> DraftMismatch:
    return DraftMismatch(index, drafted, chosen, float(logits[chosen] - logits[drafted]))
