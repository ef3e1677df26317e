"""Breakdowns by case shape, latency spread and KV memory in the benchmark summary; the engine's
count of KV cells in use, against llama.cpp's own."""

from __future__ import annotations

import ctypes
import functools
import json
import struct
from pathlib import Path

import pytest

from weavehost.bench.breakdown import (
    ARG_COUNT_BUCKETS,
    VALUE_TYPES,
    VERBATIM_BUCKETS,
    breakdowns,
    by_arg_count_from_calls,
    case_shape,
    is_verbatim,
    load_run,
)
from weavehost.bench.cases import AnswerSet, parse_case
from weavehost.bench.report import SUMMARY_KEYS, format_table, spread, summarize
from weavehost.bench.rss import kv_bytes_per_cell
from weavehost.bench.runner import BenchConfig, run_bench
from weavehost.decode import STRATEGIES, run_case
from weavehost.decode.padding import DecodePlan
from weavehost.decode.weave import WeaveStrategy
from weavehost.engine.passes import KvCells, Row
from weavehost.errors import BenchError
from weavehost.formats import FORMATS
from weavehost.gguf import GGUFMetadata, read_metadata

DATA = Path(__file__).parent / "data"

# One tool with a parameter of every kind the breakdown tells apart (BFCL spellings).
TOOL = {
    "name": "book",
    "description": "Book something.",
    "parameters": {
        "type": "dict",
        "properties": {
            "city": {"type": "string"},
            "nights": {"type": "integer"},
            "price": {"type": "float"},
            "pets": {"type": "boolean"},
            "room": {"type": "string", "enum": ["single", "double"]},
            "guests": {"type": "array", "items": {"type": "string"}},
            "budget": {"type": "dict", "properties": {"min": {"type": "integer"}}},
            "anything": {"type": "any"},
            "note": {"type": "string"},
        },
        "required": ["city"],
    },
}


def make_case(case_id: str, request: str, tool: dict | None = None):
    record = {
        "id": case_id,
        "question": [[{"role": "user", "content": request}]],
        "function": [tool or TOOL],
    }
    return parse_case(record, "test")


def answer(case_id: str, *calls: dict) -> AnswerSet:
    return AnswerSet(case_id, tuple(calls))


def args_of(shape):
    return {a["name"]: (a["type"], a["verbatim"]) for a in shape["args"]}


# -- case_shape ----------------------------------------------------------------------------------


def test_the_shape_is_the_first_accepted_value_of_each_argument_with_optional_blanks_absent():
    case = make_case("c", "Book Paris for 3 nights")
    truth = answer("c", {"book": {"city": ["Paris", "paris"], "nights": [3], "note": ["", "x"]}})
    shape = case_shape(case, truth, None)
    assert shape["n_args"] == 2
    assert args_of(shape) == {"city": ("string", True), "nights": ("number", True)}


def test_types_come_from_the_schema_with_integer_as_number_and_enum_before_type():
    case = make_case("c", "anything")
    truth = answer(
        "c",
        {
            "book": {
                "city": ["Rome"],
                "nights": [2],
                "price": [9.5],
                "pets": [True],
                "room": ["double"],
                "guests": [["Ann", "Bo"]],
                "budget": [{"min": [100]}],
            }
        },
    )
    types = {name: kind for name, (kind, _) in args_of(case_shape(case, truth, None)).items()}
    assert types == {
        "city": "string",
        "nights": "number",
        "price": "number",
        "pets": "boolean",
        "room": "enum",
        "guests": "array",
        "budget": "object",
    }


def test_a_parameter_without_a_schema_type_is_typed_by_its_value():
    case = make_case("c", "x")
    fallback = [{"name": "book", "arguments": {"anything": [1, 2], "undeclared": 4}}]
    types = {name: kind for name, (kind, _) in args_of(case_shape(case, None, fallback)).items()}
    assert types == {"anything": "array", "undeclared": "number"}


@pytest.mark.parametrize(
    ("value", "text", "expected"),
    [
        ("Paris", "fly to PARIS tomorrow", True),
        ("San Francisco", "from SF to LA", False),
        (5, "a radius of 5 units", True),
        (5, "a radius of 15 units", False),
        (5, "a radius of 5.5 units", False),
        (5.0, "a radius of 5 units", True),
        (0.05, "an interest rate of 5%", False),
        (True, "avoid the tolls", False),
        (True, "set verbose to true", True),
        (["Ann", "Bo"], "guests: ann and bo", True),
        (["Ann", "Cy"], "guests: ann and bo", False),
        ({"min": 100, "max": 200}, "between 100 and 200", True),
        ({"min": 100, "max": 300}, "between 100 and 200", False),
    ],
)
def test_verbatim_means_the_value_s_text_is_in_the_request(value, text, expected):
    assert is_verbatim(value, text) is expected


def test_a_dict_answer_takes_the_first_accepted_value_of_each_key():
    case = make_case("c", "a budget from 100 up")
    truth = answer("c", {"book": {"city": [""], "budget": [{"min": [100, 90], "max": ["", 5]}]}})
    shape = case_shape(case, truth, None)
    # city is required: its "" stays (as an empty string); budget is {"min": 100}, verbatim
    assert args_of(shape)["budget"] == ("object", True)
    assert shape["n_args"] == 2


def test_a_several_call_case_counts_the_arguments_of_every_call():
    case = make_case("c", "Paris and Rome")
    truth = answer("c", {"book": {"city": ["Paris"]}}, {"book": {"city": ["Rome"], "nights": [2]}})
    assert case_shape(case, truth, None)["n_args"] == 3


def test_without_an_answer_the_shape_is_the_fallback_calls():
    case = make_case("c", "Paris please")
    calls = [{"name": "book", "arguments": {"city": "Paris", "pets": False}}]
    shape = case_shape(case, None, calls)
    assert args_of(shape) == {"city": ("string", True), "pets": ("boolean", False)}


# -- breakdowns ----------------------------------------------------------------------------------


def line(case_id, strategy, tool, *, correct=None, calls=None, phases=None, **extra):
    return {
        "id": case_id,
        "strategy": strategy,
        "calls": calls if calls is not None else [{"name": "book", "arguments": {}}],
        "tool_latency_s": tool,
        "final_latency_s": tool,
        "forward_passes": 10,
        "correct": correct,
        "phases": phases or {},
        **extra,
    }


@pytest.fixture
def shaped():
    """Four cases of 1, 2, 3 and 5 arguments; the third has a derived value."""
    cases = [
        make_case("one", "Book Paris"),
        make_case("two", "Book Paris for 3 nights"),
        make_case("three", "Book Paris for three nights with pets"),
        make_case("five", "Book Rome, 2 nights, 80 euros, a double room, guests Ann"),
    ]
    answers = {
        "one": answer("one", {"book": {"city": ["Paris"]}}),
        "two": answer("two", {"book": {"city": ["Paris"], "nights": [3]}}),
        "three": answer("three", {"book": {"city": ["Paris"], "nights": [3], "pets": [True]}}),
        "five": answer(
            "five",
            {
                "book": {
                    "city": ["Rome"],
                    "nights": [2],
                    "price": [80.0],
                    "room": ["double"],
                    "guests": [["Ann"]],
                }
            },
        ),
    }
    records = []
    for case_id, base in (("one", 0.4), ("two", 0.8), ("three", 1.2), ("five", 2.0)):
        records.append(line(case_id, "constrained", base, correct=True, phases={"a": 0.1}))
        records.append(
            line(case_id, "weave", base / 2, correct=case_id != "three", phases={"b": 0.2})
        )
    return records, cases, answers


def test_cases_are_bucketed_by_argument_count_with_the_speedup_inside_each_bucket(shaped):
    records, cases, answers = shaped
    weave = breakdowns(records, cases, answers)["weave"]["by_arg_count"]
    assert list(weave) == list(ARG_COUNT_BUCKETS)
    assert [weave[k]["n"] for k in ARG_COUNT_BUCKETS] == [1, 1, 1, 1]
    for numbers in weave.values():
        assert set(numbers) == set(SUMMARY_KEYS)
        assert numbers["speedup_vs_constrained"] == pytest.approx(2.0)
    assert weave["3"]["correct_rate"] == 0.0 and weave["4+"]["correct_rate"] == 1.0
    assert weave["4+"]["geo_tool_latency_s"] == pytest.approx(1.0)


def test_a_case_counts_once_in_each_value_type_it_has(shaped):
    records, cases, answers = shaped
    by_type = breakdowns(records, cases, answers)["constrained"]["by_value_type"]
    assert list(by_type) == list(VALUE_TYPES)
    assert {k: v["n"] for k, v in by_type.items()} == {
        "string": 4,
        "number": 3,  # nights and price of "five" count it once
        "boolean": 1,
        "enum": 1,
        "array": 1,
        "object": 0,
    }
    assert by_type["object"]["geo_tool_latency_s"] is None


def test_cases_are_verbatim_derived_or_mixed_by_their_values(shaped):
    records, cases, answers = shaped
    by_verbatim = breakdowns(records, cases, answers)["weave"]["by_verbatim"]
    assert list(by_verbatim) == list(VERBATIM_BUCKETS)
    # "three nights" is not "3", and "pets" is not "true": that case is mixed.
    assert {k: v["n"] for k, v in by_verbatim.items()} == {"verbatim": 3, "derived": 0, "mixed": 1}


def test_phases_are_averaged_per_strategy(shaped):
    records, cases, answers = shaped
    result = breakdowns(records, cases, answers)
    assert result["weave"]["by_phase"] == {"b": {"mean_s": pytest.approx(0.2), "n": 4}}
    assert result["constrained"]["by_phase"] == {"a": {"mean_s": pytest.approx(0.1), "n": 4}}


def test_without_answers_every_strategy_is_bucketed_by_constrained_s_calls():
    cases = [make_case("c", "Book Paris for 3 nights")]
    constrained_calls = [{"name": "book", "arguments": {"city": "Paris", "nights": 3}}]
    own_calls = [{"name": "book", "arguments": {"city": "Paris"}}]
    records = [
        line("c", "constrained", 1.0, calls=constrained_calls),
        line("c", "weave", 0.5, calls=own_calls),
    ]
    weave = breakdowns(records, cases, None)["weave"]["by_arg_count"]
    assert weave["2"]["n"] == 1 and weave["1"]["n"] == 0
    alone = breakdowns([line("c", "serial", 0.5, calls=own_calls)], cases, None)
    assert alone["serial"]["by_arg_count"]["1"]["n"] == 1


def test_without_the_cases_a_line_is_counted_by_constrained_s_calls_else_by_its_own():
    constrained_calls = [{"name": "book", "arguments": {"city": "Paris", "nights": 3}}]
    own_calls = [{"name": "book", "arguments": {"city": "Paris"}}]
    records = [
        line("c", "constrained", 1.0, calls=constrained_calls),
        line("c", "weave", 0.5, calls=own_calls),
        line("d", "constrained", 1.0, calls=[]),  # wrote no call: each line counts its own
        line("d", "weave", 0.25, calls=own_calls),
    ]
    counted = by_arg_count_from_calls(records)
    weave, constrained = counted["weave"], counted["constrained"]
    assert list(weave) == list(ARG_COUNT_BUCKETS)
    assert weave["2"]["n"] == 1 and weave["2"]["speedup_vs_constrained"] == pytest.approx(2.0)
    assert weave["1"]["n"] == 1 and weave["1"]["speedup_vs_constrained"] == pytest.approx(4.0)
    assert constrained["0"]["n"] == 1 and constrained["2"]["n"] == 1
    cases = [make_case("c", "Book Paris for 3 nights"), make_case("d", "Book Paris")]
    with_cases = breakdowns(records, cases, None)
    assert counted == {name: found["by_arg_count"] for name, found in with_cases.items()}


def test_a_case_without_arguments_has_a_zero_bucket_and_no_verbatim_bucket():
    cases = [make_case("c", "hello")]
    result = breakdowns([line("c", "weave", 0.5)], cases, {"c": answer("c", {"book": {}})})
    weave = result["weave"]
    assert list(weave["by_arg_count"]) == ["0", *ARG_COUNT_BUCKETS]
    assert weave["by_arg_count"]["0"]["n"] == 1
    assert all(v["n"] == 0 for v in weave["by_verbatim"].values())


def test_a_line_of_an_unknown_case_is_left_out():
    cases = [make_case("c", "Paris")]
    records = [line("c", "weave", 0.5), line("other", "weave", 0.5)]
    result = breakdowns(records, cases, {"c": answer("c", {"book": {"city": ["Paris"]}})})
    assert sum(v["n"] for v in result["weave"]["by_arg_count"].values()) == 1


# -- the summary ---------------------------------------------------------------------------------


def test_the_summary_has_breakdowns_only_when_given_the_cases(shaped):
    records, cases, answers = shaped
    assert summarize(records)["weave"]["breakdowns"] is None
    summary = summarize(records, cases=cases, answers=answers)
    assert summary["weave"]["breakdowns"] == breakdowns(records, cases, answers)["weave"]


def test_spread_interpolates_between_the_closest_ranks_and_skips_missing_values():
    points = spread([4.0, None, 1.0, 3.0, 2.0, 5.0])
    assert points == {
        "p10": pytest.approx(1.4),
        "p25": pytest.approx(2.0),
        "p50": pytest.approx(3.0),
        "p75": pytest.approx(4.0),
        "p90": pytest.approx(4.6),
        "min": 1.0,
        "max": 5.0,
    }
    assert set(spread([None]).values()) == {None}


def test_the_latency_spread_covers_tool_and_final_latency():
    records = [line("a", "weave", 0.1), line("b", "weave", 0.3)]
    records[1]["final_latency_s"] = 0.5
    summary = summarize(records)["weave"]["latency_spread"]
    assert summary["tool"]["p50"] == pytest.approx(0.2)
    assert summary["final"]["max"] == pytest.approx(0.5)


def test_memory_gives_kv_cells_in_bytes_and_the_extra_megabytes_against_constrained():
    records = [
        line("a", "constrained", 1.0, kv_cells=300, peak_rss_bytes=10),
        line("b", "constrained", 1.0, kv_cells=500, peak_rss_bytes=12),
        line("a", "weave", 0.5, kv_cells=400, peak_rss_bytes=11),
        line("b", "weave", 0.5, kv_cells=500, peak_rss_bytes=11),
        line("c", "weave", 0.5, kv_cells=900),  # constrained has no line for c: not paired
    ]
    summary = summarize(records, kv_bytes_per_cell=20_000)
    weave, constrained = summary["weave"]["memory"], summary["constrained"]["memory"]
    assert weave["max_kv_cells"] == 900
    assert weave["mean_kv_cells"] == pytest.approx(600)
    assert weave["kv_bytes_per_cell"] == 20_000
    assert weave["mean_kv_bytes"] == pytest.approx(600 * 20_000)
    # (100 + 0) / 2 cells more than constrained on the same cases, at 20 kB a cell: 1 MB
    assert weave["extra_kv_mb_vs_constrained"] == pytest.approx(1.0)
    assert weave["max_extra_kv_mb_vs_constrained"] == pytest.approx(2.0)
    assert weave["peak_rss_bytes"] == 11
    assert constrained["extra_kv_mb_vs_constrained"] == 0.0
    unknown = summarize(records)["weave"]["memory"]
    assert unknown["max_kv_cells"] == 900 and unknown["mean_kv_bytes"] is None
    assert unknown["extra_kv_mb_vs_constrained"] is None


def test_the_table_shows_kv_megabytes_only_when_they_are_known():
    records = [line("a", "constrained", 1.0, kv_cells=500), line("a", "weave", 0.5, kv_cells=600)]
    table = format_table(summarize(records, kv_bytes_per_cell=10_000))
    assert "kv MB" in table
    assert "6.00" in table.splitlines()[3]  # weave: 600 cells of 10 kB
    assert "kv MB" not in format_table(summarize(records))


def test_kv_bytes_per_cell_is_layers_times_key_and_value_rows_in_the_cache_s_types():
    values = {
        "general.architecture": "llama",
        "llama.block_count": 30,
        "llama.embedding_length": 576,
        "llama.attention.head_count": 9,
        "llama.attention.head_count_kv": 3,
    }
    metadata = GGUFMetadata(Path("m.gguf"), 3, 0, values)
    row = 576 // 9 * 3  # a key's or a value's elements per layer: 192
    assert kv_bytes_per_cell(metadata, "f16") == 30 * row * 2 * 2
    # q8_0 keys: blocks of 32 elements in 34 bytes; f16 values.
    assert kv_bytes_per_cell(metadata, "q8_0-k") == 30 * (row // 32 * 34 + row * 2)
    assert kv_bytes_per_cell(metadata, "q8_0") == 30 * (row // 32 * 34) * 2
    without_heads = {k: v for k, v in values.items() if "head_count" not in k}
    assert kv_bytes_per_cell(GGUFMetadata(Path("m.gguf"), 3, 0, without_heads), "f16") is None


# -- load_run ------------------------------------------------------------------------------------


def test_a_run_folder_loads_back_with_its_cases_and_answers(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    records = [line("simple_python_0", "constrained", 1.0), line("simple_python_1", "weave", 1)]
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    run_info = {
        "cases": str(DATA / "bfcl_sample.jsonl"),
        "answers": str(DATA / "bfcl_sample_answers.jsonl"),
        "n_cases": 2,
    }
    (out / "run.json").write_text(json.dumps(run_info))
    loaded, info, cases, answers = load_run(out)
    assert loaded == records and info == run_info
    assert [c.id for c in cases] == ["simple_python_0", "simple_python_1"]
    assert answers is not None and "simple_python_0" in answers
    shape = breakdowns(loaded, cases, answers)
    assert shape["constrained"]["by_arg_count"]["3"]["n"] == 1  # base, height, unit


def test_a_run_folder_whose_case_file_is_gone_is_a_clear_error(tmp_path):
    (tmp_path / "results.jsonl").write_text("")
    (tmp_path / "run.json").write_text(json.dumps({"cases": str(tmp_path / "gone.jsonl")}))
    with pytest.raises(BenchError, match="gone.jsonl.*does not exist"):
        load_run(tmp_path)
    with pytest.raises(BenchError, match="not a folder"):
        load_run(tmp_path / "nothing")
    (tmp_path / "run.json").unlink()
    with pytest.raises(BenchError, match="run.json does not exist"):
        load_run(tmp_path)


# -- the engine's count of KV cells --------------------------------------------------------------


def test_forked_sequences_share_their_prefix_cells_and_a_cell_is_freed_with_its_last_holder():
    kv = KvCells()
    for _ in range(10):
        kv.add((0,))
    kv.copy(0, 1)
    kv.copy(0, 2)
    assert kv.in_use == 10
    kv.add((1,))
    kv.add((2,))
    kv.add((1, 2))  # one row of two sequences: one cell
    assert kv.in_use == 13 and kv.peak == 13
    kv.truncate(0, 4)  # the prefix 4..9 is still held by 1 and 2
    assert kv.in_use == 13
    kv.truncate(1, 0)
    kv.truncate(2, 0)
    assert kv.in_use == 4 and kv.peak == 13
    kv.reset_peak()
    assert kv.peak == 4
    kv.copy(0, 3)
    kv.copy(1, 3)  # a copy replaces what the target held
    assert kv.held(3) == 0 and kv.in_use == 4
    kv.resize(3, 2)
    assert kv.in_use == 6
    kv.clear()
    assert kv.in_use == 0 and kv.peak == 6


def llama_cells_in_use(engine) -> int:
    """llama.cpp's own count of occupied cells: the cell count in the header of the state of
    all sequences (seq_id -1): magic, seq_id, n_stream (1: a unified cache), cell_count."""
    import llama_cpp

    context = engine._native._context
    size = int(llama_cpp.llama_state_seq_get_size(context, -1))
    buffer = (ctypes.c_uint8 * size)()
    llama_cpp.llama_state_seq_get_data(context, buffer, size, -1)
    _magic, seq_id, n_stream, cells = struct.unpack_from("<iiII", bytes(buffer[:16]))
    assert (seq_id, n_stream) == (-1, 1)
    return cells


def llama_state_size(engine) -> int:
    import llama_cpp

    return int(llama_cpp.llama_state_seq_get_size(engine._native._context, -1))


def test_the_engine_counts_the_cells_llama_cpp_holds(fresh_engine):
    engine = fresh_engine
    engine.reset_kv_peak()
    engine.prefill(0, engine.tokenize("Find the area of a triangle with a base of 10 units."))
    prompt = engine.seq_len(0)
    assert engine.kv_cells == llama_cells_in_use(engine) == prompt
    engine.fork(0, 1)
    engine.fork(0, 2)
    assert engine.kv_cells == llama_cells_in_use(engine) == prompt
    engine.run_pass([Row(5, (1,)), Row(6, (2,)), Row(7, (0,), logits=True)])
    engine.run_pass([Row(8, (1, 2), logits=True)])  # one row of two sequences: one cell
    assert engine.kv_cells == llama_cells_in_use(engine) == prompt + 4
    engine.drop(0, 3)  # sequences 1 and 2 still hold the prompt
    assert engine.kv_cells == llama_cells_in_use(engine) == prompt + 3
    engine.drop(1)
    engine.drop(2)
    assert engine.kv_cells == llama_cells_in_use(engine) == 3
    assert engine.kv_cells_peak == prompt + 4
    engine.reset_kv_peak()
    assert engine.kv_cells_peak == 3
    engine.clear()
    assert engine.kv_cells == llama_cells_in_use(engine) == 0


def test_a_cell_holds_the_bytes_the_model_s_metadata_says(fresh_engine):
    engine = fresh_engine
    engine.prefill(0, engine.tokenize("Find the area of a triangle."))
    before = llama_state_size(engine)
    engine.decode_one(0, 5)
    # llama.cpp writes a cell as its K and V rows plus its position, its number of sequences
    # and its one sequence id (4 bytes each).
    cell = kv_bytes_per_cell(read_metadata(engine.path), engine.identity.kv_cache)
    assert llama_state_size(engine) - before == cell + 12


def test_the_count_agrees_with_llama_cpp_after_every_step_of_a_parallel_weave_call(
    fresh_engine, monkeypatch
):
    engine = fresh_engine
    seen: list[tuple[int, int]] = []
    steps: list[str] = []
    for name in ("run_pass", "fork", "drop"):
        original = getattr(engine, name)

        def checked(*args, _original=original, _name=name, **kwargs):
            out = _original(*args, **kwargs)
            steps.append(_name)
            seen.append((engine.kv_cells, llama_cells_in_use(engine)))
            return out

        monkeypatch.setattr(engine, name, checked)
    case = parse_case(json.loads((DATA / "bfcl_sample.jsonl").read_text().splitlines()[0]), "t")
    weave = WeaveStrategy(plan=DecodePlan({}))  # no table: values side by side
    engine.reset_kv_peak()
    outcome = run_case(engine, FORMATS["smollm2"], weave, case.messages, case.tools, max_tokens=48)
    assert "fork" in steps  # values were decoded side by side, on forks of sequence 0
    assert seen and all(ours == theirs for ours, theirs in seen), seen
    assert engine.kv_cells_peak == max(ours for ours, _ in seen)
    assert engine.kv_cells_peak > outcome.prompt_tokens


# -- a run ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def memory_run(embedded_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("memory")
    patch = pytest.MonkeyPatch()
    # Values side by side whatever this machine's calibration says.
    patch.setitem(STRATEGIES, "weave", functools.partial(WeaveStrategy, plan=DecodePlan({})))
    try:
        run = run_bench(
            BenchConfig(
                cases=DATA / "bfcl_sample.jsonl",
                answers=DATA / "bfcl_sample_answers.jsonl",
                out=out,
                model=str(embedded_model_path),
                strategies=("constrained", "weave", "llama_cpp_python"),
                limit=2,
                threads=1,
                n_ctx=2048,
                max_tokens=48,
            ),
            progress=lambda _line: None,
        )
    finally:
        patch.undo()
    return run, out


def test_every_line_counts_the_kv_cells_of_its_call_prompt_included(memory_run):
    _, out = memory_run
    lines = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 6
    for record in lines:
        assert record["kv_cells"] > record["prompt_tokens"]
        if record["strategy"] == "llama_cpp_python":  # one sequence: the prompt and its tokens
            assert record["kv_cells"] == record["prompt_tokens"] + record["decoded_tokens"]
    by = {(r["id"], r["strategy"]): r for r in lines}
    # simple_python_0's two required values are decoded side by side (passes of 2 rows); the
    # value sequences are dropped before the write-back, so the most cells at once are at least
    # constrained's (one sequence ending with the same call), not fewer
    weave, constrained = by["simple_python_0", "weave"], by["simple_python_0", "constrained"]
    assert weave["pass_rows"].get("2", 0) > 0 and weave["calls"] == constrained["calls"]
    assert weave["kv_cells"] >= constrained["kv_cells"]


def test_the_run_s_summary_has_breakdowns_spread_and_memory(memory_run):
    run, out = memory_run
    summary = json.loads((out / "summary.json").read_text())
    info = json.loads((out / "run.json").read_text())
    assert info["limit"] == 2 and Path(info["cases"]).is_absolute()
    # SmolLM2-135M in the default cache: 30 layers x (192 q8_0 keys + 192 f16 values)
    assert info["kv_bytes_per_cell"] == 30 * (192 // 32 * 34 + 192 * 2)
    for numbers in summary.values():
        assert set(numbers["breakdowns"]) == {
            "by_arg_count",
            "by_value_type",
            "by_verbatim",
            "by_phase",
        }
        assert sum(v["n"] for v in numbers["breakdowns"]["by_arg_count"].values()) == 2
        spread_ = numbers["latency_spread"]
        assert spread_["tool"]["min"] <= spread_["tool"]["p50"] <= spread_["tool"]["max"]
        memory = numbers["memory"]
        assert memory["kv_bytes_per_cell"] == info["kv_bytes_per_cell"]
        assert memory["mean_kv_bytes"] == pytest.approx(
            memory["mean_kv_cells"] * info["kv_bytes_per_cell"]
        )
        assert memory["peak_rss_bytes"] > 0
    assert (
        summary["weave"]["memory"]["max_kv_cells"]
        >= summary["constrained"]["memory"]["max_kv_cells"]
    )
    extra = summary["weave"]["memory"]["extra_kv_mb_vs_constrained"]
    assert extra >= 0 and summary["constrained"]["memory"]["extra_kv_mb_vs_constrained"] == 0
    # recomputed from the folder, the breakdowns are the same
    records, _, cases, answers = load_run(out)
    assert breakdowns(records, cases, answers) == {
        name: numbers["breakdowns"] for name, numbers in summary.items()
    }
    assert run.summary["weave"]["memory"] == summary["weave"]["memory"]
