"""``weavehost bench-agent`` with a remote model: the variants are the server's calls with and
without provisional starts from the stream (a scripted server on 127.0.0.1)."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.remote_fake_server import DONE, FakeOpenAI, Reply, chunk, streamed_call
from weavehost.cli import main

TASK = {"id": "weather-paris", "servers": ["weather.py"], "user": "What is the weather in Paris?",
        "calls": [{"get_current_weather": {"city": ["Paris"], "units": ["metric", ""]}}],
        "facts": ["-2.9"], "tool_choice": "get_current_weather", "tags": ["single"]}  # fmt: skip


def script() -> list[Reply]:
    call = Reply(events=[*streamed_call("get_current_weather", '{"city": "Paris"}'),
                         chunk(finish="tool_calls"), DONE])  # fmt: skip
    answer = Reply(events=[chunk(text="It is -2.9 C in Paris."), chunk(finish="stop"), DONE])
    return [call, answer]


def test_remote_bench_agent_compares_early_start_from_the_stream_with_none(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASK) + "\n")
    with FakeOpenAI(script() + script()) as fake:
        url = fake.url
        result = CliRunner().invoke(main, ["bench-agent", str(tasks), "--model", url,
                                           "--out", str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 0, result.output
    records = [
        json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    ]
    by_variant = {r["strategy"]: r for r in records}
    assert set(by_variant) == {"remote", "remote-late"}
    assert all(r["success"] and r["error"] is None for r in records)
    assert by_variant["remote"]["provisional_results"] == 1
    assert by_variant["remote-late"]["provisional_results"] == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["setup"]["model"] == url
    assert "remote cache=off" in result.output and "remote-late cache=off" in result.output


def test_remote_bench_agent_refuses_a_local_strategy_for_a_remote_model(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(TASK) + "\n")
    result = CliRunner().invoke(main, ["bench-agent", str(tasks), "--model", "http://127.0.0.1:9/v1",
                                       "--strategies", "weave", "--out", str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code == 2
    assert "unknown strategy 'weave'" in result.output and "remote-late" in result.output
