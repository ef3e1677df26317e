"""BFCL case and answer loading, and the normalisation of BFCL's schema spellings."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from weavehost.bench.cases import load_answers, load_cases, normalize_bfcl_schema
from weavehost.errors import BenchError

DATA = Path(__file__).parent / "data"
SAMPLE = DATA / "bfcl_sample.jsonl"
ANSWERS = DATA / "bfcl_sample_answers.jsonl"


def _by_id() -> dict:
    return {case.id: case for case in load_cases(SAMPLE)}


def _params(case_id: str, tool: int = 0) -> dict:
    return dict(_by_id()[case_id].tools[tool].parameters)


def test_real_bfcl_lines_load_in_file_order_with_their_conversation():
    cases = load_cases(SAMPLE)
    assert [c.id for c in cases][:3] == ["simple_python_0", "simple_python_1", "simple_python_83"]
    assert len(cases) == 10
    first = cases[0]
    assert first.messages == (
        {
            "role": "user",
            "content": "Find the area of a triangle with a base of 10 units and height of 5 units.",
        },
    )
    assert [t.name for t in first.tools] == ["calculate_triangle_area"]


def test_limit_keeps_only_the_first_cases():
    assert [c.id for c in load_cases(SAMPLE, limit=2)] == ["simple_python_0", "simple_python_1"]


def test_a_case_keeps_its_raw_bfcl_functions_for_the_checker():
    case = _by_id()["simple_python_83"]
    assert case.functions[0]["parameters"]["type"] == "dict"
    assert case.functions[0]["parameters"]["properties"]["coord1"]["type"] == "tuple"


def test_dict_parameters_become_json_schema_objects():
    params = _params("simple_python_1")
    assert params["type"] == "object"
    assert params["properties"]["number"] == {
        "type": "integer",
        "description": "The number for which factorial needs to be calculated.",
    }
    assert params["required"] == ["number"]


def test_tuple_of_floats_becomes_an_array_of_numbers():
    coord = _params("simple_python_83")["properties"]["coord1"]
    assert coord["type"] == "array"
    assert coord["items"] == {"type": "number"}


def test_a_nested_dict_becomes_an_object_with_its_properties_normalised():
    conditions = _params("simple_python_89")["properties"]["conditions"]
    assert conditions["type"] == "object"
    assert conditions["properties"]["school"]["type"] == "string"


def test_any_loses_its_type_and_constrains_nothing():
    data = _params("simple_python_109")["properties"]["data"]
    assert "type" not in data
    assert data["description"] == "The training data for the model."


def test_optional_true_properties_are_not_required_and_the_flag_is_dropped():
    params = _params("multiple_0")
    assert params["required"] == ["side1", "side2", "side3"]
    assert "optional" not in params["properties"]["get_area"]
    assert params["properties"]["get_area"]["default"] is True


def test_a_top_level_optional_list_is_dropped():
    params = _params("simple_python_128")
    assert "optional" not in params
    assert params["required"] == ["total_payout", "outstanding_shares"]


def test_format_and_bounds_are_kept():
    params = _by_id()["multiple_5"].tools[0].parameters
    assert params["properties"]["date"]["format"] == "date"


def test_float_becomes_number():
    assert _params("simple_python_30")["properties"]["initial_velocity"]["type"] == "number"


def test_normalisation_handles_unions_nested_items_and_stray_required_names():
    schema = {
        "type": "dict",
        "properties": {
            "a": {"type": ["integer", "float"]},
            "b": {"type": ["string", "any"]},
            "c": {
                "type": "array",
                "items": {"type": "dict", "properties": {"x": {"type": "float"}}},
            },
        },
        "required": ["a", "ghost"],
    }
    original = copy.deepcopy(schema)
    out = normalize_bfcl_schema(schema)
    assert out["properties"]["a"]["type"] == ["integer", "number"]
    assert "type" not in out["properties"]["b"]
    assert out["properties"]["c"]["items"]["type"] == "object"
    assert out["properties"]["c"]["items"]["properties"]["x"]["type"] == "number"
    assert out["required"] == ["a"]
    assert schema == original


def test_answers_load_by_id():
    answers = load_answers(ANSWERS)
    assert answers["simple_python_0"].ground_truth == (
        {"calculate_triangle_area": {"base": [10], "height": [5], "unit": ["units", ""]}},
    )


def _write(tmp_path: Path, lines: list[str]) -> Path:
    path = tmp_path / "cases.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _good_line(case_id: str = "c1") -> str:
    return json.dumps(
        {
            "id": case_id,
            "question": [[{"role": "user", "content": "hi"}]],
            "function": [
                {"name": "f", "description": "", "parameters": {"type": "dict", "properties": {}}}
            ],
        }
    )


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"id": "c2", "question": [[{"role": "user", "content": "x"}]]}), "'function'"),
        (json.dumps({"id": "c2", "question": "hello", "function": [{"name": "f"}]}), "'question'"),
        (
            json.dumps({"id": "c2", "question": [[{"role": "user"}]], "function": [{"name": "f"}]}),
            "'role' and 'content'",
        ),
        (
            json.dumps(
                {
                    "id": "c2",
                    "question": [[{"role": "user", "content": "x"}]],
                    "function": [{"description": "no name"}],
                }
            ),
            "'name'",
        ),
        (
            json.dumps(
                {"question": [[{"role": "user", "content": "x"}]], "function": [{"name": "f"}]}
            ),
            "'id'",
        ),
    ],
)
def test_a_bad_line_is_a_bench_error_naming_file_and_line(tmp_path, bad_line, message):
    path = _write(tmp_path, [_good_line(), bad_line])
    with pytest.raises(BenchError, match=message) as caught:
        load_cases(path)
    assert f"{path}:2" in str(caught.value)


def test_a_repeated_case_id_names_both_lines(tmp_path):
    path = _write(tmp_path, [_good_line("same"), _good_line("same")])
    with pytest.raises(BenchError, match=r":2: case id 'same' already used on line 1"):
        load_cases(path)


def test_a_missing_or_empty_case_file_is_a_bench_error(tmp_path):
    with pytest.raises(BenchError, match="does not exist"):
        load_cases(tmp_path / "nope.jsonl")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    with pytest.raises(BenchError, match="holds no case"):
        load_cases(empty)


def test_a_bad_answer_line_is_a_bench_error_naming_file_and_line(tmp_path):
    path = tmp_path / "answers.jsonl"
    path.write_text(
        json.dumps({"id": "a", "ground_truth": [{"f": {"x": [1]}}]})
        + "\n"
        + json.dumps({"id": "b", "ground_truth": [{"f": {"x": 1}}]})
        + "\n",
        encoding="utf-8",
    )
    with pytest.raises(BenchError, match=rf"{path}:2: accepted values of f.x must be a list"):
        load_answers(path)


def test_an_invalid_bfcl_schema_is_a_bench_error_naming_the_function():
    with pytest.raises(BenchError, match="broken_tool"):
        normalize_bfcl_schema({"type": "dict", "properties": {"x": {"type": 5}}}, "broken_tool")


# ------------------------------------------------------------------ parallel categories

PARALLEL = DATA / "bfcl_parallel_sample.jsonl"
PARALLEL_ANSWERS = DATA / "bfcl_parallel_sample_answers.jsonl"


def test_parallel_and_parallel_multiple_lines_load_with_several_calls_in_their_answers():
    cases = {case.id: case for case in load_cases(PARALLEL)}
    answers = load_answers(PARALLEL_ANSWERS)
    assert sorted(cases) == sorted(answers)
    assert [t.name for t in cases["parallel_0"].tools] == ["spotify.play"]
    assert len(cases["parallel_multiple_1"].tools) > 1  # several tools on offer
    assert cases["parallel_0"].messages[-1]["content"].startswith("Play songs from")
    assert all(len(answer.ground_truth) == 2 for answer in answers.values())
    assert answers["parallel_multiple_0"].ground_truth[1] == {
        "math_toolkit.product_of_primes": {"count": [5]}
    }
