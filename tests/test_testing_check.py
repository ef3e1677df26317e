"""`weavehost check SERVER…`: the conformance and robustness check a server author runs.

Against real servers over real stdio: the example weather server passes with its read-only tools
called; a deliberately broken stub (plus a raw server with a name the stub's spec cannot hold)
fails with each fault named; the MCP reference server (server-everything) is checked and only
warned about. The argument generator is held to its invariants with hypothesis, and the static
checks are tested on tool dicts directly.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from tests.everything import everything_command
from weavehost.cli import main
from weavehost.config import HostConfig, Limits, ServerConfig
from weavehost.errors import ConfigError
from weavehost.testing import StubServer
from weavehost.testing.check import MUTATING_WORDS, tool_findings
from weavehost.testing.check_arguments import invalid_arguments, valid_arguments
from weavehost.testing.check_cli import choose_servers

ROOT = Path(__file__).resolve().parents[1]
WEATHER = str(ROOT / "tools" / "weather.py")
RAW_SERVER = ROOT / "tests" / "host_fixtures" / "raw_server.py"
OBJ = {"type": "object", "properties": {}}
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
READ_ONLY = {"readOnlyHint": True}

BROKEN = {
    "name": "broken",
    "tools": [
        {"name": "bad_schema", "description": "A schema that is not JSON Schema.",
         "inputSchema": {"type": "object", "properties": {"n": {"type": "int"}}}},
        {"name": "remote_ref", "description": "A $ref to the network.",
         "inputSchema": {"type": "object", "properties": {"city": {"$ref": "https://example.com/city.json"}}}},
        {"name": "delete_all", "description": "Deletes everything, says it reads.",
         "annotations": READ_ONLY, "inputSchema": OBJ, "response": {"text": "deleted"}},
        {"name": "crashes", "description": "Crashes on every call.", "annotations": READ_ONLY,
         "inputSchema": CITY, "behaviour": {"crash_after": 0}},
        {"name": "hangs", "description": "Never answers.", "annotations": READ_ONLY,
         "inputSchema": CITY, "behaviour": {"hang": True}},
        # Answers its first call (the valid arguments, with --examples 1) and crashes on the
        # next, the first invalid ones: a tool that meets invalid input by crashing.
        {"name": "fragile", "description": "Crashes on invalid input.", "annotations": READ_ONLY,
         "inputSchema": CITY, "behaviour": {"crash_after": 1}, "response": {"text": "ok {{city}}"}},
        {"name": "big_result", "description": "A result over the cap.", "annotations": READ_ONLY,
         "inputSchema": OBJ, "behaviour": {"oversized_result": 20000}},
        {"name": "wipe_disk", "description": "Not read-only: never called.",
         "inputSchema": OBJ, "response": {"text": "wiped"}},
    ],
}  # fmt: skip
RAW_TOOLS = [
    {"name": "get weather!", "description": "A name with a space and a '!'.",
     "annotations": READ_ONLY, "inputSchema": CITY},
    # the stub's SDK server would coerce "yes" to true; the raw server sends it as it is
    {"name": "odd_hint", "description": "A hint that is a string.",
     "annotations": {"readOnlyHint": "yes"}, "inputSchema": OBJ},
    {"name": "dup", "description": "Listed twice.", "inputSchema": OBJ},
    {"name": "dup", "description": "Listed twice.", "inputSchema": OBJ},
]  # fmt: skip


def check(*args: str) -> Result:
    return CliRunner().invoke(main, ["check", *args])


def report(result: Result) -> dict[str, Any]:
    assert "Traceback" not in result.output, result.output
    return json.loads(result.stdout)


def results(payload: dict[str, Any]) -> dict[tuple[str | None, str], str]:
    """(tool, check) -> the worst result among its findings."""
    order = ["pass", "skip", "warn", "fail"]
    out: dict[tuple[str | None, str], str] = {}
    for f in payload["findings"]:
        key = (f["tool"], f["check"])
        if key not in out or order.index(f["result"]) > order.index(out[key]):
            out[key] = f["result"]
    return out


def details(payload: dict[str, Any], tool: str, check_name: str) -> str:
    return " | ".join(
        f["detail"] for f in payload["findings"] if f["tool"] == tool and f["check"] == check_name
    )


# --------------------------------------------------------------------------- real servers


def test_the_weather_server_with_its_read_only_tools_called_passes_and_exits_0() -> None:
    result = check(WEATHER, "--call-read-only")
    assert result.exit_code == 0, result.output
    assert "check passed: 1 server, " in result.stdout  # one server, not "1 servers"
    assert "get_forecast" in result.stdout and "invalid-calls" in result.stdout
    assert "FAIL" not in result.stdout


def test_the_json_report_has_servers_findings_and_every_call_with_its_arguments() -> None:
    result = check(WEATHER, "--call-read-only", "--examples", "2", "--json")
    assert result.exit_code == 0, result.output
    payload = report(result)
    assert set(payload) == {"ok", "strict", "elapsed_s", "summary", "servers", "findings", "calls"}
    assert payload["ok"] is True and payload["summary"]["fail"] == 0
    assert payload["servers"] == [
        {"name": "weather", "command": f"{shlex.join([sys.executable, WEATHER])}", "started": True,
         "protocol": payload["servers"][0]["protocol"], "tools": 2, "resources": 0, "prompts": 0}
    ]  # fmt: skip
    finding_keys = {"server", "tool", "check", "result", "detail", "time_s"}
    assert all(set(f) == finding_keys for f in payload["findings"])
    forecast = [c for c in payload["calls"] if c["tool"] == "get_forecast"]
    assert {c["kind"] for c in forecast} == {"valid", "invalid"}
    assert all(c["outcome"] == "ok" for c in forecast if c["kind"] == "valid")
    # weather's SDK server validates its arguments: each invalid set comes back as an error
    assert all(c["outcome"] in ("isError", "rpc-error") for c in forecast if c["kind"] == "invalid")
    assert all(c["reason"] for c in forecast if c["kind"] == "invalid")
    assert payload["summary"]["calls"] == len(payload["calls"]) <= 2 * 2 * 2


def test_a_broken_stub_fails_with_each_fault_named_and_never_calls_a_tool_not_marked_safe(
    tmp_path: Path,
) -> None:
    tools_json = tmp_path / "misnamed.json"
    tools_json.write_text(json.dumps(RAW_TOOLS))
    with StubServer(BROKEN) as stub:
        command = stub.server_config()
        config = tmp_path / "servers.json"
        config.write_text(json.dumps({"mcpServers": {
            "broken": {"command": command.command, "args": list(command.args)},
            "misnamed": {"command": sys.executable,
                         "args": [str(RAW_SERVER), "--tools-json", str(tools_json)]},
        }}))  # fmt: skip
        result = check("--config", str(config), "--call-read-only", "--examples", "1",
                       "--timeout", "1", "--json")  # fmt: skip
        assert stub.calls("wipe_disk") == [] and stub.calls("bad_schema") == []
    assert result.exit_code == 1, result.output
    payload = report(result)
    found = results(payload)
    assert found[("bad_schema", "input-schema")] == "fail"
    assert "'int' is not valid" in details(payload, "bad_schema", "input-schema")
    assert found[("remote_ref", "remote-ref")] == "fail"
    assert "https://example.com/city.json" in details(payload, "remote_ref", "remote-ref")
    assert found[("delete_all", "read-only-hint")] == "warn"
    assert found[("odd_hint", "annotations")] == "fail"
    assert "readOnlyHint is 'yes'" in details(payload, "odd_hint", "annotations")
    assert found[("crashes", "valid-calls")] == "fail"
    assert 'the server died on {"city": ' in details(payload, "crashes", "valid-calls")
    assert found[("hangs", "valid-calls")] == "fail"
    assert "it hung on" in details(payload, "hangs", "valid-calls")
    assert found[("fragile", "valid-calls")] == "pass"
    assert found[("fragile", "invalid-calls")] == "fail"
    assert "the server died on {} (without required 'city')" in details(
        payload, "fragile", "invalid-calls"
    )
    assert found[("big_result", "result-size")] == "warn"
    assert found[("get weather!", "name")] == "fail"
    assert found[(None, "unique-names")] == "fail"
    assert "'dup'" in details(payload, None, "unique-names")
    assert payload["ok"] is False


def test_a_server_that_accepts_invalid_arguments_is_a_warning_that_fails_only_with_strict() -> None:
    lenient = {"name": "lenient", "tools": [{"name": "lookup", "description": "Looks up a city.",
               "annotations": READ_ONLY, "inputSchema": CITY, "response": {"text": "found"}}]}  # fmt: skip
    with StubServer(lenient) as stub:
        target = shlex.join(stub.command)
        relaxed = check(target, "--call-read-only", "--examples", "1", "--json")
        strict = check(target, "--call-read-only", "--examples", "1", "--strict")
    assert relaxed.exit_code == 0, relaxed.output
    assert results(report(relaxed))[("lookup", "invalid-calls")] == "warn"
    assert "accepted invalid arguments without an error" in relaxed.stdout
    assert strict.exit_code == 1, strict.output
    assert "check FAILED" in strict.stdout and "(--strict)" in strict.stdout


def test_no_call_starts_after_the_budget_is_spent() -> None:
    slow = {"name": "slow", "tools": [
        {"name": f"slow_{i}", "description": "Slow.", "annotations": READ_ONLY, "inputSchema": CITY,
         "behaviour": {"delay_s": 0.4}, "response": {"text": "done"}} for i in range(3)]}  # fmt: skip
    with StubServer(slow) as stub:
        result = check(shlex.join(stub.command), "--call-read-only", "--budget", "0.2", "--json")
        assert len(stub.calls()) == 1  # the one call started within the budget
    payload = report(result)
    assert result.exit_code == 0, result.output
    assert "budget of 0.2 s" in details(payload, "slow_2", "calls")
    assert results(payload)[("slow_2", "calls")] == "skip"


def test_a_call_still_reporting_progress_at_its_timeout_is_slow_a_warning_not_a_hang() -> None:
    slow = {"name": "slow", "tools": [
        {"name": "render", "description": "Renders slowly.", "annotations": READ_ONLY,
         "inputSchema": OBJ, "behaviour": {"progress": 2, "delay_s": 5}, "response": {"text": "done"}}]}  # fmt: skip
    with StubServer(slow) as stub:
        result = check(shlex.join(stub.command), "--call-read-only", "--timeout", "1", "--json")
    payload = report(result)
    assert result.exit_code == 0, result.output
    assert results(payload)[("render", "valid-calls")] == "warn"
    assert "still working after 1 s (2 progress notifications)" in details(
        payload, "render", "valid-calls"
    )


def test_server_everything_is_checked_and_at_most_warned_about() -> None:
    # trigger-long-running-operation takes 10 s by default, reporting progress: slow, a warning
    result = check(everything_command(), "--call-read-only", "--timeout", "3", "--budget", "30",
                   "--json")  # fmt: skip
    payload = report(result)
    failures = [f for f in payload["findings"] if f["result"] == "fail"]
    assert failures == [] and result.exit_code == 0, failures
    assert payload["servers"][0]["started"] and payload["servers"][0]["tools"] > 5
    assert payload["servers"][0]["resources"] > 0 and payload["servers"][0]["prompts"] > 0
    assert payload["calls"], "server-everything marks read-only tools; some were called"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "no servers"),
        (["nobody"], "no server named 'nobody'"),
        ([WEATHER, "--allow", "launch_*"], "--allow 'launch_*' matches no tool"),
    ],
    ids=["no server", "an unknown server name", "an allow pattern that matches no tool"],
)
def test_bad_usage_is_one_error_line_and_exit_2(args: list[str], message: str) -> None:
    result = check(*args)
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and message in errors[0], result.output
    assert result.exit_code == 2


def test_a_bare_word_that_names_a_program_is_not_run_and_the_error_gives_its_path() -> None:
    # `weavehost check mcp-server-time`: a bare word may name any program, so it never starts
    # one; the error says which path would.
    program = shutil.which("git")
    assert program is not None  # CI installs git (the third-party set's repository fixture)
    result = check("git")
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert result.exit_code == 2 and len(errors) == 1, result.output
    assert errors[0].endswith(f"'git' is a program on PATH: pass {program} to start it")


# --------------------------------------------------------------------------- choosing servers


def chosen(config: HostConfig, *targets: str) -> list[tuple[str, tuple[str, ...]]]:
    return [(s.name, s.args) for s in choose_servers(config, targets).servers]


def test_several_targets_are_configured_names_or_started_servers_each_named_apart(
    tmp_path: Path,
) -> None:
    script = tmp_path / "weather.py"
    script.write_text("")
    config = HostConfig(
        servers=(ServerConfig(name="weather", command="wx"), ServerConfig(name="db", command="db"))
    )
    assert chosen(config, str(script), "db", str(script)) == [
        ("weather-2", (str(script),)), ("db", ()), ("weather-3", (str(script),))
    ]  # fmt: skip
    assert chosen(config) == [("weather", ()), ("db", ())], "no target: every configured server"


@pytest.mark.parametrize(
    "targets",
    [["db", "db"], ["weather.py", "weather"]],
    ids=["a configured name", "a started server's name"],
)
def test_a_server_named_twice_is_a_config_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, targets: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "weather.py").write_text("")
    config = HostConfig(servers=(ServerConfig(name="db", command="db"),))
    with pytest.raises(ConfigError, match=f"server {targets[1]!r} is named twice"):
        choose_servers(config, targets)


# --------------------------------------------------------------------------- static checks


def findings(tool: dict[str, Any]) -> dict[str, str]:
    return {f.check: f.result for f in tool_findings("s", tool, Limits())}


@pytest.mark.parametrize(
    ("name", "result"),
    [("get_weather", "pass"), ("files.read-v2", "pass"), ("x" * 128, "pass"), ("", "fail"),
     ("x" * 129, "fail"), ("get weather", "fail"), ("wetter/heute", "fail"), ("-lead", "warn")],
)  # fmt: skip
def test_a_tool_name_is_held_to_mcps_rule(name: str, result: str) -> None:
    assert findings({"name": name, "description": "d", "inputSchema": OBJ})["name"] == result


@pytest.mark.parametrize(
    ("name", "result"),
    [("delete_all", "warn"), ("sendEmail", "warn"), ("files.write", "warn"), ("get-forecast", "pass"),
     ("list_deleted_items", "pass"), ("add", "pass")],
)  # fmt: skip
def test_a_read_only_tool_named_like_a_change_is_a_warning(name: str, result: str) -> None:
    tool = {"name": name, "description": "d", "inputSchema": OBJ, "annotations": READ_ONLY}
    assert findings(tool)["read-only-hint"] == result


def test_the_mutating_word_list_holds_the_verbs_the_docs_name() -> None:
    assert {"delete", "remove", "send", "write", "create", "update"} <= MUTATING_WORDS
    assert not {"get", "list", "read", "search", "add", "post", "open"} & MUTATING_WORDS


def test_schema_faults_are_each_named() -> None:
    assert findings({"name": "t", "description": "d"})["input-schema"] == "fail"
    assert (
        findings({"name": "t", "description": "d", "inputSchema": {"type": "string"}})[
            "input-schema"
        ]
        == "fail"
    )
    recursive = {"type": "object", "properties": {"a": {"$ref": "#"}}}
    assert (
        findings({"name": "t", "description": "d", "inputSchema": recursive})["input-schema"]
        == "fail"
    )
    remote_out = {"name": "t", "description": "d", "inputSchema": OBJ,
                  "outputSchema": {"$ref": "https://example.com/out.json"}}  # fmt: skip
    assert findings(remote_out)["remote-ref"] == "fail"
    bad_out = {"name": "t", "description": "d", "inputSchema": OBJ, "outputSchema": {"type": 5}}
    assert findings(bad_out)["output-schema"] == "fail"
    assert findings({"name": "t", "inputSchema": OBJ})["description"] == "warn"
    hints = {"name": "t", "description": "d", "inputSchema": OBJ,
             "annotations": {"destructiveHint": 1, "title": 3}}  # fmt: skip
    assert findings(hints)["annotations"] == "fail"


# --------------------------------------------------------------------------- the generator

PROPERTY = st.one_of(
    st.builds(lambda lo, span: {"type": "integer", "minimum": lo, "maximum": lo + span},
              st.integers(-50, 50), st.integers(0, 20)),
    st.builds(lambda lo: {"type": "number", "exclusiveMinimum": lo}, st.floats(-10, 10)),
    st.builds(lambda lo, span: {"type": "string", "minLength": lo, "maxLength": lo + span},
              st.integers(0, 5), st.integers(0, 10)),
    st.builds(lambda values: {"enum": values}, st.lists(st.text(max_size=5), min_size=1, max_size=4)),
    st.just({"type": "boolean"}),
    st.just({"type": "array", "items": {"type": "integer"}, "minItems": 1, "maxItems": 3}),
    st.just({"type": "array", "prefixItems": [{"type": "string"}, {"type": "integer"}]}),
    st.just({"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]}),
    st.just({"type": "string", "format": "email"}),
)  # fmt: skip
SCHEMA = st.builds(
    lambda props, required, closed: {
        "type": "object",
        "properties": props,
        "required": sorted(set(required) & set(props)),
        **({"additionalProperties": False} if closed else {}),
    },
    st.dictionaries(st.sampled_from(["a", "b", "city", "n"]), PROPERTY, max_size=4),
    st.lists(st.sampled_from(["a", "b", "city", "n"])),
    st.booleans(),
)


@settings(max_examples=60, deadline=None)
@given(schema=SCHEMA, seed=st.integers(0, 1000))
def test_generated_valid_arguments_validate_and_invalid_ones_do_not(
    schema: dict, seed: int
) -> None:
    validator = Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    good = valid_arguments(schema, 4, seed)
    assert good, schema  # every schema drawn here is satisfiable
    assert all(validator.is_valid(args) for args in good)
    plain = Draft202012Validator(schema)
    bad = invalid_arguments(schema, good[0], 4)
    assert all(not plain.is_valid(b.arguments) and b.reason for b in bad)
    if schema["required"] or schema.get("additionalProperties") is False:
        assert bad, schema


def test_the_same_seed_gives_the_same_arguments_and_the_count_is_a_bound() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city"],
    }
    assert valid_arguments(schema, 3, seed=7) == valid_arguments(schema, 3, seed=7)
    base = valid_arguments(schema, 1)[0]
    assert len(valid_arguments(schema, 3)) <= 3 and len(invalid_arguments(schema, base, 2)) == 2
    reasons = [b.reason for b in invalid_arguments(schema, base, 10)]
    assert "without required 'city'" in reasons and "'days' past maximum" in reasons


def test_invalid_arguments_are_the_given_valid_ones_with_one_fault_each() -> None:
    schema = {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7},
        },
        "required": ["city", "days"],
    }
    base = {"city": "Bergen", "days": 3}
    bad = {b.reason: b.arguments for b in invalid_arguments(schema, base, 10)}
    assert bad["without required 'city'"] == {"days": 3}
    assert bad["'days' past maximum"] == {"city": "Bergen", "days": 8}
    assert base == {"city": "Bergen", "days": 3}, "the given arguments are not changed"


def test_an_unsatisfiable_schema_gives_no_arguments_rather_than_an_error() -> None:
    assert (
        valid_arguments({"type": "object", "properties": {"a": False}, "required": ["a"]}, 3) == []
    )
    assert (
        valid_arguments(
            {
                "type": "object",
                "properties": {"a": {"type": "string", "pattern": "^\\d{12}$"}},
                "required": ["a"],
            },
            3,
        )
        == []
    )


@pytest.mark.parametrize(
    ("response", "problem"),
    [
        ({"structuredContent": {"temp": "warm"}},
         "structured content does not match the tool's output schema: temp: 'warm' is not of type 'number'"),
        ({"text": "21 degrees"},
         "the tool declares an output schema but returned no structured content"),
    ],
    ids=["a wrong type", "no structured content"],
)  # fmt: skip
def test_structured_content_that_misses_the_output_schema_fails_in_the_words_a_host_uses(
    response: dict[str, Any], problem: str
) -> None:
    measured = {"type": "object", "properties": {"temp": {"type": "number"}}, "required": ["temp"]}
    thermometer = {"name": "thermometer", "tools": [{"name": "measure", "description": "Measures.",
                   "annotations": READ_ONLY, "inputSchema": OBJ, "outputSchema": measured,
                   "response": response}]}  # fmt: skip
    with StubServer(thermometer) as stub:
        result = check(shlex.join(stub.command), "--call-read-only", "--examples", "1", "--json")
    payload = report(result)
    assert result.exit_code == 1, result.output
    assert results(payload)[("measure", "valid-calls")] == "fail"
    assert details(payload, "measure", "valid-calls") == f"the reply was invalid on {{}}: {problem}"


def test_a_tool_that_answers_every_valid_call_with_an_error_is_a_warning_about_its_schema() -> None:
    picky = {"name": "picky", "tools": [{"name": "zone_time", "description": "Time in a zone.",
             "annotations": READ_ONLY, "inputSchema": CITY, "response": {"error": "no such zone"}}]}  # fmt: skip
    with StubServer(picky) as stub:
        result = check(shlex.join(stub.command), "--call-read-only", "--examples", "2", "--json")
    payload = report(result)
    assert result.exit_code == 0, result.output
    assert results(payload)[("zone_time", "valid-calls")] == "warn"
    assert "every valid call came back isError" in details(payload, "zone_time", "valid-calls")
