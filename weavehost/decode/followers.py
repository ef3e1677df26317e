"""The tokens a model wrote after each token and each pair of tokens, counted over its replies:
a draft for free text that no text of the conversation holds.

Stage: decoding (kept per opened model by :class:`~weavehost.decode.state.DecodeState`, counted
and read by :class:`~weavehost.decode.continuation.Continuation`).

Where an answer's last characters occur in no text the reply writer looks up (the conversation,
the prompt's head, the model's remembered answers, the answer itself), its next token is often
still the one the model wrote most often after the same one or two tokens: a small model
reuses its own phrasing ("This response indicates that the", "Here is the response for the
function call"), and a number or a name begun goes on as it did before. :meth:`Followers.draft`
chains those tokens, each the one written most often after the two before it (or, where that
pair was never written, the one before it), while it is written more often than all others
together. Such a draft's kind (:data:`FOLLOWERS`, by how often its first token was written
there) is priced and measured as any other (:class:`~weavehost.decode.answer_drafts.
DraftPricing`); it is verified as any other, so the text is the same.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from weavehost.decode.bounded import Bounded

__all__ = ["FOLLOWERS", "MAX_CONTEXTS", "Followers"]

# A draft's source (DraftPricing.kind): the model's own most frequent next token.
FOLLOWERS = "followers"
# The most contexts (tokens and pairs of tokens) counted, about 13 MB of counts; past it, the
# context counted or read least recently is forgotten.
MAX_CONTEXTS = 1 << 15


class Followers:
    """Per context of one or two tokens, how often the model wrote each token after it."""

    __slots__ = ("_after",)

    def __init__(self, cap: int = MAX_CONTEXTS) -> None:
        self._after: Bounded[tuple[int, ...], Counter[int]] = Bounded(cap)

    def __len__(self) -> int:
        return len(self._after)

    def add(self, before: Sequence[int], token: int) -> None:
        """``token`` written after ``before`` (its last two tokens count: the pair and the
        last one)."""
        for n in (1, 2):
            if len(before) >= n:
                key = tuple(before[-n:])
                counts = self._after.get(key)
                if counts is None:
                    counts = self._after[key] = Counter()
                counts[token] += 1

    def draft(self, before: Sequence[int], room: int) -> tuple[list[int], int]:
        """At most ``room`` tokens after ``before``, each the one written most often after the
        pair before it, else after the token before it, while it is written there more often
        than all others together; and how often the first was written there (0: no draft)."""
        context, out, first = list(before[-2:]), [], 0
        while len(out) < room:
            best = self._most_often(context)
            if best is None:
                break
            token, count = best
            first = first or count
            out.append(token)
            context = [*context[-1:], token]
        return out, first

    def _most_often(self, context: Sequence[int]) -> tuple[int, int] | None:
        for n in (2, 1):
            counts = self._after.get(tuple(context[-n:])) if len(context) >= n else None
            if counts:
                token, count = counts.most_common(1)[0]
                return (token, count) if 2 * count > sum(counts.values()) else None
        return None
