"""`weavehost call SERVER TOOL '{json}'`: one tool called directly, with no model, through the path
a model's call takes (validation, approval, the executor's result text), against the example
servers in ``tools/`` over real stdio. Every bad input is one ``Error:`` line and its code: 2 for
usage (an unknown server, arguments that are not a JSON object), 1 for a call that is refused,
does not validate, names no tool, or comes back as a tool error. The call runs as ``Host.call``
does (its ``tool_result`` event is what ``--json`` prints); Ctrl-C takes the console's interrupt
path: exit 130, the call cancelled on its server."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from weavehost import mcp_cli
from weavehost.agent import Event
from weavehost.cli import main
from weavehost.config import HostConfig, ServerConfig
from weavehost.host import Host
from weavehost.testing import Events

ROOT = Path(__file__).resolve().parents[1]
WEATHER = str(ROOT / "tools" / "weather.py")
FILES = str(ROOT / "tools" / "files.py")
RAW = str(ROOT / "tests" / "host_fixtures" / "raw_server.py")
BOUND_S = 60  # server start and one call (or a Python process's start) on a busy 2-core machine


def call(*args: str) -> Result:
    """``weavehost call …`` in-process; stdin is not a terminal, so nobody can be asked."""
    return CliRunner().invoke(main, ["call", *args])


def raw_config(path: Path, record: Path) -> Path:
    """A config naming the raw fixture server ``raw``, which records every message it gets."""
    server = {"command": sys.executable, "args": [RAW, "--name", "raw", "--record", str(record)]}
    path.write_text(json.dumps({"mcpServers": {"raw": server}}))
    return path


def the_error_line(result: Result) -> str:
    assert "Traceback" not in result.output, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    return errors[0]


def test_a_call_to_a_trusted_read_only_tool_prints_its_text_and_exits_0() -> None:
    result = call("weather", "get_current_weather", '{"city": "Paris"}', "--server", WEATHER,
                  "--trust", "weather")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Paris: ") and "humidity" in result.stdout


def test_call_json_prints_the_content_blocks_structured_content_and_is_error() -> None:
    result = call("weather", "get_forecast", '{"city": "Oslo", "days": 2}', "--server", WEATHER,
                  "--approval", "always", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["type"] == "result" and payload["isError"] is False
    assert payload["server"] == "weather" and payload["tool"] == "get_forecast"
    assert payload["content"][0]["type"] == "text"
    assert payload["content"][0]["text"].startswith("2-day forecast for Oslo:")
    assert payload["structuredContent"] == {"result": payload["content"][0]["text"]}


def host_call(config: HostConfig, name: str, arguments: dict[str, Any]) -> Event:
    """The ``tool_result`` event of ``Host.call`` (no model), as a program embedding it sees."""

    async def collect() -> Events:
        with anyio.fail_after(BOUND_S):
            async with Host(config, load_model=False) as host:
                return await Events.collect(host.call(name, arguments))

    [sent] = [e for e in anyio.run(collect) if e.type == "tool_result"]
    return sent


def test_call_json_prints_the_content_blocks_of_host_calls_result_as_the_server_sent_them() -> None:
    arguments = {"city": "Oslo", "days": 2}
    config = HostConfig(servers=(ServerConfig("weather", command=sys.executable, args=(WEATHER,)),),
                        approval="always")  # fmt: skip
    sent = host_call(config, "get_forecast", arguments)
    text = sent["text"]
    assert sent["content"] == [{"type": "text", "text": text}]  # the block itself, no more keys
    result = call("weather", "get_forecast", json.dumps(arguments), "--server", WEATHER,
                  "--approval", "always", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "type": "result", "server": "weather", "tool": "get_forecast", "status": "ok",
        "isError": False, "content": sent["content"],
        "structuredContent": sent["structuredContent"], "text": text,
    }  # fmt: skip


def test_call_json_prints_structured_content_as_sent_even_when_the_output_schema_rejects_it(
    tmp_path: Path,
) -> None:
    config = raw_config(tmp_path / "config.json", tmp_path / "record")
    result = call("raw", "measure", '{"mode": "bad"}', "--config", str(config), "--approval",
                  "always", "--json")  # fmt: skip
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["status"] == "tool_error" and payload["isError"] is True
    assert payload["content"] == [{"type": "text", "text": "measured (bad)"}]
    assert payload["structuredContent"] == {"celsius": "warm"}
    assert payload["text"].startswith("measure returned an invalid result: structured content")
    assert "measure returned an error" in the_error_line(result)


def recorded(path: Path, method: str) -> list[dict[str, Any]]:
    """The messages with ``method`` that the raw server received."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [m for m in map(json.loads, lines) if m.get("method") == method]


def test_ctrl_c_during_a_call_cancels_it_on_the_server_and_exits_130(tmp_path: Path) -> None:
    record = tmp_path / "record"
    config = raw_config(tmp_path / "config.json", record)
    process = subprocess.Popen(
        [sys.executable, "-m", "weavehost.cli", "call", "raw", "progress", "--config",
         str(config), "--approval", "always", "--json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ)  # type: ignore[arg-type]
        deadline = time.monotonic() + BOUND_S
        first = None
        while first is None and selector.select(timeout=max(deadline - time.monotonic(), 0)):
            line = process.stdout.readline()  # type: ignore[union-attr]
            if not line:
                break
            first = json.loads(line)
        assert first is not None and first["type"] == "progress", "no progress before the bound"
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=BOUND_S)  # drains the progress lines still coming
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    [call_request] = recorded(record, "tools/call")
    [cancel] = recorded(record, "notifications/cancelled")
    assert cancel["params"]["requestId"] == call_request["id"]


def test_a_ctrl_c_before_the_interrupt_handler_is_installed_exits_130_as_chat_and_run_do(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def interrupted_at_once(*_: object) -> None:
        raise KeyboardInterrupt  # where a SIGINT lands before run_agent listens for it

    monkeypatch.setattr(mcp_cli, "run_call", interrupted_at_once)
    result = call("weather", "get_current_weather", '{"city": "Lima"}', "--server", WEATHER)
    assert result.exit_code == 130, result.output
    assert "interrupted" in result.stderr and "Aborted!" not in result.output


def test_server_may_be_the_path_of_a_server_to_start_for_the_call() -> None:
    result = call(WEATHER, "get_current_weather", '{"city": "Lima"}', "--trust", "weather")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Lima: ")


def test_a_call_that_needs_approval_with_no_terminal_to_ask_is_refused_with_exit_1() -> None:
    result = call("weather", "get_current_weather", '{"city": "Paris"}', "--server", WEATHER)
    assert result.exit_code == 1
    assert "get_current_weather was not run: the user did not approve it" in the_error_line(result)
    assert "no terminal" in result.stderr  # the approver said why it could not ask


def test_approval_never_refuses_the_call_with_exit_1() -> None:
    result = call("weather", "get_current_weather", '{"city": "Paris"}', "--server", WEATHER,
                  "--approval", "never")  # fmt: skip
    assert result.exit_code == 1
    assert "approval: never" in the_error_line(result)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["nope", "get_current_weather", "{}"], 2, "no server named 'nope'; servers: weather"),
        (["weather", "get_weather", "{}"], 1, "server 'weather' has no tool 'get_weather'; its tools: get_current_weather, get_forecast"),
        (["weather", "get_current_weather", "{city: Paris}"], 2, "ARGUMENTS is not JSON"),
        (["weather", "get_current_weather", '["Paris"]'], 2, "ARGUMENTS must be a JSON object, got list"),
        (["weather", "get_forecast", '{"city": "Oslo", "days": 9}'], 1, "days"),
        (["weather", "get_forecast", '{"city": "Oslo"}'], 1, "days"),
    ],
    ids=["an unknown server", "an unknown tool", "arguments that are not JSON",
         "arguments that are not an object", "an argument out of range", "a missing required argument"],
)  # fmt: skip
def test_bad_input_to_call_is_one_error_line_with_its_code_and_nothing_is_called(
    args: list[str], code: int, message: str
) -> None:
    result = call(*args, "--server", WEATHER, "--approval", "always")
    assert result.exit_code == code, result.output
    assert message in the_error_line(result)
    assert result.stdout == ""


def test_a_tool_error_prints_its_text_on_the_error_line_and_exits_1(tmp_path: Path) -> None:
    result = call("files", "read_file", '{"path": "missing.txt"}', "--server", f"{FILES} {tmp_path}",
                  "--trust", "files")  # fmt: skip
    assert result.exit_code == 1
    line = the_error_line(result)
    assert "read_file returned an error" in line and "'missing.txt' is not a file" in line


def test_a_tool_error_with_json_prints_the_result_with_is_error_and_exits_1(tmp_path: Path) -> None:
    result = call("files", "read_file", '{"path": "missing.txt"}', "--server", f"{FILES} {tmp_path}",
                  "--trust", "files", "--json")  # fmt: skip
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["isError"] is True and payload["status"] == "tool_error"
    assert "'missing.txt' is not a file" in payload["content"][0]["text"]
    assert "returned an error" in the_error_line(result)


def test_trust_for_a_server_the_call_does_not_talk_to_is_a_usage_error() -> None:
    result = call("weather", "get_current_weather", '{"city": "Paris"}', "--server", WEATHER,
                  "--trust", "files")  # fmt: skip
    assert result.exit_code == 2
    assert "--trust 'files'" in the_error_line(result)


def test_root_must_be_an_existing_directory(tmp_path: Path) -> None:
    result = call("weather", "get_current_weather", "{}", "--server", WEATHER,
                  "--root", str(tmp_path / "absent"))  # fmt: skip
    assert result.exit_code == 2
    assert "--root" in result.output and "does not exist" in result.output
