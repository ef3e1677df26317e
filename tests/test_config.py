"""Config: the Claude Desktop format unchanged, weavehost's own settings, --server flags, and
errors that name the file, the key and the problem."""

# ruff: noqa: E501 - test names are sentences and fault tables read best one row a line

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from weavehost import config_servers
from weavehost.config import (
    DEFAULT_KV_CACHE,
    RemoteModelConfig,
    build_config,
    load_config,
    merge_flags,
    parse_config,
    server_from_flag,
)
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


@pytest.mark.parametrize(
    ("flag", "name"),
    [
        ("npx -y @modelcontextprotocol/server-filesystem /tmp", "server-filesystem"),
        ("npx -y @scope/pkg@1.2.3", "pkg"),
        ("uvx mcp-server-time", "mcp-server-time"),
        ("uvx --from mcp-server-git==2025.1 mcp-server-git --repository .", "mcp-server-git"),
        ("uvx 'mcp-server-fetch[cli]>=1'", "mcp-server-fetch"),
        ("pipx run mcp-server-time", "mcp-server-time"),
        ("python3 -m mcp_server_time --local-timezone UTC", "mcp_server_time"),
        (
            "node /x/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js /tmp",
            "server-filesystem",
        ),
        ("node /srv/notes-server/build/index.js", "notes-server"),
        ("deno run --allow-read /srv/servers/notes/main.ts", "notes"),
        ("node /srv/weather.js", "weather"),
        # Nothing named to start: the program, as for any other.
        ("npx -y", "npx"),
        ("pipx install mcp-server-time", "pipx"),
    ],
)
def test_a_server_started_by_a_package_runner_or_an_interpreter_is_named_after_what_it_starts(
    flag: str, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(config_servers.shutil, "which", lambda program: f"/usr/bin/{program}")
    server = server_from_flag(flag)
    assert server.name == name
    assert server.command == flag.split()[0]  # the runner still starts it


def test_a_py_server_with_a_generic_name_is_named_after_its_folder_as_a_node_one_is(
    tmp_path: Path,
) -> None:
    script = tmp_path / "notes-server" / "src" / "server.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    assert server_from_flag(str(script)).name == "notes-server"


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


def test_a_host_s_flags_go_over_the_config_and_keep_every_field_no_flag_sets() -> None:
    weather = str(ROOT / "tools" / "weather.py")
    config = parse_config({
        "mcpServers": {"weather": {"command": sys.executable, "args": [weather]}},
        "weavehost": {"model": "a.gguf", "threads": 2, "toolChoice": "auto", "approval": "never",
                      "roots": ["/srv"], "promptCache": {"maxBytes": 10}},
    })  # fmt: skip
    merged = merge_flags(
        config, servers=[weather, "python -m http.server"], trust=["weather", "fake"],
        approval="always", inproc=["fake"], model="b.gguf", threads=4, tool_choice="none",
        prompt_cache=False,
    )  # fmt: skip
    # A --server named like a configured one is left out: the configured one runs.
    assert merged.names == ("weather", "http.server")
    assert merged.trusted_servers == {"weather", "fake"} and merged.approval == "always"
    assert (merged.model, merged.remote, merged.threads, merged.tool_choice) == (
        "b.gguf", None, 4, "none"
    )  # fmt: skip
    assert not merged.prompt_cache.enabled and merged.prompt_cache.max_bytes == 10
    assert merged.roots == ("/srv",) and merged.source == config.source
    assert merge_flags(config) == config  # no flag: the config as it is


def test_a_url_model_flag_keeps_the_config_s_remote_settings_and_a_path_means_a_local_file() -> (
    None
):
    config = parse_config({"weavehost": {"model": {"url": "http://gpu:8080/v1", "retries": 5}}})
    assert config.model is None and config.remote is not None
    remote = merge_flags(config, model="http://other:9000/v1").remote
    assert remote == RemoteModelConfig(url="http://other:9000/v1", retries=5)
    local = merge_flags(config, model="m.gguf")
    assert (local.model, local.remote) == ("m.gguf", None)


def test_a_trust_flag_naming_no_server_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="--trust 'ghost': no such server"):
        merge_flags(parse_config({"mcpServers": {"a": {"command": "x"}}}), trust=["ghost"])


@pytest.mark.parametrize("value", [0, -5, 12.5, "2000", True])
def test_a_bad_description_cap_is_a_config_error_naming_its_key(value: object) -> None:
    with pytest.raises(ConfigError, match=r"weavehost\.limits\.maxDescriptionChars"):
        parse_config({"weavehost": {"limits": {"maxDescriptionChars": value}}})


def test_a_description_cap_above_1024_is_kept_as_configured() -> None:
    config = parse_config({"weavehost": {"limits": {"maxDescriptionChars": 8000}}})
    assert config.limits.max_description_chars == 8000


def test_a_disabled_server_is_left_out() -> None:
    config = parse_config(
        {"mcpServers": {"a": {"command": "x", "disabled": True}, "b": {"command": "y"}}}
    )
    assert config.names == ("b",)


# --------------------------------------------------------------------------- issue 13: HTTP servers as users configure them, filters, roots, approvals


def test_a_vs_code_mcp_json_is_read_as_is_and_its_inputs_are_ignored() -> None:
    config = parse_config(
        {
            "inputs": [
                {"type": "promptString", "id": "key", "description": "API key", "password": True}
            ],
            "servers": {
                "local": {"type": "stdio", "command": "python", "args": ["tools/weather.py"]},
                "remote": {"type": "http", "url": "https://example.com/mcp"},
                "old": {"type": "sse", "url": "http://127.0.0.1:8000/sse"},
            },
        }
    )
    assert [(s.name, s.transport) for s in config.servers] == [
        ("local", "stdio"),
        ("remote", "http"),
        ("old", "sse"),
    ]


def test_environment_variables_are_expanded_in_headers_env_url_and_args(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("API_TOKEN", "tok-123")
    monkeypatch.setenv("REGION", "eu")
    config = parse_config(
        {
            "mcpServers": {
                "web": {"url": "https://${REGION}.example.com/mcp?key=${env:API_TOKEN}",
                        "headers": {"Authorization": "Bearer ${API_TOKEN}", "X-Literal": "$${NOT_EXPANDED}"}},
                "cli": {"command": "tool", "args": ["--region", "${REGION}"], "env": {"TOKEN": "${env:API_TOKEN}"}},
            }
        }
    )  # fmt: skip
    web, cli = config.server("web"), config.server("cli")
    assert web.url == "https://eu.example.com/mcp?key=tok-123"
    assert web.headers == {"Authorization": "Bearer tok-123", "X-Literal": "${NOT_EXPANDED}"}
    assert (cli.args, cli.env) == (("--region", "eu"), {"TOKEN": "tok-123"})


def test_describe_never_shows_a_secret_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("API_TOKEN", "tok-123")
    config = parse_config(
        {"mcpServers": {"web": {"url": "https://user:${API_TOKEN}@example.com/mcp?key=${API_TOKEN}&v=1",
                                "headers": {"Authorization": "Bearer ${API_TOKEN}"}}}}
    )  # fmt: skip
    assert config.server("web").describe() == "https://user:***@example.com/mcp?key=***&v=***"


@pytest.mark.parametrize(
    ("document", "fragment"),
    [
        ({"mcpServers": {"w": {"url": "http://h/mcp", "headers": {"Authorization": "Bearer ${WEAVEHOST_TEST_UNSET}"}}}},
         "mcpServers.w.headers.Authorization: environment variable 'WEAVEHOST_TEST_UNSET' is not set"),
        ({"mcpServers": {"w": {"command": "x", "env": {"K": "${WEAVEHOST_TEST_UNSET}"}}}},
         "mcpServers.w.env.K: environment variable 'WEAVEHOST_TEST_UNSET' is not set"),
        ({"mcpServers": {"w": {"command": "x", "args": ["${env:WEAVEHOST_TEST_UNSET}"]}}},
         "mcpServers.w.args[0]: environment variable 'WEAVEHOST_TEST_UNSET' is not set"),
        ({"servers": {"w": {"url": "http://h/mcp", "headers": {"K": "${input:api-key}"}}}},
         "servers.w.headers.K: ${input:api-key}: VS Code input variables are not supported"),
        ({"mcpServers": {"w": {"url": "http://h/mcp", "headers": {"K": "${workspace Folder}"}}}},
         "${workspace Folder}: expected ${NAME} or ${env:NAME}"),
        ({"mcpServers": {"w": {"command": "x"}}, "servers": {}}, 'has both "mcpServers" and "servers"'),
        ({"servers": {"w": {"type": "websocket", "url": "ws://h"}}}, "servers.w.type: expected one of stdio, http, streamable-http, sse"),
        ({"servers": {"w": {"type": "stdio", "url": "http://h"}}}, 'servers.w.type: "stdio" needs "command"'),
        ({"servers": {"w": {"type": "sse", "command": "x"}}}, 'servers.w.type: "sse" needs "url"'),
        ({"mcpServers": {"w": {"command": "x", "headers": {}}}}, 'mcpServers.w.headers: only an HTTP server'),
        ({"mcpServers": {"w": {"command": "x", "oauth": True}}}, 'mcpServers.w.oauth: only an HTTP server'),
        ({"mcpServers": {"w": {"url": "http://h", "oauth": "yes"}}}, "mcpServers.w.oauth: expected true, false or an object"),
        ({"mcpServers": {"w": {"url": "http://h", "oauth": {"scope": []}}}}, "mcpServers.w.oauth.scope: unknown key (did you mean 'scopes'?)"),
        ({"mcpServers": {"w": {"url": "http://h", "oauth": {"redirectPort": 70000}}}}, "mcpServers.w.oauth.redirectPort: expected a TCP port"),
        ({"mcpServers": {"w": {"command": "x", "protocol": "2024-01-01"}}}, "mcpServers.w.protocol: expected one of auto, legacy, 2026-07-28"),
        ({"mcpServers": {"w": {"command": "x", "tools": {"exclude": "a"}}}}, "mcpServers.w.tools.exclude: expected a list of strings"),
        ({"mcpServers": {"w": {"command": "x", "tools": {"only": []}}}}, "mcpServers.w.tools.only: unknown key"),
        ({"mcpServers": {"w": {"command": "x", "tools": {"include": [""]}}}}, "mcpServers.w.tools.include[0]: expected a tool name"),
        ({"weavehost": {"roots": "/tmp"}}, "weavehost.roots: expected a list of strings"),
        ({"mcpServers": {"w": {"command": "x"}}, "weavehost": {"approved": {"v": {"t": "a" * 64}}}},
         "weavehost.approved.v: no server named 'v' in mcpServers"),
        ({"mcpServers": {"w": {"command": "x"}}, "weavehost": {"approved": {"w": {"t": "abc123"}}}},
         "weavehost.approved.w.t: expected the tool's schema hash (16 to 64 hex digits"),
        ({"mcpServers": {"w": {"command": "x"}}, "weavehost": {"approved": {"w": {"t": "z" * 16}}}},
         "weavehost.approved.w.t: expected the tool's schema hash"),
    ],
)  # fmt: skip
def test_a_malformed_issue_13_setting_names_the_key_and_the_problem(
    tmp_path: Path, document: object, fragment: str
) -> None:
    path = write(tmp_path, document)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    assert fragment in str(info.value)


def test_a_secret_never_appears_in_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("API_TOKEN", "tok-123")
    with pytest.raises(ConfigError) as info:
        parse_config({"mcpServers": {"w": {"url": "${API_TOKEN}"}}})
    assert "tok-123" not in str(info.value)
    assert "mcpServers.w.url: expected an http:// or https:// URL, got '${API_TOKEN}'" in str(
        info.value
    )


@pytest.mark.parametrize(
    ("written", "parsed"),
    [
        ("auto", "auto"),
        ("legacy", "legacy"),
        ("2026-07-28", "2026-07-28"),
        ("2025-06-18", "legacy"),
        ("2024-11-05", "legacy"),
    ],
)
def test_protocol_is_auto_legacy_or_a_modern_version_and_a_handshake_version_means_legacy(
    written: str, parsed: str
) -> None:
    config = parse_config({"mcpServers": {"w": {"command": "x", "protocol": written}}})
    assert config.server("w").protocol == parsed
    assert parse_config({"mcpServers": {"w": {"command": "x"}}}).server("w").protocol == "auto"


def test_oauth_tool_filters_roots_and_approvals_are_read() -> None:
    digest = "AB" * 32
    config = parse_config(
        {
            "servers": {
                "gh": {"type": "http", "url": "https://h/mcp", "oauth": {"scopes": ["repo", "read"], "clientName": "me", "redirectPort": 8765}},
                "plain": {"url": "https://h2/mcp", "oauth": True, "tools": {"include": ["get_*"], "exclude": ["get_secret"]}},
                "off": {"url": "https://h3/mcp", "oauth": False},
            },
            "weavehost": {"roots": ["~/site", "."], "approved": {"gh": {"search": digest, "list": "0123456789abcdef"}}},
        }
    )  # fmt: skip
    gh, plain, off = config.server("gh"), config.server("plain"), config.server("off")
    assert (gh.oauth, gh.oauth_scopes, gh.oauth_client_name, gh.oauth_redirect_port) == (
        True,
        ("repo", "read"),
        "me",
        8765,
    )
    assert (plain.oauth, plain.oauth_scopes, plain.oauth_redirect_port) == (True, None, None)
    assert (plain.tools_include, plain.tools_exclude) == (("get_*",), ("get_secret",))
    assert (gh.tools_include, gh.tools_exclude, off.oauth) == (None, (), False)
    assert config.roots == ("~/site", ".")
    assert config.approved == {"gh": {"search": digest.lower(), "list": "0123456789abcdef"}}


def test_answer_drafts_are_on_by_default_and_a_config_or_a_flag_turns_them_off() -> None:
    assert parse_config({"mcpServers": {}}).answer_drafts is True
    off = parse_config({"mcpServers": {}, "weavehost": {"answerDrafts": False}})
    assert off.answer_drafts is False
    assert merge_flags(off, answer_drafts=True).answer_drafts is True
    assert merge_flags(off).answer_drafts is False  # no flag: as configured
    said_off = parse_config({"mcpServers": {}, "weavehost": {"answerDrafts": "off"}})
    assert said_off.answer_drafts is False  # "on"/"off" as for every other switch
    with pytest.raises(ConfigError, match=r"weavehost\.answerDrafts"):
        parse_config({"mcpServers": {}, "weavehost": {"answerDrafts": "yes"}})


def test_the_kv_cache_has_q8_0_keys_unless_the_config_or_a_flag_names_another_type() -> None:
    assert parse_config({"mcpServers": {}}).kv_cache == "q8_0-k" == DEFAULT_KV_CACHE
    half = parse_config({"mcpServers": {}, "weavehost": {"kvCache": "q8_0"}})
    assert half.kv_cache == "q8_0"
    assert merge_flags(half).kv_cache == "q8_0"  # no flag: as configured
    assert merge_flags(half, kv_cache="f16").kv_cache == "f16"
    with pytest.raises(ConfigError, match=r"weavehost\.kvCache.*q8_0-k, f16, q8_0"):
        parse_config({"mcpServers": {}, "weavehost": {"kvCache": "q4_0"}})
    with pytest.raises(ConfigError, match=r"--kv-cache 'q4_0'"):
        merge_flags(half, kv_cache="q4_0")
