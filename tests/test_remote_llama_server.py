"""The remote model against a real OpenAI-compatible server: llama-cpp-python's own
``llama_cpp.server`` (the ``server`` extra) over the embedded SmolLM2, ``chatml-function-calling``,
on 127.0.0.1, driven through ``weavehost run --json`` as a user runs it.

That server streams a call's arguments token by token when the request names the tool, and
cannot stream a reply that leaves the call to the model (it ends such a stream at once); the
config's ``"stream": "forced"`` is what a user of that server sets (docs/remote.md)."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

ROOT = Path(__file__).resolve().parent.parent
SERVER_START_BOUND_S = 120.0  # loading a 135M model and starting uvicorn
POLL_S = 0.2
RUN_BOUND_S = 600.0  # a few steps of grammar-constrained decoding on a busy CPU


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def llama_server(
    embedded_model_path: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """``python -m llama_cpp.server`` on a free port; its API base URL once it lists its model."""
    port = free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(embedded_model_path),
               "--chat_format", "chatml-function-calling", "--host", "127.0.0.1",
               "--port", str(port), "--n_ctx", "4096"]  # fmt: skip
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + SERVER_START_BOUND_S
        while True:
            assert process.poll() is None, f"llama_cpp.server exited:\n{log.read_text()[-3000:]}"
            try:
                if httpx2.get(f"{url}/models", timeout=2).status_code == 200:
                    break
            except httpx2.TransportError:
                pass
            assert time.monotonic() < deadline, (
                f"llama_cpp.server not up in {SERVER_START_BOUND_S:g} s"
            )
            time.sleep(POLL_S)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run_weavehost(*args: str) -> tuple[int, list[dict[str, Any]], str]:
    result = subprocess.run(
        [sys.executable, "-m", "weavehost.cli", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=RUN_BOUND_S,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result.returncode, events, result.stderr


def test_remote_run_against_llama_cpp_server_calls_the_weather_tool_and_starts_it_from_the_stream(
    llama_server: str, tmp_path: Path
) -> None:
    config = tmp_path / "remote.json"
    config.write_text(
        json.dumps({"weavehost": {"model": {"url": llama_server, "stream": "forced"}}})
    )
    code, events, stderr = run_weavehost(
        "run", "What is the weather in Paris?", "--server", "tools/weather.py",
        "--model", llama_server, "--config", str(config), "--trust", "weather",
        "--tool-choice", "get_current_weather", "--max-answer-tokens", "24", "--json",
    )  # fmt: skip
    assert code == 0, stderr
    kinds = [e["type"] for e in events]
    ready = events[0]
    assert ready["engine"] == "remote (OpenAI-compatible)" and ready["url"] == llama_server
    finals = [e for e in events if e["type"] == "final_call"]
    assert finals and finals[0]["name"] == "get_current_weather"
    assert finals[0]["arguments"]["city"] == "Paris"
    results = [e for e in events if e["type"] == "tool_result"]
    assert results and results[0]["name"] == "get_current_weather" and results[0]["status"] == "ok"
    # The forced call was streamed: its required argument was complete, and the trusted
    # read-only tool started, before the server finished the call.
    provisional = events[kinds.index("provisional_call")]
    assert kinds.index("provisional_call") < kinds.index("final_call")
    assert provisional["name"] == "get_current_weather" and provisional["started"] is True
    assert provisional["arguments"] == {"city": "Paris"}
    first_step = next(e for e in events if e["type"] == "timings" and e["step"] == 1)
    assert first_step["tool_latency_s"] < first_step["final_latency_s"]
    assert events[-1]["type"] == "done" and events[-1]["stop"] == "answer"


def test_remote_streamed_automatic_choice_on_llama_cpp_server_fails_with_the_setting_to_change(
    llama_server: str,
) -> None:
    code, events, _stderr = run_weavehost(
        "run", "What is the weather in Paris?", "--server", "tools/weather.py",
        "--model", llama_server, "--json",
    )  # fmt: skip
    assert code == 1
    (error,) = [e for e in events if e["type"] == "error"]
    assert error["kind"] == "RemoteStreamError" and '"stream": "forced"' in error["error"]
    assert not [e for e in events if e["type"] in ("final_call", "tool_result")]
