"""BFCL's AST-checker rules, ported, on real BFCL answer lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from weavehost.bench.answers import check_calls, standardize_string
from weavehost.bench.cases import AnswerSet, load_answers, load_cases
from weavehost.formats.base import ToolCall

DATA = Path(__file__).parent / "data"
CASES = {case.id: case for case in load_cases(DATA / "bfcl_sample.jsonl")}
ANSWERS = load_answers(DATA / "bfcl_sample_answers.jsonl")


def judge(case_id: str, *calls: ToolCall) -> bool:
    return check_calls(CASES[case_id].functions, list(calls), ANSWERS[case_id]).valid


def triangle(**arguments) -> ToolCall:
    return ToolCall("calculate_triangle_area", arguments)


def test_the_expected_call_is_accepted():
    assert judge("simple_python_0", triangle(base=10, height=5, unit="units"))


def test_an_optional_parameter_whose_answers_include_empty_may_be_omitted():
    assert judge("simple_python_0", triangle(base=10, height=5))


def test_a_wrong_function_name_is_rejected():
    wrong = ToolCall("calculate_circle_area", {"base": 10, "height": 5})
    assert not judge("simple_python_0", wrong)


def test_a_wrong_value_is_rejected():
    assert not judge("simple_python_0", triangle(base=11, height=5))


def test_a_missing_required_parameter_is_rejected():
    assert not judge("simple_python_0", triangle(base=10))


def test_an_unknown_parameter_is_rejected():
    assert not judge("simple_python_0", triangle(base=10, height=5, colour="red"))


def test_strings_are_compared_after_bfcl_standardisation():
    assert standardize_string("Bluebird H.S-_*^/, 'x'") == 'bluebirdhs"x"'
    assert judge("simple_python_0", triangle(base=10, height=5, unit="U-N.I_TS"))
    assert not judge("simple_python_0", triangle(base=10, height=5, unit="meters"))


def test_an_int_is_accepted_for_a_float_parameter_but_not_a_string():
    good = {"acceleration": 4, "distance": 300}
    name = "kinematics.final_velocity_from_distance"
    assert judge("simple_python_30", ToolCall(name, {**good, "initial_velocity": 0}))
    assert judge("simple_python_30", ToolCall(name, {**good, "initial_velocity": 0.0}))
    assert not judge("simple_python_30", ToolCall(name, {**good, "initial_velocity": "0"}))


def test_a_float_is_not_accepted_for_an_integer_parameter():
    assert not judge("simple_python_1", ToolCall("math.factorial", {"number": 5.0}))
    assert judge("simple_python_1", ToolCall("math.factorial", {"number": 5}))


def test_a_boolean_parameter_takes_no_integer():
    sides = {"side1": 5, "side2": 4, "side3": 3}
    assert judge("multiple_0", ToolCall("triangle_properties.get", {**sides, "get_area": True}))
    assert not judge("multiple_0", ToolCall("triangle_properties.get", {**sides, "get_area": 1}))


def test_in_a_multiple_case_only_the_expected_tool_is_right():
    assert judge(
        "multiple_5",
        ToolCall(
            "weather.get_by_coordinates_date",
            {"coordinates": [46.603354, 1.888334], "date": "2019-12-13"},
        ),
    )
    assert not judge(
        "multiple_5",
        ToolCall("weather.get_forecast_by_coordinates", {"coordinates": [46.603354, 1.888334]}),
    )


def test_tuples_compare_as_ordered_lists():
    right = {"coord1": [33.4484, -112.074], "coord2": [34.0522, -118.2437], "unit": "miles"}
    assert judge("simple_python_83", ToolCall("calculate_distance", right))
    swapped = {**right, "coord1": [-112.074, 33.4484]}
    assert not judge("simple_python_83", ToolCall("calculate_distance", swapped))


def test_a_dict_value_is_checked_key_by_key():
    base = {"database_name": "StudentDB", "table_name": "students"}
    ok = {**base, "conditions": {"department": "science", "school": "Bluebird HS"}}
    assert judge("simple_python_89", ToolCall("db_fetch_records", ok))
    wrong = {**base, "conditions": {"department": "Science", "school": "Greenfield"}}
    assert not judge("simple_python_89", ToolCall("db_fetch_records", wrong))
    extra = {**base, "conditions": {"department": "Science", "school": "Bluebird HS", "year": 2}}
    assert not judge("simple_python_89", ToolCall("db_fetch_records", extra))


def test_an_any_parameter_accepts_its_answer():
    call = ToolCall("random_forest.train", {"n_estimators": 100, "max_depth": 5, "data": "my_data"})
    assert judge("simple_python_109", call)


def test_the_number_of_calls_must_match():
    assert not judge("simple_python_1")
    call = ToolCall("math.factorial", {"number": 5})
    assert not judge("simple_python_1", call, call)


def test_parallel_answers_match_in_any_order():
    answers = AnswerSet(
        "p", ({"math.factorial": {"number": [5]}}, {"math.factorial": {"number": [6]}})
    )
    functions = CASES["simple_python_1"].functions
    five, six = ToolCall("math.factorial", {"number": 5}), ToolCall("math.factorial", {"number": 6})
    assert check_calls(functions, [six, five], answers).valid
    assert not check_calls(functions, [five, five], answers).valid


@pytest.mark.parametrize("case_id", sorted(ANSWERS))
def test_every_sample_answer_accepts_its_own_first_choices(case_id):
    ((name, params),) = ANSWERS[case_id].ground_truth[0].items()
    arguments = {}
    for key, accepted in params.items():
        if accepted[0] == "":
            continue
        value = accepted[0]
        if isinstance(value, dict):  # a dict answer lists accepted values per key
            value = {k: v[0] for k, v in value.items() if v[0] != ""}
        arguments[key] = value
    assert judge(case_id, ToolCall(name, arguments))
