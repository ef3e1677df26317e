"""The client features against the MCP reference server, `@modelcontextprotocol/server-everything`
(installed from npm at the version .ci/run pins; see tests/everything.py), over real stdio.

That server registers `trigger-sampling-request`, `trigger-elicitation-request` and
`get-roots-list` only for a client that declares sampling, elicitation and roots, so seeing them
listed is seeing the capabilities declared. Each feature is then used end to end: the embedded
SmolLM2 answers a sampling request, a scripted elicitor fills the server's form, the server lists
the roots weavehost offered, and a long operation's progress notifications arrive as events."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from tests.everything import everything_command
from weavehost.cli import main
from weavehost.config import HostConfig, ServerConfig
from weavehost.host import Host
from weavehost.mcp.elicitors import ScriptedElicitor

CONDITIONAL_TOOLS = {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"}
CALL_BOUND_S = 60  # server start (node) and one call on a busy 2-core machine


def write_config(path: Path, **weavehost: Any) -> Path:
    """A config naming server-everything ``everything``, as a user would write it."""
    command, *args = shlex.split(everything_command())
    document: dict[str, Any] = {"mcpServers": {"everything": {"command": command, "args": args}}}
    if weavehost:
        document["weavehost"] = weavehost
    path.write_text(json.dumps(document))
    return path


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    return write_config(tmp_path / "config.json")


def weavehost(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def json_lines(result: Result) -> list[dict[str, Any]]:
    return [json.loads(line) for line in result.stdout.splitlines() if line.strip()]


def test_weavehost_tools_lists_the_sampling_elicitation_and_roots_tools(config_file: Path) -> None:
    result = weavehost("tools", "--config", str(config_file), "--json")
    assert result.exit_code == 0, result.output
    names = {tool["name"] for tool in json.loads(result.stdout)["tools"]}
    assert CONDITIONAL_TOOLS <= names
    assert "echo" in names  # and the tools every client gets


@pytest.mark.model  # the server's sampling request loads the embedded model in this process
def test_call_trigger_sampling_request_returns_text_written_by_the_embedded_model(
    config_file: Path,
) -> None:
    result = weavehost("call", "everything", "trigger-sampling-request",
                       '{"prompt": "Say hello", "maxTokens": 20}', "--config", str(config_file),
                       "--approval", "always", "--json", "--threads", "2")  # fmt: skip
    assert result.exit_code == 0, result.output
    (payload,) = json_lines(result)
    assert payload["isError"] is False
    head, _, reply = payload["content"][0]["text"].partition("\n")
    assert head.strip() == "LLM sampling result:"
    sampled = json.loads(reply)  # what the server got back from weavehost's sampler
    assert sampled["role"] == "assistant" and sampled["stopReason"] in ("endTurn", "maxTokens")
    assert sampled["content"]["type"] == "text" and sampled["content"]["text"].strip()


def test_get_roots_list_returns_the_roots_of_the_config(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir(), second.mkdir()
    config = write_config(tmp_path / "config.json", roots=[str(first), str(second)])
    result = weavehost("call", "everything", "get-roots-list", "--config", str(config),
                       "--trust", "everything")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Current MCP Roots (2 total)" in result.stdout
    assert f"URI: {first.as_uri()}" in result.stdout and f"URI: {second.as_uri()}" in result.stdout


def test_root_flags_replace_the_roots_of_the_config(tmp_path: Path) -> None:
    configured, flagged = tmp_path / "configured", tmp_path / "flagged"
    configured.mkdir(), flagged.mkdir()
    config = write_config(tmp_path / "config.json", roots=[str(configured)])
    result = weavehost("call", "everything", "get-roots-list", "--config", str(config),
                       "--trust", "everything", "--root", str(flagged), "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    (payload,) = json_lines(result)
    assert flagged.as_uri() in payload["text"] and configured.as_uri() not in payload["text"]


def test_trigger_long_running_operation_yields_a_progress_event_per_step(config_file: Path) -> None:
    result = weavehost("call", "everything", "trigger-long-running-operation",
                       '{"duration": 0.3, "steps": 3}', "--config", str(config_file),
                       "--trust", "everything", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    *progress, final = json_lines(result)
    assert [(e["type"], e["progress"], e["total"]) for e in progress] == [
        ("progress", 1, 3),
        ("progress", 2, 3),
        ("progress", 3, 3),
    ]
    assert {e["name"] for e in progress} == {"trigger-long-running-operation"}
    assert final["type"] == "result" and final["text"].startswith(
        "Long running operation completed"
    )


def test_progress_without_json_is_a_line_per_step_on_stderr(config_file: Path) -> None:
    result = weavehost("call", "everything", "trigger-long-running-operation",
                       '{"duration": 0.2, "steps": 2}', "--config", str(config_file),
                       "--trust", "everything")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "trigger-long-running-operation [" in result.stderr
    assert "(1/2)" in result.stderr and "(2/2)" in result.stderr
    assert result.stdout.startswith("Long running operation completed")


def test_call_trigger_elicitation_request_with_no_terminal_is_declined(config_file: Path) -> None:
    result = weavehost("call", "everything", "trigger-elicitation-request", "--config",
                       str(config_file), "--approval", "always")  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "User declined to provide the requested information" in result.stdout


@pytest.mark.anyio
async def test_trigger_elicitation_request_is_answered_by_a_scripted_elicitor() -> None:
    command, *args = shlex.split(everything_command())
    config = HostConfig(servers=(ServerConfig("everything", command=command, args=tuple(args)),),
                        approval="always")  # fmt: skip
    elicitor = ScriptedElicitor([{"name": "Ada Lovelace", "check": True, "integer": 7}])
    events = []
    async with Host(config, elicitor=elicitor, load_model="lazy") as host:
        with anyio.fail_after(CALL_BOUND_S):
            async for event in host.call("trigger-elicitation-request", {}):
                events.append(event)
    (asked,) = elicitor.seen
    assert asked.server == "everything" and asked.mode == "form"
    assert asked.schema is not None and asked.schema["required"] == ["name"]
    result = events[-1]
    assert result.type == "tool_result" and result["status"] == "ok"
    assert "User provided the requested information" in result["text"]
    assert "- Name: Ada Lovelace" in result["text"] and "- Favorite Integer: 7" in result["text"]
    assert host.model is None  # elicitation needs no model


def test_resource_links_and_embedded_resources_in_a_result_are_text_a_model_can_read(
    config_file: Path,
) -> None:
    links = weavehost("call", "everything", "get-resource-links", '{"count": 2}', "--config",
                      str(config_file), "--approval", "always")  # fmt: skip
    embedded = weavehost("call", "everything", "get-resource-reference",
                         '{"resourceType": "Text", "resourceId": 3}', "--config", str(config_file),
                         "--approval", "always")  # fmt: skip
    assert links.exit_code == 0 and embedded.exit_code == 0, links.output + embedded.output
    assert "[resource link: demo://resource/dynamic/blob/1]" in links.stdout
    assert "[resource link: demo://resource/dynamic/text/2]" in links.stdout
    assert "Resource 3: This is a plaintext resource" in embedded.stdout  # the resource's own text
