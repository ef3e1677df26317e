"""Decode plans: how to shape passes, decided from what passes cost on the machine.

Stage: parallel value decoding (planning). A :class:`DecodePlan` is made from a
:class:`~weavehost.engine.calibrate.CostTable` (:meth:`DecodePlan.from_table`; once per model
and thread count, and once per step of held tokens where the table knows what they cost,
:meth:`DecodeState.plan <weavehost.decode.state.DecodeState.plan>`) and then queried every
pass, so it answers from tables precomputed there (``parallel_pays``) or memoised as asked
(``shape_for``, ``draft_rows``): making one takes a few milliseconds. It decides three things:

- **shapes** (:meth:`DecodePlan.shape_for`): a pass of n rows, k of them asking for logits, is
  padded to the cheapest measured width >= n and computes the cheapest measured number of
  outputs >= k (llama.cpp's repacked kernels take rows four at a time: 4 or 8 rows, or
  outputs, can cost less than 3 or 5);
- **parallel values** (:meth:`DecodePlan.parallel_pays`): whether n required values decoded side
  by side (then written back to sequence 0) beat decoding them one after another;
- **drafts** (:meth:`DecodePlan.draft_rows`): how many draft rows to add to a pass.

``weavehost calibrate`` stores the table it measured per model file and thread count, and a
model's decode state reads it back (:mod:`weavehost.decode.calibration` owns both). Without
one, :data:`NO_PLAN` is the default: no padding, values drafted on sequence 0 (parallel values
off until a calibration says they pay), a modest draft budget.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from weavehost.engine.calibrate import CostTable
from weavehost.engine.passes import Row

if TYPE_CHECKING:
    import numpy as np

    from weavehost.engine import Engine

__all__ = [
    "DEFAULT_ACCEPT",
    "DRAFT_MARGIN",
    "MAX_DRAFT_CHARS",
    "MAX_DRAFT_ROWS",
    "NO_PLAN",
    "PADDING_MARGIN",
    "PARALLEL_MARGIN",
    "VALUE_TOKENS",
    "WRITE_BACK_EXTRA_TOKENS",
    "DecodePlan",
    "Foreseen",
    "Shape",
    "run_shaped",
]

# What shapes a pass: (rows, rows asking for logits) -> (width, rows computing logits); a
# plan's DecodePlan.shape_for.
Shape = Callable[[int, int], tuple[int, int]]

# Padding to a wider pass must save at least this share of the pass's cost (noise in the table).
PADDING_MARGIN = 0.03
# The estimate parallel_pays works with: a required value is about VALUE_TOKENS tokens, and
# writing it back onto sequence 0 prefills those and about WRITE_BACK_EXTRA_TOKENS more (its
# key, quotes and separators).
VALUE_TOKENS = 8
WRITE_BACK_EXTRA_TOKENS = 6
# Parallel values must save at least this share of the serial estimate: the estimate is rough,
# and values decoded apart cannot see each other (docs/decoder.md, Known limits).
PARALLEL_MARGIN = 0.05
# The probability that a drafted token is accepted, when the caller has no better estimate.
DEFAULT_ACCEPT = 0.5
# The most draft rows added to one pass.
MAX_DRAFT_ROWS = 32
# The most characters of text a draft is looked up for: more than MAX_DRAFT_ROWS tokens.
MAX_DRAFT_CHARS = 4 * MAX_DRAFT_ROWS
# draft_rows takes the shortest draft within this share of the best expected rate: a longer
# one would chase noise in the table (and modelled gains of p**13 tokens).
DRAFT_MARGIN = 0.02
# Without a cost table: draft while a token's chance of being reached and accepted (p**d) is
# at least NEUTRAL_DRAFT_ACCEPT, at most NEUTRAL_DRAFT_ROWS rows.
NEUTRAL_DRAFT_ACCEPT = 0.5
NEUTRAL_DRAFT_ROWS = 4
# Answers precomputed by from_table (value counts) or kept as asked (base row counts) up to this.
_PRECOMPUTED = 32


@dataclass(frozen=True, slots=True)
class DecodePlan:
    """How to shape passes: see the module docstring. Build with :meth:`from_table`.

    ``widths[n]`` is the width a pass of ``n`` rows, all asking for logits, is padded to (``n``
    itself if absent): given for a plan without a table, derived from the table otherwise (what
    ``weavehost calibrate`` prints and stores); ``table`` the costs the plan was made from
    (``None``: the neutral plan); ``source`` where the plan came from (``"none"``,
    ``"calibrated (PATH)"``, ``"cost model FILE"``); ``pads=False``: no pass is reshaped.
    """

    widths: Mapping[int, int] = field(default_factory=dict)
    source: str = "none"
    table: CostTable | None = None
    # Without a table: whether values are decoded side by side (see parallel_pays).
    parallel_without_table: bool = True
    pads: bool = True
    # shape_for's answers and their costs, by (rows, outputs), filled as asked.
    _shapes: dict[tuple[int, int], tuple[int, int, float]] = field(
        default_factory=dict, repr=False, compare=False
    )
    # Precomputed by from_table: parallel_pays(n) for n < _PRECOMPUTED. draft_rows(base) at
    # DEFAULT_ACCEPT, filled as asked (most of a plan's making, were it precomputed: a plan is
    # made again as a conversation grows, DecodeState.plan).
    _parallel: tuple[bool, ...] = field(default=(), repr=False, compare=False)
    _drafts: dict[int, int] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_table(
        cls, table: CostTable, *, source: str | None = None, padding: bool = True
    ) -> DecodePlan:
        """The plan for ``table``; ``source`` defaults to ``"cost model <table.source>"``.
        ``padding=False``: no pass is padded."""
        plan = cls({}, source or f"cost model {table.source}", table, pads=padding)
        widths = {n: plan.width_for(n) for n in range(1, table.widest)}
        object.__setattr__(plan, "widths", {n: w for n, w in widths.items() if w != n})
        parallel = tuple(plan._parallel_pays(n) for n in range(_PRECOMPUTED))
        object.__setattr__(plan, "_parallel", parallel)
        return plan

    def without_padding(self) -> DecodePlan:
        """The same plan with every pass as wide as its rows (the ``weave:no_padding``
        ablation): its decisions (parallel values, draft rows) are made again on the unpadded
        costs."""
        if self.table is None:
            return replace(self, widths={}, _shapes={})
        plan = DecodePlan.from_table(self.table, source=f"{self.source}, no padding", padding=False)
        return plan

    def width_for(self, rows: int) -> int:
        """The width to pad a pass of ``rows`` rows, all asking for logits, to."""
        return self.shape_for(rows, rows)[0]

    def shape_for(self, rows: int, outputs: int) -> tuple[int, int]:
        """The pass to run for ``rows`` rows of which ``outputs`` ask for logits: ``(width,
        outputs')``, ``width >= rows`` rows (padding rows added) and ``outputs' >= outputs``
        rows computing logits (the extra ones discarded: ``Engine.run_pass(outputs=…)``).

        The cheapest shape by :meth:`CostTable.cost` among the measured widths and output
        counts at or above, if it saves ``PADDING_MARGIN`` of the unpadded pass's cost. Without
        a table: ``widths`` pads, outputs stay. A table without output costs (the ones measured
        elsewhere) prices every row as asking, so only the width changes.
        """
        return self._shape(rows, outputs)[:2]

    def _shape(self, rows: int, outputs: int) -> tuple[int, int, float]:
        outputs = min(max(outputs, 0), rows)
        key = (rows, outputs)
        known = self._shapes.get(key)
        if known is not None:
            return known
        table = self.table
        if table is None:
            shape = (max(rows, self.widths.get(rows, rows)), outputs, 0.0)
        else:
            unpadded = table.cost(rows, outputs)
            shape = (rows, outputs, unpadded)
            widths = [rows, *(w for w in table.pass_s if w > rows)] if self.pads else [rows]
            counts = [outputs, *(k for k in table.output_counts if k > outputs)]
            counts = counts if self.pads and outputs else [outputs]
            for width in widths:
                for count in counts:
                    if count > width:
                        break
                    cost = table.cost(width, count)
                    if cost < shape[2]:
                        shape = (width, count, cost)
            if shape[2] >= unpadded * (1 - PADDING_MARGIN):
                shape = (rows, outputs, unpadded)
        self._shapes[key] = shape
        return shape

    def pass_cost(self, rows: int, outputs: int) -> float:
        """Seconds of a pass of ``rows`` rows, ``outputs`` of them asking, once shaped (0.0
        without a table)."""
        return self._shape(rows, outputs)[2]

    def parallel_pays(self, n_values: int) -> bool:
        """Whether ``n_values`` required values are cheaper decoded side by side.

        Side by side: ``VALUE_TOKENS`` (L) passes of ``n`` rows (shaped), then one write-back
        prefill of about ``n * (L + WRITE_BACK_EXTRA_TOKENS)`` rows onto sequence 0, ``n * L``
        of them asking for logits (each value token is verified there). One after
        another: ``n * L`` tokens on sequence 0, drafted as verified decoding drafts them, at
        ``DEFAULT_ACCEPT`` (a pass of one chosen token and the drafted ones that pay most per
        expected token; on x86 tables that is a one-row pass). Side by side must win by
        ``PARALLEL_MARGIN``. Fewer
        than two values: ``False`` (nothing to put side by side). Without a table:
        ``parallel_without_table`` (``False`` for :data:`NO_PLAN`, what an uncalibrated machine
        gets).
        """
        if n_values < 2:
            return False
        if self.table is None:
            return self.parallel_without_table
        if n_values < len(self._parallel):
            return self._parallel[n_values]
        return self._parallel_pays(n_values)

    def _parallel_pays(self, n: int) -> bool:
        table = self.table
        if table is None or n < 2:
            return n >= 2
        # Write-back reads every value token with logits (each is verified there).
        write_back = self.pass_cost(
            n * (VALUE_TOKENS + WRITE_BACK_EXTRA_TOKENS), n * VALUE_TOKENS + 1
        )
        side_by_side = VALUE_TOKENS * self.pass_cost(n, n) + write_back
        serial = n * VALUE_TOKENS * self._token_cost(DEFAULT_ACCEPT)
        return side_by_side < serial * (1 - PARALLEL_MARGIN)

    def _token_cost(self, p: float) -> float:
        """What a token costs decoded on one sequence with drafts accepted at rate ``p``."""
        return self._worth(_gains([p] * MAX_DRAFT_ROWS))

    def _worth(self, gains: Sequence[float]) -> float:
        """The least cost per expected token of a pass of one chosen token and ``d`` drafted
        ones that keep ``gains[d]`` tokens in expectation: what a drafted token kept now saves
        a later pass. Each of its rows asks for logits (the next token's, or to verify the
        next drafted one)."""
        return min(self.pass_cost(1 + d, 1 + d) / (1 + g) for d, g in enumerate(gains))

    def draft_rows(self, base_rows: int, accept_p: float = DEFAULT_ACCEPT) -> int:
        """How many draft rows to add to a pass of ``base_rows`` rows (0..``MAX_DRAFT_ROWS``),
        each accepted with probability ``accept_p`` if the ones before it were: the
        :meth:`draft_length` rule. Without a table: draft while ``p**d >=
        NEUTRAL_DRAFT_ACCEPT``, at most ``NEUTRAL_DRAFT_ROWS``.
        """
        if not 0.0 <= accept_p <= 1.0:
            raise ValueError(f"accept_p is a probability, not {accept_p}")
        if self.table is None:
            return self.draft_length(base_rows, [accept_p] * NEUTRAL_DRAFT_ROWS)
        if accept_p == DEFAULT_ACCEPT and 0 <= base_rows < _PRECOMPUTED:
            rows = self._drafts.get(base_rows)
            if rows is None:
                rows = self._drafts[base_rows] = self._draft_rows(base_rows, accept_p)
            return rows
        return self._draft_rows(base_rows, accept_p)

    def _draft_rows(self, base_rows: int, p: float) -> int:
        return self.draft_length(base_rows, [p] * MAX_DRAFT_ROWS)

    def draft_length(self, base_rows: int, accept: Sequence[float]) -> int:
        """How many tokens of a draft to add to a pass of ``base_rows`` rows (the rows it holds
        anyway: its chosen token and the grammar's forced ones), when its token ``i`` is
        accepted with probability ``accept[i]`` if the ones before it were (each source of
        drafts has its own rate); at most ``MAX_DRAFT_ROWS`` and ``len(accept)``.

        ``d`` drafted tokens keep ``g(d) = p1 + p1 p2 + ...`` tokens in expectation and cost
        the shaped cost (:meth:`shape_for`) of ``base_rows + d`` rows, ``1 + d`` of them asking
        for logits (the base rows' last one and each drafted one). A token kept now is one a
        later pass need not write, so it is worth what a pass pays per token when it starts
        from one chosen token with the best draft of these kinds: ``w = min_d cost(1 + d) /
        (1 + g(d))``. The answer is the smallest ``d`` whose ``cost(base_rows + d) - w g(d)``
        is within
        ``DRAFT_MARGIN`` of the pass's cost of the best ``d``'s (a longer draft would chase
        noise in the table). With one base row this is the draft with the best expected
        tokens per second; with many (a forced run of 15 tokens), a draft costs only the rows
        it adds, so it pays where alone it would not. The rows up to the width the pass is
        padded to hold the draft's next tokens where that costs nothing more (with their
        outputs, :meth:`shape_for`).
        """
        accept = accept[:MAX_DRAFT_ROWS]
        if any(not 0.0 <= p <= 1.0 for p in accept):
            raise ValueError(f"acceptance rates are probabilities, not {list(accept)}")
        table = self.table
        if table is None:
            drafts, reach = 0, 1.0
            for p in accept[:NEUTRAL_DRAFT_ROWS]:
                reach *= p
                if reach < NEUTRAL_DRAFT_ACCEPT:
                    break
                drafts += 1
            return drafts
        gains = _gains(accept)
        worth = self._worth(gains)
        base = max(1, base_rows)
        # The base rows need logits only on the last one; each drafted row needs them.
        net = [self.pass_cost(base + d, 1 + d) - worth * g for d, g in enumerate(gains)]
        good_enough = min(net) + DRAFT_MARGIN * self.pass_cost(base, 1)
        drafts = next(d for d, value in enumerate(net) if value <= good_enough)
        # Rows the padded pass holds anyway are filled with the draft's next tokens.
        width = self.shape_for(base + drafts, 1 + drafts)[0]
        filled = min(len(accept), width - base)
        if filled > drafts and self.pass_cost(base + filled, 1 + filled) <= self.pass_cost(
            base + drafts, 1 + drafts
        ):
            return filled
        return drafts

    def foreseen(self, kept: Sequence[int]) -> Foreseen | None:
        """What drafting a text of ``len(kept)`` tokens could cost with foresight: ``kept[i]``
        is how many of the tokens after token ``i`` a draft read with it would have had kept
        (:meth:`AnswerDrafts.kept_after
        <weavehost.decode.answer_drafts.AnswerDrafts.kept_after>`), and a pass that reads token
        ``i`` carries ``k <= kept[i]`` of them, all kept, priced as :meth:`draft_length` prices
        a draft (``1 + k`` rows, each asking for logits, shaped). :class:`Foreseen` gives the
        cheapest such schedule (a shortest path over the tokens: ``k = 0``, one row a token,
        is always one of them, so it never costs more than undrafted decoding), and the fewest
        passes any such schedule takes (the most tokens a pass). ``None`` without a table."""
        if self.table is None:
            return None
        n = len(kept)
        # From token i to the end: the cheapest schedule's seconds and passes, and the fewest
        # passes of any (the most tokens a pass).
        best: list[tuple[float, int]] = [(0.0, 0)] * (n + 1)
        fewest = [0] * (n + 1)
        for at in range(n - 1, -1, -1):
            reach = range(min(kept[at], n - 1 - at, MAX_DRAFT_ROWS) + 1)
            best[at] = min(
                (self.pass_cost(1 + k, 1 + k) + best[at + 1 + k][0], best[at + 1 + k][1] + 1)
                for k in reach
            )
            fewest[at] = 1 + min(fewest[at + 1 + k] for k in reach)
        return Foreseen(
            tokens=n,
            passes=best[0][1],
            seconds=best[0][0],
            fewest_passes=fewest[0],
            one_row_seconds=n * self.pass_cost(1, 1),
        )


@dataclass(frozen=True, slots=True)
class Foreseen:
    """:meth:`DecodePlan.foreseen`'s schedules of one text: its ``tokens``; the cheapest
    schedule's ``passes`` and ``seconds``; the fewest passes of any schedule
    (``fewest_passes``); and the seconds at one row a token (``one_row_seconds``), all priced
    by the plan's table: a bound, never a measurement."""

    tokens: int
    passes: int
    seconds: float
    fewest_passes: int
    one_row_seconds: float


def run_shaped(
    engine: Engine, rows: list[Row], shape: Shape | None, *, scratch: int | None = None
) -> list[np.ndarray]:
    """Run ``rows`` as one pass shaped by ``shape`` (``None``: as they are): padding rows on
    ``scratch`` (default the engine's last sequence, which must be free; emptied after the
    pass) and spare outputs (``Engine.run_pass``). Returns the logits of the rows that asked."""
    asking = sum(1 for row in rows if row.logits)
    width, outputs = shape(len(rows), asking) if shape is not None else (len(rows), asking)
    if width <= len(rows):
        return engine.run_pass(rows, outputs=outputs)
    scratch = engine.n_seq_max - 1 if scratch is None else scratch
    padding = [Row(rows[-1].token, (scratch,), padding=True)] * (width - len(rows))
    try:
        return engine.run_pass(rows + padding, outputs=outputs)
    finally:
        engine.drop(scratch, 0)


def _gains(accept: Sequence[float]) -> list[float]:
    """``gains[d]``: the tokens ``d`` drafted tokens keep in expectation, token ``i`` accepted
    with probability ``accept[i]`` if the ones before it were (``gains[0]`` is 0)."""
    gains, reach = [0.0], 1.0
    for p in accept:
        reach *= p
        gains.append(gains[-1] + reach)
    return gains


# What a machine nobody calibrated gets: no padding, neutral drafts, and values drafted on
# sequence 0 rather than side by side. Side by side is a bet on the machine's costs: on x86 a
# second row costs nearly a first, and uncalibrated SmolLM2-135M on the AVX-512 development
# machine wrote its calls in 204 ms with parallel values and 144 ms without (first 40
# bench-200 cases; docs/benchmarks.md, run 6). `weavehost calibrate` turns them on where
# they pay (on the paper's phone tables they do).
NO_PLAN = DecodePlan({}, "none", parallel_without_table=False)
