"""The Android-intents benchmark set: its size and mix, its answers against the real server's
schemas, BFCL's checker and the server itself, and its files in the cache."""

from __future__ import annotations

import json
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import anyio
import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from tools import android
from weavehost.bench import assets
from weavehost.bench.android_intents import TODAY, Intent
from weavehost.bench.android_set import (
    ANSWERS_FILE,
    CASES_FILE,
    KINDS,
    SET_SIZE,
    android_set_bytes,
    android_tools,
    build_android_set,
    canonical_call,
    format_stats,
    main,
    set_stats,
)
from weavehost.bench.answers import check_calls, standardize_string
from weavehost.bench.cases import AnswerSet, load_answers, load_cases
from weavehost.errors import BenchError
from weavehost.formats.base import ToolCall

CASES, ANSWERS = build_android_set()
CATEGORIES = {"alarms", "timers", "messages", "calls", "calendar", "contacts", "apps",
              "settings", "battery", "volume", "location", "search"}  # fmt: skip


def truth(index: int) -> tuple[str, dict[str, list[Any]]]:
    ((tool, accepted),) = ANSWERS[index]["ground_truth"][0].items()
    return tool, accepted


def function_of(case: dict[str, Any], tool: str) -> dict[str, Any]:
    return next(f for f in case["function"] if f["name"] == tool)


async def listed_schemas() -> dict[str, dict[str, Any]]:
    async with Client(android.build_server()) as client:
        with anyio.fail_after(5):
            return {t.name: t.input_schema for t in (await client.list_tools()).tools}


# --------------------------------------------------------------------------- size and mix


def test_the_set_holds_at_least_150_cases_and_exactly_its_declared_size() -> None:
    assert len(CASES) == len(ANSWERS) == SET_SIZE >= 150
    assert CASES_FILE == f"android-{SET_SIZE}.jsonl" and ANSWERS_FILE.endswith("-answers.jsonl")


def test_ids_are_unique_and_answers_follow_the_cases_in_order() -> None:
    ids = [case["id"] for case in CASES]
    assert ids == [f"android_{i}" for i in range(len(CASES))]
    assert [answer["id"] for answer in ANSWERS] == ids


@pytest.mark.anyio
async def test_every_tool_of_the_android_server_is_called_by_at_least_three_cases() -> None:
    names = set(await listed_schemas())
    called = Counter(truth(i)[0] for i in range(len(CASES)))
    assert "set_timer" in names
    assert set(called) == names
    assert min(called.values()) >= 3


def test_every_category_of_the_issue_has_cases() -> None:
    assert {case["meta"]["category"] for case in CASES} == CATEGORIES


def test_every_kind_of_the_mix_occurs_at_least_thirty_times() -> None:
    kinds = Counter(kind for case in CASES for kind in case["meta"]["kind"])
    assert set(kinds) == set(KINDS)
    assert min(kinds.values()) >= 30, kinds


def test_one_tool_and_three_to_five_tools_on_offer_both_occur_and_multi_tool_says_which() -> None:
    offered = Counter(len(case["function"]) for case in CASES)
    assert set(offered) == {1, 3, 4, 5} and offered[1] >= 50
    for case in CASES:
        names = [f["name"] for f in case["function"]]
        assert len(set(names)) == len(names) and case["meta"]["tool"] in names
        assert case["meta"]["offered"] == len(names)
        assert ("multi_tool" in case["meta"]["kind"]) == (len(names) > 1)


def test_the_first_twenty_cases_mix_tools_kinds_and_offers() -> None:
    first = CASES[:20]
    assert len({case["meta"]["tool"] for case in first}) >= 10
    assert {len(case["function"]) > 1 for case in first} == {True, False}
    assert {"verbatim", "conversion", "enum", "optional"} <= {
        kind for case in first for kind in case["meta"]["kind"]
    }


def test_optional_arguments_are_both_set_and_left_out() -> None:
    state = Counter()
    for index, case in enumerate(CASES):
        tool, accepted = truth(index)
        required = function_of(case, tool)["parameters"].get("required", [])
        for name, values in accepted.items():
            if name not in required:
                state["left out" if values[0] == "" else "set"] += 1
    assert state["set"] >= 40 and state["left out"] >= 100


def test_relative_dates_come_with_the_date_they_are_read_against() -> None:
    relative = [c for c in CASES if c["meta"]["template"] == "calendar_relative"]
    assert relative
    for case in relative:
        (turn,) = case["question"]
        assert turn[0] == {"role": "system", "content": TODAY}
        assert turn[1]["role"] == "user"


# --------------------------------------------------------------------------- schemas and answers


@pytest.mark.anyio
async def test_the_offered_tools_are_the_servers_own_schemas_unchanged() -> None:
    schemas = await listed_schemas()
    for case in CASES:
        for function in case["function"]:
            assert function["parameters"] == schemas[function["name"]]
    toggle = schemas["toggle_setting"]["properties"]["setting"]
    assert toggle["enum"] == ["wifi", "bluetooth", "airplane_mode", "flashlight", "do_not_disturb"]


def test_every_accepted_value_validates_against_its_parameter_schema() -> None:
    for index, case in enumerate(CASES):
        tool, accepted = truth(index)
        parameters = function_of(case, tool)["parameters"]
        assert set(accepted) == set(parameters["properties"]), case["id"]
        for name, values in accepted.items():
            validator = Draft202012Validator(parameters["properties"][name])
            for value in values:
                if value == "":
                    assert name not in parameters.get("required", []), (case["id"], name)
                else:
                    assert validator.is_valid(value), (case["id"], name, value)
        assert Draft202012Validator(parameters).is_valid(canonical_call(accepted)), case["id"]


def test_building_twice_gives_identical_bytes() -> None:
    first = android_set_bytes()
    assert android_set_bytes() == first
    assert first[0].count(b"\n") == first[1].count(b"\n") == SET_SIZE


def wrong_values(schema: dict[str, Any]) -> list[Any]:
    """Values of the parameter's type that a request of this set never asks for."""
    kind = schema["type"]
    if kind == "boolean":
        return [True, False]
    if kind == "integer":
        return [schema.get("minimum", 0) + 1, schema.get("maximum", 100) - 1, 13, 14]
    if kind == "string":
        return [*schema.get("enum", []), "something else entirely"]
    items = schema["items"]
    return [list(reversed(items["enum"]))] if "enum" in items else [["stranger@example.org"]]


def is_accepted(value: Any, accepted: list[Any]) -> bool:
    if isinstance(value, str):
        return standardize_string(value) in [standardize_string(a) for a in accepted]
    return value in accepted and not (value == [] and "" in accepted)


def test_bfcls_checker_accepts_every_ground_truth_call_and_refuses_each_wrong_value() -> None:
    anything_goes = []
    names = [f["name"] for f in android_tools()]
    for index, case in enumerate(CASES):
        tool, accepted = truth(index)
        answer = AnswerSet(case["id"], tuple(ANSWERS[index]["ground_truth"]))
        good = canonical_call(accepted)
        assert check_calls(case["function"], [ToolCall(tool, good)], answer).valid, case["id"]
        properties = function_of(case, tool)["parameters"]["properties"]
        for name, values in accepted.items():
            wrong = [v for v in wrong_values(properties[name]) if not is_accepted(v, values)]
            if not wrong:
                anything_goes.append((case["meta"]["template"], name))
            for value in wrong[:1]:
                verdict = check_calls(
                    case["function"], [ToolCall(tool, {**good, name: value})], answer
                )
                assert not verdict.valid, (case["id"], name, value)
        other = next(name for name in names if name != tool)
        assert not check_calls(case["function"], [ToolCall(other, good)], answer).valid
    # Only a plain look-up takes its one flag either way (ANY_DETAIL); every other argument of
    # every case has a wrong value.
    assert Counter(anything_goes) == {("battery", "detailed"): 4, ("location", "precise"): 3}


@pytest.mark.anyio
async def test_every_ground_truth_call_runs_on_the_real_android_server_without_a_tool_error() -> (
    None
):
    device = android.Device()
    async with Client(android.build_server(device)) as client:
        with anyio.fail_after(30):
            for index, case in enumerate(CASES):
                tool, accepted = truth(index)
                result = await client.call_tool(tool, canonical_call(accepted))
                assert not result.is_error, (case["id"], result.content)
    assert len(device.timers) == sum(truth(i)[0] == "set_timer" for i in range(len(CASES)))
    assert device.foreground_app in android.APPS


@pytest.mark.anyio
async def test_a_timer_counts_down_on_the_fake_device_and_refuses_zero_seconds() -> None:
    device = android.Device()
    async with Client(android.build_server(device)) as client:
        with anyio.fail_after(5):
            done = await client.call_tool("set_timer", {"duration_seconds": 150, "label": "tea"})
            zero = await client.call_tool("set_timer", {"duration_seconds": 0})
            listed = {t.name: t for t in (await client.list_tools()).tools}
    assert done.content[0].text == "timer 1 set for 2:30 (tea)"
    assert device.timers == [{"id": 1, "seconds": 150, "label": "tea"}]
    assert zero.is_error
    assert listed["set_timer"].annotations.read_only_hint is False
    assert listed["set_timer"].input_schema["required"] == ["duration_seconds"]


# --------------------------------------------------------------------------- build errors


def one(tool: str, accepted: dict[str, list[Any]], text: str = "Do it.") -> dict[str, list]:
    return {"t": [Intent("t", "alarms", tool, text, accepted, ("verbatim",))]}


@pytest.mark.parametrize(
    ("templates", "message"),
    [
        (one("set_alarm", {"hour": [25], "minute": [0]}), r"hour=25 breaks its schema"),
        (one("set_alarm", {"hour": [7]}), r"no answer for the required 'minute'"),
        (one("set_alarm", {"hour": ["", 7], "minute": [0]}), r"required 'hour' may not be left"),
        (one("set_alarm", {"hour": [7], "minute": [0], "snooze": [5]}), r"no parameter 'snooze'"),
        (one("set_alarm", {"hour": [7], "minute": [0], "days": [["someday"]]}), r"days="),
        (one("set_volume", {"level": [3], "stream": ["bass"]}), r"stream='bass' breaks"),
        (one("fly_drone", {}), r"no tool 'fly_drone'"),
        (
            {"a": one("get_battery_status", {}, "Same.")["t"] * 2},
            r"the same request is in 't'",
        ),
    ],
)
def test_a_bad_intent_is_a_build_error_naming_it_not_a_silent_drop(
    templates: dict[str, list[Intent]], message: str
) -> None:
    with pytest.raises(BenchError, match=message):
        build_android_set(android_tools(), templates)


def test_a_set_that_leaves_a_tool_uncalled_is_refused() -> None:
    with pytest.raises(BenchError, match=r"no case calls .*set_timer"):
        build_android_set(android_tools(), one("set_alarm", {"hour": [7], "minute": [0]}))


# --------------------------------------------------------------------------- files and CLI


def test_the_written_files_read_back_with_the_bfcl_loaders(tmp_path: Path) -> None:
    written = assets.ensure_android_set(tmp_path)
    assert written == (tmp_path / CASES_FILE, tmp_path / ANSWERS_FILE)
    cases, answers = load_cases(written[0]), load_answers(written[1])
    assert [case.id for case in cases] == [case["id"] for case in CASES]
    assert set(answers) == {case.id for case in cases}
    volume = next(t for c in cases for t in c.tools if t.name == "set_volume")
    assert volume.parameters["properties"]["stream"]["enum"] == ["media", "ring", "alarm"]
    assert volume.parameters["properties"]["level"]["type"] == "integer"
    assert volume.parameters["required"] == ["level"]
    assert cases[0].messages[-1]["content"] == CASES[0]["question"][0][-1]["content"]


def test_a_second_run_writes_nothing_and_a_changed_file_is_rebuilt(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cases_path, _ = assets.ensure_android_set(tmp_path)
    original = cases_path.read_bytes()
    writes: list[Path] = []
    real = assets._write_atomically
    monkeypatch.setattr(assets, "_write_atomically", lambda p, c: (writes.append(p), real(p, c)))
    assets.ensure_android_set(tmp_path)
    assert writes == []
    cases_path.write_text("stale\n")
    assets.ensure_android_set(tmp_path)
    assert writes == [cases_path] and cases_path.read_bytes() == original


def test_the_assets_command_writes_the_set_and_records_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = Path(__file__).parent / "data"
    for name in assets.BFCL_FILES:  # as if fetched: nothing is downloaded
        answers = tmp_path / "bfcl" / "possible_answer" / name
        answers.parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "bfcl" / name).write_text((data / "bfcl_sample.jsonl").read_text())
        answers.write_text((data / "bfcl_sample_answers.jsonl").read_text())
    monkeypatch.setattr(assets, "_pip_download", lambda spec, dest: pytest.fail(spec))
    made = assets.ensure_assets(tmp_path, model=False)
    assert made.android_cases == tmp_path / CASES_FILE
    record = json.loads((tmp_path / "assets.json").read_text())
    assert record["android"] == {
        "cases": str(tmp_path / CASES_FILE),
        "answers": str(tmp_path / ANSWERS_FILE),
    }
    assert (tmp_path / CASES_FILE).read_bytes() == android_set_bytes()[0]


def test_the_stats_command_prints_the_counts_as_markdown(capsys: pytest.CaptureFixture) -> None:
    assert main(["--stats"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{SET_SIZE} cases (android-{SET_SIZE}).")
    assert "| set_timer |" in out and "| multi_tool |" in out


def test_the_templates_are_dealt_round_robin() -> None:
    templates = [case["meta"]["template"] for case in CASES[:20]]
    assert all(a != b for a, b in pairwise(templates))


def test_the_counts_in_docs_android_set_md_are_the_scripts() -> None:
    doc = (Path(__file__).resolve().parents[1] / "docs" / "android-set.md").read_text()
    assert format_stats(set_stats(CASES, ANSWERS), len(CASES)) in doc
