"""Measuring what a pass costs here, by its number of rows (:func:`measure_pass_costs`), which
attention kernel to measure it with (:func:`probe_attention`), and whether two measurements
agree (:func:`compare_tables`). The table itself is :class:`~weavehost.engine.cost_table.CostTable`
(re-exported here, with the cost-file readers).

Stage: engine (measurement). A pass is one ``llama_decode``; its cost depends above all on how
many rows (tokens) it carries, which is what decode planning (:mod:`weavehost.decode.padding`)
and re-costing a run on another machine (``weavehost bench --cost-model``) need.

A shared machine drifts while it is measured (another process, a clock that steps down), so the
measurement is made robust to it rather than trusted:

- **Interleaved.** Every shape (each width, each output count, each prefill chunk) is timed once
  per round, in a shuffled order, for ``repeats`` rounds: drift lands on every width alike
  instead of on the widths measured while it lasted; each cost is the median of its rounds.
- **Checked.** A wider pass may cost less than a narrower one only where llama.cpp's kernels
  make it so: they take rows :data:`ROW_TILE` at a time, so a pass of ``n`` rows costs at least
  what one of ``m < n`` rows costs whenever ``n`` has at least as many rows beyond its last
  whole tile (``n % 4 >= m % 4``: 8 may cost less than 7, not less than 4). A table that breaks
  this by more than :data:`SHAPE_TOLERANCE` has the dearer, narrower width of each fault timed
  again (interleaved, its samples pooled), at most :data:`SHAPE_RETRIES` times; what still
  breaks it is reported with the calibration (:attr:`Calibration.shape_faults`), not hidden.
- **The kernel is kept unless the other is clearly faster**
  (:mod:`weavehost.engine.attention_probe`, re-exported here).
"""

from __future__ import annotations

import platform
import random
import statistics
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from weavehost.engine.attention_probe import (
    ATTENTION_MARGIN,
    EXACT_ATTENTION_MARGIN,
    FILLER,
    PROBE_HELD_TOKENS,
    PROBE_PREFILL_TOKENS,
    PROBE_ROUNDS,
    PROBE_SERIAL_PASSES,
    PROBE_WIDE_PASSES,
    PROBE_WIDE_ROWS,
    AttentionProbe,
    probe_attention,
)
from weavehost.engine.cost_table import (
    ROW_TILE,
    CostTable,
    format_held,
    format_table,
    load_cost_table,
    table_from_record,
    table_record,
)
from weavehost.engine.engine import Engine
from weavehost.engine.passes import Row
from weavehost.errors import EngineError

__all__ = [
    "AGREEMENT",
    "ATTENTION_MARGIN",
    "CALIBRATION_N_CTX",
    "DEFAULT_OUTPUTS",
    "DEFAULT_PREFILL_CHUNKS",
    "DEFAULT_REPEATS",
    "DEFAULT_ROWS",
    "OUTPUT_ROWS",
    "EXACT_ATTENTION_MARGIN",
    "HELD_ROWS",
    "HELD_TOKENS",
    "PROBE_HELD_TOKENS",
    "PROBE_PREFILL_TOKENS",
    "PROBE_ROUNDS",
    "PROBE_SERIAL_PASSES",
    "PROBE_WIDE_PASSES",
    "PROBE_WIDE_ROWS",
    "ROW_TILE",
    "SHAPE_RETRIES",
    "SHAPE_TOLERANCE",
    "Agreement",
    "AttentionProbe",
    "Calibration",
    "CostTable",
    "compare_tables",
    "cpu_model",
    "format_held",
    "format_table",
    "load_cost_table",
    "measure_pass_costs",
    "probe_attention",
    "shape_faults",
    "table_from_record",
    "table_record",
]

# The widest pass and the longest prefill chunk fit well within this context.
CALIBRATION_N_CTX = 2048
# Row counts measured by default: every width a padded, drafted or verified pass is likely to
# have, then coarser steps up to 32 (the widest pass the decoder plans; wider ones extrapolate).
# Every count to 16: kernels that take rows four at a time make 15 rows dearer than 16, which
# no line between 12 and 16 shows.
DEFAULT_ROWS = (*range(1, 17), 20, 24, 32)
# Passes of this many rows are timed with each of DEFAULT_OUTPUTS of them asking for logits
# (the outputs' cost), the same counts as the rows so that both are read at the same points.
OUTPUT_ROWS = 32
DEFAULT_OUTPUTS = DEFAULT_ROWS
# Held tokens before the passes timed again (HELD_ROWS of them): an agent's depth, as the
# attention probe holds it. An agent's prompt (its system text and tools) holds hundreds to
# thousands of tokens, and every row of a pass reads them all. On the 2-vCPU Xeon (session 58,
# all rows asking), after 1,200 held tokens instead of about 50, Qwen2.5-Coder-0.5B's 4-row pass
# cost 63.2 ms instead of 51.7 and its one-row pass 43.2 instead of 41.7; SmolLM2-135M's 38.3
# instead of 28.6, and 17.9 instead of 15.4.
HELD_TOKENS = PROBE_HELD_TOKENS
HELD_ROWS = (1, 2, 3, 4, 5, 8, 12, 16, 32)
# The held passes' rounds are shuffled from this seed (the others' from 0; the retries of a
# failed shape check from the seed plus 1000 per attempt).
_HELD_SEED = 10**6
# Prefill chunks timed (tokens); the table's per-token prefill cost is the cheapest one's.
DEFAULT_PREFILL_CHUNKS = (64, 128)
# Timed rounds (one pass of every shape each, after one warm-up round): a stable median, and
# `weavehost calibrate` stays near a minute for Qwen2.5-Coder-0.5B on 2 cores.
DEFAULT_REPEATS = 15

# ROW_TILE (cost_table.py): only whole tiles make a pass cheaper than a narrower one
# (docs/decoder.md, "What a pass's outputs cost").
# How much less than a narrower pass a wider one may cost where the tiles say it may not: two
# widths that genuinely cost the same (12 and 16 rows at 2 threads, 3 and 4 tiles over two
# threads) read 50.6 against 48.4 ms in one run and 54.8 against 57.1 in the next (Qwen2.5-
# Coder-0.5B, AVX-512): 5% of noise, and twice that is a fault.
SHAPE_TOLERANCE = 0.10
# Times the widths of a failed shape check are measured again before the fault is reported.
SHAPE_RETRIES = 2

# Two calibrations of one model on one quiet machine agree when every width's cost relative to
# a one-row pass differs by at most this much (issue 29).
AGREEMENT = 0.15

_PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant with tools.<|im_end|>\n"
    "<|im_start|>user\nWhat will the weather be in Paris and in Berlin over the next three "
    "days, in celsius please?<|im_end|>\n<|im_start|>assistant\n"
)

# The clock every timing reads (tests give a fake one).
_clock: Callable[[], float] = time.perf_counter


@dataclass(frozen=True, slots=True)
class Calibration:
    """What :func:`measure_pass_costs` measured: the table, and how it was measured (with
    llama.cpp's flash-attention kernel on or off: the table holds for that setting only).

    ``remeasured``: the shapes timed again after a failed shape check (``"rows 12"``,
    ``"outputs 5"``); ``shape_faults``: what still failed it after :data:`SHAPE_RETRIES`."""

    table: CostTable
    prefill_chunk_s: Mapping[int, float]  # chunk length -> seconds per token
    repeats: int
    threads: int
    flash_attn: bool = True
    attention: AttentionProbe | None = None
    remeasured: tuple[str, ...] = ()
    shape_faults: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """The stored calibration's measurement fields: a cost file, plus how it was made."""
        one = self.table.pass_s[1]
        record = {
            **table_record(self.table),
            "pass_x_one": {str(n): round(c / one, 4) for n, c in self.table.pass_s.items()},
            "threads": self.threads,
            "repeats": self.repeats,
            "prefill_ms_per_token_by_chunk": {
                str(c): round(s * 1e3, 4) for c, s in self.prefill_chunk_s.items()
            },
            "flash_attn": self.flash_attn,
            "shape_check": {
                "row_tile": ROW_TILE,
                "tolerance": SHAPE_TOLERANCE,
                "remeasured": list(self.remeasured),
                "faults": list(self.shape_faults),
            },
        }
        if self.attention is not None:
            record["attention_probe"] = self.attention.record()
        return record


@dataclass(frozen=True, slots=True)
class _Shape:
    """One pass the calibration times: its kind (``rows``, ``outputs``, ``prefill``), the
    count it is keyed by, and its rows."""

    kind: str
    count: int
    batch: list[Row]

    @property
    def name(self) -> str:
        return f"{self.kind} {self.count}"


def measure_pass_costs(
    engine: Engine,
    *,
    rows: Iterable[int] = DEFAULT_ROWS,
    repeats: int = DEFAULT_REPEATS,
    prefill_chunks: Iterable[int] = DEFAULT_PREFILL_CHUNKS,
    output_rows: int = OUTPUT_ROWS,
    outputs: Iterable[int] = DEFAULT_OUTPUTS,
    held_tokens: int = HELD_TOKENS,
    held_rows: Iterable[int] = HELD_ROWS,
    machine: str = "",
) -> Calibration:
    """Time passes by their number of rows, by their outputs, and prefill chunks, interleaved
    and checked (the module docstring); leave the KV cache empty.

    A pass of ``n`` rows carries ``n`` tokens, each asking for logits, on sequences that share
    one prefilled prompt: one token on each of ``n`` sequences while the engine has that many
    (``engine.n_seq_max``), beyond that several consecutive tokens on the same sequences (as
    draft rows are). What a pass costs is decided by its rows per ``llama_decode``, not by how
    many sequences they belong to, so the table is by rows. Passes of ``output_rows`` rows (at
    most the widest count) are timed with the last ``k`` rows asking for logits, for each of
    ``outputs`` up to ``output_rows``: the table's ``output_s`` (``output_rows=0``: not
    measured). Each prefill chunk of ``c`` forced tokens (logits for the last only) is timed
    too; the table's ``prefill_token_s`` is the cheapest chunk's per-token cost (each chunk's
    is kept in :attr:`Calibration.prefill_chunk_s`): in principle the longest chunk's, and
    taking the least keeps one disturbed chunk from moving the fill rule's cost per extra row.

    All of these shapes are timed once untimed (first-use allocations), then once per round in
    a shuffled order for ``repeats`` rounds; each cost is the median of its rounds. Rows and
    outputs are then checked by :func:`shape_faults` and the dearer width of a fault timed
    again.

    Then the passes of ``held_rows`` rows (those of the counts) are timed the same way after
    ``held_tokens`` tokens in the cache instead of the prompt's few (the table's
    :attr:`~CostTable.held_s`, from which the plan prices a pass after as many tokens as the
    conversation holds: :meth:`CostTable.at_held`); not where ``held_tokens`` is 0 or leaves
    no room in the context for the widest of them.
    """
    counts = sorted(set(rows))
    chunks = sorted(set(prefill_chunks))
    if not counts or counts[0] < 1 or not chunks or chunks[0] < 1 or repeats < 1:
        raise EngineError("calibration needs row counts >= 1, prefill chunks >= 1, repeats >= 1")
    if counts[-1] > engine.n_batch or chunks[-1] > engine.n_batch:
        raise EngineError(f"a calibration pass is wider than n_batch={engine.n_batch}")
    engine.clear()
    prompt = engine.tokenize(_PROMPT, special=True)
    base = len(prompt)
    need = base + max(-(-counts[-1] // engine.n_seq_max), chunks[-1])
    if need > engine.n_ctx:
        raise EngineError(f"calibration needs a context of {need} tokens, not {engine.n_ctx}")
    filler = engine.tokenize(FILLER)
    longest = max(chunks[-1], counts[-1])
    filler = (filler * (longest // len(filler) + 1))[:longest]
    forked = min(counts[-1], engine.n_seq_max)

    def spread(width: int, asking: int) -> list[Row]:
        # Row i goes to sequence i % used: consecutive positions on each sequence.
        used = min(width, engine.n_seq_max)
        return [Row(filler[i], (i % used,), logits=i >= width - asking) for i in range(width)]

    widest = min(output_rows, counts[-1])
    shapes = [_Shape("rows", n, spread(n, n)) for n in counts]
    if widest > 0:
        asked = sorted({1, *outputs} & set(range(1, widest + 1)))
        shapes += [_Shape("outputs", k, spread(widest, k)) for k in asked]
    shapes += [
        _Shape(
            "prefill",
            c,
            [Row(t, (0,), logits=i == c - 1, forced=True) for i, t in enumerate(filler[:c])],
        )
        for c in chunks
    ]

    def timed_after(held: int) -> Callable[[_Shape], float]:
        # A shape's pass timed after ``held`` tokens on every sequence it uses.
        def timed(shape: _Shape) -> float:
            for seq in range(forked):
                engine.drop(seq, held)
            started = _clock()
            engine.run_pass(shape.batch)
            return _clock() - started

        return timed

    held_counts = sorted(set(held_rows) & set(counts))
    held_need = held_tokens + -(-max(held_counts, default=0) // engine.n_seq_max)
    if held_tokens <= base or not held_counts or held_need > engine.n_ctx:
        held_counts = []
    held_shapes = [_Shape("held", n, spread(n, n)) for n in held_counts]

    try:
        engine.prefill(0, prompt, logits_last=False)
        for seq in range(1, forked):
            engine.fork(0, seq)
        samples, remeasured, faults = _measure_checked(shapes, repeats, timed_after(base))
        if held_shapes:  # the same passes after a long conversation's worth of tokens
            engine.clear()
            held = (filler * (held_tokens // len(filler) + 1))[: held_tokens - base]
            engine.prefill(0, prompt + held, logits_last=False)
            for seq in range(1, forked):
                engine.fork(0, seq)
            held_samples, held_remeasured, held_faults = _measure_checked(
                held_shapes, repeats, timed_after(held_tokens), seed=_HELD_SEED
            )
            samples.update(held_samples)
            remeasured, faults = remeasured + held_remeasured, faults + held_faults
    finally:
        engine.clear()
    shapes = [*shapes, *held_shapes]
    medians = {shape.name: statistics.median(samples[shape.name]) for shape in shapes}

    def by_kind(kind: str) -> dict[int, float]:
        return {s.count: medians[s.name] for s in shapes if s.kind == kind}

    output_s = by_kind("outputs")
    per_token = {c: cost / c for c, cost in by_kind("prefill").items()}
    table = CostTable(
        by_kind("rows"),
        min(per_token.values()),
        machine=machine,
        source="measured",
        output_s=output_s,
        output_rows=widest if output_s else 0,
        held_s=by_kind("held"),
        held_tokens=held_tokens if held_shapes else 0,
        base_tokens=base if held_shapes else 0,
    )
    return Calibration(
        table,
        per_token,
        repeats=repeats,
        threads=engine.n_threads,
        flash_attn=engine.flash_attn,
        remeasured=remeasured,
        shape_faults=faults,
    )


def _measure_checked(
    shapes: Sequence[_Shape], repeats: int, timed: Callable[[_Shape], float], *, seed: int = 0
) -> tuple[dict[str, list[float]], tuple[str, ...], tuple[str, ...]]:
    """Every shape once untimed, then ``repeats`` interleaved rounds; then the shape check of
    each kind of pass but prefills (rows, outputs, held rows), and the dearer shape of each fault
    timed again (pooled with its first samples) until it passes or :data:`SHAPE_RETRIES` are
    spent. Returns the samples by shape name, the shapes timed again, and the faults left."""
    samples: dict[str, list[float]] = {shape.name: [] for shape in shapes}
    for shape in shapes:
        timed(shape)
    _rounds(shapes, repeats, timed, samples, seed=seed)
    remeasured: list[str] = []
    faults: list[tuple[str, int, int]] = []
    kinds = sorted({shape.kind for shape in shapes} - {"prefill"})
    for attempt in range(SHAPE_RETRIES + 1):
        faults = []
        for kind in kinds:
            costs = {s.count: statistics.median(samples[s.name]) for s in shapes if s.kind == kind}
            faults += [(kind, low, high) for low, high in shape_faults(costs)]
        if not faults or attempt == SHAPE_RETRIES:
            break
        # The narrower, dearer shape of each fault: a burst of load makes a pass slower, and
        # a drift is spread by the rounds, so it is the one whose samples are suspect.
        involved = {f"{kind} {low}" for kind, low, _ in faults}
        again = [shape for shape in shapes if shape.name in involved]
        remeasured += [shape.name for shape in again if shape.name not in remeasured]
        _rounds(again, repeats, timed, samples, seed=seed + 1000 * (attempt + 1))
    reports = tuple(
        f"{kind} {high} cost {_ms(samples, kind, high)} ms, less than {kind} {low}"
        f" ({_ms(samples, kind, low)} ms) by more than {SHAPE_TOLERANCE:.0%}"
        for kind, low, high in faults
    )
    return samples, tuple(remeasured), reports


def _ms(samples: Mapping[str, list[float]], kind: str, count: int) -> str:
    return f"{statistics.median(samples[f'{kind} {count}']) * 1e3:.1f}"


def _rounds(
    shapes: Sequence[_Shape],
    repeats: int,
    timed: Callable[[_Shape], float],
    samples: dict[str, list[float]],
    *,
    seed: int,
) -> None:
    """Time each of ``shapes`` once per round, in an order shuffled per round (the same on
    every run), for ``repeats`` rounds; append to ``samples``."""
    for round_index in range(repeats):
        order = list(shapes)
        random.Random(seed + round_index).shuffle(order)
        for shape in order:
            samples[shape.name].append(timed(shape))


def shape_faults(
    costs: Mapping[int, float], *, tile: int = ROW_TILE, tolerance: float = SHAPE_TOLERANCE
) -> list[tuple[int, int]]:
    """The pairs ``(m, n)``, ``m < n``, where a pass of ``n`` rows costs less than one of
    ``m`` by more than ``tolerance`` although ``n`` has at least as many rows beyond its last
    whole ``tile`` as ``m`` (so it does all of ``m``'s work and more)."""
    return [
        (low, high)
        for low in sorted(costs)
        for high in sorted(costs)
        if high > low and high % tile >= low % tile and costs[high] < costs[low] * (1 - tolerance)
    ]


@dataclass(frozen=True, slots=True)
class Agreement:
    """How two tables of one model on one machine differ, count by count: each cost divided
    by the same table's one-row pass (what the plan compares), then ``|now / before - 1|``.
    ``rows``: by rows; ``outputs``: the output costs (also ÷ the one-row pass); ``held``: the
    passes timed after held tokens, each ÷ the one-row pass timed so (empty where either table
    has none); ``absolute``: the rows' costs in seconds, undivided (a machine that is uniformly
    slower shows here)."""

    rows: Mapping[int, float]
    outputs: Mapping[int, float]
    absolute: Mapping[int, float]
    held: Mapping[int, float] = field(default_factory=dict)

    @property
    def worst(self) -> tuple[str, int, float]:
        """The largest relative difference: ``("rows", "outputs" or "held", count,
        difference)``."""
        found = [("rows", n, d) for n, d in self.rows.items()]
        found += [("outputs", n, d) for n, d in self.outputs.items()]
        found += [("held", n, d) for n, d in self.held.items()]
        return max(found, key=lambda item: item[2])

    def agrees(self, bound: float = AGREEMENT) -> bool:
        return self.worst[2] <= bound

    def record(self) -> dict[str, Any]:
        """The differences as ``calibrate --check --json`` reports them (4 decimals)."""

        def rounded(differences: Mapping[int, float]) -> dict[str, float]:
            return {str(n): round(d, 4) for n, d in differences.items()}

        kind, count, worst = self.worst
        return {
            "relative_difference": {
                "rows": rounded(self.rows),
                "outputs": rounded(self.outputs),
                "held": rounded(self.held),
            },
            "absolute_difference": rounded(self.absolute),
            "worst": {"kind": kind, "count": count, "difference": round(worst, 4)},
        }


def compare_tables(before: CostTable, now: CostTable) -> Agreement:
    """The :class:`Agreement` of two tables over the counts both measured."""

    def relative(a: Mapping[int, float], b: Mapping[int, float], scale_a: float, scale_b: float):
        return {n: abs((b[n] / scale_b) / (a[n] / scale_a) - 1) for n in a if n in b}

    one_before, one_now = before.pass_s[1], now.pass_s[1]
    held_before, held_now = before.held_s.get(1), now.held_s.get(1)
    return Agreement(
        rows=relative(before.pass_s, now.pass_s, one_before, one_now),
        outputs=relative(before.output_s, now.output_s, one_before, one_now),
        absolute=relative(before.pass_s, now.pass_s, 1.0, 1.0),
        held=(
            relative(before.held_s, now.held_s, held_before, held_now)
            if held_before and held_now and before.held_tokens == now.held_tokens
            else {}
        ),
    )


def cpu_model() -> str:
    """The processor's name (``model name`` in ``/proc/cpuinfo``), else the architecture."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"
