"""The third-party MCP servers users run first, as they configure them: ``mcp-server-time``,
``mcp-server-git`` (PyPI) and ``@modelcontextprotocol/server-filesystem`` (npm), pinned under
``.ci/`` (see tests/third_party.py), over real stdio.

Each is listed (``weavehost tools``), called directly (``weavehost call``), used in an agent turn
(a scripted model: the test is about the wiring, not the model's choice) and checked
(``weavehost check --call-read-only``). server-filesystem also shows the roots decision
(docs/host.md, "Roots"): started with its own directory it keeps it from any current directory,
because weavehost offers no roots unless asked; given ``--root`` it works only inside that."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tests.third_party import filesystem_command, git_command, time_command
from weavehost.cli import main
from weavehost.config import server_from_flag
from weavehost.testing import HostDriver, ScriptedModel, assert_called, call, open_host

NOTES = "The meeting moved to Thursday at 10.\n"
COMMIT = "Add the meeting notes"
BOUND_S = 60  # a server's start (node, a Python venv) and a call on a busy 2-core machine


def weavehost(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """A directory holding ``notes.txt``: what server-filesystem is started with."""
    directory = tmp_path / "notes"
    directory.mkdir()
    (directory / "notes.txt").write_text(NOTES)
    return directory


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current directory: another one than the server's."""
    directory = tmp_path / "elsewhere"
    directory.mkdir()
    monkeypatch.chdir(directory)
    return directory


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit, for mcp-server-git."""
    directory = tmp_path / "repo"
    directory.mkdir()
    (directory / "notes.txt").write_text(NOTES)
    git = ["git", "-C", str(directory), "-c", "user.name=Test", "-c", "user.email=test@example.org"]
    for args in (["init", "-q"], ["add", "notes.txt"], ["commit", "-q", "-m", COMMIT]):
        subprocess.run([*git, *args], check=True, capture_output=True, timeout=BOUND_S)
    return directory


@dataclass(frozen=True)
class Server:
    """One third-party server as a user starts it, and one read-only call with what it returns."""

    command: str
    tools: frozenset[str]  # some of the tools it lists
    tool: str
    arguments: dict[str, Any]
    returns: str  # a piece of the call's text


def time_server(_notes: Path, _repo: Path) -> Server:
    return Server(time_command(), frozenset({"get_current_time", "convert_time"}),
                  "get_current_time", {"timezone": "Asia/Tokyo"}, '"timezone": "Asia/Tokyo"')  # fmt: skip


def git_server(_notes: Path, repo: Path) -> Server:
    return Server(f"{git_command()} --repository {shlex.quote(str(repo))}",
                  frozenset({"git_status", "git_log", "git_diff", "git_commit"}),
                  "git_log", {"repo_path": str(repo)}, COMMIT)  # fmt: skip


def filesystem_server(notes: Path, _repo: Path) -> Server:
    return Server(f"{filesystem_command()} {shlex.quote(str(notes))}",
                  frozenset({"read_text_file", "list_directory", "write_file", "list_allowed_directories"}),
                  "read_text_file", {"path": str(notes / "notes.txt")}, NOTES.strip())  # fmt: skip


SERVERS: dict[str, Callable[[Path, Path], Server]] = {
    "mcp-server-time": time_server,
    "mcp-server-git": git_server,
    "server-filesystem": filesystem_server,
}


@pytest.fixture(params=list(SERVERS))
def server(request: pytest.FixtureRequest, notes: Path, tmp_path: Path, elsewhere: Path) -> Server:
    """Each server, started from a current directory that is not its own."""
    repo = request.getfixturevalue("repo") if request.param == "mcp-server-git" else tmp_path
    return SERVERS[request.param](notes, repo)


# --------------------------------------------------------------------------- each server


def test_weavehost_tools_lists_each_servers_tools(server: Server) -> None:
    result = weavehost("tools", "--server", server.command, "--json")
    assert result.exit_code == 0, result.output
    listed = {tool["name"] for tool in json.loads(result.stdout)["tools"]}
    assert server.tools <= listed


def test_weavehost_call_runs_a_tool_of_each_server_directly(server: Server) -> None:
    result = weavehost("call", server.command, server.tool, json.dumps(server.arguments),
                       "--approval", "always", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout.splitlines()[-1])
    assert payload["status"] == "ok" and payload["isError"] is False
    assert server.returns in payload["text"]


def test_an_agent_turn_calls_a_tool_of_each_server_and_answers(server: Server) -> None:
    model = ScriptedModel([call(server.tool, **server.arguments), "Here it is."])
    with open_host(server.command, model=model) as host:
        events = host.run("Use the tool, please.", timeout=BOUND_S)
    made = assert_called(events, server.tool, **server.arguments)
    assert made.status == "ok" and server.returns in made.text
    assert events.stop == "answer" and events.answer == "Here it is."


def test_weavehost_check_with_read_only_calls_passes_each_server(server: Server) -> None:
    result = weavehost("check", server.command, "--call-read-only", "--timeout", "10", "--json")
    assert "Traceback" not in result.output, result.output
    payload = json.loads(result.stdout)
    failures = [f for f in payload["findings"] if f["result"] == "fail"]
    assert failures == [] and result.exit_code == 0, failures
    assert payload["calls"], "each server marks read-only tools; some were called"


# --------------------------------------------------------------------------- roots


def test_server_filesystem_started_with_its_directory_reads_its_file_from_another_directory(
    notes: Path, tmp_path: Path
) -> None:
    # As a user runs it: a separate process whose current directory does not hold the notes.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    command = f"{filesystem_command()} {shlex.quote(str(notes))}"
    arguments = json.dumps({"path": str(notes / "notes.txt")})
    done = subprocess.run(
        [sys.executable, "-m", "weavehost.cli", "call", command, "read_text_file", arguments,
         "--approval", "always"],
        cwd=elsewhere, capture_output=True, text=True, timeout=BOUND_S,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == NOTES.strip()


def taken_in(host: HostDriver, root: Path) -> str:
    """server-filesystem's allowed directories once they hold ``root``. It takes the roots in
    after initialize, asynchronously: a call in its first milliseconds can still see its own
    directories (about 1 in 12 here), a window of the server's that no client closes."""
    deadline = time.monotonic() + BOUND_S
    while str(root.resolve()) not in (
        allowed := host.call("list_allowed_directories").calls[0].text
    ):
        assert time.monotonic() < deadline, allowed
        time.sleep(0.05)
    return allowed


def test_given_a_root_server_filesystem_reads_only_inside_it(
    notes: Path, tmp_path: Path, elsewhere: Path
) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (root / "inside.txt").write_text("inside the root\n")
    command = f"{filesystem_command()} {shlex.quote(str(notes))}"
    with open_host(command, roots=[root]) as host:
        allowed = taken_in(host, root)
        inside = host.call("read_text_file", path=str(root / "inside.txt")).calls[0]
        outside = host.call("read_text_file", path=str(notes / "notes.txt")).calls[0]
    assert str(notes) not in allowed
    assert inside.status == "ok" and inside.text.strip() == "inside the root"
    assert outside.status == "tool_error"
    assert "Access denied - path outside allowed directories" in outside.text


def test_tools_v_says_no_roots_were_offered_and_with_root_names_them(
    notes: Path, tmp_path: Path, elsewhere: Path
) -> None:
    command = f"{filesystem_command()} {shlex.quote(str(notes))}"
    plain = weavehost("-v", "tools", "--server", command)
    rooted = weavehost("-v", "tools", "--server", command, "--root", str(tmp_path))
    assert plain.exit_code == 0 and rooted.exit_code == 0, plain.output + rooted.output
    name = server_from_flag(command).name  # server-filesystem, whichever way it is started
    assert name != "node"
    assert f"server '{name}': roots offered: none" in plain.stderr
    assert f"server '{name}': roots offered: {tmp_path.resolve()}" in rooted.stderr
    quiet = weavehost("tools", "--server", command)
    assert "roots offered" not in quiet.stderr


@pytest.mark.model  # chat loads the embedded model in this process before it reads a line
def test_chat_v_says_which_roots_each_server_was_offered(notes: Path, tmp_path: Path) -> None:
    command = f"{filesystem_command()} {shlex.quote(str(notes))}"
    result = CliRunner().invoke(
        main, ["-v", "chat", "--server", command, "--server", time_command(), "--root",
               str(tmp_path), "--threads", "2"], input="/exit\n",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    offered = [line for line in result.stderr.splitlines() if "roots offered" in line]
    assert offered == [
        f"server '{server_from_flag(command).name}': roots offered: {tmp_path.resolve()}",
        f"server 'mcp-server-time': roots offered: {tmp_path.resolve()}",
    ]
