"""``weavehost bench`` end to end on the embedded model, the stock peer's grammar, and the
strategy list."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from weavehost.bench.cli import bench
from weavehost.bench.compare import (
    Mismatch,
    compare_with_baseline,
    first_difference,
    logit_gaps,
    same_calls,
)
from weavehost.bench.peer import call_frame, call_grammar
from weavehost.bench.report import SUMMARY_KEYS
from weavehost.bench.runner import (
    PROJECTED_KEYS,
    RESULT_FIELDS,
    known_strategies,
    parse_strategies,
)
from weavehost.decode import STRATEGIES, DecodeState
from weavehost.decode.base import ToolSchema
from weavehost.engine.calibrate import load_cost_table
from weavehost.errors import BenchError, ConfigError, FormatError
from weavehost.formats import FORMATS

DATA = Path(__file__).parent / "data"
STRATS = ["serial", "llama_cpp_python"]


@pytest.fixture(scope="module")
def bench_run(embedded_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("bench")
    result = CliRunner().invoke(
        bench,
        [
            str(DATA / "bfcl_sample.jsonl"),
            "--answers",
            str(DATA / "bfcl_sample_answers.jsonl"),
            "--model",
            str(embedded_model_path),
            "--strategies",
            ",".join(STRATS),
            "--limit",
            "2",
            "--threads",
            "1",
            "--ctx",
            "2048",
            "--max-tokens",
            "48",
            "--out",
            str(out),
        ],
    )
    return result, out


def results(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


def test_bench_writes_one_contract_line_per_case_and_strategy(bench_run):
    result, out = bench_run
    assert result.exit_code == 0, result.output
    lines = results(out)
    assert sorted((r["id"], r["strategy"]) for r in lines) == sorted(
        (case, s) for case in ("simple_python_0", "simple_python_1") for s in STRATS
    )
    for record in lines:
        assert set(RESULT_FIELDS) <= set(record)
        assert isinstance(record["correct"], bool)
        assert record["tool_latency_s"] > 0 and record["prompt_prefill_s"] > 0
        assert record["forward_passes"] >= 1


def test_strategies_are_interleaved_case_by_case(bench_run):
    _, out = bench_run
    ids = [r["id"] for r in results(out)]
    assert ids == ["simple_python_0"] * 2 + ["simple_python_1"] * 2


def test_the_stock_peer_writes_a_grammar_shaped_call_with_passes_per_token(bench_run):
    _, out = bench_run
    for record in results(out):
        if record["strategy"] != "llama_cpp_python":
            continue
        assert record["text"].startswith("<tool_call>[{")
        assert record["text"].endswith("}]</tool_call>")
        assert len(record["calls"]) == 1
        assert record["forward_passes"] == record["decoded_tokens"]
        assert record["prefilled_tokens"] == 0
        assert record["provisional"] is None


def test_bench_writes_a_summary_of_every_strategy_and_a_plot(bench_run):
    result, out = bench_run
    summary = json.loads((out / "summary.json").read_text())
    assert list(summary) == STRATS
    for numbers in summary.values():
        assert set(SUMMARY_KEYS) <= set(numbers)
        assert numbers["n"] == 2
        assert numbers["speedup_vs_constrained"] is None
    assert (out / "summary.svg").read_text().startswith("<svg")
    run = json.loads((out / "run.json").read_text())
    assert run["format"] == "smollm2"
    assert run["flash_attn"] is True  # not calibrated here: the engine's default
    assert "llama_cpp_python" in result.stdout and "strategy" in result.stdout


def test_an_unknown_strategy_fails_before_loading_with_the_known_ones_listed(tmp_path):
    result = CliRunner().invoke(
        bench,
        [
            str(DATA / "bfcl_sample.jsonl"),
            "--strategies",
            "serial,bogus",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert isinstance(result.exception, BenchError)
    assert "'bogus'" in str(result.exception)
    for name in known_strategies():
        assert name in str(result.exception)
    assert not (tmp_path / "o").exists()


def test_known_strategies_are_the_decoders_and_the_peers():
    assert known_strategies() == [*STRATEGIES, "llama_cpp_python", "llama_cpp_python_lookup"]
    assert parse_strategies(" serial ,serial") == ("serial",)


def test_an_answer_file_matching_no_case_is_refused(tmp_path, embedded_model_path):
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps({"id": "other", "ground_truth": []}) + "\n")
    result = CliRunner().invoke(
        bench,
        [
            str(DATA / "bfcl_sample.jsonl"),
            "--answers",
            str(answers),
            "--strategies",
            "serial",
            "--model",
            str(embedded_model_path),
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert isinstance(result.exception, BenchError)
    assert "no answer for any of the cases" in str(result.exception)


@pytest.mark.parametrize(
    ("format_name", "prefix", "suffix", "key"),
    [
        ("qwen", "<tool_call>\n", "\n</tool_call>", "arguments"),
        ("smollm2", "<tool_call>[", "]</tool_call>", "arguments"),
        ("llama3", "", "", "parameters"),
    ],
)
def test_the_peer_frames_the_call_json_in_the_format_s_fixed_text(format_name, prefix, suffix, key):
    frame = call_frame(FORMATS[format_name])
    assert (frame.prefix, frame.suffix, frame.arguments_key) == (prefix, suffix, key)


def test_the_peer_grammar_wraps_the_json_schema_rules_in_a_root():
    tools = [
        ToolSchema(
            "get_weather",
            "",
            {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        ),
        ToolSchema("get_time", "", {"type": "object", "properties": {}}),
    ]
    grammar = call_grammar(FORMATS["qwen"], tools)
    assert 'root ::= "<tool_call>\\n" call "\\n</tool_call>"' in grammar
    assert grammar.count("root ::=") == 1
    assert "get_weather" in grammar and "get_time" in grammar


def test_the_peer_refuses_a_format_whose_calls_are_not_json():
    with pytest.raises(FormatError, match="functiongemma"):
        call_frame(FORMATS["functiongemma"])


# --------------------------------------------------------------------------- against constrained

COSTS = DATA / "costs" / "avx2-qwen2.5-coder-0.5b-q4_0-t2.json"
WOVEN = ["constrained", "jump_forward", "weave"]


def call(name="f", **arguments):
    return {"name": name, "arguments": arguments}


def test_calls_are_the_same_when_names_and_arguments_are_equal_in_order():
    assert same_calls([call(a=1, b="x")], [call(b="x", a=1)])
    assert not same_calls([call(a=1)], [call(a=2)])
    assert not same_calls([call("f")], [call("g")])
    assert not same_calls([call(a=1)], [call(a=1), call(a=1)])
    assert not same_calls([call("f"), call("g")], [call("g"), call("f")])
    assert not same_calls([call(a=1)], [call(a=1.0)])
    assert not same_calls([call(a=1)], [call(a=True)])
    assert same_calls([call(a={"x": [1, 2], "y": None})], [call(a={"y": None, "x": [1, 2]})])


def test_the_first_difference_is_the_first_unequal_token_or_where_the_shorter_ends():
    assert first_difference([1, 2, 3], [1, 2, 3]) is None
    assert first_difference([1, 9, 3], [1, 2, 3]) == 1
    assert first_difference([1, 2], [1, 2, 3]) == 2
    assert first_difference([5], []) == 0


def test_each_strategy_is_marked_against_constrained_and_a_mismatch_is_located():
    records = {
        "constrained": {"calls": [call(a=1)]},
        "weave": {"calls": [call(a=2)]},
        "jump_forward": {"calls": [call(a=1)]},
        "serial": {"calls": []},
    }
    tokens = {"constrained": [7, 8, 9], "weave": [7, 8, 4, 5], "jump_forward": [7, 3]}
    wanted = compare_with_baseline(records, tokens, "constrained")
    assert [r["same_as_constrained"] for r in records.values()] == [True, False, True, None]
    assert records["weave"]["mismatch"] == {
        "position": 2,
        "token": 4,
        "constrained_token": 9,
        "logit_gap": None,
    }
    # equal calls are never judged by their tokens (jump_forward's differ here)
    assert records["jump_forward"]["mismatch"] is None
    assert wanted == [Mismatch("weave", 2, 4, 9)]


def test_without_constrained_nothing_is_compared_and_constrained_without_a_call_is_null():
    records = {"weave": {"calls": [call()]}}
    assert compare_with_baseline(records, {"weave": [1]}, "constrained") == []
    assert records["weave"]["same_as_constrained"] is None
    records = {"constrained": {"calls": []}, "weave": {"calls": [call()]}}
    compare_with_baseline(records, {"constrained": [1], "weave": [2]}, "constrained")
    assert records["constrained"]["same_as_constrained"] is None
    assert records["weave"]["same_as_constrained"] is False


def test_a_strategy_that_reports_no_tokens_is_compared_but_not_located():
    records = {"constrained": {"calls": [call(a=1)]}, "peer": {"calls": [call(a=2)]}}
    assert compare_with_baseline(records, {"constrained": [1, 2]}, "constrained") == []
    assert records["peer"]["same_as_constrained"] is False
    assert records["peer"]["mismatch"] is None


def test_the_logit_gap_is_the_constrained_token_s_logit_minus_the_other_s_after_the_prefix(
    fresh_engine,
):
    engine = fresh_engine
    prompt = engine.tokenize("<|im_start|>user\nName a colour.<|im_end|>\n", special=True)
    prefix = engine.tokenize("<|im_start|>assistant\nThe colour")
    logits = engine.prefill(0, prompt + prefix)
    best, other = int(logits.argmax()), int(logits.argmin())
    engine.clear()
    baseline_tokens = [*prefix, best]
    mismatches = [
        Mismatch("weave", len(prefix), other, best),
        Mismatch("jump_forward", 0, prefix[0] + 1, prefix[0]),
        Mismatch("serial", 1, None, prefix[1]),
    ]
    measured = logit_gaps(engine, prompt, mismatches, baseline_tokens)
    assert measured[0].logit_gap == pytest.approx(float(logits[best] - logits[other]), abs=1e-3)
    assert measured[0].logit_gap > 0
    first = engine.prefill(0, prompt)
    assert measured[1].logit_gap == pytest.approx(
        float(first[prefix[0]] - first[prefix[0] + 1]), abs=1e-3
    )
    assert measured[2].logit_gap is None  # a token list that ended there
    engine.clear()


# Run in a fresh interpreter: late in a full local test run a new, fully written 64 MB block
# raised this process's resident set by only 6.5 MB (the heap an earlier test left behind), and
# in CI the kernel's high-water mark missed the block; a fresh process has neither history.
_PEAK_PROBE = """
import json, sys
from weavehost.bench.rss import PeakRss, max_rss_bytes, rss_bytes
size = 64 * 1024 * 1024
with PeakRss() as rss:
    before = rss_bytes()
    held = bytearray(size)  # fresh zero pages are not resident until written:
    held[::4096] = b"\\x01" * len(range(0, size, 4096))  # touch every page
    holding = rss_bytes()
json.dump({"size": size, "before": before, "holding": holding, "peak": rss.peak,
           "max_rss": max_rss_bytes(), "held": len(held)}, sys.stdout)
"""


def test_the_peak_resident_memory_sees_what_the_block_holds():
    run = subprocess.run(
        [sys.executable, "-c", _PEAK_PROBE], capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    seen = json.loads(run.stdout)
    size, before, holding = seen["size"], seen["before"], seen["holding"]
    assert before is not None and holding is not None
    assert holding >= before + size * 0.9  # the block's memory is resident...
    # ...and the peak saw it (a sample, not the reading above: a page freed between that
    # reading and the last sample leaves the peak a page short of it, as seen once).
    assert seen["peak"] is not None and seen["peak"] >= before + size * 0.9
    assert seen["held"] == size
    # The kernel's high-water mark is reported in bytes, not KiB; it may trail a ``statm`` sample
    # by more than the block (in CI it read 55 MB below the sample, so it is no peak detector).
    assert seen["max_rss"] >= before * 0.5


def test_a_bad_cost_model_fails_before_loading_and_writes_nothing(tmp_path):
    bad = tmp_path / "costs.json"
    bad.write_text('{"machine": "m", "pass_ms": {"2": 10}, "prefill_ms_per_token": 1}')
    result = CliRunner().invoke(
        bench,
        [str(DATA / "bfcl_sample.jsonl"), "--cost-model", str(bad), "--out", str(tmp_path / "o")],
    )
    assert isinstance(result.exception, ConfigError)
    assert str(bad) in str(result.exception)
    assert not (tmp_path / "o").exists()


@pytest.fixture(scope="module")
def woven_run(embedded_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("woven")
    result = CliRunner().invoke(
        bench,
        [
            str(DATA / "bfcl_sample.jsonl"),
            "--answers",
            str(DATA / "bfcl_sample_answers.jsonl"),
            "--model",
            str(embedded_model_path),
            "--strategies",
            ",".join(WOVEN),
            "--limit",
            "2",
            "--threads",
            "1",
            "--ctx",
            "2048",
            "--max-tokens",
            "48",
            "--cost-model",
            str(COSTS),
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    return result, out


def test_every_line_counts_its_passes_by_rows_and_its_drafts(woven_run):
    _, out = woven_run
    lines = results(out)
    assert len(lines) == 2 * len(WOVEN)
    for record in lines:
        histogram = record["pass_rows"]
        assert all(key.isdigit() and count > 0 for key, count in histogram.items())
        assert sum(histogram.values()) == record["forward_passes"]
        assert 0 <= record["accepted_tokens"] <= record["drafted_tokens"]
        assert record["peak_rss_bytes"] > 0


def test_every_line_is_compared_with_constrained_s_call(woven_run):
    _, out = woven_run
    lines = results(out)
    constrained = {r["id"]: r for r in lines if r["strategy"] == "constrained"}
    assert any(r["calls"] for r in constrained.values())
    for record in lines:
        reference = constrained[record["id"]]
        if not record["calls"]:
            assert record["same_as_constrained"] is None
        elif record["strategy"] == "constrained":
            assert record["same_as_constrained"] is True
        else:
            same = record["calls"] == reference["calls"]
            assert record["same_as_constrained"] is same
            assert (record["mismatch"] is None) is same
        if record["mismatch"] is not None:
            assert isinstance(record["mismatch"]["position"], int)


def test_a_cost_model_run_projects_each_latency_from_the_passes_it_covers(woven_run):
    result, out = woven_run
    table = load_cost_table(COSTS)
    decided_after = 0
    for record in results(out):
        rows = {int(k): n for k, n in record["pass_rows"].items()}
        tool, final = record["projected_latency_s"], record["projected_final_latency_s"]
        reply = record["projected_reply_s"]
        assert reply == pytest.approx(table.recost(rows))
        assert 0 < tool <= final <= reply
        # SmolLM2's format decides after each call whether another follows: passes the
        # tool and the final call do not wait for
        decided_after += final < reply
    assert decided_after > 0
    summary = json.loads((out / "summary.json").read_text())
    for numbers in summary.values():
        projection = numbers["projection"]
        assert projection["machine"] == table.machine
        assert 0 < projection["geo_latency_s"] <= projection["geo_final_latency_s"]
        assert projection["geo_final_latency_s"] <= projection["geo_reply_s"]
        assert set(projection) >= {"speedup_vs_constrained", "speedup_vs_jump_forward"}
    assert summary["constrained"]["projection"]["speedup_vs_constrained"] == pytest.approx(1.0)
    assert "PROJECTION on " + table.machine in result.stdout
    assert "PROJECTED" in (out / "summary.svg").read_text()
    run = json.loads((out / "run.json").read_text())
    assert run["cost_model"]["file"] == str(COSTS)
    assert run["cost_model"]["table"]["pass_ms"]["1"] == pytest.approx(35.3)
    peak = max(numbers["peak_rss_bytes"] for numbers in summary.values())
    assert run["max_rss_bytes"] >= 0.5 * peak  # in bytes; the kernel's mark may trail a sample


def test_a_run_without_a_cost_model_projects_nothing(bench_run):
    _, out = bench_run
    for record in results(out):
        assert all(record[key] is None for key in PROJECTED_KEYS)
    assert json.loads((out / "run.json").read_text())["cost_model"] is None
    summary = json.loads((out / "summary.json").read_text())
    assert all(numbers["projection"] is None for numbers in summary.values())
    # the stock peer's passes are one row each
    peer = [r for r in results(out) if r["strategy"] == "llama_cpp_python"]
    assert all(r["pass_rows"] == {"1": r["forward_passes"]} for r in peer)


def test_a_cost_model_gives_its_plan_to_every_decoder_whose_passes_it_shapes():
    from weavehost.bench.runner import _decoders
    from weavehost.engine.calibrate import load_cost_table

    names = ("constrained", "jump_forward", "weave", "weave:no_drafts")
    state = DecodeState()
    decoders = _decoders(names, state, load_cost_table(COSTS))
    assert list(decoders) == list(names)  # each made once for the run, on the model's state
    assert all(d._state is state for d in decoders.values())
    shaped = [decoders[name] for name in names[1:]]
    assert all(d._plan.source == f"bench --cost-model {COSTS}" for d in shaped)
    assert decoders["constrained"]._plan is None  # one row a pass: nothing to shape


def test_every_decoder_s_line_accounts_for_its_call_s_time_in_parts_that_add_up(woven_run):
    from weavehost.bench.account import ACCOUNT_PARTS

    _, out = woven_run
    for record in results(out):
        account = record["account"]
        assert all(account[key] >= 0 for key in ACCOUNT_PARTS), record["strategy"]
        assert sum(account[key] for key in ACCOUNT_PARTS) == pytest.approx(account["total_s"])
        # The span is the reply's, whose passes forward_passes counts: it ends after the final
        # call (the decision that no call follows).
        assert record["final_latency_s"] <= account["total_s"]
        assert account["passes"] == record["forward_passes"]
        assert 0 < account["passes_s"] <= account["total_s"]
        # Every constrained decoder computes masks; no calibration in the tests' cache: no split.
        assert account["masks"] > 0 and account["mask_s"] > 0
        assert account["rows_s"] is None and account["logits_rows_s"] is None
        if record["strategy"] != "weave":
            assert account["selector_s"] == 0.0
    summary = json.loads((out / "summary.json").read_text())
    assert all(summary[name]["account"]["n"] == 2 for name in WOVEN)


def test_a_stock_peer_keeps_no_account_and_the_table_shows_the_decoders(bench_run):
    result, out = bench_run
    accounts = {r["strategy"]: r["account"] for r in results(out)}
    assert accounts["llama_cpp_python"] is None
    assert accounts["serial"]["mask_s"] == 0.0 and accounts["serial"]["masks"] == 0
    assert "selector ms" in result.output
    account_lines = [line.split()[0] for line in result.output.splitlines() if "  call  " in line]
    assert account_lines == ["serial"]
