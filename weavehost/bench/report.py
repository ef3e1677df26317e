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
  plus ``errors`` (lines with no call) and ``geo_prompt_prefill_s``.
- The plot is plain SVG written here (no plotting dependency): one bar per strategy.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from weavehost.errors import BenchError

__all__ = [
    "BASELINE",
    "SUMMARY_KEYS",
    "format_table",
    "geomean",
    "load_results",
    "render_svg",
    "summarize",
    "write_summary",
]

BASELINE = "constrained"
SUMMARY_KEYS = (
    "n",
    "geo_tool_latency_s",
    "geo_final_latency_s",
    "mean_forward_passes",
    "correct_rate",
    "speedup_vs_constrained",
)


def geomean(values: Iterable[float | None]) -> float | None:
    """The geometric mean of the positive values; None when there is none."""
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(sum(logs) / len(logs)) if logs else None


def _mean(values: Iterable[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def summarize(
    records: Sequence[Mapping[str, Any]], strategies: Sequence[str] | None = None
) -> dict[str, dict[str, Any]]:
    """Per strategy (in ``strategies`` order, else first appearance) the summary numbers."""
    order = list(strategies) if strategies else list(dict.fromkeys(r["strategy"] for r in records))
    by_strategy: dict[str, list[Mapping[str, Any]]] = {name: [] for name in order}
    for record in records:
        by_strategy.setdefault(record["strategy"], []).append(record)
    summary: dict[str, dict[str, Any]] = {}
    for name, rows in by_strategy.items():
        judged = [r["correct"] for r in rows if r.get("correct") is not None]
        summary[name] = {
            "n": len(rows),
            "geo_tool_latency_s": geomean(r.get("tool_latency_s") for r in rows),
            "geo_final_latency_s": geomean(r.get("final_latency_s") for r in rows),
            "mean_forward_passes": _mean(r.get("forward_passes") for r in rows),
            "correct_rate": (sum(1 for c in judged if c) / len(judged)) if judged else None,
            "speedup_vs_constrained": None,
            "errors": sum(1 for r in rows if not r.get("calls")),
            "geo_prompt_prefill_s": geomean(r.get("prompt_prefill_s") for r in rows),
        }
    baseline = summary.get(BASELINE, {}).get("geo_tool_latency_s")
    if baseline:
        for numbers in summary.values():
            latency = numbers["geo_tool_latency_s"]
            numbers["speedup_vs_constrained"] = baseline / latency if latency else None
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


def format_table(summary: Mapping[str, Mapping[str, Any]]) -> str:
    """The summary as a fixed-width text table (latencies in ms)."""
    header = ("strategy", "n", "tool ms", "final ms", "speedup", "passes", "correct", "errors")
    rows = [header]
    for name, numbers in summary.items():
        rate = numbers.get("correct_rate")
        rows.append(
            (
                name,
                str(numbers["n"]),
                _ms(numbers["geo_tool_latency_s"]),
                _ms(numbers["geo_final_latency_s"]),
                _num(numbers["speedup_vs_constrained"], ".2f")
                + ("x" if numbers["speedup_vs_constrained"] is not None else ""),
                _num(numbers["mean_forward_passes"], ".1f"),
                "-" if rate is None else f"{rate * 100:.1f}%",
                str(numbers.get("errors", "-")),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = []
    for index, row in enumerate(rows):
        cells = [row[0].ljust(widths[0])] + [
            c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)
        ]
        lines.append("  ".join(cells))
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    lines.append("(tool/final ms: geometric means over cases; speedup: vs constrained)")
    return "\n".join(lines)


_BAR_HEIGHT = 26
_GAP = 10
_LABEL_WIDTH = 150
_PLOT_WIDTH = 420
_VALUE_WIDTH = 170
_TOP = 48


def render_svg(summary: Mapping[str, Mapping[str, Any]], title: str = "") -> str:
    """A horizontal bar chart of geo tool latency per strategy, as SVG text."""
    items = [(name, numbers) for name, numbers in summary.items()]
    largest = max((n["geo_tool_latency_s"] or 0.0 for _, n in items), default=0.0) or 1.0
    width = _LABEL_WIDTH + _PLOT_WIDTH + _VALUE_WIDTH
    height = _TOP + len(items) * (_BAR_HEIGHT + _GAP) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="13">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="15" font-weight="bold">'
        f"{escape('Tool-call latency (geometric mean)')}</text>",
        f'<text x="10" y="38" fill="#555">{escape(title)}</text>',
    ]
    for index, (name, numbers) in enumerate(items):
        y = _TOP + index * (_BAR_HEIGHT + _GAP)
        latency = numbers["geo_tool_latency_s"]
        bar = 0.0 if latency is None else _PLOT_WIDTH * latency / largest
        colour = "#d62728" if name == BASELINE else "#1f77b4"
        speedup = numbers.get("speedup_vs_constrained")
        label = _ms(latency) + " ms" + (f"  ({speedup:.2f}x)" if speedup is not None else "")
        out.append(
            f'<text x="{_LABEL_WIDTH - 8}" y="{y + _BAR_HEIGHT * 0.68:.1f}" '
            f'text-anchor="end">{escape(name)}</text>'
        )
        out.append(
            f'<rect x="{_LABEL_WIDTH}" y="{y}" width="{bar:.1f}" height="{_BAR_HEIGHT}" '
            f'fill="{colour}"><title>{escape(name)}: {escape(label)}</title></rect>'
        )
        out.append(
            f'<text x="{_LABEL_WIDTH + bar + 6:.1f}" y="{y + _BAR_HEIGHT * 0.68:.1f}">'
            f"{escape(label)}</text>"
        )
    axis_y = _TOP + len(items) * (_BAR_HEIGHT + _GAP)
    out.append(
        f'<line x1="{_LABEL_WIDTH}" y1="{_TOP - 4}" x2="{_LABEL_WIDTH}" y2="{axis_y}" '
        'stroke="#333"/>'
    )
    out.append(
        f'<text x="{_LABEL_WIDTH}" y="{axis_y + 18}" fill="#555">'
        f"{escape('0 ms … ' + _ms(largest) + ' ms; speedup in brackets is vs constrained')}"
        "</text>"
    )
    out.append("</svg>")
    return "\n".join(out) + "\n"


def write_summary(
    summary: Mapping[str, Mapping[str, Any]], out: Path, *, title: str = ""
) -> tuple[Path, Path]:
    """Write ``summary.json`` and ``summary.svg`` into ``out``; return their paths."""
    json_path = out / "summary.json"
    svg_path = out / "summary.svg"
    json_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    svg_path.write_text(render_svg(summary, title), encoding="utf-8")
    return json_path, svg_path
