"""``weavehost bench-agent``: the task file, the measures read from events, the scoring, the runner.

The runner's tests drive real stdio servers from ``tools/`` with the scripted model; one runs the
embedded SmolLM2 end to end (marked ``model``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from weavehost.agent import Event
from weavehost.bench.agent import (
    AgentBenchConfig,
    parse_agent_strategies,
    plan_variants,
    run_agent_bench,
)
from weavehost.bench.agent_report import judge_turn, summarize_agent, trace_turn
from weavehost.bench.agent_tasks import SHIPPED_TASKS, AgentTask, AgentTurn, load_tasks
from weavehost.cli import main
from weavehost.errors import BenchError
from weavehost.formats import ToolCall
from weavehost.testing.model import ScriptedCall, ScriptedModel

PARIS = ToolCall("get_current_weather", {"city": "Paris"})
PARIS_CALL = {"name": PARIS.name, "arguments": dict(PARIS.arguments)}
PARIS_UNITS_CALL = {"name": PARIS.name, "arguments": {"city": "Paris", "units": "metric"}}
PARIS_RESULT = "Paris: partly cloudy, -2.9 C"  # tools/weather.py's fake data for Paris
WEATHER_FUNCTIONS = [
    {
        "name": "get_current_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "units": {"type": "string", "enum": ["metric", "imperial"]},
            },
            "required": ["city"],
        },
    }
]


def write_tasks(path: Path, *tasks: dict[str, Any] | str) -> Path:
    lines = [t if isinstance(t, str) else json.dumps(t) for t in tasks]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def weather_task(task_id: str, user: str, city: str, facts: list[str]) -> dict[str, Any]:
    return {
        "id": task_id,
        "servers": ["weather.py"],
        "user": user,
        "calls": [{"get_current_weather": {"city": [city], "units": ["metric", ""]}}],
        "facts": facts,
        "tags": ["single"],
    }


# --------------------------------------------------------------------------- the task file


def test_the_shipped_tasks_load_and_cover_every_kind_over_the_three_servers() -> None:
    tasks = load_tasks(SHIPPED_TASKS)
    assert len(tasks) >= 40
    tags = {tag for task in tasks for tag in task.tags}
    assert {"single", "multi_call", "follow_up", "no_tool"} <= tags
    servers = " ".join(server for task in tasks for server in task.servers)
    for script in ("weather.py", "android.py", "files.py"):
        assert script in servers
    assert any(len(task.turns) > 1 for task in tasks)
    assert any(not turn.calls for task in tasks for turn in task.turns)
    assert all(task.approval == "always" for task in tasks)


def test_the_first_ten_shipped_tasks_sample_every_kind() -> None:
    first = load_tasks(SHIPPED_TASKS)[:10]
    tags = {tag for task in first for tag in task.tags}
    assert {"weather", "android", "files", "multi_call", "follow_up", "no_tool"} <= tags


def test_a_line_that_is_not_json_is_refused_with_its_line_number(tmp_path: Path) -> None:
    path = write_tasks(tmp_path / "t.jsonl", weather_task("a", "Paris?", "Paris", []), "{oops")
    with pytest.raises(BenchError, match=r"t\.jsonl:2: not JSON"):
        load_tasks(path)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"servers": ["nowhere.py"]}, r":1 \(a\): server 'nowhere.py': no such Python file"),
        ({"trust": ["android"]}, r"trust 'android': no such server \(have: weather\)"),
        ({"approval": "ask"}, r"'approval' must be one of always, never"),
        ({"fatcs": ["x"]}, r"unknown key 'fatcs'; did you mean 'facts'\?"),
        ({"calls": [{"get_current_weather": {"city": "Paris"}}]}, r"non-empty list of accepted"),
        ({"turns": [{"user": "hi"}]}, r"either 'turns' or 'user'/'calls'/'facts'"),
    ],
)
def test_a_malformed_task_is_refused_with_its_line_and_what_is_wrong(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = write_tasks(tmp_path / "t.jsonl", {**weather_task("a", "Paris?", "Paris", []), **change})
    with pytest.raises(BenchError, match=message):
        load_tasks(path)


def test_servers_are_found_beside_the_task_file_and_fixtures_are_substituted(
    tmp_path: Path,
) -> None:
    (tmp_path / "mine.py").write_text("print('a server')\n", encoding="utf-8")
    path = write_tasks(
        tmp_path / "t.jsonl",
        {"id": "a", "servers": ["mine.py", "files.py {fixtures}"], "user": "hi", "calls": []},
    )
    (task,) = load_tasks(path)
    assert task.servers[0] == str((tmp_path / "mine.py").resolve())
    assert task.servers[1].endswith("agent_files")
    assert task.trust == ("mine", "files")  # every server of the task, by Host's names


def test_an_unknown_strategy_is_a_config_error_naming_the_known_ones() -> None:
    with pytest.raises(BenchError, match="unknown strategy 'fast'; known strategies: .*weave"):
        parse_agent_strategies("weave,fast")


def test_variants_are_every_strategy_with_every_prompt_cache_setting_asked_for() -> None:
    both = plan_variants(["weave", "constrained"], "both")
    assert [v.label for v in both] == [
        "weave cache=off",
        "weave cache=on",
        "constrained cache=off",
        "constrained cache=on",
    ]
    assert [v.label for v in plan_variants(["weave"], "on")] == ["weave cache=on"]


def test_bad_input_on_the_command_line_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    path = write_tasks(tmp_path / "t.jsonl", "[1, 2]")
    runner = CliRunner()
    result = runner.invoke(main, ["bench-agent", str(path), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"Error: {path}:1: a task is a JSON object, got list"
    ]
    result = runner.invoke(main, ["bench-agent", "--strategies", "fast", "--out", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.startswith("Error: unknown strategy 'fast'")


# --------------------------------------------------------------------------- measures and scores


def test_the_first_tool_start_is_the_provisional_start_when_the_provisional_result_is_used() -> (
    None
):
    trace = trace_turn(
        [
            (0.0, Event("step", {"step": 1})),
            (0.8, Event("provisional_call", {**PARIS_CALL, "started": True})),
            (1.3, Event("final_call", PARIS_CALL)),
            (
                1.4,
                Event(
                    "tool_result",
                    {"name": PARIS.name, "arguments": {"city": "Paris"}, "source": "provisional"},
                ),
            ),  # fmt: skip
            (1.5, Event("step", {"step": 2})),
            (2.0, Event("text", {"text": "It is -2.9 C."})),
            (2.5, Event("done", {"stop": "answer", "steps": 2})),
        ]
    )
    assert trace.first_tool_s == 0.8
    assert trace.answer_s == 2.5
    assert trace.answer == "It is -2.9 C."
    assert trace.sources == ("provisional",)


def test_the_first_tool_start_is_the_final_call_when_the_provisional_run_was_replaced() -> None:
    trace = trace_turn(
        [
            (0.0, Event("step", {"step": 1})),
            (0.8, Event("provisional_call", {**PARIS_CALL, "started": True})),
            (1.3, Event("final_call", {**PARIS_UNITS_CALL, "replaced": True})),
            (1.9, Event("tool_result", {**PARIS_UNITS_CALL, "source": "final"})),
            (2.5, Event("done", {"stop": "answer", "steps": 2})),
        ]
    )
    assert trace.first_tool_s == 1.3


def test_with_two_calls_in_a_step_the_first_tool_start_is_the_first_calls_own_start() -> None:
    oslo = {"name": PARIS.name, "arguments": {"city": "Oslo"}}
    trace = trace_turn(
        [
            (0.0, Event("step", {"step": 1})),
            (1.0, Event("provisional_call", {**PARIS_CALL, "started": True})),
            (2.0, Event("provisional_call", {**oslo, "started": True})),
            (2.5, Event("final_call", PARIS_CALL)),
            (2.6, Event("final_call", oslo)),
            (2.7, Event("tool_result", {**PARIS_CALL, "source": "provisional"})),
            (2.8, Event("tool_result", {**oslo, "source": "provisional"})),
            (3.0, Event("done", {"stop": "answer", "steps": 1})),
        ]
    )
    assert trace.first_tool_s == 1.0


def test_a_turn_without_a_tool_has_no_first_tool_start_and_its_whole_text_is_the_answer() -> None:
    trace = trace_turn(
        [
            (0.0, Event("step", {"step": 1})),
            (0.5, Event("text", {"text": "Four"})),
            (0.6, Event("text", {"text": "."})),
            (0.7, Event("done", {"stop": "answer", "steps": 1})),
        ]
    )
    assert (trace.first_tool_s, trace.answer_s, trace.answer) == (None, 0.7, "Four.")


def test_an_argument_the_task_does_not_name_is_not_judged_but_a_named_one_is() -> None:
    turn = AgentTurn("Paris?", calls=({"get_current_weather": {"city": ["Paris"]}},))
    arguments = {"city": "paris", "units": "imperial"}
    loose = trace_turn(
        [
            (
                1.0,
                Event(
                    "tool_result", {"name": PARIS.name, "source": "final", "arguments": arguments}
                ),
            ),
            (2.0, Event("done", {"stop": "answer"})),
        ]
    )
    assert judge_turn(turn, loose, WEATHER_FUNCTIONS)["success"]
    named = {"city": ["Paris"], "units": ["metric", ""]}
    strict = AgentTurn("Paris?", calls=({"get_current_weather": named},))
    judged = judge_turn(strict, loose, WEATHER_FUNCTIONS)
    assert not judged["success"] and "units" in judged["calls_error"]


@pytest.mark.parametrize(
    ("user", "result", "answer", "foreign"),
    [
        (
            "Weather in Paris?",
            "Paris: sunny",
            "抱歉，我无法协助完成这个请求。",
            ["Han", "CJK punctuation"],
        ),
        ("Weather in Paris?", "Paris: sunny", "Paris: sunny, 20 °C.", []),  # Latin, a symbol
        ("Погода в Москве?", "Москва: ясно", "В Москве ясно.", []),  # the user's own script
        ("Weather in Tokyo?", "東京: 晴れ", "東京 is sunny (晴れ).", []),  # the result's script
    ],
)
def test_an_answer_in_a_script_neither_the_user_nor_a_result_wrote_is_counted(
    user: str, result: str, answer: str, foreign: list[str]
) -> None:
    trace = trace_turn(
        [
            (1.0, Event("tool_result", {**PARIS_CALL, "source": "final", "text": result})),
            (1.5, Event("text", {"text": answer})),
            (2.0, Event("done", {"stop": "answer"})),
        ]
    )
    judged = judge_turn(AgentTurn(user), trace, WEATHER_FUNCTIONS)
    assert judged["foreign_scripts"] == foreign
    record = {"variant": "weave", "success": False, "tags": [], "turns": [judged]}
    summary = summarize_agent([record], ["weave"])
    assert summary["variants"]["weave"]["foreign_script_answers"] == int(bool(foreign))


def test_the_summary_rates_success_and_takes_geometric_means_over_tasks() -> None:
    records = [
        {"variant": "weave", "success": True, "first_tool_s": 1.0, "answer_s": 4.0,
         "tool_results": 1, "provisional_results": 1, "tags": ["single"], "turns": []},
        {"variant": "weave", "success": False, "first_tool_s": 4.0, "answer_s": 9.0,
         "tool_results": 1, "provisional_results": 0, "tags": ["single"], "turns": []},
    ]  # fmt: skip
    summary = summarize_agent(records, ["weave"])
    numbers = summary["variants"]["weave"]
    assert (numbers["tasks"], numbers["success_rate"]) == (2, 0.5)
    assert numbers["geo_first_tool_s"] == pytest.approx(2.0)
    assert numbers["geo_answer_s"] == pytest.approx(6.0)
    assert summary["by_tag"] == {"single": {"weave": {"n": 2, "success": 1}}}


# --------------------------------------------------------------------------- the runner


SCRIPTS: dict[str, list[str | ScriptedCall]] = {
    # Right call (started provisionally on the trusted server), the fact restated: a success.
    "right": [ScriptedCall(final=PARIS, provisional=PARIS), f"It is {PARIS_RESULT}."],
    # The wrong city: the call runs, the check fails.
    "wrong": [ScriptedCall(final=ToolCall("get_current_weather", {"city": "Lyon"})), "Done."],
    # No tool needed and none called: a success.
    "none": ["2 plus 2 is 4."],
}


def scripted(task: AgentTask, strategy: str) -> ScriptedModel:
    return ScriptedModel(list(SCRIPTS[task.id]))


def test_the_runner_scores_success_failure_and_the_no_tool_case_and_times_them(
    tmp_path: Path,
) -> None:
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        weather_task("right", "What is the weather in Paris?", "Paris", ["-2.9"]),
        weather_task("wrong", "What is the weather in Paris?", "Paris", []),
        {"id": "none", "servers": ["weather.py"], "user": "What is 2 plus 2?", "calls": [],
         "facts": ["4"], "tags": ["no_tool"]},
    )  # fmt: skip
    config = AgentBenchConfig(
        tasks=tasks, out=tmp_path / "out", strategies=("weave",), prompt_cache="off"
    )
    lines: list[str] = []
    run = run_agent_bench(config, progress=lines.append, make_model=scripted)

    records = {r["id"]: r for r in map(json.loads, run.results.read_text().splitlines())}
    assert (records["right"]["success"], records["wrong"]["success"]) == (True, False)
    assert records["none"]["success"] is True
    assert records["wrong"]["turns"][0]["calls_error"]
    right = records["right"]
    assert right["provisional_results"] == 1 == right["tool_results"]
    assert 0 < right["first_tool_s"] < right["answer_s"]
    assert records["none"]["first_tool_s"] is None and records["none"]["answer_s"] > 0
    summary = json.loads(run.summary_json.read_text())
    (label,) = summary["variants"]
    assert summary["variants"][label]["succeeded"] == 2
    assert summary["by_tag"]["no_tool"][label] == {"n": 1, "success": 1}
    # One progress line a task (a busy-machine warning may come first: it depends on the load).
    task_lines = [line for line in lines if line.startswith("[")]
    assert len(task_lines) == 3 and "right: ok" in task_lines[0]
    assert "2/3" in run.table


@pytest.mark.model
def test_a_run_on_the_embedded_model_writes_its_results_and_summary(tmp_path: Path) -> None:
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        weather_task("paris", "What is the weather in Paris?", "Paris", ["-2.9"]),
    )
    config = AgentBenchConfig(
        tasks=tasks,
        out=tmp_path / "out",
        strategies=("weave",),
        prompt_cache="off",
        threads=2,
        n_ctx=2048,
    )
    run = run_agent_bench(config)

    (record,) = map(json.loads, run.results.read_text().splitlines())
    assert record["error"] is None, record["error"]
    assert record["turns"][0]["calls"], (
        "the model wrote no call (SmolLM2: the message names the weather tool)"
    )
    assert record["answer_s"] > 0
    summary = json.loads(run.summary_json.read_text())
    assert summary["setup"]["format"] == "smollm2"
    assert summary["variants"][record["variant"]]["tasks"] == 1
