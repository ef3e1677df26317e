"""A call begun again in an answer: the token its take-back would choose instead, read beside it.

Stage: decoding (a reply's free text, :class:`~weavehost.decode.continuation.Continuation`). A
small model often begins its answer after a result with the call it made again (Qwen's bare
``{"name": "get_current_weather"…``, or a fenced copy after a line of prose), drafted from its
first token (:data:`~weavehost.decode.answer_drafts.START`; as far as where the reply decides
it, where that pays: :meth:`DraftPricing.reaching
<weavehost.decode.answer_drafts.DraftPricing.reaching>`). The reply takes it back where its name
is refused, bans its first token at its place, and reads the token chosen there instead. On the
51 shipped tasks, 64 of the 68 passes in which Qwen2.5-Coder-0.5B read such a start were taken
back at it (session 57's pass log). The token chosen instead is known in the pass that reads
the start: the most likely token there under the masks the take-back adds
(:meth:`Continuation.chosen_instead
<weavehost.decode.continuation.Continuation.chosen_instead>`). A :class:`Branch` reads it in that
pass, last, on a sequence of its own that shares the text before it (no cell is computed
again), emptied right after. Where the take-back comes and the reply reads that token, the
token the branch's logits choose after it is drafted first (:meth:`Continuation.branch_guess
<weavehost.decode.continuation.Continuation.branch_guess>`): the pass that reads that token
also verifies the next, which otherwise took a pass of its own.

Guarantees:

* **Lossless, as drafts are.** The branch only drafts, and a draft is kept where it is the
  choice. The text's own cells are where undrafted text's are: the branch's row is the pass's
  last (after the text's rows) and its sequence is emptied after that pass, before any other.
  So the text's logits are what drafted rows' are, with the default cache bit for bit those of
  undrafted decoding (``docs/decoder.md``, "Lossless by construction"). A branch whose cell
  stayed and was taken over moved Qwen's logits by up to 0.26 (we believe because the text's
  later cells then sat one slot over); one near-tie answer then differed.
* **Followed only where it holds**: for the token it read, at its place, with sequence 0 cut
  back to exactly where the branch began and nothing before that rolled back since
  (:meth:`Branch.follows`). Opened only on an empty sequence that is not the padding rows'
  (the last), and where its pass fits in the cache.
* **Priced** (:func:`branch_pays`): its row is added only where the rate at which branches'
  drafts were kept (:data:`~weavehost.decode.answer_drafts.BRANCH`, measured with the drafts'
  rates) times a one-row pass's cost exceeds what the row adds to the pass.
"""

from __future__ import annotations

import numpy as np

from weavehost.decode.answer_drafts import BRANCH, DraftKind, DraftPricing
from weavehost.engine import Engine, Row

__all__ = ["BRANCH_KIND", "BRANCH_SEQ", "Branch", "branch_pays"]

# The sequence a branch is read on: the padding rows take the last one (decode.padding).
BRANCH_SEQ = 1
# The rate a branch is priced at (DraftPricing.rates' first): how often its draft was kept.
BRANCH_KIND: DraftKind = (BRANCH, 0)


def branch_pays(pricing: DraftPricing, rows: int) -> bool:
    """Whether a branch's row pays in a pass of ``rows`` rows, each asking for logits: followed
    and kept at the rate branches were, it saves a pass of one row at least."""
    plan = pricing.plan
    if plan.table is None:
        return False
    taken = pricing.rates(BRANCH_KIND)[0]
    added = plan.pass_cost(rows + 1, rows + 1) - plan.pass_cost(rows, rows)
    return taken * plan.pass_cost(1, 1) > added


class Branch:
    """The token ``token`` a take-back at the reply's place ``place`` would choose there, read
    beside the text (sequence 0 then ``position`` long) on :data:`BRANCH_SEQ` (:meth:`open`),
    and the logits after it once its pass ran (``None`` before)."""

    __slots__ = ("logits", "place", "position", "token")

    def __init__(self, place: int, position: int, token: int) -> None:
        self.place, self.position, self.token = place, position, token
        self.logits: np.ndarray | None = None

    @classmethod
    def open(cls, engine: Engine, place: int, token: int) -> Branch | None:
        """A branch for ``token`` at ``place``, its sequence now sequence 0's text (whose end
        is where ``token`` goes); ``None`` where the engine has no sequence to spare."""
        if engine.n_seq_max <= BRANCH_SEQ + 1 or engine.seq_len(BRANCH_SEQ):
            return None
        engine.fork(0, BRANCH_SEQ)
        return cls(place, engine.seq_len(0), token)

    def row(self) -> Row:
        """The branch's row, last in the pass that reads the call's start."""
        return Row(self.token, (BRANCH_SEQ,), logits=True)

    @staticmethod
    def close(engine: Engine) -> None:
        """The branch's sequence emptied, once its pass ran (or failed)."""
        engine.drop(BRANCH_SEQ, 0)

    def follows(self, place: int, token: int, position: int) -> bool:
        """Whether the reply, reading ``token`` at ``place`` with sequence 0 ``position`` long
        (the text before ``place``), reads what the branch read."""
        return self.logits is not None and (place, token, position) == (
            self.place, self.token, self.position)  # fmt: skip
