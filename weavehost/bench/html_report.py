"""``weavehost bench-report``: one self-contained ``report.html`` and its SVG charts, over runs.

Stage: benchmark report (after one or more ``weavehost bench --out DIR`` runs; reads only what
a run wrote). Guarantees:

- **Inputs.** Each run folder must hold a ``results.jsonl`` with at least one line; a folder
  that is missing, lacks it or is not a ``weavehost bench`` run (no line carries
  ``tool_latency_s`` or ``final_latency_s``, which every bench line has; a ``weavehost
  bench-agent`` folder is named as one) is a :class:`BenchError` naming it. ``summary.json`` is
  read when there (else the summary is recomputed with
  :func:`weavehost.bench.report.summarize`), ``run.json`` when there (else the run is titled by
  its folder name). Nothing in a run folder is written. Within a bench run a line with no
  latency (a case that failed) is data: the charts draw what was measured and say what was not.
- **Sources, newest first.** Where ``summary.json`` has a strategy's ``latency_spread`` or
  ``breakdowns.by_arg_count`` they are used as written; a run that predates them gets the spread
  computed from its lines (:func:`spread_by_strategy`) and the argument counts from
  :mod:`weavehost.bench.breakdown`, which owns the buckets and their numbers: the reference
  call's arguments (:func:`~weavehost.bench.breakdown.breakdowns`) when the run's cases file can
  still be read, else the arguments of the calls ``constrained`` wrote on each case
  (:func:`~weavehost.bench.breakdown.by_arg_count_from_calls`). Every chart's caption says which
  source it used.
- **Naming a run.** :func:`run_heading` is the one line that names a run everywhere on the page
  (its section heading, the list of runs, the chart captions); it ends with the source commit
  when ``run.json`` records one.
- **The ablation waterfall** (:func:`ablation_waterfall`, for runs with ``constrained``,
  ``weave`` and at least one ``weave:<component>`` ablation) is computed over the cases on which
  every one of those strategies measured a final latency, so its bars compare the same cases;
  each component's step is (geomean of the ablation − geomean of ``weave``) and an
  "interactions / rest" step makes the bars add up exactly from ``constrained`` to ``weave``.
- **Output.** ``OUT/<chart>.svg`` for every chart and ``OUT/report.html`` with the same SVG
  inlined, each inside ``<figure id="chart-<chart>" data-chart="<chart>">`` with a
  ``<figcaption>``, plus a table of summary numbers per run. The page loads nothing (no script,
  font, stylesheet or image from anywhere); the same inputs give byte-identical files.
- The charts need matplotlib (the ``bench`` extra, :mod:`weavehost.bench.report_charts`); the
  data stages here do not.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weavehost.bench import breakdown
from weavehost.bench.breakdown import read_json_object
from weavehost.bench.compare import BASELINE
from weavehost.bench.report import geomean, latency_spread, load_results, summarize
from weavehost.errors import BenchError

__all__ = [
    "ABLATION_PREFIX",
    "FULL_WEAVE",
    "REPORT_HTML",
    "ReportFiles",
    "RunData",
    "Waterfall",
    "WaterfallStep",
    "ablation_waterfall",
    "ablations",
    "build_report",
    "load_run_dir",
    "render_html",
    "run_command",
    "run_commit",
    "run_heading",
    "spread_by_strategy",
]

REPORT_HTML = "report.html"
# A strategy named weave:<component> is weave with that one component turned off; except
# weave:parallel_values, which turns nothing off (it forces values side by side where the plan
# would not) and so is a variant, shown in the tables but not as a step of the waterfall.
ABLATION_PREFIX = "weave:"
NOT_ABLATIONS = frozenset({"weave:parallel_values"})
FULL_WEAVE = "weave"
# Keys of every line `weavehost bench` writes (weavehost.bench.runner's results contract).
LATENCY_KEYS = ("tool_latency_s", "final_latency_s")
# Keys of a `weavehost bench-agent` line, one whole task under one variant
# (weavehost.bench.agent), which has no per-call latencies to chart.
AGENT_LINE_KEYS = ("variant", "turns")


def _by_strategy(records: Iterable[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        grouped.setdefault(record["strategy"], []).append(record)
    return grouped


def spread_by_strategy(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per strategy :func:`weavehost.bench.report.latency_spread` of its lines (what a newer
    summary.json holds as ``latency_spread``), for runs that predate it."""
    return {name: latency_spread(rows) for name, rows in _by_strategy(records).items()}


@dataclass(frozen=True, slots=True)
class WaterfallStep:
    """One component's share: ``weave`` without ``component`` (the ``strategy`` line) is
    ``delta_s`` slower than ``weave`` (geomeans), ``ratio`` = ablation / weave."""

    strategy: str
    component: str
    delta_s: float
    ratio: float


@dataclass(frozen=True, slots=True)
class Waterfall:
    """From ``constrained``'s geomean final latency (``start_s``) down to ``weave``'s
    (``end_s``): one step per ablation and ``rest_s`` (interactions and what no ablation
    turns off), so ``start_s - sum(step.delta_s) - rest_s == end_s``; over ``cases`` cases."""

    cases: int
    start_s: float
    end_s: float
    steps: tuple[WaterfallStep, ...]
    rest_s: float


def ablations(strategies: Iterable[str]) -> list[str]:
    """The ``weave:<component>`` strategies among ``strategies`` that turn a component off
    (the steps of the waterfall), in order."""
    return [s for s in strategies if s.startswith(ABLATION_PREFIX) and s not in NOT_ABLATIONS]


def ablation_waterfall(records: Sequence[Mapping[str, Any]]) -> Waterfall | None:
    """The ablation waterfall of a run's lines, over the cases every strategy involved measured;
    None without ``constrained``, ``weave`` or an ablation, or with no such common case."""
    grouped = _by_strategy(records)
    steps_of = ablations(grouped)
    if BASELINE not in grouped or FULL_WEAVE not in grouped or not steps_of:
        return None
    involved = [BASELINE, FULL_WEAVE, *steps_of]
    latency = {
        name: {r["id"]: r["final_latency_s"] for r in grouped[name] if r.get("final_latency_s")}
        for name in involved
    }
    common = set.intersection(*(set(by_case) for by_case in latency.values()))
    if not common:
        return None
    geo = {name: geomean(latency[name][case] for case in common) or 0.0 for name in involved}
    steps = tuple(
        WaterfallStep(
            strategy=name,
            component=name[len(ABLATION_PREFIX) :],
            delta_s=geo[name] - geo[FULL_WEAVE],
            ratio=geo[name] / geo[FULL_WEAVE],
        )
        for name in steps_of
    )
    start, end = geo[BASELINE], geo[FULL_WEAVE]
    return Waterfall(
        cases=len(common),
        start_s=start,
        end_s=end,
        steps=steps,
        rest_s=start - end - sum(step.delta_s for step in steps),
    )


@dataclass(frozen=True, slots=True)
class RunData:
    """What the report shows of one run folder, with where each part came from."""

    path: Path
    label: str
    info: Mapping[str, Any]
    records: Sequence[Mapping[str, Any]]
    summary: Mapping[str, Mapping[str, Any]]
    spread: Mapping[str, Mapping[str, Any]]
    spread_source: str
    by_args: Mapping[str, Mapping[str, Mapping[str, Any]]]
    by_args_source: str
    waterfall: Waterfall | None


def _breakdown_by_args(path: Path) -> tuple[dict[str, dict[str, dict[str, Any]]] | None, str]:
    """By-argument-count numbers from :mod:`weavehost.bench.breakdown` (the reference call's
    arguments), or None and why not (the run's cases or answers cannot be read)."""
    try:
        records, _info, cases, answers = breakdown.load_run(path)
    except BenchError as exc:
        return None, f"weavehost.bench.breakdown could not read the run's cases: {exc}"
    found = breakdown.breakdowns(records, cases, answers)
    return {name: dict(sections["by_arg_count"]) for name, sections in found.items()}, ""


def _by_args(
    path: Path, records: Sequence[Mapping[str, Any]], summary: Mapping[str, Mapping[str, Any]]
) -> tuple[dict[str, dict[str, dict[str, Any]]], str]:
    written = {
        name: dict(numbers["breakdowns"]["by_arg_count"])
        for name, numbers in summary.items()
        if (numbers.get("breakdowns") or {}).get("by_arg_count")
    }
    if written:
        return written, "summary.json (breakdowns.by_arg_count: the reference call's arguments)"
    found, why_not = _breakdown_by_args(path)
    if found:
        return found, (
            "weavehost.bench.breakdown over the run's cases and answers (the reference call's "
            "arguments; this run's summary.json has no breakdowns)"
        )
    return (
        breakdown.by_arg_count_from_calls(records),
        "the arguments of the calls constrained wrote on each case, else of the strategy's own "
        f"(this run's summary.json has no breakdowns, and {why_not})",
    )


def _require_bench_lines(path: Path, records: Sequence[Mapping[str, Any]]) -> None:
    """:class:`BenchError` saying what ``path`` is when its lines are not `weavehost bench`'s."""
    if any(all(key in record for key in AGENT_LINE_KEYS) for record in records):
        raise BenchError(
            f"{path} is a `weavehost bench-agent` run (its results.jsonl lines are whole tasks, "
            "with variant and turns), not a `weavehost bench` run: bench-report charts the "
            "per-call latencies of `weavehost bench --out` folders only; bench-agent's numbers "
            f"are in {path / 'summary.json'}"
        )
    if not any(key in record for record in records for key in LATENCY_KEYS):
        raise BenchError(
            f"{path} is not a `weavehost bench` run: no line of its results.jsonl has "
            f"{' or '.join(LATENCY_KEYS)}, which every `weavehost bench` line has"
        )


def load_run_dir(path: Path, label: str | None = None) -> RunData:
    """Read one run folder (:class:`BenchError` when it or its ``results.jsonl`` is missing, or
    when it is not a ``weavehost bench`` run)."""
    if not path.is_dir():
        raise BenchError(f"run folder {path} does not exist (or is not a folder)")
    results = path / "results.jsonl"
    if not results.is_file():
        raise BenchError(
            f"run folder {path} has no results.jsonl: is it a `weavehost bench` --out?"
        )
    records = load_results(results)
    if not records:
        raise BenchError(f"{results} has no result lines")
    _require_bench_lines(path, records)
    info = read_json_object(path / "run.json") if (path / "run.json").is_file() else {}
    summary_path = path / "summary.json"
    summary = read_json_object(summary_path) if summary_path.is_file() else {}
    if not all(isinstance(numbers, dict) for numbers in summary.values()):
        raise BenchError(f"{summary_path}: every strategy's summary must be a JSON object")
    written_spread = {n: s["latency_spread"] for n, s in summary.items() if s.get("latency_spread")}
    if written_spread:
        spread, spread_source = written_spread, "summary.json (latency_spread)"
    else:
        spread, spread_source = spread_by_strategy(records), "the run's results.jsonl lines"
    summary = summary or summarize(records)
    by_args, by_args_source = _by_args(path, records, summary)
    return RunData(
        path=path,
        label=label or path.resolve().name,
        info=info,
        records=records,
        summary=summary,
        spread=spread,
        spread_source=spread_source,
        by_args=by_args,
        by_args_source=by_args_source,
        waterfall=ablation_waterfall(records),
    )


def _unique_labels(paths: Sequence[Path]) -> list[str]:
    labels: list[str] = []
    for path in paths:
        base = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.resolve().name).strip("-") or "run"
        label, number = base, 2
        while label in labels:
            label, number = f"{base}-{number}", number + 1
        labels.append(label)
    return labels


@dataclass(frozen=True, slots=True)
class ReportFiles:
    """What :func:`build_report` wrote: the page and one SVG per chart, in page order."""

    html: Path
    charts: tuple[Path, ...]


def build_report(run_dirs: Sequence[Path], out: Path, *, title: str | None = None) -> ReportFiles:
    """Read ``run_dirs``, draw every chart and write ``out/<chart>.svg`` and ``out/report.html``.

    The runs are all read (and matplotlib found) before anything is written.
    """
    # The charts need matplotlib; require_matplotlib says so when it is missing.
    from weavehost.bench import report_charts, report_cross

    report_charts.require_matplotlib()
    if not run_dirs:
        raise BenchError("bench-report needs at least one run folder")
    runs = [
        load_run_dir(path, label)
        for path, label in zip(run_dirs, _unique_labels(run_dirs), strict=True)
    ]
    charts = report_cross.draw_all(runs)
    try:
        out.mkdir(parents=True, exist_ok=True)
        written = []
        for chart in charts:
            svg_path = out / f"{chart.name}.svg"
            svg_path.write_text(chart.svg, encoding="utf-8")
            written.append(svg_path)
        html_path = out / REPORT_HTML
        html_path.write_text(render_html(runs, charts, title=title), encoding="utf-8")
    except OSError as exc:
        raise BenchError(f"cannot write the report into {out}: {exc.strerror}") from exc
    return ReportFiles(html=html_path, charts=tuple(written))


# --- the page ---------------------------------------------------------------------------------

_STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
figure { margin: 1.5em 0; } figure svg { max-width: 100%; height: auto; }
figcaption { color: #444; font-size: 0.92em; max-width: 60em; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { padding: 0.2em 0.6em; border-bottom: 1px solid #ddd; text-align: right; }
th:first-child, td:first-child { text-align: left; }
dl.run { display: grid; grid-template-columns: max-content auto; gap: 0.1em 1em; }
dl.run dt { font-weight: bold; } dl.run dd { margin: 0; }
code { font-size: 0.95em; }
"""


def run_commit(info: Mapping[str, Any]) -> str | None:
    """The source commit run.json records (``commit``, with ``+dirty`` for uncommitted changes:
    :func:`weavehost.bench.machine.source_commit`); None in runs made before it was recorded."""
    commit = info.get("commit")
    return str(commit) if commit else None


def run_heading(run: RunData) -> str:
    """One line naming a run: folder, model, cases file, case count, threads and, where
    recorded, the source commit."""
    info = run.info
    parts = [info.get("model_name") or Path(str(info.get("model", ""))).name or None]
    if info.get("cases"):
        parts.append(f"{Path(str(info['cases'])).name} ({info.get('n_cases', '?')} cases)")
    if info.get("threads"):
        parts.append(f"{info['threads']} threads")
    commit = run_commit(info)
    if commit:
        parts.append(f"commit {commit}")
    described = ", ".join(p for p in parts if p)
    return f"{run.label}: {described}" if described else run.label


def run_command(info: Mapping[str, Any]) -> tuple[str, bool] | None:
    """The command that made the run: ``(command, True)`` when run.json records it, else one
    rebuilt from its setup ``(command, False)``; None without a cases file."""
    for key in ("command", "argv"):
        recorded = info.get(key)
        if recorded:
            return (recorded if isinstance(recorded, str) else " ".join(recorded)), True
    if not info.get("cases"):
        return None
    words = ["weavehost bench", str(info["cases"])]
    for flag, key in (("--answers", "answers"), ("--model", "model"), ("--threads", "threads")):
        if info.get(key):
            words += [flag, str(info[key])]
    if info.get("strategies"):
        words += ["--strategies", ",".join(info["strategies"])]
    if info.get("cost_model"):
        words += ["--cost-model", str(info["cost_model"].get("file"))]
    return " ".join(words), False


def _run_facts(run: RunData) -> list[tuple[str, str]]:
    info = run.info
    flags = info.get("cpu_flags")
    facts = [
        ("folder", str(run.path)),
        ("model", f"{info.get('model_name', '?')} — {info.get('model', '?')}"),
        ("format", str(info.get("format", "?"))),
        ("cases", f"{info.get('cases', '?')} ({info.get('n_cases', '?')} cases)"),
        ("threads / n_ctx", f"{info.get('threads', '?')} / {info.get('n_ctx', '?')}"),
        ("CPU", f"{info.get('machine', '?')}, {info.get('cpus', '?')} CPUs"),
        ("CPU flags", " ".join(flags) if flags else "unknown"),
        ("commit", run_commit(info) or "not recorded"),
        ("when", f"{info.get('started', '?')} – {info.get('finished', 'not finished')}"),
        (
            "versions",
            f"weavehost {info.get('weavehost')}, llama-cpp-python "
            f"{info.get('llama_cpp_python')}, Python {info.get('python')}",
        ),
    ]
    if info.get("cost_model"):
        facts.append(("cost model", f"{info['cost_model'].get('file')} (projected latencies)"))
    command = run_command(info)
    if command:
        facts.append(("command" if command[1] else "command (rebuilt from run.json)", command[0]))
    return facts


def _ms(seconds: Any) -> str:
    return "–" if seconds is None else f"{seconds * 1000:,.1f}"


def _pct(rate: Any) -> str:
    return "–" if rate is None else f"{rate * 100:.1f}%"


def _table(run: RunData) -> str:
    head = (
        "strategy",
        "n",
        "tool ms (geo)",
        "final ms (geo)",
        "final p10–p90 ms",
        "speedup",
        "passes",
        "correct",
        "errors",
        "same",
        "peak RSS MB",
    )
    extra_kv = any(
        (n.get("memory") or {}).get("extra_kv_mb_vs_constrained") is not None
        for n in run.summary.values()
    )
    head += ("extra KV MB",) if extra_kv else ()
    rows = []
    for name, numbers in run.summary.items():
        final = (run.spread.get(name) or {}).get("final") or {}
        speedup = numbers.get("speedup_vs_constrained")
        passes = numbers.get("mean_forward_passes")
        rss = (numbers.get("memory") or {}).get("peak_rss_bytes") or numbers.get("peak_rss_bytes")
        cells = (
            name,
            str(numbers.get("n", "–")),
            _ms(numbers.get("geo_tool_latency_s")),
            _ms(numbers.get("geo_final_latency_s")),
            "–" if final.get("p10") is None else f"{_ms(final['p10'])} – {_ms(final['p90'])}",
            "–" if speedup is None else f"{speedup:.2f}×",
            "–" if passes is None else f"{passes:.1f}",
            _pct(numbers.get("correct_rate")),
            str(numbers.get("errors", "–")),
            _pct(numbers.get("same_as_constrained_rate")),
            "–" if rss is None else f"{rss / 1e6:,.0f}",
        )
        if extra_kv:
            kv = (numbers.get("memory") or {}).get("extra_kv_mb_vs_constrained")
            cells += ("–" if kv is None else f"{kv:+,.1f}",)
        rows.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>")
    header = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"
    note = (
        "<p>Latencies: geometric means over the cases with a measured latency; speedup: "
        "geomean tool latency of constrained / the strategy's; same: calls equal to "
        "constrained's; peak RSS: the whole process's (every model of the run included); "
        "extra KV MB (where recorded): KV cache in use beyond constrained's, mean over the "
        "cases.</p>"
    )
    return (
        f"<table>\n<thead>{header}</thead>\n<tbody>\n"
        + "\n".join(rows)
        + (f"\n</tbody>\n</table>\n{note}")
    )


def _figure(chart: Any) -> str:
    return (
        f'<figure id="chart-{chart.name}" data-chart="{chart.name}">\n{chart.inline_svg()}\n'
        f'<figcaption>{html.escape(chart.caption)} <span class="file">(<code>'
        f"{chart.name}.svg</code>)</span></figcaption>\n</figure>"
    )


def render_html(runs: Sequence[RunData], charts: Sequence[Any], *, title: str | None) -> str:
    """The page: the cross-run charts (several runs), then per run its facts, table and charts."""
    heading = title or (
        f"Benchmark report: {runs[0].label}"
        if len(runs) == 1
        else f"Benchmark report: {len(runs)} runs"
    )
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f"<title>{html.escape(heading)}</title>",
        f"<style>{_STYLE}</style>",
        "</head>",
        "<body>",
        f"<h1>{html.escape(heading)}</h1>",
        "<p>Made by <code>weavehost bench-report</code> from the run folders' "
        "<code>results.jsonl</code>, <code>summary.json</code> and <code>run.json</code>. "
        "Every chart is also a file of its own beside this page.</p>",
    ]
    shared = [c for c in charts if c.run is None]
    if shared:
        parts.append('<section id="runs"><h2>All runs</h2>')
        parts.append(
            "<ul>" + "".join(f"<li>{html.escape(run_heading(r))}</li>" for r in runs) + "</ul>"
        )
        parts += [_figure(c) for c in shared]
        parts.append("</section>")
    for run in runs:
        parts.append(f'<section id="run-{run.label}"><h2>{html.escape(run_heading(run))}</h2>')
        parts.append('<dl class="run">')
        for term, value in _run_facts(run):
            parts.append(f"<dt>{html.escape(term)}</dt><dd>{html.escape(value)}</dd>")
        parts.append("</dl>")
        parts.append(_table(run))
        parts += [_figure(c) for c in charts if c.run == run.label]
        parts.append("</section>")
    parts += ["</body>", "</html>"]
    return "\n".join(parts) + "\n"
