"""A token of free text chosen from masked logits, and by how much it won.

Stage: decoding (the reply writer's choice step,
:meth:`~weavehost.decode.continuation.Continuation.choose`).

Guarantees:

* :func:`choose_token` is the greedy argmax (the lowest index among equal maxima), or, with a
  generator, a draw from the softmax at a temperature, banned tokens (``-inf``) never drawn.
* :func:`top_two_gap` is the chosen token's logit minus the best other token's, both under the
  same masks: for a greedy choice it is ``>= 0`` and ``0`` only where another token ties it
  exactly (``inf`` where every other token is banned). It reads the vocabulary twice with
  ``max`` (no copy, no partition: a few microseconds on a 49k vocabulary, against ~150 µs for
  ``np.argpartition``), so recording it costs next to nothing beside a pass.
* :class:`Sampling` is how a server's sampling request asks for its text to be chosen.
* :class:`Margins` keeps one gap per place of the text, the last choice at a place replacing
  the ones before it (a token taken back is chosen again there), so at any time the gaps held
  are those of the tokens the text holds, and one more where the text stopped at a choice it
  does not keep (an end-of-generation token, the first token of a call's trigger). It also
  logs every choice in the order made, with its gap, those later taken back or rolled back
  included (a refused call's JSON, a trigger's judged text): where two runs of one reply first
  chose apart, whatever the text kept. Only a reply that asks records them
  (``continue_reply(margins=True)``): a normal reply pays nothing.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from weavehost.decode.reply import Continued

__all__ = ["Margins", "Sampling", "choose_token", "top_two_gap"]


@dataclass(frozen=True, slots=True)
class Sampling:
    """How free text is chosen when a server's sampling request asks for more than the agent's
    greedy answer: ``temperature`` (``None`` or 0: greedy; above 0: drawn from the softmax at
    that temperature with a generator seeded by ``seed``, so one request always gets one
    answer) and ``stop`` sequences (the text ends before the first one; it is not returned)."""

    temperature: float | None = None
    seed: int = 0
    stop: tuple[str, ...] = ()

    @property
    def greedy(self) -> bool:
        return not self.temperature or self.temperature <= 0


# Where a text stopped at a choice it does not keep, whose gap is then the stop's.
STOPS_AT_A_CHOICE = ("end", "call")


def choose_token(
    logits: np.ndarray, rng: np.random.Generator | None, temperature: float | None
) -> int:
    """The next token: the most likely one, or (with ``rng``) one drawn from the softmax of the
    logits at ``temperature``."""
    if rng is None or not temperature:
        return int(logits.argmax())
    scaled = logits.astype(np.float64) / temperature
    scaled -= scaled.max()  # banned tokens stay at -inf: probability 0
    probs = np.exp(scaled)
    probs /= probs.sum()
    return int(rng.choice(len(probs), p=probs))


def top_two_gap(logits: np.ndarray, token: int) -> float:
    """``logits[token]`` minus the largest other logit (``inf`` where every other is ``-inf``)."""
    before = logits[:token].max(initial=-np.inf)
    after = logits[token + 1 :].max(initial=-np.inf)
    other = float(max(before, after))
    if other == -math.inf:
        return math.inf
    return float(logits[token]) - other


class Margins:
    """The top-two gap of each choice of one reply's free text, by place (see the module's
    guarantees)."""

    def __init__(self) -> None:
        self.gaps: list[float] = []
        self.log: list[tuple[int, float]] = []  # every choice in order: token, gap

    def record(self, place: int, logits: np.ndarray, token: int) -> None:
        """``token`` chosen from ``logits`` at ``place`` (the text's token count before it)."""
        gap = top_two_gap(logits, token)
        del self.gaps[place:]
        self.gaps.append(gap)
        self.log.append((token, gap))

    def recorded(self, continued: Continued) -> Continued:
        """``continued`` (whose text holds its first ``tokens``, then stopped) with what was
        recorded: one gap per token, the stopping choice's gap (``None`` where the text did
        not stop at a choice it does not keep) and every choice in the order made."""
        kept = continued.tokens
        at_stop = continued.stop in STOPS_AT_A_CHOICE and len(self.gaps) > kept
        return dataclasses.replace(
            continued,
            margins=tuple(self.gaps[:kept]),
            stop_margin=self.gaps[kept] if at_stop else None,
            choices=tuple(self.log),
        )
