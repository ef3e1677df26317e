"""Config: the Claude Desktop format unchanged, weavehost's own settings, --server flags, and
errors that name the file, the key and the problem."""

# ruff: noqa: E501 - test names are sentences and fault tables read best one row a line

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from weavehost.config import build_config, load_config, parse_config, server_from_flag
from weavehost.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "host.json"
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def test_the_claude_desktop_example_loads_unchanged() -> None:
    config = load_config(ROOT / "configs" / "claude_desktop_config.json")
    assert config.names == ("weather", "android", "files")
    weather = config.server("weather")
    assert (weather.command, weather.args, weather.transport) == (
        "python",
        ("tools/weather.py",),
        "stdio",
    )
    assert config.server("files").env == {"WEAVEHOST_FILES_ROOT": "."}
    assert config.trusted_servers == frozenset() and config.approval == "ask"


def test_the_weavehost_example_sets_trust_approval_timeouts_and_limits() -> None:
    config = load_config(ROOT / "configs" / "weavehost.json")
    assert config.trusted_servers == {"weather", "files"}
    assert config.threads == 2
    assert config.timeouts.shutdown_grace == 2 and config.timeouts.list_tools == 10
    assert config.limits.max_message_bytes == 4194304


def test_a_url_server_is_streamable_http() -> None:
    config = parse_config({"mcpServers": {"remote": {"url": "http://127.0.0.1:9/mcp"}}})
    assert config.server("remote").transport == "http"


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        (
            {"mcpServers": {"w": {"command": "python", "args": ["a", 3]}}},
            "mcpServers.w.args[1]: expected a string",
        ),
        (
            {"mcpServers": {"w": {"comand": "python"}}},
            "mcpServers.w.comand: unknown key (did you mean 'command'?)",
        ),
        ({"mcpServers": {"w": {}}}, 'mcpServers.w: needs "command"'),
        (
            {"mcpServers": {"w": {"command": "x", "url": "http://h"}}},
            'has both "command" and "url"',
        ),
        (
            {"mcpServers": {"w": {"url": "ftp://h"}}},
            "mcpServers.w.url: expected an http:// or https:// URL",
        ),
        (
            {"mcpServers": {"w": {"command": "x", "env": {"A": 1}}}},
            "mcpServers.w.env.A: expected a string",
        ),
        (
            {"weavehost": {"trustedServers": ["ghost"]}},
            "weavehost.trustedServers[0]: no server named 'ghost'",
        ),
        (
            {"weavehost": {"approval": "sometimes"}},
            "weavehost.approval: expected one of ask, always, never",
        ),
        (
            {"weavehost": {"timeouts": {"call": -1}}},
            "weavehost.timeouts.call: must be greater than 0",
        ),
        (
            {"weavehost": {"limits": {"maxResultChars": 1.5}}},
            "weavehost.limits.maxResultChars: expected an integer",
        ),
        (
            {"weavehost": {"threads": True}},
            "weavehost.threads: expected an integer, got boolean true",
        ),
        ([], "expected an object, got a list"),
    ],
)
def test_a_malformed_config_names_the_file_the_key_and_the_problem(
    tmp_path: Path, document: object, fragment: str
) -> None:
    path = write(tmp_path, document)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(str(path))
    assert fragment in str(info.value)
    assert info.value.exit_code == 2


def test_invalid_json_names_the_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, '{\n  "mcpServers": {,}\n}')
    with pytest.raises(ConfigError, match=r"host.json: line 2 column 18: invalid JSON"):
        load_config(path)


def test_a_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.json")


def test_a_py_server_flag_runs_with_the_current_python() -> None:
    server = server_from_flag(str(ROOT / "tools" / "weather.py"))
    assert server.command == sys.executable
    assert server.args == (str(ROOT / "tools" / "weather.py"),)
    assert server.name == "weather"


def test_a_url_server_flag_is_named_after_its_host_and_a_command_after_its_program() -> None:
    assert server_from_flag("http://127.0.0.1:8000/mcp").name == "127.0.0.1"
    server = server_from_flag("sh -c 'echo hi'")
    assert (server.name, server.command, server.args) == ("sh", "sh", ("-c", "echo hi"))


def test_server_flags_that_clash_get_numbered_names() -> None:
    weather = str(ROOT / "tools" / "weather.py")
    config = build_config(None, [weather, weather])
    assert config.names == ("weather", "weather-2")


def test_bad_server_flags_are_config_errors() -> None:
    for flag, fragment in [("", "empty value"), ("missing.py", "no such Python file"),
                           ("no-such-program-xyz", "not found on PATH"), ("'unclosed", "cannot split")]:  # fmt: skip
        with pytest.raises(ConfigError, match=fragment):
            server_from_flag(flag)


def test_trust_flags_must_name_a_configured_server() -> None:
    weather = str(ROOT / "tools" / "weather.py")
    assert build_config(None, [weather], trust=["weather"]).is_trusted("weather")
    with pytest.raises(ConfigError, match="--trust 'android': no such server"):
        build_config(None, [weather], trust=["android"])


def test_a_disabled_server_is_left_out() -> None:
    config = parse_config(
        {"mcpServers": {"a": {"command": "x", "disabled": True}, "b": {"command": "y"}}}
    )
    assert config.names == ("b",)
