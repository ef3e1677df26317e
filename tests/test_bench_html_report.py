"""``weavehost bench-report``: SVG charts and one self-contained report.html over bench runs.

The run folders are written here by hand (results.jsonl, summary.json, run.json) with a few
strategies, two ablations of weave and cases of 1 to 5 arguments, so every number a chart shows
can be worked out. The browser test opens the page in a real headless Chromium; where Chromium
is missing it skips, unless ``WEAVEHOST_REQUIRE_BROWSER`` is set (CI), where it fails.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from weavehost.bench.html_report import (
    REPORT_HTML,
    ablation_waterfall,
    build_report,
    load_run_dir,
    render_html,
    spread_by_strategy,
)
from weavehost.bench.report import summarize
from weavehost.bench.report_charts import MATPLOTLIB_MISSING, ablation_chart, by_args_chart
from weavehost.cli import main
from weavehost.errors import BenchError

# Case id -> number of arguments in its call.
CASES = {f"case_{n}": n % 5 + 1 for n in range(10)}
# Per strategy the latency of a case, in seconds, as a factor of (1 + 0.1 * arguments).
SCALE = {
    "constrained": 0.40,
    "jump_forward": 0.25,
    "weave": 0.20,
    "weave:no_drafts": 0.30,
    "weave:no_padding": 0.22,
}
PER_RUN_CHARTS = ("latency", "passes", "by-args", "ablation", "correctness")
BROWSER_BOUND_S = 60  # a cold Chromium start and one page on a busy 2-core machine


def make_line(case: str, strategy: str, args: int) -> dict:
    latency = SCALE[strategy] * (1 + 0.1 * args)
    return {
        "id": case,
        "strategy": strategy,
        "calls": [{"name": "f", "arguments": {f"a{i}": i for i in range(args)}}],
        "provisional": None,
        "forward_passes": int(100 * SCALE[strategy]) + args,
        "decoded_tokens": 10,
        "prefilled_tokens": 0,
        "tool_latency_s": latency * (0.9 if strategy.startswith("weave") else 1.0),
        "final_latency_s": latency,
        "prompt_prefill_s": 0.3,
        "correct": args != 3 or strategy == "constrained",
        "same_as_constrained": strategy == "constrained" or args != 2,
        "pass_rows": {"1": 10},
        "peak_rss_bytes": 2_000_000_000,
    }


def write_cases(folder: Path) -> tuple[Path, Path]:
    """A BFCL case file for :data:`CASES` and answers whose ground truth has one argument."""
    function = {
        "name": "f",
        "parameters": {"type": "dict", "properties": {"a0": {"type": "integer"}}},
    }
    cases, answers = folder / "cases.jsonl", folder / "answers.jsonl"
    question = [[{"role": "user", "content": "call f with 0"}]]
    cases.write_text(
        "".join(
            json.dumps({"id": c, "question": question, "function": [function]}) + "\n"
            for c in CASES
        )
    )
    answers.write_text(
        "".join(json.dumps({"id": c, "ground_truth": [{"f": {"a0": [0]}}]}) + "\n" for c in CASES)
    )
    return cases, answers


def write_run(
    folder: Path, strategies=tuple(SCALE), *, summary: bool = True, with_cases: bool = False
) -> Path:
    folder.mkdir(parents=True)
    cases, answers = write_cases(folder) if with_cases else (folder / "cases.jsonl", None)
    records = [make_line(c, s, a) for c, a in CASES.items() for s in strategies]
    (folder / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    if summary:
        numbers = summarize(records, list(strategies))
        for entry in numbers.values():  # as a run made before the newer sections wrote it
            entry.pop("latency_spread", None)
            entry.pop("breakdowns", None)
        (folder / "summary.json").write_text(json.dumps(numbers))
    run_info = {
        "cases": str(cases),  # not there unless with_cases: the breakdown cannot read it
        "answers": str(answers) if answers else None,
        "n_cases": len(CASES),
        "strategies": list(strategies),
        "model": "/models/tiny.gguf",
        "model_name": "Tiny Model",
        "format": "qwen",
        "threads": 2,
        "n_ctx": 4096,
        "cpu_flags": ["avx2", "avx512f"],
        "started": "2026-11-30T12:00:00+0000",
        "finished": "2026-11-30T12:10:00+0000",
    }
    (folder / "run.json").write_text(json.dumps(run_info))
    return folder


def geo(values) -> float:
    values = list(values)
    return math.exp(sum(math.log(v) for v in values) / len(values))


class Figures(HTMLParser):
    """Every ``figure[data-chart]`` of a page: its id, whether it holds an ``<svg>`` (and that
    svg's attributes), and its caption text."""

    def __init__(self) -> None:
        super().__init__()
        self.figures: dict[str, dict] = {}
        self._current: str | None = None
        self._in_caption = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "figure" and "data-chart" in attributes:
            self._current = attributes["data-chart"]
            self.figures[self._current] = {"id": attributes.get("id"), "svg": None, "caption": ""}
        elif tag == "svg" and self._current and self.figures[self._current]["svg"] is None:
            self.figures[self._current]["svg"] = attributes
        elif tag == "figcaption" and self._current:
            self._in_caption = True

    def handle_endtag(self, tag):
        if tag == "figure":
            self._current = None
        elif tag == "figcaption":
            self._in_caption = False

    def handle_data(self, data):
        if self._in_caption and self._current:
            self.figures[self._current]["caption"] += data


def figures_of(page: str) -> dict[str, dict]:
    parser = Figures()
    parser.feed(page)
    return parser.figures


def test_the_spread_of_each_strategy_is_computed_from_its_lines_when_the_summary_predates_it(
    tmp_path,
):
    run = load_run_dir(write_run(tmp_path / "run"))
    finals = sorted(SCALE["weave"] * (1 + 0.1 * a) for a in CASES.values())
    final = run.spread["weave"]["final"]
    assert run.spread_source == "the run's results.jsonl lines"
    assert final["min"] == pytest.approx(finals[0]) and final["max"] == pytest.approx(finals[-1])
    assert final["p50"] == pytest.approx((finals[4] + finals[5]) / 2)
    assert final["p10"] == pytest.approx(finals[0] + 0.9 * (finals[1] - finals[0]))


def test_the_spread_and_argument_counts_in_summary_json_are_used_as_written(tmp_path):
    folder = write_run(tmp_path / "run")
    summary = json.loads((folder / "summary.json").read_text())
    written = {"p10": 1.0, "p25": 2.0, "p50": 3.0, "p75": 4.0, "p90": 5.0, "min": 0.5, "max": 6.0}
    by_args = {"2": {"n": 7, "geo_final_latency_s": 0.123, "geo_tool_latency_s": 0.1}}
    for entry in summary.values():
        entry["latency_spread"] = {"tool": written, "final": written}
        entry["breakdowns"] = {"by_arg_count": by_args}
    (folder / "summary.json").write_text(json.dumps(summary))
    run = load_run_dir(folder)
    assert run.spread["weave"]["final"] == written
    assert run.by_args["weave"] == by_args
    assert run.spread_source.startswith("summary.json")
    assert run.by_args_source.startswith("summary.json")


def test_a_run_whose_cases_file_is_gone_counts_the_arguments_constrained_wrote(tmp_path):
    run = load_run_dir(write_run(tmp_path / "run"))
    assert set(run.by_args["weave"]) == {"1", "2", "3", "4+"}
    four_plus = run.by_args["weave"]["4+"]
    assert four_plus["n"] == 4  # 4 and 5 arguments, twice each
    assert four_plus["geo_final_latency_s"] == pytest.approx(geo([0.2 * 1.4, 0.2 * 1.5] * 2))
    # breakdown's numbers: the speedup against constrained on the bucket's own cases.
    assert four_plus["speedup_vs_constrained"] == pytest.approx(0.40 / (0.20 * 0.9))
    assert "constrained wrote" in run.by_args_source
    assert "could not read the run's cases" in run.by_args_source


@pytest.mark.parametrize(
    "summary", ['{"weave": 1}', "[1, 2]", b"\xff\xfe"], ids=["value", "list", "not-utf8"]
)
def test_a_summary_that_is_not_a_summary_is_a_clear_error(tmp_path, summary):
    folder = write_run(tmp_path / "run")
    path = folder / "summary.json"
    path.write_bytes(summary if isinstance(summary, bytes) else summary.encode())
    with pytest.raises(BenchError, match="summary.json"):
        load_run_dir(folder)


def test_with_its_cases_at_hand_a_run_is_broken_down_by_the_reference_call_s_arguments(tmp_path):
    run = load_run_dir(write_run(tmp_path / "run", with_cases=True))
    # Every ground truth has one argument, whatever constrained wrote.
    assert run.by_args["weave"]["1"]["n"] == len(CASES)
    assert all(not numbers["n"] for b, numbers in run.by_args["weave"].items() if b != "1")
    assert run.by_args_source.startswith("weavehost.bench.breakdown")
    svg = by_args_chart(run, {}).svg
    assert "1 argument" in svg and "2 arguments" not in svg  # empty buckets are not drawn


def test_a_run_s_heading_names_its_source_commit_where_run_json_records_it(tmp_path):
    folder = write_run(tmp_path / "run")
    without = render_html([load_run_dir(folder)], [], title=None)
    info = json.loads((folder / "run.json").read_text())
    (folder / "run.json").write_text(json.dumps({**info, "commit": "1cbb744abcde+dirty"}))
    with_commit = render_html([load_run_dir(folder)], [], title=None)
    heading = re.compile(r"<h2>([^<]*)</h2>")
    assert heading.findall(with_commit) == [
        "run: Tiny Model, cases.jsonl (10 cases), 2 threads, commit 1cbb744abcde+dirty"
    ]
    assert heading.findall(without) == ["run: Tiny Model, cases.jsonl (10 cases), 2 threads"]


def test_the_waterfall_goes_from_constrained_to_weave_and_its_steps_add_up_exactly(tmp_path):
    run = load_run_dir(write_run(tmp_path / "run"))
    waterfall = run.waterfall
    g = geo(1 + 0.1 * a for a in CASES.values())
    assert waterfall.cases == len(CASES)
    assert waterfall.start_s == pytest.approx(0.40 * g)
    assert waterfall.end_s == pytest.approx(0.20 * g)
    steps = {s.component: s for s in waterfall.steps}
    assert steps["no_drafts"].delta_s == pytest.approx(0.10 * g)
    assert steps["no_drafts"].ratio == pytest.approx(1.5)
    assert steps["no_padding"].delta_s == pytest.approx(0.02 * g)
    assert waterfall.rest_s == pytest.approx(0.08 * g)
    total = waterfall.start_s - sum(s.delta_s for s in waterfall.steps) - waterfall.rest_s
    assert total == pytest.approx(waterfall.end_s, abs=1e-12)


def test_the_waterfall_compares_only_the_cases_every_strategy_measured():
    lines = [make_line(c, s, a) for c, a in CASES.items() for s in SCALE]
    lines = [
        {**line, "final_latency_s": None}
        if (line["id"], line["strategy"]) == ("case_0", "weave:no_drafts")
        else line
        for line in lines
    ]
    assert ablation_waterfall(lines).cases == len(CASES) - 1


def test_a_component_that_costs_time_is_a_step_up_and_the_bars_still_add_up(tmp_path, monkeypatch):
    monkeypatch.setitem(SCALE, "weave:no_padding", 0.18)  # faster without it
    run = load_run_dir(write_run(tmp_path / "run"))
    step = {s.component: s for s in run.waterfall.steps}["no_padding"]
    assert step.delta_s < 0 and step.ratio == pytest.approx(0.9)
    waterfall = run.waterfall
    total = waterfall.start_s - sum(s.delta_s for s in waterfall.steps) - waterfall.rest_s
    assert total == pytest.approx(waterfall.end_s, abs=1e-12)
    assert "costs" in ablation_chart(run, waterfall).svg


def test_the_table_shows_the_extra_kv_cache_where_the_summary_records_it(tmp_path):
    folder = write_run(tmp_path / "run")
    summary = json.loads((folder / "summary.json").read_text())
    summary["weave"]["memory"] = {
        "peak_rss_bytes": 3_000_000_000,
        "extra_kv_mb_vs_constrained": 8.9,
    }
    (folder / "summary.json").write_text(json.dumps(summary))
    page = build_report([folder], tmp_path / "report").html.read_text()
    assert "<th>extra KV MB</th>" in page
    weave_row = re.search(r"<tr><td>weave</td>(.*?)</tr>", page).group(1)
    assert re.findall(r"<td>(.*?)</td>", weave_row)[-2:] == ["3,000", "+8.9"]


def test_a_run_without_an_ablation_or_without_constrained_has_no_waterfall():
    assert ablation_waterfall([make_line("a", s, 1) for s in ("constrained", "weave")]) is None
    assert ablation_waterfall([make_line("a", s, 1) for s in ("weave", "weave:no_drafts")]) is None


def test_the_report_writes_every_chart_as_svg_and_inlines_each_in_its_figure(tmp_path):
    files = build_report([write_run(tmp_path / "run-a")], tmp_path / "report")
    names = [f"run-a-{chart}" for chart in PER_RUN_CHARTS]
    assert [p.name for p in files.charts] == [f"{n}.svg" for n in names]
    page = files.html.read_text()
    figures = figures_of(page)
    assert sorted(figures) == sorted(names)
    for name in names:
        svg = (tmp_path / "report" / f"{name}.svg").read_text()
        assert figures[name]["id"] == f"chart-{name}"
        assert figures[name]["svg"] is not None
        assert svg[svg.index("<svg") :].strip() in page  # the same SVG, inlined
        assert "<text" in svg and "<path" in svg  # text stays text (svg.fonttype none)
        assert "run-a" in figures[name]["caption"]
    assert "weave:no_drafts" in (tmp_path / "report" / "run-a-latency.svg").read_text()
    caption = figures["run-a-ablation"]["caption"]
    assert "interactions" in caption and "10 cases" in caption
    assert "rebuilt from run.json" in figures["run-a-latency"]["caption"]


def test_the_page_has_a_table_of_summary_numbers_and_the_run_s_setup(tmp_path):
    build_report([write_run(tmp_path / "run-a")], tmp_path / "report")
    page = (tmp_path / "report" / REPORT_HTML).read_text()
    assert page.count("<table>") == 1
    weave_row = re.search(r"<tr><td>weave</td>(.*?)</tr>", page).group(1)
    cells = re.findall(r"<td>(.*?)</td>", weave_row)
    g = geo(1 + 0.1 * a for a in CASES.values())
    assert cells[0] == "10"  # n
    assert cells[2] == f"{0.2 * g * 1000:,.1f}"  # final ms (geo)
    assert "Tiny Model" in page and "avx2 avx512f" in page and "2026-11-30T12:00:00" in page


def test_the_page_loads_nothing_and_every_id_in_it_is_unique(tmp_path):
    build_report([write_run(tmp_path / "a"), write_run(tmp_path / "b")], tmp_path / "report")
    page = (tmp_path / "report" / REPORT_HTML).read_text()
    for needle in ("<script", "<link", "<img", "src=", "@import", "@font-face", "url(http"):
        assert needle not in page
    assert all(ref.startswith("#") for ref in re.findall(r'href="([^"]*)"', page))
    ids = re.findall(r'\sid="([^"]+)"', page)
    assert len(ids) == len(set(ids)) and len(ids) > 50


def test_several_runs_get_the_cross_run_charts_first(tmp_path):
    runs = [write_run(tmp_path / "a"), write_run(tmp_path / "b", ("constrained", "weave"))]
    files = build_report(runs, tmp_path / "report")
    names = [p.stem for p in files.charts]
    assert names[:2] == ["runs-latency", "runs-speedup"]
    assert "b-ablation" not in names and "a-ablation" in names
    speedup = (tmp_path / "report" / "runs-speedup.svg").read_text()
    assert "jump_forward" in speedup and "weave:no_padding" in speedup


def test_two_run_folders_with_the_same_name_get_charts_of_their_own(tmp_path):
    runs = [write_run(tmp_path / "x" / "run"), write_run(tmp_path / "y" / "run")]
    names = [p.stem for p in build_report(runs, tmp_path / "report").charts]
    assert "run-latency" in names and "run-2-latency" in names


def test_the_same_runs_give_byte_identical_files(tmp_path):
    run = write_run(tmp_path / "run")
    first = build_report([run], tmp_path / "one")
    second = build_report([run], tmp_path / "two")
    for a, b in zip((first.html, *first.charts), (second.html, *second.charts), strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name


def test_a_run_folder_without_summary_or_run_json_is_summarised_from_its_lines(tmp_path):
    folder = write_run(tmp_path / "bare", summary=False)
    (folder / "run.json").unlink()
    run = load_run_dir(folder)
    assert run.summary["weave"]["n"] == len(CASES)
    assert run.summary["weave"]["speedup_vs_constrained"] == pytest.approx(0.40 / (0.20 * 0.9))
    assert build_report([folder], tmp_path / "report").html.is_file()


def test_a_missing_run_folder_or_results_file_is_one_error_line_and_exit_2(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for bad, message in ((tmp_path / "nowhere", "does not exist"), (empty, "no results.jsonl")):
        result = CliRunner().invoke(main, ["bench-report", str(bad), "--out", str(tmp_path / "r")])
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "r").exists()
    with pytest.raises(BenchError, match="no results.jsonl"):
        load_run_dir(empty)


def test_without_matplotlib_the_command_says_how_to_install_it_and_exits_2(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    run = write_run(tmp_path / "run")
    result = CliRunner().invoke(main, ["bench-report", str(run), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2
    assert result.output.strip() == f"Error: {MATPLOTLIB_MISSING}"
    assert MATPLOTLIB_MISSING == "bench-report needs matplotlib: pip install 'weavehost[bench]'"
    assert not (tmp_path / "r").exists()


def test_the_command_writes_the_report_and_names_every_file(tmp_path):
    run = write_run(tmp_path / "run")
    result = CliRunner().invoke(main, ["bench-report", str(run), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert f"report: {tmp_path / 'r' / REPORT_HTML}" in result.output
    assert result.output.count("chart:  ") == len(PER_RUN_CHARTS)


def test_the_spread_of_a_strategy_without_measured_latencies_is_empty():
    lines = [{**make_line("a", "weave", 1), "tool_latency_s": None, "final_latency_s": None}]
    assert spread_by_strategy(lines)["weave"]["final"]["p50"] is None


# --- runs with nothing to chart, and folders that are not bench runs ------------------------


def rewrite_lines(folder: Path, change) -> Path:
    """The run's lines passed through ``change`` (line -> line), its summary.json dropped so
    the numbers are the lines' own."""
    lines = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
    (folder / "results.jsonl").write_text(
        "".join(json.dumps(change(line)) + "\n" for line in lines)
    )
    (folder / "summary.json").unlink()
    return folder


def failed(line: dict) -> dict:
    """A line of a case that raised: no call, no latency, no passes."""
    return {
        **line,
        "calls": [],
        "error": "ContextOverflowError: the prompt is longer than the context",
        "tool_latency_s": None,
        "final_latency_s": None,
        "forward_passes": None,
        "pass_rows": None,
        "same_as_constrained": None,
    }


def write_agent_run(folder: Path) -> Path:
    """What `weavehost bench-agent --out` writes: one line per task and variant, whole turns."""
    folder.mkdir(parents=True)
    turn = {"user": "What is the weather in Paris?", "calls": [], "timings": [{"step": 1}]}
    line = {"id": "weather-paris", "variant": "remote cache=off", "strategy": "remote"}
    line |= {"success": False, "first_tool_s": 0.5, "answer_s": 27.3, "turns": [turn]}
    (folder / "results.jsonl").write_text(json.dumps(line) + "\n")
    variants = {"remote cache=off": {"tasks": 1, "succeeded": 0, "geo_answer_s": 27.3}}
    summary = {"setup": {"tasks_file": "tasks.jsonl"}, "variants": variants, "by_tag": {}}
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def report_page(tmp_path: Path) -> str:
    """The report.html that build_report wrote into ``tmp_path / "report"``."""
    return (tmp_path / "report" / REPORT_HTML).read_text()


def test_a_bench_agent_folder_is_named_as_one_in_one_error_line_and_exit_2(tmp_path):
    folder = write_agent_run(tmp_path / "agent")
    result = CliRunner().invoke(main, ["bench-report", str(folder), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"Error: {folder} is a `weavehost bench-agent` run")
    assert "Traceback" not in result.output and result.output.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_a_folder_whose_lines_have_no_latencies_is_not_a_bench_run(tmp_path):
    folder = write_run(tmp_path / "run")
    rewrite_lines(folder, lambda line: {"id": line["id"], "strategy": line["strategy"]})
    with pytest.raises(BenchError, match=r"run is not a `weavehost bench` run: no line .* has"):
        load_run_dir(folder)


def test_an_empty_results_file_is_a_clear_error(tmp_path):
    folder = write_run(tmp_path / "run")
    (folder / "results.jsonl").write_text("\n")
    with pytest.raises(BenchError, match="has no result lines"):
        load_run_dir(folder)


def test_a_run_where_every_call_failed_draws_every_chart_with_no_data_and_says_why(tmp_path):
    folder = rewrite_lines(write_run(tmp_path / "run"), failed)
    files = build_report([folder], tmp_path / "report")
    assert [p.stem for p in files.charts] == [f"run-{chart}" for chart in PER_RUN_CHARTS]
    figures = figures_of(files.html.read_text())
    latency = figures["run-latency"]["caption"]
    assert "No tool latency was measured for any strategy" in latency
    assert "No final latency was measured for any strategy" in latency
    assert "Not drawn: no case has both a call" in figures["run-by-args"]["caption"]
    waterfall = figures["run-ablation"]["caption"]
    assert "Not drawn: no case on which constrained, weave and every ablation" in waterfall
    for name in ("latency", "by-args", "ablation"):
        assert "no data: " in (tmp_path / "report" / f"run-{name}.svg").read_text(), name


def test_a_strategy_that_measured_no_latency_has_no_box_and_the_caption_names_it(tmp_path):
    folder = rewrite_lines(
        write_run(tmp_path / "run"),
        lambda line: failed(line) if line["strategy"] == "weave" else line,
    )
    build_report([folder], tmp_path / "report")
    caption = figures_of(report_page(tmp_path))["run-latency"]["caption"]
    assert "No tool latency was measured for weave (no box)." in caption
    assert "No final latency was measured for weave (no box)." in caption
    weave_row = re.search(r"<tr><td>weave</td>(.*?)</tr>", report_page(tmp_path)).group(1)
    assert re.findall(r"<td>(.*?)</td>", weave_row)[2:5] == ["–", "–", "–"]  # tool, final, p10–p90


def test_ablations_without_constrained_get_a_waterfall_that_says_what_is_missing(tmp_path):
    folder = write_run(tmp_path / "run", ("weave", "weave:no_drafts"))
    build_report([folder], tmp_path / "report")
    caption = figures_of(report_page(tmp_path))["run-ablation"]["caption"]
    assert "Not drawn: the run has ablations but no constrained." in caption


def test_runs_of_constrained_alone_have_a_speedup_chart_that_says_there_is_none(tmp_path):
    runs = [write_run(tmp_path / name, ("constrained",)) for name in ("a", "b")]
    build_report(runs, tmp_path / "report")
    figures = figures_of(report_page(tmp_path))
    speedup = figures["runs-speedup"]["caption"]
    assert "Not drawn: no run measured the tool latency of both constrained and" in speedup
    assert "Not drawn" not in figures["runs-latency"]["caption"]
    assert "no data: " in (tmp_path / "report" / "runs-speedup.svg").read_text()


# --- a real browser -------------------------------------------------------------------------

# Appended to a copy of the page: after layout, each figure's svg gets its rendered size as
# attributes, which --dump-dom then shows. The page itself has no script.
MEASURE = """<script>
for (const figure of document.querySelectorAll("figure[data-chart]")) {
  const svg = figure.querySelector("svg");
  if (!svg) continue;
  const box = svg.getBoundingClientRect();
  svg.setAttribute("data-rendered", `${Math.round(box.width)}x${Math.round(box.height)}`);
  svg.setAttribute("data-texts", String(svg.querySelectorAll("text").length));
}
</script>"""


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.environ.get("WEAVEHOST_REQUIRE_BROWSER"):
        pytest.fail("WEAVEHOST_REQUIRE_BROWSER is set but no chromium is on PATH")
    pytest.skip("no chromium on PATH (apt-get install chromium); CI sets WEAVEHOST_REQUIRE_BROWSER")


def test_the_report_opens_in_a_headless_chromium_and_shows_every_chart(tmp_path):
    browser = chromium()
    runs = [write_run(tmp_path / "run-a"), write_run(tmp_path / "run-b", ("constrained", "weave"))]
    files = build_report(runs, tmp_path / "report")
    expected = {p.stem for p in files.charts}
    probe = files.html.with_name("probe.html")
    probe.write_text(files.html.read_text().replace("</body>", MEASURE + "\n</body>"))
    dumped = subprocess.run(
        [
            browser,
            "--headless",
            "--disable-gpu",
            "--no-sandbox",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,900",
            "--dump-dom",
            probe.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=BROWSER_BOUND_S,
        check=True,
    ).stdout
    figures = figures_of(dumped)
    assert set(figures) == expected
    for name, figure in figures.items():
        svg = figure["svg"]
        assert svg is not None, f"{name}: no <svg> in its figure"
        width, height = (int(v) for v in svg["data-rendered"].split("x"))
        assert width > 200 and height > 100, f"{name}: rendered {width}x{height}"
        assert int(svg["data-texts"]) > 5, f"{name}: its labels are not text"
        assert figure["caption"].strip()


def test_forcing_parallel_values_is_a_variant_in_the_tables_not_a_step_of_the_waterfall(
    monkeypatch,
):
    monkeypatch.setitem(SCALE, "weave:parallel_values", 0.35)
    lines = [make_line(c, s, a) for c, a in CASES.items() for s in SCALE]
    components = {step.component for step in ablation_waterfall(lines).steps}
    assert components == {"no_drafts", "no_padding"}
