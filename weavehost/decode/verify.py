"""Verified decoding: greedy constrained decoding that reads drafted tokens many per pass.

Stage: decoding (the loop under ``weave``'s selector, its write-back and everything after it).
:class:`Verifier` (one run: :meth:`Verifier.run`) writes exactly the tokens that greedy
token-by-token constrained decoding (the ``constrained`` strategy) writes on the same sequence
under the same constraint, up to floating-point differences between a pass of one row and a
pass of many. It only changes how many passes that takes:

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
  assembled from its parallel values — verified at write-back — with each token the model
  was seen to write in two split so where the mask allows it, :func:`split_where_allowed`),
  from the tokens the grammar
  forces (jump-forward's canonical tokens — verified too, so a forced run whose canonical
  split differs from the model's own split is caught), then *guesses*: the text the grammar
  forces past those tokens (``" "`` before a string value, which no token can be forced for)
  and a ``drafter``'s text after it (:mod:`weavehost.decode.drafts`), tokenized together;
  where that guess completes a value, the value's closing text, the grammar's text after it
  and the next value's guess, again and again (:mod:`~weavehost.decode.proposals`). Each
  guessed token has a kind, and :attr:`Drafts.rows` says how many of them a pass carries beside its
  pending and forced rows (the plan, from each kind's acceptance rate); ``by_kind`` on the
  outcome counts, per kind, the guessed tokens a pass reached and those it accepted. The
  model's own splits of drafted tokens, learned as the model refuses them, live in the model's
  :class:`~weavehost.decode.state.DecodeState`, as do its value closings.
- On return the sequence holds every written token (the last one read with logits; with
  ``read_last=False`` all but the ``unread`` last ones) and nothing rejected; the constraint
  has consumed exactly the written tokens.
- ``completed_at`` is when the text was known: its last token taken, or, where a pass held
  only tokens the grammar forces up to its end (the closer after a chosen ``}}``), before
  that pass, as :func:`~weavehost.decode.guided.guided_decode` counts a forced run once it
  is consumed.

``mismatch`` records where an explicit draft first differed from the argmax, with the logit
gap there (the model's argmax logit minus the drafted token's), so a rejected parallel value
can be told apart as a near-tie or a real difference.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from weavehost.decode.constraint import Constraint, only_allowed
from weavehost.decode.padding import Shape, run_shaped
from weavehost.decode.proposals import Drafts, learn_split, propose, split_where_allowed
from weavehost.engine import Engine, Row

if TYPE_CHECKING:
    from weavehost.decode.state import DecodeState

__all__ = ["DraftMismatch", "VerifiedOutcome", "Verifier"]


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
    # Per kind of guessed token (the grammar's text past its forced tokens, the drafter's):
    # (reached, accepted). Reached: a pass read it and every guessed token before it was
    # accepted, so accepted / reached is the rate at which the next such token is accepted.
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The last tokens written but not read into the sequence (``read_last=False``): 0 or 1.
    unread: int = 0


class Verifier:
    """Greedy decoding of ``seq`` under ``constraint``, drafts verified in each pass: one run,
    its state, and one method per step of a pass (see the module docstring).

    ``state`` is the model's :class:`~weavehost.decode.state.DecodeState` (the splits and
    closings it learned). ``shape`` (the plan's
    :meth:`~weavehost.decode.padding.DecodePlan.shape_for`) widens a pass with padding rows on
    the engine's last sequence (emptied after the pass; it must be free, as it is outside
    ``weave``'s parallel values) and has more rows compute logits where that is cheaper.
    ``stop`` is checked on the written text after each token and ends the run there; ``watch``
    is shown the written text after each token (the token is verified by then), and before a
    pass the text it is sure to write (:meth:`foresee`): a watch reads each text's new part.
    ``read_last=False``: a run that ends (``stop``, the grammar's end) with a token chosen but
    not yet read leaves it unread (``unread`` on the outcome): a caller that reads it again
    with a draft after it (``weave``'s write-back after its selector) saves a pass.
    """

    def __init__(
        self,
        engine: Engine,
        constraint: Constraint,
        state: DecodeState,
        *,
        seq: int = 0,
        shape: Shape | None = None,
        stop: Callable[[bytes], bool] | None = None,
        watch: Callable[[bytes], None] | None = None,
        read_last: bool = True,
    ) -> None:
        self.engine, self.constraint, self.state = engine, constraint, state
        self.seq, self.shape = seq, shape
        self.stop, self.watch, self.read_last = stop, watch, read_last
        self.tokens: list[int] = []
        self.text = b""
        self.explicit: list[int] = []
        self.queue: list[int] = []  # chosen, consumed, not yet in the KV cache
        self.drafted = self.accepted = 0
        self.by_kind: dict[str, list[int]] = {}
        self.mismatch: DraftMismatch | None = None
        self.completed_at = time.perf_counter()
        # Set when a pass holds only tokens the grammar forces, up to its end: the text is
        # known before that pass reads them in, as jump_forward's is once its forced run is
        # consumed.
        self.known = False
        self.error: str | None = None
        self.halted = False  # stop() said so, or the constraint stopped or failed

    def run(
        self, max_tokens: int, *, pending: Sequence[int] = (), drafts: Drafts | None = None
    ) -> VerifiedOutcome:
        """Decode at most ``max_tokens`` tokens. ``pending`` are tokens the constraint has
        already consumed and the caller already chose (verified), which the sequence does not
        hold yet; without them the run starts from the sequence's next-token logits.
        ``pending`` tokens are not part of the returned ``tokens``."""
        drafts = drafts if drafts is not None else Drafts()
        self.explicit = list(drafts.explicit)
        self.queue = list(pending)
        while True:
            if not self.queue:
                if self.halted or len(self.tokens) >= max_tokens or self.constraint.stopped:
                    break
                if not self.choose():
                    break
            if self.halted and not self.read_last:
                break  # the chosen tokens stay unread: the caller reads them
            self.verify_pass(max_tokens, drafts)
            if self.halted and not self.queue:
                break
        return self.outcome(max_tokens)

    def choose(self) -> bool:
        """The next token from the sequence's logits, chosen and consumed, set against the
        explicit draft; ``False``: no token is allowed."""
        constraint = self.constraint
        token = constraint.best(self.engine.last_logits(self.seq))
        if token is None:
            self.error = "no token allowed"
            return False
        constraint.consume(token)
        self.queue.append(token)
        if self.explicit:
            if self.explicit[0] != token:
                self.follow(self.explicit, token, lambda: self.engine.last_logits(self.seq))
            else:
                self.explicit.pop(0)
        self.take(token)
        return True

    def verify_pass(self, max_tokens: int, drafts: Drafts) -> None:
        """One pass: the pending tokens and a draft, each drafted token kept while it is the
        masked argmax; the first that is not is replaced by that argmax, pending next."""
        engine, constraint = self.engine, self.constraint
        from_explicit = bool(self.explicit)
        proposal, kinds = self.draft(max_tokens, drafts)
        guessed_from = len(proposal) - len(kinds)  # proposal[guessed_from:] are guesses
        # The mask before each drafted token, computed once and used again to verify it; a
        # drafted token the mask alone allows needs no logits on the row before it.
        masks, stops = constraint.walk(proposal)
        certain = only_allowed(masks, proposal)
        if proposal and stops and all(certain):
            self.known, self.completed_at = True, time.perf_counter()
        self.foresee(proposal, certain)
        before = len(self.queue) - 1  # proposal[i] is verified by the logits after row before + i
        start = engine.seq_len(self.seq)
        after = self.read(proposal, certain)
        self.drafted += len(proposal)
        kept = 0
        refused = False  # the model chose another token than a drafted one
        for index, token in enumerate(proposal):
            if certain[index]:
                choice: int | None = token
            else:
                mask = masks[index] if index < len(masks) else None
                choice = constraint.best(after[before + index], mask)
            if choice != token:
                refused = True
                rest = self.explicit[index:] if from_explicit else None
                self.refuse(token, choice, index >= guessed_from, rest, after[before + index])
                break
            constraint.consume(token)
            kept += 1
            self.take(token)
            if self.halted:
                break
        if kept < len(proposal):
            # Only the verified rows stay; the first rejected one and all after it go. A run
            # stopped inside certain tokens read no logits after its last kept row: the
            # sequence then has no next-token logits (the caller reads its last token again).
            next_logits = after.get(before + kept)
            engine.drop(self.seq, start + before + 1 + kept, next_logits=next_logits)
        if from_explicit and kept == len(proposal):
            self.explicit = self.explicit[kept:]
        self.accepted += kept
        _count_kinds(self.by_kind, kinds, max(0, kept - guessed_from), rejected=refused)
        engine.count_accepted(kept)

    def foresee(self, proposal: list[int], certain: list[bool]) -> None:
        """Show ``watch`` the text the pass is sure to write before it runs: the written text
        and the proposal's tokens up to its first one the grammar does not force. A provisional
        call whose last value the model chose is then sent before the pass that only reads the
        forced text after it (``}}`` and the closer), as ``completed_at`` counts such text
        known (not where ``stop`` may end the run inside it)."""
        if self.watch is None or self.stop is not None:
            return
        forced = 0
        while forced < len(proposal) and certain[forced]:
            forced += 1
        if forced:
            token_bytes = self.engine.token_bytes
            self.watch(self.text + b"".join(token_bytes(t) for t in proposal[:forced]))

    def draft(self, max_tokens: int, drafts: Drafts) -> tuple[list[int], list[str]]:
        """The next pass's draft (nothing once the run halted) and the kinds of the guessed
        tokens at its end; the explicit draft split where the model was seen to split."""
        if self.halted:
            return [], []
        room = max(0, max_tokens - len(self.tokens))
        state, engine, constraint = self.state, self.engine, self.constraint
        self.explicit = split_where_allowed(state, engine, constraint, self.explicit)
        pending = len(self.queue)
        return propose(state, engine, constraint, self.explicit, self.text, room, pending, drafts)

    def read(self, proposal: list[int], certain: list[bool]) -> dict[int, np.ndarray]:
        """Run the pass: the pending tokens, then ``proposal``; logits on the last row and
        before each drafted token that is not ``certain``. Returns them by the row's place in
        the pass; the pending tokens are read."""
        queue, seq = self.queue, self.seq
        before = len(queue) - 1
        wanted = [False] * (len(queue) + len(proposal))
        wanted[-1] = True  # the next token's
        for index, sure in enumerate(certain):
            wanted[before + index] = wanted[before + index] or not sure
        rows = [Row(token, (seq,), logits=wanted[i]) for i, token in enumerate(queue)] + [
            Row(token, (seq,), logits=wanted[len(queue) + i], draft=True)
            for i, token in enumerate(proposal)
        ]
        out = iter(run_shaped(self.engine, rows, self.shape))
        self.queue = []
        return {i: next(out) for i in range(len(rows)) if wanted[i]}

    def refuse(
        self,
        token: int,
        choice: int | None,
        guessed: bool,
        explicit: list[int] | None,
        logits: np.ndarray,
    ) -> None:
        """The model chose ``choice`` where the draft had ``token`` (a guess, or the start of
        ``explicit``, the rest of the explicit draft; ``logits``: the row that chose): learn
        its split, follow the explicit draft past it, and take the choice as the next pending
        token."""
        if guessed and choice is not None:
            learn_split(self.state, self.engine, token, choice)
        if choice is None:
            self.error = "no token allowed"
            self.halted = True
            return
        if explicit is not None:
            self.follow(explicit, choice, lambda: logits)
        self.constraint.consume(choice)
        self.queue.append(choice)
        self.take(choice)

    def follow(self, explicit: list[int], chosen: int, logits: Callable[[], np.ndarray]) -> None:
        """The explicit draft after the model chose ``chosen`` where it had ``explicit[0]``:
        a real difference gives it up (and is the run's ``mismatch`` if the first), another
        split of the same text is learned."""
        drafted = explicit[0]
        self.explicit, differs = _follow(self.engine, explicit, chosen)
        if differs and self.mismatch is None:
            self.mismatch = _mismatch(logits(), len(self.tokens), drafted, chosen)
        elif not differs:
            learn_split(self.state, self.engine, drafted, chosen)

    def take(self, token: int) -> None:
        """``token`` written (verified): the text grows, ``watch`` sees it, and the run halts
        where the constraint stops or fails or ``stop`` says so."""
        self.tokens.append(token)
        self.text += self.engine.token_bytes(token)
        if not self.known:
            self.completed_at = time.perf_counter()
        if self.watch is not None:
            self.watch(self.text)
        constraint = self.constraint
        if constraint.failed:
            self.error, self.halted = "constraint failed", True
        elif constraint.stopped or (self.stop is not None and self.stop(self.text)):
            self.halted = True

    def outcome(self, max_tokens: int) -> VerifiedOutcome:
        constraint = self.constraint
        error = self.error
        finished = error is None and (constraint.stopped or constraint.accepting)
        if error is None and not finished and not self.halted:
            error = f"the call did not finish within {max_tokens} tokens"
        return VerifiedOutcome(
            self.tokens,
            self.text.decode("utf-8", errors="replace"),
            self.completed_at,
            finished,
            error,
            self.drafted,
            self.accepted,
            self.mismatch,
            {kind: (reached, hits) for kind, (reached, hits) in self.by_kind.items()},
            len(self.queue),
        )


def _count_kinds(
    by_kind: dict[str, list[int]], kinds: Sequence[str], kept: int, *, rejected: bool
) -> None:
    """Count a pass's guessed tokens by kind: the first ``kept`` accepted, the next one reached
    and rejected (when the pass rejected one), the rest never reached."""
    for index, kind in enumerate(kinds):
        if index > kept or (index == kept and not rejected):
            break
        counts = by_kind.setdefault(kind, [0, 0])
        counts[0] += 1
        counts[1] += index < kept


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
