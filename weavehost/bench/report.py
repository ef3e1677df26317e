"""The benchmark summary: per-strategy geometric means, speedup over ``constrained``, a plot.

Stage: benchmark report (after the runner, or on its own over a ``results.jsonl``).
Guarantees (the metrics ``docs/benchmarks.md`` "How it measures" describes):

- Latencies are summarised by the **geometric mean** over the cases whose latency was measured
  (a line with a null latency — a case that raised — is left out of that mean, not counted as 0).
- ``speedup_vs_constrained`` is the ratio of two such means from the same run:
  geo tool latency of ``constrained`` / geo tool latency of the strategy; null when
  ``constrained`` was not run (1.0 for ``constrained`` itself).
- ``correct_rate`` is over the lines that were judged (``correct`` not null); null when none were.
- ``summary.json`` maps each strategy, in the order asked, to ``{"n", "geo_tool_latency_s",
  "geo_final_latency_s", "mean_forward_passes", "correct_rate", "speedup_vs_constrained"}``
  plus ``errors`` (lines with no call), ``geo_prompt_prefill_s``, the drafting counters
  (``mean_drafted_tokens``, ``mean_accepted_tokens``, ``acceptance_rate``), the agreement
  with ``constrained`` (``same_as_constrained_rate`` over ``compared`` lines, ``mismatches``,
  ``near_tie_mismatches``), ``phases`` (``{phase: {"mean_s", "n"}}``, each mean over the lines
  that had the phase), ``mean_rows_per_pass``, ``peak_rss_bytes`` and ``projection``, plus
  ``latency_spread`` and ``memory`` (below), and ``breakdowns`` when :func:`summarize` is given
  the run's cases (:func:`weavehost.bench.breakdown.breakdowns`; null otherwise).
- ``latency_spread`` holds, for ``tool`` and ``final`` latency, the ``p10``, ``p25``, ``p50``,
  ``p75``, ``p90`` (linear interpolation between the closest ranks), ``min`` and ``max`` over
  the lines whose latency was measured, in seconds; each null when none was.
- ``memory`` holds ``peak_rss_bytes`` (as above), ``max_kv_cells`` and ``mean_kv_cells`` over
  the lines' ``kv_cells`` (the most KV cells in use at once during the call, the prompt's
  included), ``kv_bytes_per_cell`` (the model's, when the caller knows it), ``mean_kv_bytes``
  and ``extra_kv_mb_vs_constrained``: the mean over the cases both ran of the strategy's
  ``kv_cells`` minus ``constrained``'s, times the bytes per cell, in MB (10^6 bytes), and
  ``max_extra_kv_mb_vs_constrained`` the largest such difference; null where a number is
  missing.
- ``projection`` is null unless the lines carry ``projected_latency_s`` (a ``--cost-model``
  run): then it holds the geometric means of the re-costed latencies, each from the passes
  it covers — ``geo_latency_s`` to the tool start (the headline, as ``geo_tool_latency_s``),
  ``geo_final_latency_s`` to the last final call, ``geo_reply_s`` the whole reply — and the
  speedups of the tool means vs ``constrained`` and ``jump_forward``, under ``machine`` (the
  cost table's), and is shown everywhere as a projection on that machine, never as a
  measurement.
- ``account`` is null unless the lines carry a time ``account``
  (:mod:`weavehost.bench.account`); then ``n`` (the lines with one), ``per_call_s`` (the mean of
  each of its seconds over those lines; ``rows_s`` and ``logits_rows_s`` over the lines that
  have them), ``per_pass_s`` (each summed over those lines, over their passes summed),
  ``mean_passes`` and ``mean_masks``. :func:`format_account` prints it.
- The plot is plain SVG written here (no plotting dependency): per strategy a latency bar and a
  passes bar side by side (and a projected-latency bar in a third panel when projected).
"""

from __future__ import annotations

import json
import math
import textwrap
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from weavehost.bench.cases import AnswerSet, BenchCase
from weavehost.bench.compare import BASELINE, is_near_tie
from weavehost.errors import BenchError

__all__ = [
    "BASELINE",
    "PROJECTION_BASELINES",
    "SPREAD_POINTS",
    "SUMMARY_KEYS",
    "account_means",
    "contract_numbers",
    "format_account",
    "format_table",
    "geomean",
    "latency_spread",
    "load_results",
    "mean_rows_per_pass",
    "phase_means",
    "ratio",
    "render_svg",
    "spread",
    "summarize",
    "write_summary",
]

# The strategies a projected latency is compared with (each where it ran).
PROJECTION_BASELINES = ("constrained", "jump_forward")
SUMMARY_KEYS = (
    "n",
    "geo_tool_latency_s",
    "geo_final_latency_s",
    "mean_forward_passes",
    "correct_rate",
    "speedup_vs_constrained",
)
# The percentiles of a latency spread, by name.
SPREAD_POINTS = {"p10": 0.10, "p25": 0.25, "p50": 0.50, "p75": 0.75, "p90": 0.90}
# Bytes in the MB of ``extra_kv_mb_vs_constrained`` (decimal, as the paper's +8.9 MB).
_MB = 1_000_000


def geomean(values: Iterable[float | None]) -> float | None:
    """The geometric mean of the positive values; None when there is none."""
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator``; None when either is missing or 0 (every speedup here, and
    the acceptance rate, is this)."""
    return numerator / denominator if numerator and denominator else None


def mean_rows_per_pass(histograms: Iterable[Mapping[str, int] | None]) -> float | None:
    """Rows per pass over all passes of ``histograms`` (``pass_rows``: {"rows": passes})."""
    rows = passes = 0
    for histogram in histograms:
        for width, count in (histogram or {}).items():
            rows += int(width) * count
            passes += count
    return rows / passes if passes else None


def spread(values: Iterable[float | None]) -> dict[str, float | None]:
    """``p10``…``p90`` (linear interpolation between the closest ranks), ``min`` and ``max``
    of the values that are not None; every entry None when there is none."""
    kept = sorted(v for v in values if v is not None)
    out: dict[str, float | None] = {}
    for name, q in SPREAD_POINTS.items():
        if not kept:
            out[name] = None
            continue
        rank = q * (len(kept) - 1)
        low = math.floor(rank)
        high = min(low + 1, len(kept) - 1)
        out[name] = kept[low] + (kept[high] - kept[low]) * (rank - low)
    out["min"] = kept[0] if kept else None
    out["max"] = kept[-1] if kept else None
    return out


def latency_spread(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float | None]]:
    """The :func:`spread` of the lines' tool and final latencies."""
    return {
        "tool": spread(r.get("tool_latency_s") for r in rows),
        "final": spread(r.get("final_latency_s") for r in rows),
    }


def phase_means(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """``{phase: {"mean_s", "n"}}``: each phase's mean over the ``n`` lines that had it."""
    seen: dict[str, list[float]] = {}
    for record in rows:
        for phase, seconds in (record.get("phases") or {}).items():
            seen.setdefault(phase, []).append(seconds)
    return {name: {"mean_s": sum(v) / len(v), "n": len(v)} for name, v in seen.items()}


def contract_numbers(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The :data:`SUMMARY_KEYS` of ``rows`` (``speedup_vs_constrained`` left None: it needs
    the baseline's lines)."""
    judged = [r["correct"] for r in rows if r.get("correct") is not None]
    return {
        "n": len(rows),
        "geo_tool_latency_s": geomean(r.get("tool_latency_s") for r in rows),
        "geo_final_latency_s": geomean(r.get("final_latency_s") for r in rows),
        "mean_forward_passes": _mean(r.get("forward_passes") for r in rows),
        "correct_rate": (sum(1 for c in judged if c) / len(judged)) if judged else None,
        "speedup_vs_constrained": None,
    }


def _numbers(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    compared = [r["same_as_constrained"] for r in rows if r.get("same_as_constrained") is not None]
    mismatches = [r["mismatch"] for r in rows if r.get("mismatch")]
    drafted = [r.get("drafted_tokens") for r in rows]
    accepted = [r.get("accepted_tokens") for r in rows]
    rss = [r["peak_rss_bytes"] for r in rows if r.get("peak_rss_bytes") is not None]
    return {
        **contract_numbers(rows),
        "errors": sum(1 for r in rows if not r.get("calls")),
        "geo_prompt_prefill_s": geomean(r.get("prompt_prefill_s") for r in rows),
        "mean_drafted_tokens": _mean(drafted),
        "mean_accepted_tokens": _mean(accepted),
        "acceptance_rate": ratio(
            sum(a for a in accepted if a is not None), sum(d for d in drafted if d is not None)
        ),
        "same_as_constrained_rate": (sum(1 for c in compared if c) / len(compared))
        if compared
        else None,
        "compared": len(compared),
        "mismatches": len(mismatches),
        "near_tie_mismatches": sum(1 for m in mismatches if is_near_tie(m.get("logit_gap"))),
        "phases": phase_means(rows),
        "mean_rows_per_pass": mean_rows_per_pass(r.get("pass_rows") for r in rows),
        "peak_rss_bytes": max(rss) if rss else None,
        "projection": None,
        "latency_spread": latency_spread(rows),
        "breakdowns": None,
        "account": account_means(rows),
    }


# An account's seconds, in the order they are printed: the parts that add up to the total, then
# the passes' split (weavehost.bench.account).
_ACCOUNT_SECONDS = (
    "total_s",
    "passes_s",
    "rows_s",
    "logits_rows_s",
    "mask_s",
    "selector_s",
    "other_s",
)


def account_means(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The ``account`` of the summary (see the module docstring); None when no line has one."""
    accounts = [r["account"] for r in rows if r.get("account")]
    if not accounts:
        return None
    passes = sum(a.get("passes") or 0 for a in accounts)
    per_pass: dict[str, float | None] = {}
    for key in _ACCOUNT_SECONDS:
        kept = [a[key] for a in accounts if a.get(key) is not None]
        # Per pass only over the lines that have the number (the split needs a table).
        kept_passes = sum(a.get("passes") or 0 for a in accounts if a.get(key) is not None)
        per_pass[key] = sum(kept) / kept_passes if kept and kept_passes else None
    return {
        "n": len(accounts),
        "per_call_s": {key: _mean(a.get(key) for a in accounts) for key in _ACCOUNT_SECONDS},
        "per_pass_s": per_pass,
        "mean_passes": passes / len(accounts),
        "mean_masks": _mean(a.get("masks") for a in accounts),
    }


def _memory(
    rows: Sequence[Mapping[str, Any]],
    baseline: Sequence[Mapping[str, Any]],
    bytes_per_cell: int | None,
    peak_rss_bytes: int | None,
) -> dict[str, Any]:
    """``memory`` of the summary; ``peak_rss_bytes`` is :func:`_numbers`' (computed there)."""
    cells = [r["kv_cells"] for r in rows if r.get("kv_cells") is not None]
    baseline_cells = {r["id"]: r["kv_cells"] for r in baseline if r.get("kv_cells") is not None}
    extra = [
        r["kv_cells"] - baseline_cells[r["id"]]
        for r in rows
        if r.get("kv_cells") is not None and r.get("id") in baseline_cells
    ]
    mean_cells = _mean(cells)

    def mb(n_cells: float | None) -> float | None:
        if n_cells is None or bytes_per_cell is None:
            return None
        return n_cells * bytes_per_cell / _MB

    return {
        "peak_rss_bytes": peak_rss_bytes,
        "max_kv_cells": max(cells) if cells else None,
        "mean_kv_cells": mean_cells,
        "kv_bytes_per_cell": bytes_per_cell,
        "mean_kv_bytes": mean_cells * bytes_per_cell
        if mean_cells is not None and bytes_per_cell is not None
        else None,
        "extra_kv_mb_vs_constrained": mb(_mean(extra)),
        "max_extra_kv_mb_vs_constrained": mb(max(extra)) if extra else None,
    }


def summarize(
    records: Sequence[Mapping[str, Any]],
    strategies: Sequence[str] | None = None,
    *,
    projected_on: str | None = None,
    cases: Sequence[BenchCase] | None = None,
    answers: Mapping[str, AnswerSet] | None = None,
    kv_bytes_per_cell: int | None = None,
) -> dict[str, dict[str, Any]]:
    """Per strategy (in ``strategies`` order, else first appearance) the summary numbers.

    ``projected_on`` names the machine of the cost table the lines' ``projected_latency_s``
    were re-costed with; each strategy then gets a ``projection`` (also when the lines carry
    projections and the machine is not known: ``machine`` is null then). With the run's
    ``cases`` (and ``answers``, when it had them) each strategy gets its ``breakdowns``;
    ``kv_bytes_per_cell`` (:func:`weavehost.bench.rss.kv_bytes_per_cell`) turns ``memory``'s
    cells into bytes.
    """
    order = list(strategies) if strategies else list(dict.fromkeys(r["strategy"] for r in records))
    by_strategy: dict[str, list[Mapping[str, Any]]] = {name: [] for name in order}
    for record in records:
        by_strategy.setdefault(record["strategy"], []).append(record)
    summary = {name: _numbers(rows) for name, rows in by_strategy.items()}
    for name, rows in by_strategy.items():
        numbers = summary[name]
        numbers["memory"] = _memory(
            rows, by_strategy.get(BASELINE, []), kv_bytes_per_cell, numbers["peak_rss_bytes"]
        )
    if cases is not None:
        # Imported here: breakdown builds on this module's helpers.
        from weavehost.bench.breakdown import breakdowns

        for name, numbers in breakdowns(records, cases, answers).items():
            if name in summary:
                summary[name]["breakdowns"] = numbers
    baseline = summary.get(BASELINE, {}).get("geo_tool_latency_s")
    for numbers in summary.values():
        numbers["speedup_vs_constrained"] = ratio(baseline, numbers["geo_tool_latency_s"])
    if projected_on is not None or any(r.get("projected_latency_s") for r in records):
        projected = {
            name: geomean(r.get("projected_latency_s") for r in rows)
            for name, rows in by_strategy.items()
        }
        for name, numbers in summary.items():
            rows = by_strategy.get(name, [])
            numbers["projection"] = {
                "machine": projected_on,
                "what": "each latency's passes re-costed with this machine's cost table: "
                "a projection, not a measurement (host-side time not included)",
                "geo_latency_s": projected[name],
                "geo_final_latency_s": geomean(r.get("projected_final_latency_s") for r in rows),
                "geo_reply_s": geomean(r.get("projected_reply_s") for r in rows),
                **{
                    f"speedup_vs_{other}": ratio(projected.get(other), projected[name])
                    for other in PROJECTION_BASELINES
                },
            }
    return summary


def load_results(path: str | Path) -> list[dict[str, Any]]:
    """The lines of a ``results.jsonl``; a bad line is a :class:`BenchError` naming it."""
    file_path = Path(path)
    try:
        lines = file_path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BenchError(f"cannot read results file {file_path}: {exc.strerror}") from exc
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BenchError(f"{file_path}:{number}: not JSON ({exc.msg})") from exc
        if not isinstance(record, dict) or "strategy" not in record:
            raise BenchError(f"{file_path}:{number}: not a result line (no 'strategy')")
        records.append(record)
    return records


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _num(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _percent(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def _projection_machine(summary: Mapping[str, Mapping[str, Any]]) -> tuple[bool, str | None]:
    projections = [n.get("projection") for n in summary.values() if n.get("projection")]
    return bool(projections), (projections[0].get("machine") if projections else None)


def _columns(rows: Sequence[Sequence[str]]) -> list[str]:
    """``rows`` (the header first) as fixed-width lines: the first column left-aligned, the
    others right-aligned, a rule under the header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for index, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return lines


def format_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """The summary as a fixed-width text table (latencies in ms); ``kv MB`` only when the lines
    counted their KV cells and the model's bytes per cell are known; the projected columns only
    when the run was re-costed with a cost table."""
    projected, machine = _projection_machine(summary)
    kv = any((n.get("memory") or {}).get("mean_kv_bytes") is not None for n in summary.values())
    header = ("strategy", "n", "tool ms", "final ms", "speedup", "passes", "correct", "errors")
    header += ("same", "draft/acc") + (("kv MB",) if kv else ())
    header += ("proj ms", "proj x") if projected else ()
    rows = [header]
    for name, numbers in summary.items():
        drafted, accepted = numbers.get("mean_drafted_tokens"), numbers.get("mean_accepted_tokens")
        row = (
            name,
            str(numbers["n"]),
            _ms(numbers["geo_tool_latency_s"]),
            _ms(numbers["geo_final_latency_s"]),
            _times(numbers["speedup_vs_constrained"]),
            _num(numbers["mean_forward_passes"], ".1f"),
            _percent(numbers.get("correct_rate")),
            str(numbers.get("errors", "-")),
            _percent(numbers.get("same_as_constrained_rate")),
            "-" if drafted is None else f"{drafted:.1f}/{_num(accepted, '.1f')}",
        )
        if kv:
            kv_bytes = (numbers.get("memory") or {}).get("mean_kv_bytes")
            row += (_num(None if kv_bytes is None else kv_bytes / _MB, ".2f"),)
        if projected:
            projection = numbers.get("projection") or {}
            row += (
                _ms(projection.get("geo_latency_s")),
                _times(projection.get("speedup_vs_constrained")),
            )
        rows.append(row)
    lines = _columns(rows)
    lines.append("(tool/final ms: geometric means over cases; speedup: vs constrained)")
    lines.append(
        "(same: calls equal to constrained's; draft/acc: mean drafted/accepted tokens per call)"
    )
    if kv:
        lines.append("(kv MB: KV cache in use at the call's peak, mean over cases, 10^6 bytes)")
    if projected:
        where = machine or "the cost table's machine"
        lines.append(
            f"(proj ms, proj x: a PROJECTION on {where}: the passes to the tool start "
            "re-costed with its cost table, host time left out; not a measurement)"
        )
    return "\n".join(lines)


def format_account(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """Where each strategy's reply time went, ms per call and per pass, as a fixed-width text
    table; empty when no strategy has an account."""
    shown = {name: n["account"] for name, n in summary.items() if n.get("account")}
    if not shown:
        return ""
    names = ("total", "passes", "rows", "logits", "mask", "selector", "other")
    header = ("strategy", "per", "n", "passes", *(f"{n} ms" for n in names))
    rows = [header]
    for name, account in shown.items():
        per_call, per_pass = account["per_call_s"], account["per_pass_s"]
        rows.append(
            (
                name,
                "call",
                str(account["n"]),
                _num(account["mean_passes"], ".1f"),
                *(_ms(per_call[key]) for key in _ACCOUNT_SECONDS),
            )
        )
        rows.append(("", "pass", "", "", *(_ms(per_pass[key]) for key in _ACCOUNT_SECONDS)))
    lines = _columns(rows)
    lines.append("(where a reply's time went: mean per call over cases, and per pass over all")
    lines.append(" passes; total = passes + mask + selector + other, passes = rows + logits split")
    lines.append(" by this machine's calibration table, '-' without one; noise on a busy machine)")
    return "\n".join(lines)


_BAR_HEIGHT = 22
_GAP = 10
_LABEL_WIDTH = 150
_BAR_SPACE = 210
_VALUE_WIDTH = 120
_PANEL_GAP = 20
_LINE = 18
# Characters of 13px sans-serif per pixel, generously: a text line is wrapped to fit the width.
_CHAR_PX = 7


def _panels(summary: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, str, list[float | None]]]:
    """(css class, heading, value per strategy) for each panel of the plot."""
    items = list(summary.values())
    panels: list[tuple[str, str, list[float | None]]] = [
        ("latency", "Tool latency, ms (geo mean)", [n["geo_tool_latency_s"] for n in items]),
        ("passes", "Forward passes (mean)", [n["mean_forward_passes"] for n in items]),
    ]
    if _projection_machine(summary)[0]:
        panels.append(
            (
                "projected",
                "PROJECTED tool latency, ms (geo mean)",
                [(n.get("projection") or {}).get("geo_latency_s") for n in items],
            )
        )
    return panels


def _label(kind: str, value: float | None, numbers: Mapping[str, Any]) -> str:
    if value is None:
        return "-"
    if kind == "passes":
        return f"{value:.1f}"
    speedup = (
        numbers.get("speedup_vs_constrained")
        if kind == "latency"
        else (numbers.get("projection") or {}).get("speedup_vs_constrained")
    )
    return f"{value * 1000:.1f}" + (f" ({speedup:.2f}x)" if speedup is not None else "")


def render_svg(
    summary: Mapping[str, Mapping[str, Any]], title: str = "", notes: Sequence[str] = ()
) -> str:
    """Per strategy a latency bar and a passes bar side by side (two panels, a third for a
    projected latency), under a heading, ``title`` and ``notes`` lines, as SVG text."""
    names = list(summary)
    panels = _panels(summary)
    projected, machine = _projection_machine(summary)
    footer = ["Bars start at 0; speedups in brackets are vs constrained."]
    if projected:
        footer.append(
            f"PROJECTED: the passes to the tool start re-costed with the cost table of "
            f"{machine or 'another machine'}; a projection, not a measurement."
        )
    panel_width = _BAR_SPACE + _VALUE_WIDTH + _PANEL_GAP
    width = _LABEL_WIDTH + len(panels) * panel_width
    chars = (width - 20) // _CHAR_PX
    header = [wrapped for text in [title, *notes] for wrapped in textwrap.wrap(text, chars)]
    footer = [wrapped for text in footer for wrapped in textwrap.wrap(text, chars)]
    top = 30 + _LINE * len(header) + 26
    rows_bottom = top + len(names) * (_BAR_HEIGHT + _GAP)
    height = rows_bottom + 10 + _LINE * len(footer) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="15" font-weight="bold">'
        f"{escape('Tool-call latency and forward passes per strategy')}</text>",
    ]
    for index, text in enumerate(header):
        out.append(f'<text x="10" y="{38 + index * _LINE}" fill="#555">{escape(text)}</text>')
    for p, (kind, heading, values) in enumerate(panels):
        x0 = _LABEL_WIDTH + p * panel_width
        largest = max((v or 0.0 for v in values), default=0.0) or 1.0
        out.append(f'<text x="{x0}" y="{top - 10}" font-weight="bold">{escape(heading)}</text>')
        for index, (name, value) in enumerate(zip(names, values, strict=True)):
            y = top + index * (_BAR_HEIGHT + _GAP)
            bar = 0.0 if value is None else _BAR_SPACE * value / largest
            colour = "#d62728" if name == BASELINE else "#1f77b4"
            if kind == "projected":
                colour = "#9467bd" if name != BASELINE else "#e377c2"
            label = _label(kind, value, summary[name])
            out.append(
                f'<rect class="{kind}" x="{x0}" y="{y}" width="{bar:.1f}" '
                f'height="{_BAR_HEIGHT}" fill="{colour}"><title>{escape(name)}: '
                f"{escape(heading)} {escape(label)}</title></rect>"
            )
            out.append(
                f'<text x="{x0 + bar + 5:.1f}" y="{y + _BAR_HEIGHT * 0.7:.1f}">'
                f"{escape(label)}</text>"
            )
        out.append(f'<line x1="{x0}" y1="{top - 4}" x2="{x0}" y2="{rows_bottom}" stroke="#333"/>')
    for index, name in enumerate(names):
        y = top + index * (_BAR_HEIGHT + _GAP)
        out.append(
            f'<text x="{_LABEL_WIDTH - 8}" y="{y + _BAR_HEIGHT * 0.7:.1f}" '
            f'text-anchor="end">{escape(name)}</text>'
        )
    for index, text in enumerate(footer):
        out.append(
            f'<text x="10" y="{rows_bottom + 18 + index * _LINE}" fill="#555">{escape(text)}</text>'
        )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_summary(
    summary: Mapping[str, Mapping[str, Any]],
    out: Path,
    *,
    title: str = "",
    notes: Sequence[str] = (),
) -> tuple[Path, Path]:
    """Write ``summary.json`` and ``summary.svg`` into ``out``; return their paths."""
    json_path = out / "summary.json"
    svg_path = out / "summary.svg"
    json_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    svg_path.write_text(render_svg(summary, title, notes), encoding="utf-8")
    return json_path, svg_path
