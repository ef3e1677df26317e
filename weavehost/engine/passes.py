"""What a pass is made of and what passes cost: :class:`Row` and :class:`EngineStats`.

Stage: engine (its records). A pass is one ``llama_decode`` over rows; every row is one token
that joins one or more KV sequences. The counters are what every strategy reports, so they are
kept by the engine alone and read through snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EngineStats", "Row"]


@dataclass(frozen=True, slots=True)
class Row:
    """One token of a pass: the token, the sequences it joins, whether to keep its logits.

    ``forced`` marks a token that was known before the pass (prompt, skeleton, jump-forward):
    it is counted as prefilled, not decoded. ``padding`` marks a placeholder row added only to
    reach a cheaper batch width; it is counted apart from both.
    """

    token: int
    seqs: tuple[int, ...]
    logits: bool = False
    forced: bool = False
    padding: bool = False


@dataclass(slots=True)
class EngineStats:
    """Counters of the work done on a context. Subtract two snapshots to cost one call."""

    passes: int = 0
    decode_passes: int = 0
    prefill_passes: int = 0
    decoded_tokens: int = 0
    prefilled_tokens: int = 0
    padded_tokens: int = 0
    decode_s: float = 0.0
    prefill_s: float = 0.0
    # Number of sequences in each decode pass, by width (what padding plans are made from).
    width_counts: dict[int, int] = field(default_factory=dict)

    def snapshot(self) -> EngineStats:
        return EngineStats(
            self.passes,
            self.decode_passes,
            self.prefill_passes,
            self.decoded_tokens,
            self.prefilled_tokens,
            self.padded_tokens,
            self.decode_s,
            self.prefill_s,
            dict(self.width_counts),
        )

    def since(self, earlier: EngineStats) -> EngineStats:
        widths = {
            w: n - earlier.width_counts.get(w, 0)
            for w, n in self.width_counts.items()
            if n - earlier.width_counts.get(w, 0)
        }
        return EngineStats(
            self.passes - earlier.passes,
            self.decode_passes - earlier.decode_passes,
            self.prefill_passes - earlier.prefill_passes,
            self.decoded_tokens - earlier.decoded_tokens,
            self.prefilled_tokens - earlier.prefilled_tokens,
            self.padded_tokens - earlier.padded_tokens,
            self.decode_s - earlier.decode_s,
            self.prefill_s - earlier.prefill_s,
            widths,
        )
