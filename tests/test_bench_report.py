"""The benchmark summary: geometric means, speedup over constrained, table and plot."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pytest

from weavehost.bench.report import (
    SUMMARY_KEYS,
    format_table,
    geomean,
    load_results,
    render_svg,
    summarize,
    write_summary,
)
from weavehost.errors import BenchError


def line(strategy, tool, *, final=None, passes=10, correct=None, calls=True):
    return {
        "id": "x",
        "strategy": strategy,
        "calls": [{"name": "f", "arguments": {}}] if calls else [],
        "tool_latency_s": tool,
        "final_latency_s": tool if final is None else final,
        "forward_passes": passes,
        "prompt_prefill_s": 0.5,
        "correct": correct,
    }


def test_geomean_is_the_nth_root_of_the_product_and_skips_missing_values():
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([2.0, 8.0, None]) == pytest.approx(4.0)
    assert geomean([]) is None
    assert geomean([None]) is None


def test_speedup_is_the_ratio_of_geometric_means_against_constrained():
    records = [
        line("constrained", 0.4, passes=40),
        line("constrained", 0.1, passes=20),
        line("weave", 0.1, passes=10),
        line("weave", 0.025, passes=6),
    ]
    summary = summarize(records, ["constrained", "weave"])
    assert summary["constrained"]["geo_tool_latency_s"] == pytest.approx(0.2)
    assert summary["weave"]["geo_tool_latency_s"] == pytest.approx(0.05)
    assert summary["weave"]["speedup_vs_constrained"] == pytest.approx(4.0)
    assert summary["constrained"]["speedup_vs_constrained"] == pytest.approx(1.0)
    assert summary["weave"]["mean_forward_passes"] == pytest.approx(8.0)
    assert summary["weave"]["n"] == 2


def test_final_latency_has_its_own_geometric_mean():
    summary = summarize([line("weave", 0.1, final=0.4), line("weave", 0.1, final=0.1)])
    assert summary["weave"]["geo_final_latency_s"] == pytest.approx(0.2)


def test_without_constrained_the_speedup_is_null():
    summary = summarize([line("serial", 1.0)])
    assert summary["serial"]["speedup_vs_constrained"] is None


def test_correct_rate_counts_judged_lines_and_is_null_without_answers():
    judged = summarize(
        [
            line("s", 1, correct=True),
            line("s", 1, correct=False),
            line("s", 1, correct=True),
            line("s", 1, correct=True),
        ]
    )
    assert judged["s"]["correct_rate"] == pytest.approx(0.75)
    assert summarize([line("s", 1)])["s"]["correct_rate"] is None


def test_a_case_that_raised_is_counted_but_left_out_of_the_latency_mean():
    summary = summarize([line("s", 0.2), line("s", None, passes=None, calls=False)])
    assert summary["s"]["n"] == 2
    assert summary["s"]["geo_tool_latency_s"] == pytest.approx(0.2)
    assert summary["s"]["mean_forward_passes"] == pytest.approx(10)
    assert summary["s"]["errors"] == 1


def test_every_requested_strategy_has_every_contract_key(tmp_path):
    summary = summarize([line("serial", 1.0)], ["serial", "weave"])
    for numbers in summary.values():
        assert set(SUMMARY_KEYS) <= set(numbers)
    json_path, svg_path = write_summary(summary, tmp_path, title="t")
    assert list(json.loads(json_path.read_text())) == ["serial", "weave"]
    assert svg_path.exists()


def test_the_plot_is_valid_svg_with_one_bar_per_strategy():
    summary = summarize([line("constrained", 0.4), line("weave", 0.1)])
    root = ET.fromstring(render_svg(summary, "Qwen <0.5B> & friends"))
    bars = [
        el
        for el in root.iter("{http://www.w3.org/2000/svg}rect")
        if el.find("{http://www.w3.org/2000/svg}title") is not None
    ]
    widths = [float(bar.get("width")) for bar in bars]
    assert len(bars) == 2
    assert math.isclose(widths[0] / widths[1], 4.0)


def test_the_table_has_a_row_per_strategy_with_latency_in_ms():
    table = format_table(summarize([line("constrained", 0.4), line("weave", 0.1, correct=True)]))
    rows = table.splitlines()
    assert rows[0].split()[:3] == ["strategy", "n", "tool"]
    assert rows[2].split()[:3] == ["constrained", "1", "400.0"]
    assert "4.00x" in rows[3] and "100.0%" in rows[3]


def test_results_load_back_and_a_bad_line_is_named(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(line("s", 1)) + "\n{oops\n", encoding="utf-8")
    with pytest.raises(BenchError, match=r"results.jsonl:2"):
        load_results(path)
    path.write_text(json.dumps(line("s", 1)) + "\n", encoding="utf-8")
    assert load_results(path)[0]["strategy"] == "s"
