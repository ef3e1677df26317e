"""What a pass costs, by its number of rows, on one machine: :class:`CostTable`, read from a
cost file (:func:`load_cost_table`) or measured here (:mod:`weavehost.engine.calibrate`).

Stage: engine (its records). A pass is one ``llama_decode``; its cost depends above all on how
many rows (tokens) it carries, which is what decode planning (:mod:`weavehost.decode.padding`)
and re-costing a run on another machine (``weavehost bench --cost-model``) need.

Invariants: a :class:`CostTable` always has the cost of a one-row pass, every cost positive and
finite; :meth:`CostTable.pass_cost` answers for any row count by one documented fill rule. A
cost file has the shape of the tables measured elsewhere (``tests/data/costs/*.json``)::

    {"machine": "...", "model": "...", "threads": 2,
     "pass_ms": {"1": 35.3, "4": 113.8}, "prefill_ms_per_token": 16.6, "note": "..."}

A table measured by :func:`weavehost.engine.calibrate.measure_pass_costs` also says what the
*outputs* of a pass cost (its rows that ask for logits): ``"output_ms": {"1": 69.8, "8": 79.0,
...}`` times passes of ``"output_rows"`` rows with that many asking. llama.cpp computes the
vocabulary projection only for those rows, and on x86 its kernels take them four at a time: on
the AVX-512 development machine (Qwen2.5-Coder-0.5B, 2 threads) 32 rows cost 69.8 ms with 1
output, 85.4 with 5 and 79.0 with 8. :meth:`CostTable.cost` prices a pass by rows and outputs
from both. It also times some widths again after 1,024 held tokens (``"held_pass_ms"``,
``"held_tokens"``, and ``"base_tokens"``, the prompt's own length): what the tokens a
conversation holds add to a pass (:meth:`CostTable.at_held`).

The calibration ``weavehost calibrate`` stores is such a file (with more fields), so a table
measured on one machine is read on another by the same :func:`load_cost_table`.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from weavehost.errors import ConfigError

__all__ = [
    "ROW_TILE",
    "CostTable",
    "format_held",
    "format_table",
    "load_cost_table",
    "table_from_record",
    "table_record",
]

# The least share of an all-asking pass's cost its rows alone are priced at (CostTable.cost).
_LEAST_BODY_SHARE = 0.05
# llama.cpp's CPU matrix kernels (the repacked Q4_0 ones, and the vocabulary projection) take
# the rows of a pass this many at a time and the rest one by one (calibrate.py, docs/decoder.md).
ROW_TILE = 4


@dataclass(frozen=True, slots=True)
class CostTable:
    """Seconds of a pass by its number of rows, and of one prefilled token, on one machine.

    ``pass_s[n]``: the measured seconds of a pass of ``n`` rows (all of them asking for logits,
    the shape of a value or draft pass). ``prefill_token_s``: seconds per token of a prefill
    (one pass of many forced tokens). ``machine`` says where it was measured, ``source`` where
    the table came from (a file, or ``"measured"``).

    Fill rule (:meth:`pass_cost`): a measured row count costs what was measured; between two
    measured counts the cost is linear between them, except where the table shows rows taken
    :data:`ROW_TILE` at a time (a whole number of tiles ``t`` and ``t + 1`` both measured, the
    extra row dearer than a tile's share): then a count ``n`` costs at least its whole tiles'
    cost plus, per row left over, what the widest such ``t + 1`` added to its ``t`` (18 rows:
    16's cost and two extra rows; 17–19 measured 7.2–8.6 one-row passes against 6.9 for 20 on
    the AVX-512 machine, where the line from 16 to 20 said 6.4–7.3); beyond the widest measured
    count ``W`` each extra row adds ``prefill_token_s`` (``pass_cost(W) + (n - W) *
    prefill_token_s``): a wide pass is compute-bound, and a long prefill is the cheapest per-row
    cost a wide pass has been seen to have. So the phone tables (widths 1 and 4) read 2-3 on
    the line from 1 to 4 and 5, 6, ... at one prefilled token per row above the 4-row pass.

    Held tokens: ``pass_s`` was measured after :attr:`base_tokens` tokens in the cache (a short
    prompt). Where ``held_s`` is given, the same passes (some of their widths) were measured
    again after :attr:`held_tokens`: every row of a pass reads every held token, and a wide
    pass's rows read them dearer than a one-row pass does. :meth:`at_held` is the table after
    any number of held tokens, each adding what it added between the two measurements
    (:meth:`held_extra`); a table without ``held_s`` (the ones measured elsewhere) costs the
    same after any number.
    """

    pass_s: Mapping[int, float]
    prefill_token_s: float
    machine: str = ""
    source: str = ""
    output_s: Mapping[int, float] = field(default_factory=dict)
    output_rows: int = 0
    held_s: Mapping[int, float] = field(default_factory=dict)
    held_tokens: int = 0
    base_tokens: int = 0
    _rows: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _outputs: tuple[int, ...] = field(init=False, repr=False, compare=False)
    _extra: float | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        costs = _by_count(self.pass_s, "rows", "the cost of a pass of {} rows")
        if 1 not in costs:
            raise ConfigError("a cost table needs the cost of a one-row pass (width 1)")
        _positive(self.prefill_token_s, "the prefill cost per token")
        object.__setattr__(self, "pass_s", MappingProxyType(dict(sorted(costs.items()))))
        object.__setattr__(self, "prefill_token_s", float(self.prefill_token_s))
        object.__setattr__(self, "_rows", tuple(sorted(costs)))
        object.__setattr__(self, "_extra", self._tile_extra())
        outputs = _by_count(self.output_s, "outputs", "the cost of a pass with {} outputs")
        if outputs and (1 not in outputs or max(outputs) > self.output_rows):
            raise ConfigError(
                "output costs need a pass with one output and no more outputs than "
                f"output_rows ({self.output_rows})"
            )
        object.__setattr__(self, "output_s", MappingProxyType(dict(sorted(outputs.items()))))
        object.__setattr__(self, "_outputs", tuple(sorted(outputs)))
        held = _by_count(self.held_s, "rows", "the cost of a pass of {} rows after held tokens")
        if held and (1 not in held or not 0 <= self.base_tokens < self.held_tokens):
            raise ConfigError(
                "costs after held tokens need a one-row pass and more held tokens "
                f"({self.held_tokens}) than the table's own ({self.base_tokens})"
            )
        object.__setattr__(self, "held_s", MappingProxyType(dict(sorted(held.items()))))

    @property
    def widest(self) -> int:
        """The widest measured pass."""
        return self._rows[-1]

    def pass_cost(self, rows: int) -> float:
        """Seconds of a pass of ``rows`` rows, by the fill rule in the class docstring."""
        if rows < 1:
            raise ValueError(f"a pass has at least one row, not {rows}")
        measured = self.pass_s.get(rows)
        if measured is not None:
            return measured
        widest = self._rows[-1]
        if rows > widest:
            return self.pass_s[widest] + (rows - widest) * self.prefill_token_s
        line = self._between(rows)
        left = rows % ROW_TILE  # rows past whole tiles
        if self._extra is None or left == 0 or rows < ROW_TILE:
            return line
        return max(line, self._between(rows - left) + left * self._extra)

    def _between(self, rows: int) -> float:
        """The measured cost of ``rows`` (at most the widest), else the line between its
        measured neighbours."""
        measured = self.pass_s.get(rows)
        if measured is not None:
            return measured
        above = bisect.bisect(self._rows, rows)
        low, high = self._rows[above - 1], self._rows[above]
        share = (rows - low) / (high - low)
        return self.pass_s[low] + share * (self.pass_s[high] - self.pass_s[low])

    def _tile_extra(self) -> float | None:
        """What a row past whole tiles adds, where the table shows tiles (the fill rule): the
        widest measured ``t + 1`` less ``t`` (``t`` a whole number of tiles, ``t + ROW_TILE``
        measured too); ``None`` where no such widths are measured or the extra row costs no
        more than a tile's share of ``t + ROW_TILE``."""
        costs = self.pass_s
        tiles = [t for t in costs if t % ROW_TILE == 0 and t + 1 in costs and t + ROW_TILE in costs]
        if not tiles:
            return None
        t = tiles[-1]
        extra = costs[t + 1] - costs[t]
        return extra if extra > (costs[t + ROW_TILE] - costs[t]) / ROW_TILE else None

    @property
    def knows_held(self) -> bool:
        """Whether the table knows what the tokens a pass's rows attend to add to its cost."""
        return bool(self.held_s)

    def held_extra(self, rows: int, held: int) -> float:
        """Seconds a pass of ``rows`` rows after ``held`` tokens in the cache costs more than
        the table's own passes (after :attr:`base_tokens`): each held token adds what the
        passes measured after :attr:`held_tokens` added per token over the table's own, for
        the same rows (never below 0: attention reads every held token for every row). Between
        measured row counts linear; beyond the widest, in proportion to the rows (each row
        reads them all). 0 without such costs, or at no more held tokens than the table's."""
        extra = held - self.base_tokens
        if not self.held_s or extra <= 0 or rows < 1:
            return 0.0
        counts = tuple(self.held_s)
        per_token = self.held_tokens - self.base_tokens

        def slope(n: int) -> float:
            return max(0.0, self.held_s[n] - self.pass_cost(n)) / per_token

        if rows in self.held_s:
            return extra * slope(rows)
        above = bisect.bisect(counts, rows)
        if above >= len(counts):
            return extra * slope(counts[-1]) * rows / counts[-1]
        low, high = counts[above - 1], counts[above]
        share = (rows - low) / (high - low)
        return extra * (slope(low) + share * (slope(high) - slope(low)))

    def at_held(self, held: int) -> CostTable:
        """This table as its passes cost after ``held`` tokens in the cache
        (:meth:`held_extra` added to every measured row count, and to the prefilled token that
        prices each row beyond the widest: a row's share of the widest held pass's extra);
        itself where that adds nothing. The table returned knows no held costs of its own."""
        if not self.held_s or held <= self.base_tokens:
            return self
        widest = max(self.held_s)
        return CostTable(
            {rows: cost + self.held_extra(rows, held) for rows, cost in self.pass_s.items()},
            self.prefill_token_s + self.held_extra(widest, held) / widest,
            machine=self.machine,
            source=f"{self.source} at {held} held tokens",
            output_s=self.output_s,
            output_rows=self.output_rows,
        )

    @property
    def has_outputs(self) -> bool:
        """Whether the table knows what a pass's outputs cost apart from its rows."""
        return bool(self._outputs)

    @property
    def output_counts(self) -> tuple[int, ...]:
        """The output counts measured (empty without output costs)."""
        return self._outputs

    def output_extra(self, outputs: int) -> float:
        """Seconds ``outputs`` rows asking for logits add to a pass over one row asking.

        Between measured counts linear, beyond the most measured on the last measured slope
        (never falling); 0 without output costs. Noise below 0 reads as 0."""
        if not self._outputs or outputs <= 1:
            return 0.0
        counts, one = self._outputs, self.output_s[1]
        measured = self.output_s.get(outputs)
        if measured is None:
            above = bisect.bisect(counts, outputs)
            if above < len(counts):
                low, high = counts[above - 1], counts[above]
            elif len(counts) > 1:
                low, high = counts[-2], counts[-1]
            else:
                return 0.0
            slope = (self.output_s[high] - self.output_s[low]) / (high - low)
            if above >= len(counts):
                slope = max(0.0, slope)
            measured = self.output_s[low] + (outputs - low) * slope
        return max(0.0, measured - one)

    def cost(self, rows: int, outputs: int) -> float:
        """Seconds of a pass of ``rows`` rows of which ``outputs`` ask for logits.

        ``pass_s`` was measured with every row asking, so a pass with fewer outputs costs
        ``pass_cost(rows) - output_extra(rows) + output_extra(outputs)``; without output costs
        (the tables measured elsewhere) it is ``pass_cost(rows)``: every row priced as asking.
        """
        full = self.pass_cost(rows)
        if not self._outputs:
            return full
        outputs = min(max(outputs, 1), rows)
        body = full - self.output_extra(rows)
        # Two measurements subtracted: noise must not price the rows at nothing.
        return max(body, full * _LEAST_BODY_SHARE) + self.output_extra(outputs)

    def recost(self, pass_rows: Mapping[int, int]) -> float:
        """Total seconds of a run given as ``{rows: passes}`` (as ``EngineStats.pass_rows``),
        every row priced as asking for logits (``pass_cost``): a table with output costs
        overprices passes whose rows mostly do not ask; the tables measured elsewhere have
        none."""
        return sum(count * self.pass_cost(rows) for rows, count in pass_rows.items() if count)


def _by_count(costs: Mapping[Any, Any], noun: str, what: str) -> dict[int, float]:
    """``costs`` checked: each key a positive whole number of ``noun``, each cost positive and
    finite (``what`` names one, ``{}`` its count)."""
    checked: dict[int, float] = {}
    for count, cost in costs.items():
        if isinstance(count, bool) or not isinstance(count, int) or count < 1:
            raise ConfigError(f"a pass has a positive whole number of {noun}, not {count!r}")
        checked[count] = _positive(cost, what.format(count))
    return checked


def _whole(record: Mapping[str, Any], name: str, noun: str) -> int:
    """``record[name]`` (0 where absent): a whole number of ``noun`` at least 0."""
    value = record.get(name, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f'"{name}" must be a whole number of {noun}, not {value!r}')
    return value


def _positive(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ConfigError(f"{what} must be a number, not {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{what} must be positive and finite, not {value!r}")
    return float(value)


def load_cost_table(path: str | Path) -> CostTable:
    """Read a cost file (``pass_ms``, ``prefill_ms_per_token``, ``machine``; the shape in the
    module docstring). A missing, unreadable or malformed file is a one-line :class:`ConfigError`
    naming the file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such cost table") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: the cost table cannot be read ({exc})") from exc
    try:
        record = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{path}: the cost table is not JSON ({exc})") from exc
    try:
        return table_from_record(record, source=str(path), default_machine=path.stem)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from exc


def table_from_record(record: Any, *, source: str, default_machine: str = "") -> CostTable:
    """A :class:`CostTable` from a decoded cost file; :class:`ConfigError` if it is malformed."""
    if not isinstance(record, dict):
        raise ConfigError(f"a cost table is a JSON object, not {type(record).__name__}")
    pass_ms = record.get("pass_ms")
    if not isinstance(pass_ms, dict):
        raise ConfigError('a cost table needs "pass_ms", an object of {"rows": milliseconds}')
    costs = _seconds_by_count(pass_ms, "pass_ms", "a row count", "a pass of {} rows")
    if "prefill_ms_per_token" not in record:
        raise ConfigError('a cost table needs "prefill_ms_per_token"')
    prefill = _positive(record["prefill_ms_per_token"], '"prefill_ms_per_token"') / 1e3
    machine = record.get("machine", default_machine)
    if not isinstance(machine, str):
        raise ConfigError(f'"machine" must be a string, not {machine!r}')
    output_ms = record.get("output_ms", {})
    if not isinstance(output_ms, dict):
        raise ConfigError('"output_ms" must be an object of {"outputs": milliseconds}')
    outputs = _seconds_by_count(output_ms, "output_ms", "a count", "a pass with {} outputs")
    held_ms = record.get("held_pass_ms", {})
    if not isinstance(held_ms, dict):
        raise ConfigError('"held_pass_ms" must be an object of {"rows": milliseconds}')
    held = _seconds_by_count(held_ms, "held_pass_ms", "a row count", "a pass of {} rows")
    return CostTable(
        costs, prefill, machine=machine, source=source, output_s=outputs,
        output_rows=_whole(record, "output_rows", "rows"), held_s=held,
        held_tokens=_whole(record, "held_tokens", "tokens"),
        base_tokens=_whole(record, "base_tokens", "tokens"),
    )  # fmt: skip


def _seconds_by_count(
    ms: dict[Any, Any], field_name: str, key_kind: str, what: str
) -> dict[int, float]:
    """``{"count": milliseconds}`` read as ``{count: seconds}``; a key that is not a whole
    number, or a cost that is not positive, is a :class:`ConfigError`."""
    seconds: dict[int, float] = {}
    for key, value in ms.items():
        try:
            count = int(key)
        except ValueError:
            raise ConfigError(f'"{field_name}" has a key {key!r} that is not {key_kind}') from None
        seconds[count] = _positive(value, f"the cost of {what.format(key)}") / 1e3
    return seconds


def table_record(table: CostTable) -> dict[str, Any]:
    """The cost-file fields of ``table`` (milliseconds, string keys), ready for ``json.dumps``."""
    record: dict[str, Any] = {
        "machine": table.machine,
        "pass_ms": {str(rows): round(cost * 1e3, 4) for rows, cost in table.pass_s.items()},
        "prefill_ms_per_token": round(table.prefill_token_s * 1e3, 4),
    }
    if table.has_outputs:
        record["output_rows"] = table.output_rows
        record["output_ms"] = {str(n): round(c * 1e3, 4) for n, c in table.output_s.items()}
    if table.knows_held:
        record["base_tokens"] = table.base_tokens
        record["held_tokens"] = table.held_tokens
        record["held_pass_ms"] = {str(n): round(c * 1e3, 4) for n, c in table.held_s.items()}
    return record


def format_held(table: CostTable) -> str:
    """One line: the passes measured after held tokens, ms by rows (``""`` without them)."""
    if not table.knows_held:
        return ""
    costs = ", ".join(f"{n} {c * 1e3:.1f}" for n, c in table.held_s.items())
    return f"a pass by rows after {table.held_tokens} held tokens (ms): {costs}"


def format_table(table: CostTable) -> str:
    """A Markdown table: each measured row count's ms per pass, × a one-row pass, ms per row."""
    one = table.pass_s[1]
    lines = ["| rows | ms / pass | × one row | ms / row |", "|---:|---:|---:|---:|"]
    for rows, cost in table.pass_s.items():
        lines.append(f"| {rows} | {cost * 1e3:.2f} | {cost / one:.2f} | {cost * 1e3 / rows:.2f} |")
    return "\n".join(lines)
