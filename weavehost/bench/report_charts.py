"""The charts of ``weavehost bench-report``, drawn with matplotlib as SVG text: how every chart
is rendered, and one run's charts (:func:`run_charts`).

Stage: benchmark report (drawing only; the numbers come from :mod:`weavehost.bench.html_report`;
the charts across runs, and every chart in page order, are :mod:`weavehost.bench.report_cross`'s).
Guarantees:

- matplotlib is optional (the ``bench`` extra): :func:`require_matplotlib` raises a
  :class:`BenchError` (exit 2) that says how to install it, and nothing here imports it before.
- Each chart is drawn on its own :class:`matplotlib.figure.Figure` (no pyplot, no global
  figure state, no display: the SVG backend writes it) with ``svg.fonttype = "none"`` (text
  stays text), ``svg.hashsalt`` set to the chart's name and no date in the metadata, so the
  same numbers give the same bytes. Every ``id`` in a chart's SVG (and every reference to
  one) is prefixed with the chart's name, so many charts inline in one page without clashes.
- A chart's caption says what is plotted, from which run (and the command that made it), and
  where the numbers came from.
- A chart is drawn with whatever its run measured: a strategy, panel or whole chart with nothing
  to show (every call failed, no ``constrained`` to compare with) says "no data" where its bars
  would be, and its caption says what is missing and why. Only the ablation waterfall is left
  out, and only for a run with no ``weave:<component>`` ablation.
"""

from __future__ import annotations

import inspect
import io
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from weavehost.bench.breakdown import ARG_COUNT_BUCKETS, NO_ARGS_BUCKET
from weavehost.bench.compare import BASELINE
from weavehost.bench.html_report import (
    ABLATION_PREFIX,
    FULL_WEAVE,
    RunData,
    Waterfall,
    ablations,
    run_command,
    run_heading,
)
from weavehost.errors import BenchError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["MATPLOTLIB_MISSING", "Chart", "no_data", "render", "require_matplotlib", "run_charts"]

MATPLOTLIB_MISSING = "bench-report needs matplotlib: pip install 'weavehost[bench]'"

# One colour per strategy in every chart; ablations and unknown names take the next free one.
STRATEGY_COLOURS = {
    "serial": "#7f7f7f",
    "constrained": "#d62728",
    "jump_forward": "#ff7f0e",
    "weave": "#1f77b4",
    "llama_cpp_python": "#2ca02c",
    "llama_cpp_python_lookup": "#bcbd22",
}
SPARE_COLOURS = ("#9467bd", "#17becf", "#8c564b", "#e377c2", "#aec7e8", "#98df8a", "#c5b0d5")
SAVED_COLOUR, COST_COLOUR, REST_COLOUR = "#2ca02c", "#d62728", "#bbbbbb"
ROW_INCHES = 0.42  # height of one strategy's row in a horizontal chart
NO_DATA_INCHES = 1.8  # height of a chart with nothing to draw
NO_DATA_COLOUR = "#666666"
WIDTH_INCHES = 9.0
RC = {"svg.fonttype": "none", "font.size": 9, "font.family": "sans-serif"}


def require_matplotlib() -> None:
    """Raise :class:`BenchError` with the install hint when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401 - only whether it imports
    except ImportError as exc:
        raise BenchError(MATPLOTLIB_MISSING) from exc


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart: ``name`` (file stem and ``data-chart``), the run it belongs to (its label, or
    None for a chart across runs), its caption and its SVG text."""

    name: str
    run: str | None
    caption: str
    svg: str

    def inline_svg(self) -> str:
        """The SVG element alone (no XML declaration or doctype), for inlining in HTML."""
        start = self.svg.find("<svg")
        return self.svg[start:].strip()


def _colour(name: str, assigned: dict[str, str]) -> str:
    if name in STRATEGY_COLOURS:
        return STRATEGY_COLOURS[name]
    if name not in assigned:
        assigned[name] = SPARE_COLOURS[len(assigned) % len(SPARE_COLOURS)]
    return assigned[name]


def _prefix_ids(svg: str, prefix: str) -> str:
    svg = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}-\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}-\1)", svg)
    return re.sub(r'href="#([^"]+)"', rf'href="#{prefix}-\1"', svg)


def render(name: str, size: tuple[float, float], draw: Callable[[Figure], None]) -> str:
    """The SVG text of one chart: ``draw`` fills a new Figure of ``size`` inches, rendered as
    the module docstring says, every id in it prefixed with ``name``."""
    import matplotlib
    from matplotlib.figure import Figure

    with matplotlib.rc_context({**RC, "svg.hashsalt": f"weavehost-{name}"}):
        figure = Figure(figsize=size, layout="constrained")
        draw(figure)
        buffer = io.StringIO()
        figure.savefig(buffer, format="svg", metadata={"Date": None})
    return _prefix_ids(buffer.getvalue(), name)


def no_data(ax: Axes, why: str) -> None:
    """Write "no data" and why across ``ax``, where its bars would be."""
    ax.text(
        0.5,
        0.5,
        f"no data: {why}",
        transform=ax.transAxes,
        ha="center",
        va="center",
        color=NO_DATA_COLOUR,
        wrap=True,
    )
    ax.set_xticks([])


def _no_data_chart(name: str, run: RunData, title: str, why: str, what: str) -> Chart:
    """A chart that could not be drawn for ``run``: its title and, in its place and its
    caption, why (``what`` says what the chart would have shown)."""

    def draw(figure: Figure) -> None:
        ax = figure.subplots()
        ax.set_title(title)
        no_data(ax, why)
        ax.set_yticks([])

    svg = render(name, (WIDTH_INCHES, NO_DATA_INCHES), draw)
    return Chart(name, run.label, f"{what} Not drawn: {why}. {_source(run)}", svg)


def _ms_axis(axis: Any, *, log: bool) -> None:
    from matplotlib.ticker import FuncFormatter, NullFormatter

    if log:
        axis.set_minor_formatter(NullFormatter())
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))


def _horizontal(axes: Axes) -> dict[str, Any]:
    # bxp's `vert` became `orientation` in matplotlib 3.10.
    if "orientation" in inspect.signature(axes.bxp).parameters:
        return {"orientation": "horizontal"}
    return {"vert": False}


def _strategies(run: RunData) -> list[str]:
    return list(dict.fromkeys([*run.summary, *run.spread]))


def _source(run: RunData) -> str:
    command = run_command(run.info)
    made = ""
    if command:
        made = f" Made by `{command[0]}`" + ("." if command[1] else " (rebuilt from run.json).")
    return f"Run {run_heading(run)}.{made}"


# --- one run ----------------------------------------------------------------------------------


def _box(name: str, spread: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``bxp``'s statistics (ms) of one strategy's latency spread; None when nothing was
    measured."""
    if not spread or spread.get("p50") is None:
        return None
    ms = {key: value * 1000 for key, value in spread.items()}
    return {
        "label": name,
        "med": ms["p50"],
        "q1": ms["p25"],
        "q3": ms["p75"],
        "whislo": ms["p10"],
        "whishi": ms["p90"],
        "fliers": [ms["min"], ms["max"]],
    }


def latency_chart(run: RunData, colours: dict[str, str]) -> Chart:
    """Per strategy the spread of its tool and final latencies (box plots, log scale)."""
    names = _strategies(run)
    kinds = ("tool", "final")
    # Per kind, (row, box) of each strategy that measured that latency.
    boxes = {
        kind: [
            (row, box)
            for row, name in enumerate(names)
            if (box := _box(name, (run.spread.get(name) or {}).get(kind))) is not None
        ]
        for kind in kinds
    }

    def draw(figure: Figure) -> None:
        axes = figure.subplots(1, 2, sharey=True)
        for ax, kind in zip(axes, kinds, strict=True):
            ax.set_title(f"{kind.capitalize()} latency per call")
            if not boxes[kind]:
                no_data(ax, f"no {kind} latency was measured")
                continue
            positions = [row for row, _ in boxes[kind]]
            drawn = ax.bxp(
                [box for _, box in boxes[kind]],
                positions=positions,
                widths=0.55,
                patch_artist=True,
                flierprops={"marker": ".", "markersize": 4},
                medianprops={"color": "black"},
                **_horizontal(ax),
            )
            for patch, position in zip(drawn["boxes"], positions, strict=True):
                patch.set_facecolor(_colour(names[position], colours))
                patch.set_alpha(0.75)
            for row in positions:
                geo = (run.summary.get(names[row]) or {}).get(f"geo_{kind}_latency_s")
                spread = (run.spread.get(names[row]) or {}).get(kind) or {}
                if geo:
                    ax.plot([geo * 1000], [row], marker="D", color="white", mec="black", ms=5)
                    ax.annotate(
                        f"geo {geo * 1000:,.0f}",
                        (max(geo, spread.get("p90") or geo) * 1000, row),
                        xytext=(4, 0),
                        textcoords="offset points",
                        va="center",
                        fontsize=7,
                    )
            ax.set_xscale("log")
            _ms_axis(ax.xaxis, log=True)
            ax.set_xlabel(f"{kind} latency, ms (log scale)")
            ax.grid(axis="x", which="both", alpha=0.25)
        axes[0].set_yticks(range(len(names)), names)
        axes[0].set_ylim(len(names) - 0.5, -0.5)

    unmeasured = ""
    for kind in kinds:
        measured = {row for row, _ in boxes[kind]}
        missing = [name for row, name in enumerate(names) if row not in measured]
        if not measured:
            unmeasured += f" No {kind} latency was measured for any strategy."
        elif missing:
            unmeasured += f" No {kind} latency was measured for {', '.join(missing)} (no box)."
    svg = render(f"{run.label}-latency", (WIDTH_INCHES, 1.3 + ROW_INCHES * len(names)), draw)
    caption = (
        "Latency per strategy with its spread over the cases: box p25–p75, black line the "
        "median, whiskers p10–p90, dots the fastest and slowest call, white diamond (labelled, "
        "ms) the geometric mean the summary reports. Left: to the tool's start (a provisional "
        f"call counts); right: to the final call. Log scale.{unmeasured} Spread from "
        f"{run.spread_source}. {_source(run)}"
    )
    return Chart(f"{run.label}-latency", run.label, caption, svg)


def _barh(
    ax: Axes,
    names: Sequence[str],
    values: Sequence[float | None],
    labels: Sequence[str],
    colours: Sequence[str],
    *,
    offset: float = 0.0,
    height: float = 0.7,
    **style: Any,
) -> None:
    for row, (value, label, colour) in enumerate(zip(values, labels, colours, strict=True)):
        if value is None:
            ax.text(0, row + offset, " no value", va="center", fontsize=7, color="#666")
            continue
        ax.barh(row + offset, value, height=height, color=colour, **style)
        ax.annotate(
            label,
            (value, row + offset),
            xytext=(3, 0),
            textcoords="offset points",
            va="center",
            fontsize=7,
        )
    ax.set_yticks(range(len(names)), names)
    ax.set_ylim(len(names) - 0.5, -0.5)


def passes_chart(run: RunData, colours: dict[str, str]) -> Chart:
    """Per strategy its mean forward passes per call."""
    names = list(run.summary)
    values = [run.summary[n].get("mean_forward_passes") for n in names]
    labels = []
    for name, value in zip(names, values, strict=True):
        rows = run.summary[name].get("mean_rows_per_pass")
        label = "" if value is None else f"{value:.1f}"
        labels.append(label + (f"  ({rows:.1f} rows a pass)" if rows else ""))

    def draw(figure: Figure) -> None:
        ax = figure.subplots()
        _barh(ax, names, values, labels, [_colour(n, colours) for n in names])
        ax.set_xlabel("forward passes per call (mean over cases)")
        ax.set_title("Forward passes per strategy")
        ax.set_xlim(0, max((v or 0 for v in values), default=1) * 1.35 or 1)
        ax.grid(axis="x", alpha=0.25)

    name = f"{run.label}-passes"
    svg = render(name, (WIDTH_INCHES, 1.1 + ROW_INCHES * len(names)), draw)
    caption = (
        "Mean forward passes (llama_decode calls) per call, prefill passes of the call included; "
        "in brackets the mean rows per pass (all rows / all passes), where the run recorded "
        f"pass_rows. From summary.json. {_source(run)}"
    )
    return Chart(name, run.label, caption, svg)


def correctness_chart(run: RunData, colours: dict[str, str]) -> Chart:
    """Per strategy its BFCL correct rate and its rate of calls equal to constrained's."""
    names = list(run.summary)
    correct = [run.summary[n].get("correct_rate") for n in names]
    same = [run.summary[n].get("same_as_constrained_rate") for n in names]

    def draw(figure: Figure) -> None:
        ax = figure.subplots()
        _barh(
            ax,
            names,
            [None if c is None else c * 100 for c in correct],
            [
                ""
                if c is None
                else f"{c * 100:.1f}% correct ({run.summary[n].get('errors', 0)} without a call)"
                for n, c in zip(names, correct, strict=True)
            ],
            [_colour(n, colours) for n in names],
            offset=-0.18,
            height=0.36,
        )
        _barh(
            ax,
            names,
            [None if s is None else s * 100 for s in same],
            ["" if s is None else f"{s * 100:.1f}% same as constrained" for s in same],
            [_colour(n, colours) for n in names],
            offset=0.18,
            height=0.36,
            alpha=0.45,
            hatch="//",
        )
        ax.set_xlim(0, 135)
        ax.set_xticks(range(0, 101, 20))
        ax.set_xlabel("% of cases")
        ax.set_title("Correctness (solid) and agreement with constrained (hatched)")
        ax.grid(axis="x", alpha=0.25)

    name = f"{run.label}-correctness"
    svg = render(name, (WIDTH_INCHES, 1.1 + ROW_INCHES * 1.3 * len(names)), draw)
    caption = (
        "Solid: share of judged cases whose call BFCL's rules accept (correct_rate); hatched: "
        "share of compared cases whose calls equal constrained's as parsed JSON "
        "(same_as_constrained_rate). A strategy with no answers or no comparison has no bar. "
        f"From summary.json. {_source(run)}"
    )
    return Chart(name, run.label, caption, svg)


BY_ARGS_WHAT = (
    "Geometric-mean final latency per strategy, cases grouped by how many arguments their "
    "call has (ablations left out)."
)


def by_args_chart(run: RunData, colours: dict[str, str]) -> Chart:
    """Per argument-count bucket the geomean final latency of each (non-ablation) strategy."""
    ordered = dict.fromkeys([*(n for n in run.summary if n in run.by_args), *run.by_args])
    names = [n for n in ordered if not n.startswith(ABLATION_PREFIX)]
    every_bucket = (NO_ARGS_BUCKET, *ARG_COUNT_BUCKETS)
    buckets = [
        b for b in every_bucket if any((run.by_args[n].get(b) or {}).get("n") for n in names)
    ]
    # Per strategy its bars: (x, geomean final latency in ms) of each bucket it measured.
    bars = {
        name: [
            (x - 0.4 + 0.8 / len(names) * (index + 0.5), geo * 1000)
            for x, bucket in enumerate(buckets)
            if (geo := (run.by_args[name].get(bucket) or {}).get("geo_final_latency_s"))
        ]
        for index, name in enumerate(names)
    }
    name = f"{run.label}-by-args"
    title = "Latency by the number of arguments in the call"
    if not any(bars.values()):
        why = "no case has both a call with counted arguments and a measured final latency"
        what = f"{BY_ARGS_WHAT} Argument counts from {run.by_args_source}."
        return _no_data_chart(name, run, title, why, what)

    def cases_in(bucket: str) -> int:
        return max(int((run.by_args[n].get(bucket) or {}).get("n") or 0) for n in names)

    def draw(figure: Figure) -> None:
        ax = figure.subplots()
        width = 0.8 / len(names)
        for strategy, drawn in bars.items():
            xs = [x for x, _ in drawn]
            heights = [height for _, height in drawn]
            ax.bar(
                xs, heights, width=width * 0.95, color=_colour(strategy, colours), label=strategy
            )
        ax.set_xticks(
            range(len(buckets)),
            [f"{b} argument{'' if b == '1' else 's'}\n{cases_in(b)} cases" for b in buckets],
        )
        ax.set_ylabel("final latency, ms (geometric mean)")
        ax.set_title(title)
        _ms_axis(ax.yaxis, log=False)
        ax.grid(axis="y", alpha=0.25)
        ax.legend(fontsize=7, ncols=min(3, len(names)), loc="upper left")

    svg = render(name, (WIDTH_INCHES, 4.2), draw)
    caption = f"{BY_ARGS_WHAT} Argument counts from {run.by_args_source}. {_source(run)}"
    return Chart(name, run.label, caption, svg)


def _saves(delta_s: float) -> str:
    return f"{'saves' if delta_s >= 0 else 'costs'} {abs(delta_s) * 1000:,.1f} ms"


def no_waterfall_chart(run: RunData) -> Chart:
    """In place of the waterfall of a run with ablations that cannot have one: why not."""
    missing = [name for name in (BASELINE, FULL_WEAVE) if name not in _strategies(run)]
    why = (
        f"the run has ablations but no {' or '.join(missing)}"
        if missing
        else "no case on which constrained, weave and every ablation all measured a final latency"
    )
    return _no_data_chart(
        f"{run.label}-ablation",
        run,
        "Where weave's speedup over constrained comes from",
        why,
        "Ablation waterfall: from constrained's geometric-mean final latency down to weave's, one "
        "step per component turned off.",
    )


def ablation_chart(run: RunData, waterfall: Waterfall) -> Chart:
    """The waterfall from constrained's geomean final latency down to weave's."""
    steps = [
        (s.strategy, s.delta_s, f"{_saves(s.delta_s)}\n(off: {s.ratio:.2f}× weave)")
        for s in waterfall.steps
    ]
    steps.append(
        ("interactions\n/ rest", waterfall.rest_s, f"{_saves(waterfall.rest_s)}\n(not attributed)")
    )

    def draw(figure: Figure) -> None:
        ax = figure.subplots()
        start, end = waterfall.start_s * 1000, waterfall.end_s * 1000
        labels = [BASELINE]
        ax.bar(0, start, color=STRATEGY_COLOURS[BASELINE], width=0.6)
        ax.annotate(
            f"{start:,.1f} ms",
            (0, start),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            fontsize=7,
        )
        level = peak = start
        for x, (label, delta_s, text) in enumerate(steps, start=1):
            delta = delta_s * 1000
            rest = x == len(steps)
            colour = REST_COLOUR if rest else SAVED_COLOUR if delta >= 0 else COST_COLOUR
            ax.bar(
                x,
                -delta,
                bottom=level,
                color=colour,
                width=0.6,
                hatch="//" if rest else None,
                edgecolor="#555" if rest else None,
            )
            ax.plot([x - 1.3, x + 0.3], [level, level], color="#555", lw=0.6, ls=":")
            ax.annotate(
                text,
                (x, max(level, level - delta)),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                fontsize=7,
            )
            level -= delta
            peak = max(peak, level)
            labels.append(label)
        last = len(steps) + 1
        ax.plot([last - 1.3, last + 0.3], [level, level], color="#555", lw=0.6, ls=":")
        ax.bar(last, end, color=STRATEGY_COLOURS[FULL_WEAVE], width=0.6)
        ax.annotate(
            f"{end:,.1f} ms",
            (last, end),
            xytext=(0, 3),
            textcoords="offset points",
            ha="center",
            fontsize=7,
        )
        labels.append(FULL_WEAVE)
        ax.set_xticks(range(len(labels)), labels, fontsize=8, rotation=25, ha="right")
        ax.set_ylabel("final latency, ms (geometric mean)")
        ax.set_ylim(0, max(peak, end) * 1.18)
        ax.set_title(f"Where weave's speedup over constrained comes from ({waterfall.cases} cases)")
        _ms_axis(ax.yaxis, log=False)
        ax.grid(axis="y", alpha=0.25)

    name = f"{run.label}-ablation"
    svg = render(name, (WIDTH_INCHES, 4.4), draw)
    components = ", ".join(s.strategy for s in waterfall.steps)
    caption = (
        "Ablation waterfall: from constrained's geometric-mean final latency down to weave's. "
        "Each green step is one component's share: how much slower weave is with that one "
        "component turned off (ablation − weave, ms; below it the ratio ablation / weave); a "
        "red step is a component that costs time. The hatched step is what no single ablation "
        "accounts for (interactions between components and the parts no ablation turns off), "
        "so the bars add up exactly. Geometric means over the "
        f"{waterfall.cases} cases that constrained, weave and every ablation ({components}) "
        f"measured, from results.jsonl. {_source(run)}"
    )
    return Chart(name, run.label, caption, svg)


def run_charts(run: RunData, colours: dict[str, str]) -> list[Chart]:
    """The charts of one run, in page order (``colours``: the strategies' colours so far)."""
    charts = [latency_chart(run, colours), passes_chart(run, colours), by_args_chart(run, colours)]
    if run.waterfall is not None:
        charts.append(ablation_chart(run, run.waterfall))
    elif ablations(_strategies(run)):
        charts.append(no_waterfall_chart(run))
    charts.append(correctness_chart(run, colours))
    return charts
