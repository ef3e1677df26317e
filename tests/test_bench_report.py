"""The benchmark summary: geometric means, speedup over constrained, table and plot."""

from __future__ import annotations

import json
import math
import xml.etree.ElementTree as ET

import pytest

from weavehost.bench.compare import NEAR_TIE_LOGIT_GAP
from weavehost.bench.report import (
    SUMMARY_KEYS,
    format_table,
    geomean,
    load_results,
    mean_rows_per_pass,
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
    widths = [float(bar.get("width")) for bar in bars if bar.get("class") == "latency"]
    assert len(widths) == 2
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


SVG = "{http://www.w3.org/2000/svg}"


def rich(strategy, tool, **fields):
    """A result line with the comparison, drafting and cost fields of a current run."""
    record = line(strategy, tool, passes=fields.pop("passes", 10))
    record.update(
        {
            "pass_rows": {"1": 8, "4": 2},
            "drafted_tokens": 0,
            "accepted_tokens": 0,
            "same_as_constrained": True,
            "mismatch": None,
            "phases": {},
            "peak_rss_bytes": 100,
            "projected_latency_s": None,
        }
    )
    record.update(fields)
    return record


def bars(svg: str, kind: str) -> dict[str, float]:
    """The bar widths of one panel (``latency``, ``passes``, ``projected``) by strategy."""
    root = ET.fromstring(svg)
    found = {}
    for rect in root.iter(f"{SVG}rect"):
        if rect.get("class") == kind:
            name = rect.find(f"{SVG}title").text.split(":")[0]
            found[name] = float(rect.get("width"))
    return found


def test_drafted_and_accepted_tokens_are_averaged_and_the_acceptance_rate_is_pooled():
    summary = summarize(
        [
            rich("weave", 0.1, drafted_tokens=10, accepted_tokens=9),
            rich("weave", 0.1, drafted_tokens=30, accepted_tokens=11),
            rich("weave", None, drafted_tokens=None, accepted_tokens=None, calls=[]),
        ]
    )["weave"]
    assert summary["mean_drafted_tokens"] == pytest.approx(20)
    assert summary["mean_accepted_tokens"] == pytest.approx(10)
    assert summary["acceptance_rate"] == pytest.approx(20 / 40)
    assert summarize([rich("serial", 0.1)])["serial"]["acceptance_rate"] is None


def test_agreement_with_constrained_counts_only_compared_lines_and_near_ties_by_the_gap():
    near = NEAR_TIE_LOGIT_GAP / 2
    mismatch = {"position": 3, "token": 1, "constrained_token": 2}
    summary = summarize(
        [
            rich("weave", 0.1, same_as_constrained=True),
            rich("weave", 0.1, same_as_constrained=False, mismatch={**mismatch, "logit_gap": near}),
            rich(
                "weave", 0.1, same_as_constrained=False, mismatch={**mismatch, "logit_gap": -near}
            ),
            rich("weave", 0.1, same_as_constrained=False, mismatch={**mismatch, "logit_gap": 4.0}),
            rich("weave", 0.1, same_as_constrained=None),
        ]
    )["weave"]
    assert summary["compared"] == 4
    assert summary["same_as_constrained_rate"] == pytest.approx(0.25)
    assert summary["mismatches"] == 3
    assert summary["near_tie_mismatches"] == 2


def test_phases_are_averaged_over_the_lines_that_had_them_with_their_count():
    summary = summarize(
        [
            rich("weave", 0.1, phases={"selector": 0.01, "optional": 0.3}),
            rich("weave", 0.1, phases={"selector": 0.03}),
        ]
    )["weave"]
    assert summary["phases"]["selector"] == pytest.approx({"mean_s": 0.02, "n": 2})
    assert summary["phases"]["optional"] == pytest.approx({"mean_s": 0.3, "n": 1})


def test_rows_per_pass_pool_every_pass_of_every_line_and_rss_is_the_peak():
    assert mean_rows_per_pass([{"1": 3, "5": 1}, {"8": 1}, None]) == pytest.approx(16 / 5)
    assert mean_rows_per_pass([{}]) is None
    summary = summarize(
        [
            rich("weave", 0.1, pass_rows={"1": 3, "5": 1}, peak_rss_bytes=300),
            rich("weave", 0.1, pass_rows={"8": 1}, peak_rss_bytes=700),
        ]
    )["weave"]
    assert summary["mean_rows_per_pass"] == pytest.approx(16 / 5)
    assert summary["peak_rss_bytes"] == 700


def projected_run():
    records = [
        rich("constrained", 0.4, projected_latency_s=0.8),
        rich("jump_forward", 0.2, projected_latency_s=0.4),
        rich(
            "weave",
            0.1,
            projected_latency_s=0.2,
            projected_final_latency_s=0.25,
            projected_reply_s=0.3,
        ),
    ]
    return summarize(records, projected_on="Pixel 7")


def test_a_projection_is_labelled_with_its_machine_and_compared_with_both_baselines():
    summary = projected_run()
    weave = summary["weave"]["projection"]
    assert weave["machine"] == "Pixel 7"
    assert "projection, not a measurement" in weave["what"]
    assert weave["geo_latency_s"] == pytest.approx(0.2)  # to the tool, as the headline
    assert weave["geo_final_latency_s"] == pytest.approx(0.25)
    assert weave["geo_reply_s"] == pytest.approx(0.3)
    assert weave["speedup_vs_constrained"] == pytest.approx(4.0)
    assert weave["speedup_vs_jump_forward"] == pytest.approx(2.0)
    assert summary["weave"]["speedup_vs_constrained"] == pytest.approx(4.0)  # measured, apart
    assert summarize([rich("weave", 0.1)])["weave"]["projection"] is None


def test_a_projection_without_a_baseline_has_no_speedup():
    summary = summarize([rich("weave", 0.1, projected_latency_s=0.2)], projected_on="m")
    projection = summary["weave"]["projection"]
    assert projection["speedup_vs_constrained"] is None
    assert projection["speedup_vs_jump_forward"] is None


def test_the_table_shows_agreement_and_drafts_and_projected_columns_only_when_projected():
    plain = format_table(
        summarize(
            [
                rich("constrained", 0.4),
                rich("weave", 0.1, drafted_tokens=6, accepted_tokens=4, same_as_constrained=False),
                rich("weave", 0.1, drafted_tokens=2, accepted_tokens=2),
            ]
        )
    )
    header, _, constrained, weave = plain.splitlines()[:4]
    assert header.split()[-2:] == ["same", "draft/acc"]
    assert weave.split()[-2:] == ["50.0%", "4.0/3.0"]
    assert constrained.split()[-2] == "100.0%"
    assert "proj" not in plain and "PROJECTION" not in plain

    projected = format_table(projected_run())
    rows = projected.splitlines()
    assert rows[0].split()[-4:] == ["proj", "ms", "proj", "x"]
    assert rows[4].split()[-2:] == ["200.0", "4.00x"]
    assert any("PROJECTION on Pixel 7" in row and "not a measurement" in row for row in rows)


def test_the_plot_shows_latency_and_passes_side_by_side_with_the_notes():
    summary = summarize(
        [rich("constrained", 0.4, passes=40), rich("weave", 0.1, passes=10)],
    )
    svg = render_svg(summary, "SmolLM2, 2 cases", ["CPU flags: avx2 avx512f"])
    latency, passes = bars(svg, "latency"), bars(svg, "passes")
    assert latency["constrained"] / latency["weave"] == pytest.approx(4.0)
    assert passes["constrained"] / passes["weave"] == pytest.approx(4.0)
    assert max(latency.values()) == max(passes.values())  # each panel scaled to its own
    assert bars(svg, "projected") == {}
    texts = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]
    assert "CPU flags: avx2 avx512f" in texts and "SmolLM2, 2 cases" in texts
    assert not any("PROJECTED" in (t or "") for t in texts)


def test_a_projected_plot_has_a_third_panel_labelled_as_a_projection_on_its_machine():
    svg = render_svg(projected_run(), "t")
    projected = bars(svg, "projected")
    assert projected["constrained"] / projected["weave"] == pytest.approx(4.0)
    texts = [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")]
    assert any("PROJECTED" in t and "Pixel 7" in t and "not a measurement" in t for t in texts)
