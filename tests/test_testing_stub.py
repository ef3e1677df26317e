"""Stub servers from a spec (weavehost.testing.StubServer, ``weavehost stub``), shown through the host.

Every behaviour of the spec is run as a real stub process over real stdio (or streamable HTTP)
and checked by weavehost's reaction to it: the pool's errors, respawns, timeouts, progress
records, catalog, caps, and the sampling and elicitation doubles it offers. Bad specs are
refused with the JSON path of the fault, from the library and from both command lines.
"""

# ruff: noqa: E501 - test names are sentences and spec tables read best one row a line

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from weavehost.cli import main
from weavehost.config import HostConfig, Limits, ServerConfig, Timeouts
from weavehost.errors import (
    ConfigError,
    MessageTooLargeError,
    ServerDiedError,
    ServerTimeoutError,
    StubSpecError,
)
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.features import (
    ClientFeatures,
    ElicitationReply,
    ElicitationRequest,
    Progress,
    SamplingReply,
    SamplingRequest,
)
from weavehost.mcp.servers import ServerPool
from weavehost.testing import StubServer, load_spec
from weavehost.testing.spec import schema
from weavehost.testing.stub import CRASH_EXIT_CODE

DATA = Path(__file__).parent / "data" / "stubs"
FAST = Timeouts(startup=20, list_tools=10, call=10, ping=5, shutdown_grace=0.5, kill_grace=0.5)
BOUND_S = 30  # one test's pool, on a busy 2-core machine
SUBPROCESS_BOUND_S = 60
# The stub speaks both eras: "auto" gets the 2026-07-28 one, "legacy" the initialize handshake.
ERAS = {"2026-07-28": "both", "handshake": "legacy"}
VERSIONS = {"2026-07-28": "2026-07-28", "handshake": "2025-11-25"}

CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def tool(name: str, **fields: Any) -> dict[str, Any]:
    return {"name": name, "description": f"The {name} tool.", "inputSchema": CITY} | fields


def spec(*tools: dict[str, Any], era: str = "2026-07-28", **top: Any) -> dict[str, Any]:
    return {"name": "s", "protocol": ERAS[era], "tools": list(tools)} | top


@asynccontextmanager
async def pool_over(
    stub: StubServer, *, features: ClientFeatures | None = None, **config: Any
) -> AsyncIterator[ServerPool]:
    """A pool with ``stub`` as its one server (``s``), bounded as a whole."""
    host = HostConfig(servers=(stub.server_config(),), timeouts=FAST, **config)
    with anyio.fail_after(BOUND_S):
        async with ServerPool(host, features=features, restart_backoff=0) as pool:
            yield pool


def text(result: Any) -> str:
    return result.content[0].text


@dataclass
class AnsweringSampler:
    """The model double: answers every sampling request with ``reply``, keeping the requests."""

    reply: SamplingReply
    seen: list[SamplingRequest] = field(default_factory=list)

    async def sample(self, request: SamplingRequest) -> SamplingReply:
        self.seen.append(request)
        return self.reply


@dataclass
class AnsweringElicitor:
    """The person double: answers every elicitation with ``reply``, keeping the requests."""

    reply: ElicitationReply
    seen: list[ElicitationRequest] = field(default_factory=list)

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply:
        self.seen.append(request)
        return self.reply


# --------------------------------------------------------------------------- responses


@pytest.mark.anyio
async def test_tools_are_listed_with_their_input_and_output_schemas_and_annotations() -> None:
    forecast = tool(
        "get_forecast",
        title="Forecast",
        outputSchema={"type": "object", "properties": {"temp": {"type": "number"}}},
        annotations={"readOnlyHint": True},
    )
    with StubServer(spec(forecast, {"name": "bare"}, {"name": "get weather!"})) as stub:
        async with pool_over(stub) as pool:
            listed = {t["name"]: t for t in await pool.list_tools("s")}
    assert listed["get_forecast"]["inputSchema"] == CITY
    assert listed["get_forecast"]["outputSchema"] == forecast["outputSchema"]
    assert listed["get_forecast"]["annotations"] == {"readOnlyHint": True}
    assert listed["get_forecast"]["title"] == "Forecast"
    assert listed["bare"]["inputSchema"] == {"type": "object", "properties": {}}
    assert "get weather!" in listed, "a name outside MCP's rules is served as written"


@pytest.mark.anyio
async def test_a_fixed_text_a_template_structured_content_and_an_error_come_back_as_the_spec_says() -> (
    None
):
    weather = {"temp": 21, "city": "{{city}}"}
    stub_spec = spec(
        tool("fixed", response={"text": "always this"}),
        tool("templated", response={"text": "It is sunny in {{city}}"}),
        tool("structured", response={"structuredContent": weather}),
        tool("failing", response={"error": "no forecast for {{city}}"}),
        tool("default"),
    )
    with StubServer(stub_spec) as stub:
        async with pool_over(stub) as pool:
            fixed = await pool.call_tool("s", "fixed", {"city": "Oslo"})
            templated = await pool.call_tool("s", "templated", {"city": "Oslo"})
            structured = await pool.call_tool("s", "structured", {"city": "Oslo"})
            failing = await pool.call_tool("s", "failing", {"city": "Lima"})
            default = await pool.call_tool("s", "default", {"city": "Oslo"})
            unknown = await pool.call_tool("s", "nope", {})
    assert (text(fixed), fixed.is_error) == ("always this", False)
    assert text(templated) == "It is sunny in Oslo"
    assert structured.structured_content == {"temp": 21, "city": "Oslo"}
    assert json.loads(text(structured)) == {"temp": 21, "city": "Oslo"}
    assert (text(failing), failing.is_error) == ("no forecast for Lima", True)
    assert text(default) == "ok"
    assert unknown.is_error and "unknown tool 'nope'" in text(unknown)


@pytest.mark.anyio
async def test_a_template_whose_argument_is_missing_is_an_error_result_that_names_it() -> None:
    with StubServer(spec(tool("templated", response={"text": "It is {{city}}"}))) as stub:
        async with pool_over(stub) as pool:
            result = await pool.call_tool("s", "templated", {})
            after = await pool.call_tool("s", "templated", {"city": "Oslo"})
    assert result.is_error
    assert text(result) == (
        "stub tool 'templated': its template needs 'city', which the call did not give"
    )
    assert text(after) == "It is Oslo", "the session goes on"


@pytest.mark.anyio
@pytest.mark.parametrize("era", list(ERAS))
async def test_arguments_named_like_the_stubs_own_faults_are_plain_template_values(
    era: str,
) -> None:
    odd = {
        "type": "object",
        "properties": {"__missing__": {"type": "string"}, "__refused__": {"type": "string"}},
    }
    form = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    stub_spec = spec(
        tool("echo", inputSchema=odd, response={"text": "{{__missing__}} and {{__refused__}}"}),
        tool("ask", inputSchema=odd, ask_user={"message": "Sure?", "schema": form}, response={"text": "{{action}} {{__refused__}}"}),
        era=era,
    )  # fmt: skip
    arguments = {"__missing__": "city", "__refused__": "no"}
    elicitor = AnsweringElicitor(ElicitationReply("accept", {"ok": True}))
    with StubServer(stub_spec) as stub:
        async with pool_over(stub, features=ClientFeatures(elicitor=elicitor)) as pool:
            echo = await pool.call_tool("s", "echo", arguments)
            ask = await pool.call_tool("s", "ask", arguments)
    assert (text(echo), echo.is_error) == ("city and no", False)
    assert (text(ask), ask.is_error) == ("accept no", False)


@pytest.mark.anyio
async def test_a_sequence_answers_one_item_per_call_and_repeats_its_last_item() -> None:
    steps = [{"text": "first"}, {"error": "second fails"}, {"text": "then {{city}}"}]
    with StubServer(spec(tool("seq", response={"sequence": steps}))) as stub:
        async with pool_over(stub) as pool:
            results = [await pool.call_tool("s", "seq", {"city": "Oslo"}) for _ in range(4)]
    assert [(text(r), r.is_error) for r in results] == [
        ("first", False),
        ("second fails", True),
        ("then Oslo", False),
        ("then Oslo", False),
    ]


# --------------------------------------------------------------------------- behaviours


@pytest.mark.anyio
async def test_crash_after_n_calls_fails_call_n_plus_1_with_server_died_and_the_pool_respawns_the_stub() -> (
    None
):
    with StubServer(spec(tool("fragile", behaviour={"crash_after": 1}))) as stub:
        async with pool_over(stub) as pool:
            first = await pool.call_tool("s", "fragile", {"city": "Oslo"})
            with pytest.raises(ServerDiedError, match=f"exited with code {CRASH_EXIT_CODE}"):
                await pool.call_tool("s", "fragile", {"city": "Oslo"})
            respawned = await pool.call_tool("s", "fragile", {"city": "Oslo"})  # a fresh count
            restarts = pool.status()["s"].restarts
    assert text(first) == text(respawned) == "ok"
    assert restarts == 1
    assert len(stub.calls("fragile")) == 3, "the call that crashed was recorded before it"


@pytest.mark.anyio
async def test_crash_after_0_crashes_on_the_first_call_and_server_behaviour_counts_every_tool() -> (
    None
):
    stub_spec = spec(tool("a"), tool("b"), behaviour={"crash_after": 0})
    with StubServer(stub_spec) as stub:
        async with pool_over(stub) as pool:
            with pytest.raises(ServerDiedError):
                await pool.call_tool("s", "b", {"city": "Oslo"})
    assert [c["name"] for c in stub.calls()] == ["b"]


@pytest.mark.anyio
async def test_a_hanging_tool_times_out_with_server_timeout_error_and_the_cancel_reaches_the_stub() -> (
    None
):
    with StubServer(spec(tool("stuck", behaviour={"hang": True}), tool("fine"))) as stub:
        async with pool_over(stub) as pool:
            with pytest.raises(ServerTimeoutError, match=r"did not answer tools/call 'stuck'"):
                await pool.call_tool("s", "stuck", {"city": "Oslo"}, timeout=0.3)
            after = await pool.call_tool("s", "fine", {"city": "Oslo"})
    assert text(after) == "ok", "the session goes on"
    [stuck] = [r for r in stub.requests() if (r["params"] or {}).get("name") == "stuck"]
    cancels = [n for n in stub.notifications() if n["method"] == "notifications/cancelled"]
    # (the pool also cancels its subscriptions/listen stream when it closes)
    assert stuck["id"] in [c["params"]["requestId"] for c in cancels]


@pytest.mark.anyio
async def test_a_delay_holds_the_answer_back_and_a_shorter_call_bound_times_it_out() -> None:
    with StubServer(spec(tool("slow", behaviour={"delay_s": 0.4}))) as stub:
        async with pool_over(stub) as pool:
            started = anyio.current_time()
            result = await pool.call_tool("s", "slow", {"city": "Oslo"})
            waited = anyio.current_time() - started
            with pytest.raises(ServerTimeoutError):
                await pool.call_tool("s", "slow", {"city": "Oslo"}, timeout=0.1)
    assert text(result) == "ok" and waited >= 0.4


@pytest.mark.anyio
@pytest.mark.parametrize("era", list(ERAS))
async def test_progress_notifications_reach_the_pool_as_progress_records(era: str) -> None:
    with StubServer(spec(tool("steps", behaviour={"progress": 3}), era=era)) as stub:
        async with pool_over(stub) as pool:
            assert pool.status()["s"].protocol == VERSIONS[era]
            seen: list[Progress] = []
            result = await pool.call_tool("s", "steps", {"city": "Oslo"}, on_progress=seen.append)
    assert text(result) == "ok"
    assert seen == [Progress("s", i, 3, f"step {i} of 3") for i in (1, 2, 3)]


@pytest.mark.anyio
async def test_garbage_lines_on_stdout_are_skipped_and_the_session_goes_on() -> None:
    stub_spec = spec(tool("noisy", behaviour={"garbage_stdout": 3}, response={"text": "{{city}}"}))
    with StubServer(stub_spec) as stub:
        async with pool_over(stub) as pool:
            first = await pool.call_tool("s", "noisy", {"city": "Oslo"})
            second = await pool.call_tool("s", "noisy", {"city": "Lima"})
            await pool.ping("s")
            restarts = pool.status()["s"].restarts
    assert (text(first), text(second), restarts) == ("Oslo", "Lima", 0)


@pytest.mark.anyio
@pytest.mark.parametrize("era", list(ERAS))
async def test_a_tool_list_that_changes_after_n_calls_reaches_the_catalog(era: str) -> None:
    stub_spec = spec(
        tool("switch", behaviour={"tools_change_after": 2}),
        tool("doomed"),
        tool("renamed_later"),
        era=era,
        tools_change={
            "add": [tool("added")],
            "remove": ["doomed"],
            "update": [{"name": "renamed_later", "description": "Changed under you."}],
        },
    )
    with StubServer(stub_spec) as stub:
        async with pool_over(stub) as pool:
            catalog = await Catalog.load(pool)
            before = sorted(catalog.names)
            changed = anyio.Event()
            pool.on_tools_changed(lambda server: changed.set())
            await pool.call_tool("s", "switch", {"city": "Oslo"})
            assert not changed.is_set()
            await pool.call_tool("s", "switch", {"city": "Oslo"})
            await changed.wait()
            spec_now = await catalog.current("renamed_later")
            after = sorted(catalog.names)
    assert before == ["doomed", "renamed_later", "switch"]
    assert after == ["added", "renamed_later", "switch"]
    assert spec_now.description == "Changed under you." and spec_now.changed


@pytest.mark.anyio
async def test_an_oversized_result_fails_its_call_at_the_message_cap_and_the_session_goes_on() -> (
    None
):
    stub_spec = spec(tool("huge", behaviour={"oversized_result": 200_000}), tool("small"))
    with StubServer(stub_spec) as stub:
        async with pool_over(stub, limits=Limits(max_message_bytes=50_000)) as pool:
            with pytest.raises(MessageTooLargeError):
                await pool.call_tool("s", "huge", {"city": "Oslo"})
            small = await pool.call_tool("s", "small", {"city": "Oslo"})
    assert text(small) == "ok"


@pytest.mark.anyio
async def test_an_oversized_result_under_the_cap_comes_back_whole() -> None:
    with StubServer(spec(tool("big", behaviour={"oversized_result": 30_000}))) as stub:
        async with pool_over(stub) as pool:
            result = await pool.call_tool("s", "big", {"city": "Oslo"})
    assert text(result) == "x" * 30_000


# --------------------------------------------------------------------------- resources, prompts


@pytest.mark.anyio
async def test_resources_are_listed_and_read_and_prompts_are_rendered_from_their_arguments() -> (
    None
):
    stub_spec = spec(
        resources=[
            {"uri": "note://readme", "name": "readme", "mimeType": "text/plain", "text": "Remember the milk."}
        ],
        prompts=[
            {"name": "greet", "description": "Greet someone.", "arguments": [{"name": "who", "required": True}], "text": "Say hello to {{who}}."},
            {"name": "chat", "messages": [{"role": "user", "text": "Hi"}, {"role": "assistant", "text": "Hello!"}]},
        ],
    )  # fmt: skip
    with StubServer(stub_spec) as stub:
        async with pool_over(stub) as pool:
            resources = await pool.list_resources("s")
            contents = await pool.read_resource("s", "note://readme")
            prompts = await pool.list_prompts("s")
            greeting = await pool.get_prompt("s", "greet", {"who": "Ann"})
            chat = await pool.get_prompt("s", "chat")
    assert [(r.uri, r.name, r.mime_type) for r in resources] == [
        ("note://readme", "readme", "text/plain")
    ]
    assert [c.text for c in contents] == ["Remember the milk."]
    assert [p.name for p in prompts] == ["greet", "chat"]
    assert [(m.role, m.text) for m in greeting] == [("user", "Say hello to Ann.")]
    assert [(m.role, m.text) for m in chat] == [("user", "Hi"), ("assistant", "Hello!")]


# --------------------------------------------------------------------------- client features


@pytest.mark.anyio
@pytest.mark.parametrize("era", list(ERAS))
async def test_ask_model_sends_a_sampling_request_and_the_models_answer_is_in_the_result(
    era: str,
) -> None:
    ask = {
        "prompt": "Summarise the weather in {{city}}",
        "maxTokens": 20,
        "systemPrompt": "Be brief.",
    }
    stub_spec = spec(
        tool("summary", ask_model=ask, response={"text": "model said: {{answer}}"}),
        tool("plain", ask_model={"prompt": "Hi"}),
        era=era,
    )
    sampler = AnsweringSampler(SamplingReply("Sunny, 21 C.", "double", "endTurn"))
    with StubServer(stub_spec) as stub:
        async with pool_over(stub, features=ClientFeatures(sampler=sampler)) as pool:
            summary = await pool.call_tool("s", "summary", {"city": "Oslo"})
            plain = await pool.call_tool("s", "plain", {"city": "Oslo"})
    assert text(summary) == "model said: Sunny, 21 C."
    assert text(plain) == "Sunny, 21 C."
    request = sampler.seen[0]
    assert [m.text for m in request.messages] == ["Summarise the weather in Oslo"]
    assert (request.max_tokens, request.system_prompt) == (20, "Be brief.")
    assert len(stub.calls("summary")) == 1, "a 2026-07-28 retry with the answer is one call"


@pytest.mark.anyio
@pytest.mark.parametrize("era", list(ERAS))
@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            ElicitationReply("accept", {"name": "Ann"}),
            {"action": "accept", "content": {"name": "Ann"}},
        ),
        (ElicitationReply("decline"), {"action": "decline", "content": None}),
    ],
    ids=["accept", "decline"],
)
async def test_ask_user_sends_an_elicitation_and_the_action_and_content_are_in_the_result(
    era: str, reply: ElicitationReply, expected: dict[str, Any]
) -> None:
    form = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    stub_spec = spec(
        tool("who", ask_user={"message": "Who is asking about {{city}}?", "schema": form}),
        tool("greet", ask_user={"message": "Name?", "schema": form}, response={"text": "{{action}}: {{content}}"}),
        era=era,
    )  # fmt: skip
    elicitor = AnsweringElicitor(reply)
    with StubServer(stub_spec) as stub:
        async with pool_over(stub, features=ClientFeatures(elicitor=elicitor)) as pool:
            who = await pool.call_tool("s", "who", {"city": "Oslo"})
            greet = await pool.call_tool("s", "greet", {"city": "Oslo"})
    assert json.loads(text(who)) == expected
    assert text(greet) == f"{expected['action']}: {json.dumps(expected['content'])}"
    asked = elicitor.seen[0]
    assert (asked.message, asked.mode, asked.schema) == ("Who is asking about Oslo?", "form", form)


@pytest.mark.anyio
async def test_ask_model_without_a_sampler_is_an_error_result_and_the_session_goes_on() -> None:
    stub_spec = spec(tool("summary", ask_model={"prompt": "Hi"}), tool("fine"), era="handshake")
    with StubServer(stub_spec) as stub:
        async with pool_over(stub) as pool:
            refused = await pool.call_tool("s", "summary", {"city": "Oslo"})
            fine = await pool.call_tool("s", "fine", {"city": "Oslo"})
    assert refused.is_error and text(refused).startswith("the client did not answer")
    assert text(fine) == "ok"


# --------------------------------------------------------------------------- recording


@pytest.mark.anyio
async def test_every_request_the_stub_receives_is_recorded_with_method_params_and_time() -> None:
    with StubServer(spec(tool("get_forecast"), tool("other"))) as stub:
        async with pool_over(stub) as pool:
            await pool.call_tool("s", "get_forecast", {"city": "Oslo"})
            await pool.call_tool("s", "other", {"city": "Lima"})
            await pool.call_tool("s", "get_forecast", {"city": "Rome"})
        requests = stub.requests()
    methods = [r["method"] for r in requests]
    assert methods[0] == "server/discover", "the pool's first request, in the 2026-07-28 era"
    assert methods.count("tools/call") == 3
    assert all(isinstance(r["time"], float) for r in requests)
    assert [r["time"] for r in requests] == sorted(r["time"] for r in requests)
    assert [c["arguments"] for c in stub.calls("get_forecast")] == [
        {"city": "Oslo"},
        {"city": "Rome"},
    ]
    assert [c["name"] for c in stub.calls()] == ["get_forecast", "other", "get_forecast"]


def test_a_stdio_stub_starts_nothing_and_leaving_it_removes_its_files() -> None:
    with StubServer(DATA / "weather.json") as stub:
        config = stub.server_config()
        assert stub.pid is None and stub.url is None
        assert stub.spec_path.is_file()
    assert (stub.name, config.name, config.transport) == ("weather", "weather", "stdio")
    assert config.command == sys.executable
    assert list(config.args[:2]) == ["-m", "weavehost.testing.stub"]
    assert stub.server_config("w").name == "w"
    assert not stub.spec_path.parent.exists()


# --------------------------------------------------------------------------- HTTP


@pytest.mark.anyio
async def test_an_http_stub_serves_streamable_http_and_its_process_ends_with_the_context() -> None:
    async with StubServer(
        spec(tool("templated", response={"text": "It is {{city}}"})), http=True
    ) as stub:
        pid = stub.pid
        assert pid is not None and stub.url is not None and stub.url.startswith("http://127.0.0.1:")
        config = stub.server_config()
        assert config.transport == "http"
        async with pool_over(stub) as pool:
            result = await pool.call_tool("s", "templated", {"city": "Oslo"})
        assert [c["arguments"] for c in stub.calls()] == [{"city": "Oslo"}]
    assert text(result) == "It is Oslo"
    assert not _alive(pid), "leaving the context ended the stub's process"


@pytest.mark.anyio
async def test_an_http_stub_that_crashes_fails_the_call_and_still_closes_cleanly() -> None:
    async with StubServer(spec(tool("fragile", behaviour={"crash_after": 0})), http=True) as stub:
        pid = stub.pid
        async with pool_over(stub) as pool:
            with pytest.raises(ServerDiedError):
                await pool.call_tool("s", "fragile", {"city": "Oslo"})
    assert pid is not None and not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); it is gone for our purposes once it is not running.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


# --------------------------------------------------------------------------- bad specs

BAD_SPECS = {
    "a sequence item that is not an object": (
        {"tools": [{"name": "a", "response": {"sequence": [{"text": "x"}, {"text": "y"}, "oops"]}}]},
        'tools[0].response.sequence[2]: expected an object, got "oops"',
    ),
    "a misspelt behaviour": (
        {"tools": [{"name": "a", "behaviour": {"delay": 1}}]},
        "tools[0].behaviour: unknown key 'delay'; did you mean 'delay_s'?",
    ),
    "a tool without a name": ({"tools": [{"description": "?"}]}, "tools[0]: missing required key 'name'"),
    "a negative crash_after": (
        {"tools": [{"name": "a", "behaviour": {"crash_after": -1}}]},
        "tools[0].behaviour.crash_after: expected a number >= 0, got -1",
    ),
    "tools that are not a list": ({"tools": {"a": {}}}, "tools: expected a list"),
    "an empty tool name": ({"tools": [{"name": ""}]}, "tools[0].name: expected at least 1 character(s)"),
    "an unknown protocol": ({"protocol": "2020"}, "protocol: expected one of 'both', 'legacy'"),
    "a tool listed twice": ({"tools": [{"name": "a"}, {"name": "a"}]}, "tools[1].name: 'a' is listed twice"),
    "a change with nothing to change": (
        {"tools": [{"name": "a", "behaviour": {"tools_change_after": 1}}]},
        "tools[0].behaviour.tools_change_after: there is no top-level `tools_change`",
    ),
    "a change that removes a tool that is not there": (
        {"tools": [{"name": "a"}], "tools_change": {"remove": ["b"]}},
        "tools_change.remove[0]: no tool named 'b' in `tools`",
    ),
    "a prompt with neither text nor messages": ({"prompts": [{"name": "p"}]}, "prompts[0]: give `text` or `messages`"),
    "a sequence beside a text": (
        {"tools": [{"name": "a", "response": {"sequence": [{"text": "x"}], "text": "y"}}]},
        "tools[0].response: a `sequence` stands alone",
    ),
    "a spec that is not an object": ([1, 2], "(spec): expected an object"),
}  # fmt: skip


@pytest.mark.parametrize(("bad", "message"), list(BAD_SPECS.values()), ids=list(BAD_SPECS))
def test_a_bad_spec_is_refused_with_a_stub_spec_error_that_names_the_json_path(
    bad: Any, message: str
) -> None:
    with pytest.raises(StubSpecError) as caught:
        StubServer(bad)
    assert str(caught.value).startswith(message), str(caught.value)
    assert isinstance(caught.value, ConfigError) and caught.value.exit_code == 2


def test_a_spec_file_that_is_not_json_or_not_there_is_a_stub_spec_error(tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"tools": [\n  {"name": }]}')
    with pytest.raises(StubSpecError, match=r"broken.json: not valid JSON \(line 2, column 12"):
        load_spec(broken)
    with pytest.raises(StubSpecError, match="no such spec file"):
        load_spec(tmp_path / "missing.json")


def test_a_yaml_spec_loads_like_json_and_without_pyyaml_says_to_use_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("yaml")
    path = tmp_path / "forecast.yaml"
    path.write_text("tools:\n  - name: get_forecast\n    response:\n      text: It is {{city}}\n")
    loaded = load_spec(path)
    assert loaded["name"] == "forecast"
    assert loaded["tools"][0]["response"] == {"text": "It is {{city}}"}
    monkeypatch.setitem(sys.modules, "yaml", None)  # as if PyYAML were not installed
    with pytest.raises(
        StubSpecError, match=r"needs PyYAML.*write the spec as JSON, or `pip install pyyaml`"
    ):
        load_spec(path)


def test_the_published_schema_is_valid_draft_2020_12_and_accepts_the_example_specs() -> None:
    published = schema()
    Draft202012Validator.check_schema(published)
    assert published["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    for path in sorted(DATA.glob("*.json")):
        Draft202012Validator(published).validate(json.loads(path.read_text()))
        load_spec(path)


# --------------------------------------------------------------------------- command lines


def test_weavehost_stub_with_a_bad_spec_prints_one_error_line_naming_the_path_and_exits_2(
    tmp_path: Path,
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(BAD_SPECS["a sequence item that is not an object"][0]))
    result = CliRunner().invoke(main, ["stub", str(bad)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert errors == [f"Error: {BAD_SPECS['a sequence item that is not an object'][1]}"]


def test_the_stub_module_with_a_bad_spec_prints_one_error_line_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"tools": [{"name": "a", "behaviour": {"delay": 1}}]}')
    done = subprocess.run(
        [sys.executable, "-m", "weavehost.testing.stub", str(bad)],
        capture_output=True, text=True, timeout=SUBPROCESS_BOUND_S, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "Error: tools[0].behaviour: unknown key 'delay'; did you mean 'delay_s'?"
    )


def weavehost_command() -> str:
    script = Path(sys.executable).with_name("weavehost")
    if not script.is_file():
        pytest.fail(f"the weavehost script is not installed next to {sys.executable}")
    return str(script)


@pytest.mark.anyio
async def test_weavehost_stub_serves_a_spec_file_over_stdio(tmp_path: Path) -> None:
    record = tmp_path / "record.jsonl"
    server = ServerConfig(
        name="weather",
        command=weavehost_command(),
        args=("stub", str(DATA / "weather.json"), "--record", str(record)),
    )
    config = HostConfig(servers=(server,), timeouts=FAST)
    with anyio.fail_after(BOUND_S):
        async with ServerPool(config) as pool:
            result = await pool.call_tool("weather", "get_forecast", {"city": "Oslo"})
    assert text(result) == "It is sunny in Oslo"
    assert '"tools/call"' in record.read_text()


@pytest.mark.anyio
async def test_weavehost_stub_over_http_prints_its_url_and_serves_it() -> None:
    process = await anyio.open_process(
        [weavehost_command(), "stub", str(DATA / "weather.json"), "--http", "--port", "0"],
        start_new_session=True,
    )
    try:
        assert process.stdout is not None
        with anyio.fail_after(BOUND_S):
            line = (await process.stdout.receive()).decode()
        url = line.split("serving ", 1)[1].strip()
        assert line.startswith("weavehost stub 'weather' serving http://127.0.0.1:")
        config = HostConfig(servers=(ServerConfig(name="w", url=url),), timeouts=FAST)
        with anyio.fail_after(BOUND_S):
            async with ServerPool(config) as pool:
                result = await pool.call_tool("w", "get_forecast", {"city": "Lima"})
        assert text(result) == "It is sunny in Lima"
    finally:
        process.terminate()
        with anyio.fail_after(10):
            await process.wait()
        await process.aclose()
