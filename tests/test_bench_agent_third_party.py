"""The ``third-party`` task set of ``weavehost bench-agent``: tasks over mcp-server-time,
mcp-server-git and server-filesystem, checked against the real servers (found as
tests/third_party.py says), without a model.

Each task's expected calls are valid against the tools the real servers list, succeed when
called directly under the task's own approval, and give the task's facts; each call a task is
built to fail on fails with the server's own error. A scripted run of the bench over a few of
them writes results labelled apart from the 51 over the example servers."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import itertools
import json
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import pytest
from click.testing import CliRunner

from tests.third_party import FILESYSTEM, GIT, TIME, filesystem_command, git_command, time_command
from weavehost.agent import Event
from weavehost.bench import agent_third_party
from weavehost.bench.agent import AgentBenchConfig, run_agent_bench
from weavehost.bench.agent_report import judge_turn, trace_turn
from weavehost.bench.agent_tasks import (
    RECOVERABLE,
    SHIPPED_TASKS,
    THIRD_PARTY_TASKS,
    AgentTask,
    AgentTurn,
    bind_task,
    load_tasks,
    task_set_of,
)
from weavehost.bench.agent_third_party import COMMITS, build_repository, fixtures
from weavehost.cli import main
from weavehost.errors import BenchError
from weavehost.host import Host
from weavehost.testing.model import ScriptedModel, call

IDS = [json.loads(line)["id"] for line in THIRD_PARTY_TASKS.read_text().splitlines() if line]
BOUND_S = 120  # a task's servers started (node, two Python servers) and its calls, on 2 busy cores


@pytest.fixture
def servers(monkeypatch: pytest.MonkeyPatch) -> None:
    """The three servers named in their variables, as tests/third_party.py finds them."""
    for variable, command in ((TIME, time_command()), (GIT, git_command()),
                              (FILESYSTEM, filesystem_command())):  # fmt: skip
        monkeypatch.setenv(variable, command)


@pytest.fixture
def tasks(servers: None) -> dict[str, AgentTask]:
    return {task.id: task for task in load_tasks(THIRD_PARTY_TASKS)}


# --------------------------------------------------------------------------- the task file


def test_the_third_party_tasks_load_and_cover_every_kind_over_the_three_servers(
    tasks: dict[str, AgentTask],
) -> None:
    assert len(tasks) >= 20
    tags = {tag for task in tasks.values() for tag in task.tags}
    assert {"single", "follow_up", "no_tool", "tool_error", "multi_call"} <= tags
    assert {"time", "git", "filesystem"} <= tags
    for task in tasks.values():
        assert task.approval == "never", "only the trusted servers' read-only tools may run"
        if "follow_up" in task.tags:  # a new entity, answered from a new call
            assert len(task.turns) > 1 and all(turn.calls for turn in task.turns)
        if "tool_error" in task.tags:
            assert any(turn.fails for turn in task.turns), task.id
        if "no_tool" in task.tags:
            assert all(not turn.calls and turn.facts for turn in task.turns)
    # --limit 10 samples every kind and every server
    first = {tag for task in list(tasks.values())[:10] for tag in task.tags}
    assert first == tags


def test_the_sets_are_named_so_the_two_are_never_reported_together(tmp_path: Path) -> None:
    assert task_set_of(SHIPPED_TASKS) == "examples"
    assert task_set_of(THIRD_PARTY_TASKS) == "third-party"
    assert task_set_of(tmp_path / "mine.jsonl") == "custom"


def test_a_task_s_fixtures_are_filled_in_its_servers_words_accepted_values_and_facts(
    tasks: dict[str, AgentTask],
) -> None:
    task = tasks["git-last-commit-message"]
    assert task.fixtures == {"repo"}
    bound = bind_task(task, {"repo": "/tmp/a b"})
    assert bound.servers[0].endswith("--repository '/tmp/a b'")
    (turn,) = bound.turns
    assert "/tmp/a b" in turn.user
    assert turn.calls == ({"git_log": {"repo_path": ["/tmp/a b"]}},)
    assert tasks["time-error-mumbai"].fixtures == set()


def test_the_fixture_repository_is_the_same_every_time(tmp_path: Path) -> None:
    heads = []
    for name in ("one", "two"):
        root = build_repository(tmp_path / name)
        git = ["git", "-C", str(root)]
        heads.append(subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True,
                                    text=True, check=True).stdout)  # fmt: skip
        status = subprocess.run([*git, "status", "--porcelain"], capture_output=True,
                                text=True, check=True).stdout  # fmt: skip
        assert status.splitlines() == [" M care.md", "?? ideas.txt"]
    assert heads[0] == heads[1]
    log = subprocess.run([*git, "log", "--format=%an|%aI|%s"], capture_output=True, text=True,
                         check=True).stdout.splitlines()  # fmt: skip
    assert log == [f"{c.author}|{c.date}|{c.message}" for c in reversed(COMMITS)]


# --------------------------------------------------------------------------- against the servers


def _tried_arguments(expected: Mapping[str, list[Any]]) -> Iterator[dict[str, Any]]:
    """The call with each argument's first accepted value, then each other accepted value of
    each argument in turn (``""``: left out)."""
    first = {name: values[0] for name, values in expected.items()}
    yield {k: v for k, v in first.items() if v != ""}
    for name, values in expected.items():
        for value in values[1:]:
            yield {k: v for k, v in {**first, name: value}.items() if v != ""}


async def _call(host: Host, name: str, arguments: dict[str, Any]) -> Mapping[str, Any]:
    results = [e.data async for e in host.call(name, arguments) if e.type == "tool_result"]
    (result,) = results
    return result


async def _check_task(task: AgentTask) -> list[str]:
    """Every expected call of every turn, checked: valid against the server's schema, runs
    under the task's approval, and the turn's facts are in its results; every call the turn
    is built to fail on fails with the server's own error. What went wrong, as lines."""
    problems: list[str] = []
    async with Host(servers=list(task.servers), trust=list(task.trust), approval=task.approval,
                    load_model=False) as host:  # fmt: skip
        assert host.catalog is not None
        schemas = {spec.qualified_name: spec.schema_dict() for spec in host.catalog}
        for number, turn in enumerate(task.turns, start=1):
            texts: list[str] = []
            for expected, must_fail in itertools.chain(
                ((c, False) for c in turn.calls), ((c, True) for c in turn.fails)
            ):
                ((name, accepted),) = expected.items()
                if name not in schemas:
                    problems.append(f"turn {number}: {name}: no such tool")
                    continue
                for arguments in _tried_arguments(accepted):
                    try:
                        jsonschema.validate(arguments, schemas[name])
                    except jsonschema.ValidationError as exc:
                        problems.append(f"turn {number}: {name}{arguments}: {exc.message}")
                        continue
                    result = await _call(host, name, arguments)
                    if must_fail and result["status"] != "tool_error":
                        problems.append(f"turn {number}: {name}{arguments} did not fail: "
                                        f"{result['status']}")  # fmt: skip
                    elif not must_fail and result["status"] != "ok":
                        problems.append(f"turn {number}: {name}{arguments}: {result['status']}: "
                                        f"{result['text']}")  # fmt: skip
                    if not must_fail:
                        texts.append(result["text"])
            found = "\n".join(texts).lower()
            missing = [fact for fact in turn.facts if turn.calls and fact.lower() not in found]
            if missing:
                problems.append(f"turn {number}: facts {missing} not in the results: {texts}")
    return problems


@pytest.mark.parametrize("task_id", IDS)
def test_each_task_s_calls_are_valid_run_on_the_real_server_and_give_its_facts(
    tasks: dict[str, AgentTask], task_id: str
) -> None:
    task = tasks[task_id]

    async def check() -> list[str]:
        with anyio.fail_after(BOUND_S), fixtures(task.fixtures) as folders:
            return await _check_task(bind_task(task, folders))

    assert anyio.run(check) == []


# --------------------------------------------------------------------------- scoring a failed call


def _trace(*results: tuple[str, str]) -> Any:
    events = [
        (float(i), Event("tool_result", {"name": "convert_time", "status": status,
                                         "arguments": {"source_timezone": zone}}))
        for i, (zone, status) in enumerate(results)
    ]  # fmt: skip
    return trace_turn([*events, (9.0, Event("text", {"text": "12:30"})), (9.5, Event("done", {}))])


CONVERT = [{"name": "convert_time",
            "parameters": {"type": "object", "properties": {"source_timezone": {"type": "string"}},
                           "required": ["source_timezone"]}}]  # fmt: skip
KOLKATA = {"convert_time": {"source_timezone": ["Asia/Kolkata"]}}
MUMBAI = {"convert_time": {"source_timezone": ["Asia/Mumbai"]}}


def test_a_failed_call_corrected_after_it_is_not_judged_in_a_turn_built_to_fail_first() -> None:
    trace = _trace(("Asia/Mumbai", "tool_error"), ("Asia/Kolkata", "ok"))
    built = AgentTurn("It is 09:00 in Mumbai…", calls=(KOLKATA,), facts=("12:30",), fails=(MUMBAI,))
    judged = judge_turn(built, trace, CONVERT)
    assert judged["success"] and judged["statuses"] == ["tool_error", "ok"]
    # elsewhere (the 51) a failed call still counts, as it always did
    plain = AgentTurn("It is 09:00 in Mumbai…", calls=(KOLKATA,), facts=("12:30",))
    assert not judge_turn(plain, trace, CONVERT)["success"]
    # a call refused for want of approval is a wrong choice, not an error to recover from
    assert "denied" not in RECOVERABLE
    denied = _trace(("Asia/Mumbai", "denied"), ("Asia/Kolkata", "ok"))
    assert not judge_turn(built, denied, CONVERT)["success"]


# --------------------------------------------------------------------------- the bench


def _script(task: AgentTask, strategy: str) -> ScriptedModel:
    """The right calls for the task (with its fixtures filled in), then the facts."""
    steps: list[Any] = []
    if task.id == "time-error-mumbai-gives-up":
        return ScriptedModel([call("convert_time", source_timezone="Asia/Mumbai", time="09:00",
                                   target_timezone="Asia/Tokyo"), "There is no such zone."])  # fmt: skip
    for turn in task.turns:
        for expected in [*turn.fails, *turn.calls]:
            ((name, accepted),) = expected.items()
            steps.append(call(name, **{k: v[0] for k, v in accepted.items()}))
        steps.append("Here it is: " + ", ".join(turn.facts) + ".")
    return ScriptedModel(steps)


def test_a_scripted_run_of_the_third_party_set_is_labelled_apart_from_the_51(
    servers: None, tmp_path: Path
) -> None:
    config = AgentBenchConfig(tasks=THIRD_PARTY_TASKS, out=tmp_path / "out", strategies=("weave",),
                              prompt_cache="off", limit=3)  # fmt: skip
    run = run_agent_bench(config, make_model=_script)

    records = [json.loads(line) for line in run.results.read_text().splitlines()]
    assert [r["id"] for r in records] == IDS[:3]
    assert {r["set"] for r in records} == {"third-party"}
    assert all(r["success"] and r["error"] is None for r in records), records
    summary = json.loads(run.summary_json.read_text())
    assert summary["set"] == "third-party"
    assert summary["by_tag"].keys() >= {"time", "git", "filesystem"}
    assert run.table.splitlines()[0] == "task set: third-party"


def test_a_run_s_variants_of_a_task_see_its_fixtures_at_the_same_paths_made_fresh_each_time(
    servers: None, tmp_path: Path
) -> None:
    lines = [line for line in THIRD_PARTY_TASKS.read_text().splitlines() if '"{repo}"' in line]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(lines[0] + "\n")
    config = AgentBenchConfig(tasks=tasks, out=tmp_path / "out", strategies=("weave",),
                              prompt_cache="both")  # fmt: skip
    run = run_agent_bench(config, make_model=_script)
    records = [json.loads(line) for line in run.results.read_text().splitlines()]
    calls = [json.dumps(r["turns"][0]["calls"]) for r in records]
    assert len(records) == 2 and "weavehost-tasks-" in calls[0]
    assert calls[0] == calls[1]  # the same path in both variants: their answers compare
    assert all(r["success"] for r in records), records
    with fixtures({"repo"}, tmp_path) as first:
        (Path(first["repo"]) / "left-over.txt").write_text("from the first variant")
    with fixtures({"repo"}, tmp_path) as second:
        assert second == first and not (Path(second["repo"]) / "left-over.txt").exists()
    assert not Path(first["repo"]).exists()  # removed on exit


def test_two_runs_given_one_fixtures_dir_show_the_model_the_same_paths_and_leave_it_empty(
    servers: None, tmp_path: Path
) -> None:
    lines = [line for line in THIRD_PARTY_TASKS.read_text().splitlines() if '"{repo}"' in line]
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(lines[0] + "\n")
    chosen = tmp_path / "fixtures"
    calls = []
    for run_index in range(2):
        config = AgentBenchConfig(tasks=tasks, out=tmp_path / f"out{run_index}",
                                  strategies=("weave",), prompt_cache="off",
                                  fixtures_dir=chosen)  # fmt: skip
        run = run_agent_bench(config, make_model=_script)
        (record,) = [json.loads(line) for line in run.results.read_text().splitlines()]
        assert record["success"], record
        calls.append(json.dumps(record["turns"][0]["calls"]))
    assert str(chosen.resolve()) in calls[0] and calls[0] == calls[1]
    assert chosen.is_dir() and not any(chosen.iterdir())  # each task's folder removed after it


def test_a_fixtures_dir_holding_the_users_files_is_refused_before_any_task_and_kept(
    tmp_path: Path,
) -> None:
    chosen = tmp_path / "mine"
    chosen.mkdir()
    (chosen / "notes.txt").write_text("the user's")
    config = AgentBenchConfig(tasks=THIRD_PARTY_TASKS, out=tmp_path / "out", strategies=("weave",),
                              prompt_cache="off", fixtures_dir=chosen)  # fmt: skip
    with pytest.raises(BenchError, match=r"--fixtures-dir .*mine holds notes\.txt: give a new"):
        run_agent_bench(config, make_model=_script)
    assert (chosen / "notes.txt").read_text() == "the user's"
    assert not (tmp_path / "out").exists()  # refused before anything was made


def test_a_turn_that_recovers_from_a_real_server_error_succeeds_and_one_that_gives_up_fails(
    servers: None, tmp_path: Path
) -> None:
    (line,) = [t for t in THIRD_PARTY_TASKS.read_text().splitlines() if '"time-error-mumbai"' in t]
    gives_up = json.dumps({**json.loads(line), "id": "time-error-mumbai-gives-up"})
    path = tmp_path / "errors.jsonl"
    path.write_text(f"{line}\n{gives_up}\n", encoding="utf-8")
    config = AgentBenchConfig(tasks=path, out=tmp_path / "out", strategies=("weave",),
                              prompt_cache="off")  # fmt: skip
    run = run_agent_bench(config, make_model=_script)

    recovered, gave_up = (json.loads(line) for line in run.results.read_text().splitlines())
    assert recovered["set"] == "custom"
    assert recovered["success"], recovered["turns"]
    assert recovered["turns"][0]["statuses"] == ["tool_error", "ok"]
    assert not gave_up["success"]
    assert gave_up["turns"][0]["statuses"] == ["tool_error"]


# --------------------------------------------------------------------------- a missing server


def test_a_named_server_that_is_not_there_is_one_error_line_and_exit_2(
    servers: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(TIME, "no-such-mcp-server-time")
    result = CliRunner().invoke(main, ["bench-agent", "--set", "third-party", "--out",
                                       str(tmp_path)])  # fmt: skip
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: ") and "(time-convert-kolkata-tokyo)" in line
    assert f"{TIME}='no-such-mcp-server-time': 'no-such-mcp-server-time' is not on PATH" in line


def test_a_server_that_is_not_installed_says_how_to_install_it(
    servers: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(FILESYSTEM)
    monkeypatch.setattr(agent_third_party, "_FILESYSTEM_ENTRY", tmp_path / "nowhere.js")
    bin_dir = tmp_path / "bin"  # git (the repository fixture's), no node, no mcp-server-filesystem
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(shutil.which("git") or "git")
    monkeypatch.setenv("PATH", str(bin_dir))
    result = CliRunner().invoke(main, ["bench-agent", "--set", "third-party", "--out",
                                       str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 2
    assert (
        "the task needs server-filesystem, which is not installed: npm install -g " in result.output
    )
    assert f"or set {FILESYSTEM}" in result.output and "Traceback" not in result.output


def test_a_tasks_file_and_a_set_together_are_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["bench-agent", str(tmp_path / "t.jsonl"), "--set",
                                       "examples"])  # fmt: skip
    assert result.exit_code == 2
    assert "give a TASKS file or --set, not both" in result.output
