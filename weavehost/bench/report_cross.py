"""The charts of ``weavehost bench-report`` across runs, and every chart of a report in page order.

Stage: benchmark report (drawing only; over :mod:`weavehost.bench.report_charts`, which draws
one run's charts and owns how every chart is rendered, and under
:mod:`weavehost.bench.html_report`, which calls :func:`draw_all`). Guarantees:

- Across runs (a report over several runs, first on the page): final latency per strategy and
  each strategy's speedup vs ``constrained``, one bar per run, from each run's ``summary.json``.
  A strategy a run did not measure has no bar; a chart with no bar at all says "no data" and
  why, in its place and in its caption, which lists the runs by
  :func:`~weavehost.bench.html_report.run_heading`.
- They are drawn as the per-run charts are (:func:`~weavehost.bench.report_charts.render`):
  SVG text, the same bytes for the same numbers, ids prefixed with the chart's name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from weavehost.bench.compare import BASELINE
from weavehost.bench.html_report import RunData, run_heading
from weavehost.bench.report_charts import (
    NO_DATA_INCHES,
    ROW_INCHES,
    WIDTH_INCHES,
    Chart,
    no_data,
    render,
    require_matplotlib,
    run_charts,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["cross_run_charts", "draw_all"]

# One colour per run (its bars in every chart across runs).
RUN_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#17becf")


def _grouped_by_run(
    name: str,
    runs: Sequence[RunData],
    strategies: Sequence[str],
    value: Callable[[Mapping[str, Any]], float | None],
    fmt: Callable[[float], str],
    *,
    xlabel: str,
    title: str,
    caption: str,
    why_empty: str,
    reference: float | None = None,
) -> Chart:
    """One bar per run and strategy of ``value`` (of the strategy's summary); "no data" and
    ``why_empty`` when no run has a value for any of ``strategies``."""
    # (run index, row, value) of every bar.
    bars = [
        (index, row, number)
        for index, run in enumerate(runs)
        for row, strategy in enumerate(strategies)
        if (number := value(run.summary.get(strategy) or {})) is not None
    ]
    if not bars:
        caption += f" Not drawn: {why_empty}."

    def draw(figure: Figure) -> None:
        ax = figure.subplots()
        ax.set_title(title)
        if not bars:
            no_data(ax, why_empty)
            ax.set_yticks([])
            return
        height = 0.8 / len(runs)
        labelled: set[int] = set()  # the run's label goes on its first bar only
        for index, row, number in bars:
            y = row - 0.4 + height * (index + 0.5)
            colour = RUN_COLOURS[index % len(RUN_COLOURS)]
            label = None if index in labelled else runs[index].label
            labelled.add(index)
            ax.barh(y, number, height=height * 0.92, color=colour, label=label)
            ax.annotate(
                fmt(number),
                (number, y),
                xytext=(3, 0),
                textcoords="offset points",
                va="center",
                fontsize=6,
            )
        if reference is not None:
            ax.axvline(reference, color="black", lw=0.8, ls="--")
        ax.set_yticks(range(len(strategies)), strategies)
        ax.set_ylim(len(strategies) - 0.5, -0.5)
        ax.set_xlim(0, max(number for _, _, number in bars) * 1.2 or 1)
        ax.set_xlabel(xlabel)
        ax.grid(axis="x", alpha=0.25)
        ax.legend(fontsize=7, loc="lower right")

    rows = len(strategies) * max(1.0, 0.45 * len(runs)) if bars else 0
    size = (WIDTH_INCHES, max(NO_DATA_INCHES, 1.3 + ROW_INCHES * rows))
    return Chart(name, None, caption, render(name, size, draw))


def _all_strategies(runs: Sequence[RunData]) -> list[str]:
    return list(dict.fromkeys(n for run in runs for n in run.summary))


def cross_run_charts(runs: Sequence[RunData]) -> list[Chart]:
    """Latency per strategy grouped by run, and each strategy's speedup vs constrained per run."""
    strategies = _all_strategies(runs)
    listed = "; ".join(run_heading(r) for r in runs)
    latency = _grouped_by_run(
        "runs-latency",
        runs,
        strategies,
        lambda n: None if n.get("geo_final_latency_s") is None else n["geo_final_latency_s"] * 1000,
        lambda v: f"{v:,.0f}",
        xlabel="final latency, ms (geometric mean over the run's cases)",
        title="Final latency per strategy, by run",
        caption="Geometric-mean final latency of each strategy, one bar per run (a strategy a "
        f"run did not measure has no bar). From each run's summary.json. Runs: {listed}.",
        why_empty="no run measured a final latency",
    )
    speedup = _grouped_by_run(
        "runs-speedup",
        runs,
        [s for s in strategies if s != BASELINE],
        lambda n: n.get("speedup_vs_constrained"),
        lambda v: f"{v:.2f}×",
        xlabel="speedup vs constrained (geomean tool latency of constrained / the strategy's)",
        title="Speedup vs constrained, by run (dashed: as fast as constrained)",
        caption="Each strategy's speedup over constrained within its own run (summary.json's "
        "speedup_vs_constrained: geomean tool latency of constrained / the strategy's), one "
        f"bar per run; right of the dashed line is faster than constrained. Runs: {listed}.",
        why_empty="no run measured the tool latency of both constrained and another strategy",
        reference=1.0,
    )
    return [latency, speedup]


def draw_all(runs: Sequence[RunData]) -> list[Chart]:
    """Every chart of the report, in page order: across runs (several runs), then per run."""
    require_matplotlib()
    colours: dict[str, str] = {}
    charts = cross_run_charts(runs) if len(runs) > 1 else []
    for run in runs:
        charts.extend(run_charts(run, colours))
    return charts
