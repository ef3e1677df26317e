"""What a pass is made of and what passes cost: :class:`Row` and :class:`EngineStats`; which
KV cells the sequences hold: :class:`KvCells`.

Stage: engine (its records). A pass is one ``llama_decode`` over rows; every row is one token
that joins one or more KV sequences. The counters are what every strategy reports, so they are
kept by the engine alone and read through snapshots.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TypeVar

__all__ = ["EngineStats", "KvCells", "Row"]

_Key = TypeVar("_Key")


@dataclass(frozen=True, slots=True)
class Row:
    """One token of a pass: the token, the sequences it joins, whether to keep its logits.

    ``forced`` marks a token that was known before the pass (prompt, skeleton, jump-forward):
    it is counted as prefilled, not decoded. ``padding`` marks a placeholder row added only to
    reach a cheaper batch width; it is counted apart from both. ``draft`` marks a proposed
    token the decoder will verify against the logits of the row before it: it is counted as
    decoded and as drafted.
    """

    token: int
    seqs: tuple[int, ...]
    logits: bool = False
    forced: bool = False
    padding: bool = False
    draft: bool = False


@dataclass(slots=True)
class EngineStats:
    """Counters of the work done on a context. Subtract two snapshots to cost one call.

    ``width_counts`` counts decode passes by width (padding included): what padding plans are
    made from. ``pass_rows`` counts *every* pass by its number of rows (prefill passes too):
    what a pass-by-pass cost table re-costs. ``drafted_tokens`` are rows sent as a draft (a
    token proposed before the pass, kept only if it equals the constrained argmax there);
    ``accepted_tokens`` are the drafted tokens that were kept. Drafted rows count as decoded.
    ``outputs`` counts rows llama.cpp computed logits for (asked or spare, ``run_pass``);
    ``pass_shapes`` counts every pass by ``(rows, outputs)``: what a table with output costs
    re-costs (``CostTable.cost``).
    """

    passes: int = 0
    decode_passes: int = 0
    prefill_passes: int = 0
    decoded_tokens: int = 0
    prefilled_tokens: int = 0
    padded_tokens: int = 0
    decode_s: float = 0.0
    prefill_s: float = 0.0
    width_counts: dict[int, int] = field(default_factory=dict)
    pass_rows: dict[int, int] = field(default_factory=dict)
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    outputs: int = 0
    pass_shapes: dict[tuple[int, int], int] = field(default_factory=dict)

    def snapshot(self) -> EngineStats:
        return replace(
            self,
            width_counts=dict(self.width_counts),
            pass_rows=dict(self.pass_rows),
            pass_shapes=dict(self.pass_shapes),
        )

    def since(self, earlier: EngineStats) -> EngineStats:
        return EngineStats(
            passes=self.passes - earlier.passes,
            decode_passes=self.decode_passes - earlier.decode_passes,
            prefill_passes=self.prefill_passes - earlier.prefill_passes,
            decoded_tokens=self.decoded_tokens - earlier.decoded_tokens,
            prefilled_tokens=self.prefilled_tokens - earlier.prefilled_tokens,
            padded_tokens=self.padded_tokens - earlier.padded_tokens,
            decode_s=self.decode_s - earlier.decode_s,
            prefill_s=self.prefill_s - earlier.prefill_s,
            width_counts=_minus(self.width_counts, earlier.width_counts),
            pass_rows=_minus(self.pass_rows, earlier.pass_rows),
            drafted_tokens=self.drafted_tokens - earlier.drafted_tokens,
            accepted_tokens=self.accepted_tokens - earlier.accepted_tokens,
            outputs=self.outputs - earlier.outputs,
            pass_shapes=_minus(self.pass_shapes, earlier.pass_shapes),
        )


def _minus(later: dict[_Key, int], earlier: dict[_Key, int]) -> dict[_Key, int]:
    """Per-key difference of two counters, keeping only keys that changed."""
    return {k: n - earlier.get(k, 0) for k, n in later.items() if n - earlier.get(k, 0)}


class KvCells:
    """Which KV cells each sequence holds: the cells in use and their high-water mark, counted
    without asking llama.cpp.

    A pass row creates one cell, held by every sequence the row joins; :meth:`copy` (a fork)
    lets another sequence hold the same cells; :meth:`truncate` lets a sequence go of its cells
    from a position on; a cell no sequence holds any more is free. That is what llama.cpp's
    unified KV cache does (``llama_memory_seq_cp`` tags the same cells with the new sequence,
    ``llama_memory_seq_rm`` untags them), so :attr:`in_use` is the number of cells llama.cpp
    has occupied, and :attr:`peak` the most at once since :meth:`reset_peak`.
    Each sequence's cells are a list indexed by position: the engine places every token at its
    sequence's next position, so positions are 0..length-1 without gaps.
    """

    __slots__ = ("_held", "_holders", "_next_cell", "peak")

    def __init__(self) -> None:
        self._held: dict[int, list[int]] = {}
        self._holders: dict[int, int] = {}  # cell -> how many sequences hold it
        self._next_cell = 0
        self.peak = 0

    @property
    def in_use(self) -> int:
        """Cells held by at least one sequence now."""
        return len(self._holders)

    def held(self, seq: int) -> int:
        """How many cells ``seq`` holds (its length)."""
        return len(self._held.get(seq, ()))

    def add(self, seqs: tuple[int, ...] | list[int]) -> None:
        """One new cell at the next position of each of ``seqs`` (one row of a pass)."""
        cell = self._next_cell
        self._next_cell += 1
        for seq in seqs:
            self._held.setdefault(seq, []).append(cell)
        self._holders[cell] = len(seqs)
        self.peak = max(self.peak, len(self._holders))

    def copy(self, src: int, dst: int) -> None:
        """``dst`` holds exactly ``src``'s cells (its own are let go first)."""
        self.truncate(dst, 0)
        cells = list(self._held.get(src, ()))
        self._held[dst] = cells
        for cell in cells:
            self._holders[cell] += 1

    def truncate(self, seq: int, length: int) -> None:
        """``seq`` keeps its cells below position ``length`` and lets go of the rest."""
        cells = self._held.get(seq)
        if not cells or length >= len(cells):
            return
        for cell in cells[length:]:
            left = self._holders[cell] - 1
            if left:
                self._holders[cell] = left
            else:
                del self._holders[cell]
        del cells[length:]

    def resize(self, seq: int, length: int) -> None:
        """``seq`` holds ``length`` cells: cut back, or grown by cells of its own (a sequence
        restored from a file, or lengths read back from llama.cpp after a failed pass)."""
        self.truncate(seq, length)
        for _ in range(length - self.held(seq)):
            self.add((seq,))

    def clear(self) -> None:
        """No cell in use (the peak is kept until :meth:`reset_peak`)."""
        self._held.clear()
        self._holders.clear()

    def reset_peak(self) -> None:
        """Start a new high-water mark from the cells in use now."""
        self.peak = len(self._holders)
