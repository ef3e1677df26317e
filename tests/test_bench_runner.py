"""``weavehost bench`` end to end on the embedded model, the stock peer's grammar, and the
strategy list."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from weavehost.bench.cli import bench
from weavehost.bench.peer import call_frame, call_grammar
from weavehost.bench.report import SUMMARY_KEYS
from weavehost.bench.runner import RESULT_FIELDS, known_strategies, parse_strategies
from weavehost.decode import STRATEGIES
from weavehost.decode.base import ToolSchema
from weavehost.errors import BenchError, FormatError
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
    assert json.loads((out / "run.json").read_text())["format"] == "smollm2"
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


def test_known_strategies_are_the_decoders_and_the_peer():
    assert known_strategies() == [*STRATEGIES, "llama_cpp_python"]
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
