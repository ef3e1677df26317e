"""What the pool offers servers beyond their tools, over the wire, in both protocol eras.

Sampling, elicitation (form and URL), roots, progress, server logs, cancellation, resources and
prompts, each against the real SDK server in tests/host_fixtures/features_server.py: in-process
for the logic (the SDK's direct dispatcher in the 2026-07-28 era, its in-memory JSON-RPC in the
handshake era) and over stdio for the wiring (a dual-era process, and one that only knows the
handshake). The sampler and elicitor are plain test doubles: the model-backed sampler and the
console's elicitor are tested where they live.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp.server import Server

from tests.host_fixtures.features_server import build
from weavehost.config import HostConfig, ServerConfig, Timeouts
from weavehost.errors import ClientFeatureError, ServerError
from weavehost.mcp.elicitors import ScriptedElicitor
from weavehost.mcp.features import (
    ClientFeatures,
    ElicitationReply,
    LogMessage,
    Progress,
    PromptArgument,
    PromptMessage,
    ResourceInfo,
    ResourceText,
    Roots,
    SamplingMessage,
    SamplingReply,
    SamplingRequest,
    ToolUse,
)
from weavehost.mcp.servers import ServerPool

FIXTURES = Path(__file__).parent / "host_fixtures"
FEATURES = str(FIXTURES / "features_server.py")
RAW = str(FIXTURES / "raw_server.py")
FAST = Timeouts(startup=20, list_tools=10, call=10, ping=5, shutdown_grace=0.5, kill_grace=0.5)
VERSIONS = {"2026-07-28": "2026-07-28", "handshake": "2025-11-25"}
ERAS = list(VERSIONS)
WIRES = [("in-process", era) for era in ERAS] + [("stdio", era) for era in ERAS]

# The fixture logs through the SDK's deprecated (2026-07-28) logging capability on purpose.
pytestmark = [
    pytest.mark.filterwarnings("ignore:The logging capability is deprecated"),
    pytest.mark.filterwarnings("ignore:The roots capability is deprecated"),
]


@dataclass
class RecordingSampler:
    """Answers every sampling request with ``reply`` (or raises it), keeping the requests."""

    reply: SamplingReply | Exception
    seen: list[SamplingRequest] = field(default_factory=list)

    async def sample(self, request: SamplingRequest) -> SamplingReply:
        self.seen.append(request)
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


HI = SamplingReply(text="hi there", model="smollm2", stop_reason="endTurn")


@asynccontextmanager
async def features_pool(
    wire: str, era: str, features: ClientFeatures | None = None
) -> AsyncIterator[ServerPool]:
    """The features server reached ``wire``-wise in ``era``, under a pool offering ``features``."""
    if wire == "in-process":
        protocol = "auto" if era == "2026-07-28" else "legacy"
        server = ServerConfig(name="f", command="<in-process>", protocol=protocol)
        inproc = {"f": build()}
    else:  # a handshake-only process; the pool finds its era by itself ("auto")
        args = (FEATURES,) if era == "2026-07-28" else (FEATURES, "--legacy")
        server, inproc = ServerConfig(name="f", command=sys.executable, args=args), None
    config = HostConfig(servers=(server,), timeouts=FAST)
    with anyio.fail_after(30):
        async with ServerPool(config, inproc=inproc, features=features) as pool:
            assert pool.status()["f"].protocol == VERSIONS[era]
            yield pool


async def text_of(pool: ServerPool, tool: str, arguments: dict | None = None, **kw: object) -> str:
    result = await pool.call_tool("f", tool, arguments or {}, **kw)  # type: ignore[arg-type]
    assert not result.is_error, result.content
    return result.content[0].text  # type: ignore[union-attr]


# --------------------------------------------------------------------------- capabilities


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_sampling_and_elicitation_are_declared_only_when_offered_and_roots_always(
    era: str,
) -> None:
    async with features_pool("in-process", era) as pool:
        bare = json.loads(await text_of(pool, "client_capabilities"))
    offered = ClientFeatures(sampler=RecordingSampler(HI), elicitor=ScriptedElicitor())
    async with features_pool("in-process", era, offered) as pool:
        full = json.loads(await text_of(pool, "client_capabilities"))
        declared_by_server = pool.capabilities("f")
    assert bare == {"roots": {"listChanged": True}}
    assert full == {
        "sampling": {"tools": {}},
        "elicitation": {"form": {}, "url": {}},
        "roots": {"listChanged": True},
    }
    assert {"tools", "resources", "prompts"} <= set(declared_by_server)


# --------------------------------------------------------------------------- sampling


@pytest.mark.anyio
@pytest.mark.parametrize(("wire", "era"), WIRES)
async def test_a_sampling_request_reaches_the_sampler_with_every_parameter_and_the_reply_reaches_the_server(
    wire: str, era: str
) -> None:
    sampler = RecordingSampler(HI)
    async with features_pool(wire, era, ClientFeatures(sampler=sampler)) as pool:
        answer = await text_of(pool, "ask_model", {"prompt": "Say hello", "max_tokens": 12})
    assert answer == "smollm2 said: hi there (endTurn)"
    [request] = sampler.seen
    assert request == SamplingRequest(
        server="f",
        messages=(SamplingMessage(role="user", text="Say hello"),),
        max_tokens=12,
        system_prompt="Answer briefly.",
        stop_sequences=("END",),
        temperature=0.2,
    )


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_a_sampling_request_that_offers_tools_gets_the_models_tool_call_back(
    era: str,
) -> None:
    call = ToolUse(id="call-1", name="lookup", arguments={"word": "milk"})
    sampler = RecordingSampler(
        SamplingReply(text="", model="smollm2", stop_reason="toolUse", tool_uses=(call,))
    )
    async with features_pool("in-process", era, ClientFeatures(sampler=sampler)) as pool:
        seen_by_server = json.loads(
            await text_of(pool, "ask_model_with_tools", {"prompt": "Define milk"})
        )
    [request] = sampler.seen
    assert [t["name"] for t in request.tools] == ["lookup"] and request.tool_choice == "auto"
    assert request.tools[0]["inputSchema"]["required"] == ["word"]
    assert seen_by_server == {
        "stop": "toolUse",
        "blocks": [
            {"type": "tool_use", "id": "call-1", "name": "lookup", "input": {"word": "milk"}}
        ],
    }


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_image_content_in_a_sampling_request_is_refused_with_a_clear_error_and_the_session_goes_on(
    era: str,
) -> None:
    sampler = RecordingSampler(HI)
    async with features_pool("in-process", era, ClientFeatures(sampler=sampler)) as pool:
        # Handshake era: the refusal is the server's answer, which fails its tools/call. 2026-07-28:
        # the refused input request ends the call here (an input response cannot carry an error).
        refused = ClientFeatureError if era == "2026-07-28" else ServerError
        with pytest.raises(
            refused,
            match="asked the model to read image content; weavehost's model reads text only",
        ):
            await pool.call_tool("f", "ask_model_about_image", {})
        assert sampler.seen == []
        after = await text_of(pool, "ask_model", {"prompt": "still there?"})
        status = pool.status()["f"]
    assert after == "smollm2 said: hi there (endTurn)"
    assert (status.state, status.restarts) == ("running", 0)


@pytest.mark.anyio
@pytest.mark.parametrize(("wire", "era"), WIRES)
@pytest.mark.parametrize(
    ("failure", "message"),
    [
        (ClientFeatureError("sampling was not approved for server 'f'"), "sampling was not approved for server 'f'"),
        (RuntimeError("the model fell over"), "answering sampling/createMessage for server 'f' failed: RuntimeError: the model fell over"),
    ],
)  # fmt: skip
async def test_a_sampler_that_refuses_or_fails_is_an_error_for_that_call_and_never_ends_the_connection(
    wire: str, era: str, failure: Exception, message: str
) -> None:
    sampler = RecordingSampler(failure)
    async with features_pool(wire, era, ClientFeatures(sampler=sampler)) as pool:
        with pytest.raises(ServerError, match=message):
            await pool.call_tool("f", "ask_model", {"prompt": "hello?"})
        sampler.reply = HI
        after = await text_of(pool, "ask_model", {"prompt": "and now?"})
        status = pool.status()["f"]
    assert after == "smollm2 said: hi there (endTurn)"
    assert (status.state, status.restarts) == ("running", 0)


# --------------------------------------------------------------------------- elicitation


@pytest.mark.anyio
@pytest.mark.parametrize(("wire", "era"), WIRES)
@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        (ElicitationReply("accept", {"name": "Ann", "age": 41}), "hello Ann, 41"),
        (ElicitationReply("decline"), "the user chose decline"),
        (ElicitationReply("cancel"), "the user chose cancel"),
    ],
)
async def test_a_form_elicitation_shows_the_schema_and_returns_accept_decline_or_cancel(
    wire: str, era: str, reply: ElicitationReply, answer: str
) -> None:
    elicitor = ScriptedElicitor([reply])
    async with features_pool(wire, era, ClientFeatures(elicitor=elicitor)) as pool:
        said = await text_of(pool, "ask_user")
    assert said == answer
    [request] = elicitor.seen
    assert (request.server, request.mode, request.message) == ("f", "form", "Who is asking?")
    assert request.schema is not None and request.schema["required"] == ["name"]
    assert request.schema["properties"]["age"] == {"default": 30, "title": "Age", "type": "integer"}


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("action", ["accept", "decline"])
async def test_a_url_elicitation_shows_the_url_and_returns_the_choice(
    era: str, action: str
) -> None:
    elicitor = ScriptedElicitor([action])
    async with features_pool("in-process", era, ClientFeatures(elicitor=elicitor)) as pool:
        said = await text_of(pool, "visit", {"url": "https://example.com/sign-in"})
    assert said == f"url elicitation: {action}"
    [request] = elicitor.seen
    assert (request.mode, request.url, request.message, request.schema) == (
        "url", "https://example.com/sign-in", "Sign in to continue.", None
    )  # fmt: skip


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_an_elicitor_that_fails_is_an_error_for_that_call_and_the_session_goes_on(
    era: str,
) -> None:
    elicitor = ScriptedElicitor([ClientFeatureError("no terminal to ask on"), {"name": "Bo"}])
    async with features_pool("in-process", era, ClientFeatures(elicitor=elicitor)) as pool:
        with pytest.raises(ServerError, match="no terminal to ask on"):
            await pool.call_tool("f", "ask_user", {})
        after = await text_of(pool, "ask_user")
    assert after == "hello Bo, 30"


# --------------------------------------------------------------------------- roots


@pytest.mark.anyio
@pytest.mark.parametrize(("wire", "era"), WIRES)
async def test_roots_are_the_configured_directories_as_file_uris_and_follow_a_change(
    wire: str, era: str, tmp_path: Path
) -> None:
    first, second = tmp_path / "first", tmp_path / "second dir"
    roots = Roots([first])
    async with features_pool(wire, era, ClientFeatures(roots=roots)) as pool:
        before = await text_of(pool, "roots")
        roots.set([first, second])
        after = await text_of(pool, "roots")
    assert before == first.as_uri()
    assert after.splitlines() == [first.as_uri(), second.as_uri()]


def recorded(path: Path, method: str) -> list[dict]:
    if not path.exists():
        return []
    return [m for m in map(json.loads, path.read_text().splitlines()) if m.get("method") == method]


@pytest.mark.anyio
async def test_changing_the_roots_notifies_every_running_handshake_era_server_and_no_2026_server(
    tmp_path: Path,
) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    servers = (
        ServerConfig(name="old", command=sys.executable, args=(RAW, "--record", str(old))),
        ServerConfig(name="new", command=sys.executable, args=(RAW, "--modern", "--record", str(new))),
    )  # fmt: skip
    roots = Roots([tmp_path])
    config = HostConfig(servers=servers, timeouts=FAST)
    with anyio.fail_after(15):
        async with ServerPool(config, features=ClientFeatures(roots=roots)) as pool:
            roots.set([tmp_path, tmp_path / "more"])
            while not recorded(old, "notifications/roots/list_changed"):
                await pool.ping("old")  # each a round trip: the notification is on its way
            await pool.ping("new")
    assert len(recorded(old, "notifications/roots/list_changed")) == 1
    assert recorded(new, "notifications/roots/list_changed") == []  # 2026-07-28 has no such notice


# --------------------------------------------------------------------------- progress, logs


@pytest.mark.anyio
@pytest.mark.parametrize(("wire", "era"), WIRES)
async def test_progress_reaches_on_progress_and_info_log_lines_reach_on_log_but_debug_ones_do_not(
    wire: str, era: str
) -> None:
    progress: list[Progress] = []
    logs: list[LogMessage] = []
    async with features_pool(wire, era, ClientFeatures(on_log=logs.append)) as pool:
        said = await text_of(pool, "steps", {"n": 3}, on_progress=progress.append)
    assert said == "3 steps"
    assert progress == [Progress("f", i, 3, f"step {i}") for i in (1, 2, 3)]
    assert logs == [LogMessage("f", "info", f"did step {i}") for i in (1, 2, 3)]


# --------------------------------------------------------------------------- cancellation


@pytest.mark.anyio
@pytest.mark.parametrize(("wire", "era"), WIRES)
async def test_cancelling_the_caller_cancels_the_call_on_the_server_and_the_session_goes_on(
    wire: str, era: str, tmp_path: Path
) -> None:
    record = tmp_path / "wait.txt"
    async with features_pool(wire, era) as pool:
        with anyio.fail_after(15):
            started = anyio.Event()
            with anyio.CancelScope() as caller:  # what host.abort() and Ctrl-C cancel

                def on_progress(_: Progress) -> None:
                    started.set()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(
                        lambda: pool.call_tool(
                            "f", "wait", {"record": str(record)}, on_progress=on_progress
                        )
                    )
                    await started.wait()
                    caller.cancel()
            assert caller.cancelled_caught
            while "cancelled" not in record.read_text():
                await pool.ping("f")  # each a round trip while the server records the cancel
            after = await text_of(pool, "steps", {"n": 1})
            status = pool.status()["f"]
    assert record.read_text().splitlines() == ["started", "cancelled"]
    assert after == "1 steps" and (status.state, status.restarts) == ("running", 0)


# --------------------------------------------------------------------------- resources, prompts


@pytest.mark.anyio
@pytest.mark.parametrize(("wire", "era"), WIRES)
async def test_resources_and_templates_are_listed_and_read_as_text_with_a_blob_described_not_inlined(
    wire: str, era: str
) -> None:
    async with features_pool(wire, era) as pool:
        listed = await pool.list_resources("f")
        readme = await pool.read_resource("f", "note://readme")
        logo = await pool.read_resource("f", "data://logo.png")
        note = await pool.read_resource("f", "note://shopping")
    assert listed == [
        ResourceInfo("f", "note://readme", "readme", "Read me", "The notes.", "text/plain"),
        ResourceInfo("f", "data://logo.png", "logo", None, "", "image/png"),
        ResourceInfo(
            "f", "note://{name}", "note", None, "A note by name.", "text/plain", template=True
        ),
    ]
    assert readme == [ResourceText("note://readme", "Remember the milk.", "text/plain")]
    assert logo == [
        ResourceText(
            "data://logo.png", "[binary content data://logo.png: image/png, 70 bytes]", "image/png"
        )
    ]
    assert note == [ResourceText("note://shopping", "note shopping", "text/plain")]


@pytest.mark.anyio
@pytest.mark.parametrize("era", ERAS)
async def test_an_unknown_resource_or_prompt_is_a_server_error_naming_it(era: str) -> None:
    async with features_pool("in-process", era) as pool:
        with pytest.raises(ServerError, match=r"server 'f' rejected resources/read 'nope://x'"):
            await pool.read_resource("f", "nope://x")
        with pytest.raises(ServerError, match=r"server 'f' rejected prompts/get 'nope'"):
            await pool.get_prompt("f", "nope", {})
        assert await pool.list_prompts("f")  # the session goes on


@pytest.mark.anyio
@pytest.mark.parametrize(("wire", "era"), WIRES)
async def test_prompts_are_listed_and_got_as_text_with_resources_inlined_and_images_described(
    wire: str, era: str
) -> None:
    async with features_pool(wire, era) as pool:
        prompts = {p.name: p for p in await pool.list_prompts("f")}
        greeting = await pool.get_prompt("f", "greet", {"name": "Bo"})
        with_context = await pool.get_prompt("f", "with_context", {})
    assert prompts["greet"].arguments == (PromptArgument("name", None, True),)
    assert prompts["greet"].description == "Greet someone."
    assert greeting == [PromptMessage("user", "Say hello to Bo.")]
    assert with_context == [
        PromptMessage("user", "Remember the milk."),
        PromptMessage("user", "[image: image/png, 70 bytes]"),
        PromptMessage("assistant", "Noted."),
    ]


@pytest.mark.anyio
async def test_a_server_that_declares_no_resources_or_prompts_lists_none_without_asking(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.jsonl"
    server = ServerConfig(name="raw", command=sys.executable, args=(RAW, "--record", str(record)))
    with anyio.fail_after(10):
        async with ServerPool(HostConfig(servers=(server,), timeouts=FAST)) as pool:
            resources, prompts = await pool.list_resources("raw"), await pool.list_prompts("raw")
    assert (resources, prompts) == ([], [])
    assert recorded(record, "resources/list") == recorded(record, "prompts/list") == []


@pytest.mark.anyio
async def test_a_handshake_era_server_that_declares_logging_is_asked_for_info_and_hears_of_root_changes(
    tmp_path: Path,
) -> None:
    heard: list[tuple[str, ...]] = []

    async def set_level(_ctx: object, params: types.SetLevelRequestParams) -> types.EmptyResult:
        heard.append(("logging/setLevel", params.level))
        return types.EmptyResult()

    async def roots_changed(_ctx: object, _params: object) -> None:
        heard.append(("notifications/roots/list_changed",))

    server = Server("logs", on_set_logging_level=set_level, on_roots_list_changed=roots_changed)
    config = HostConfig(servers=(ServerConfig(name="logs", command="<in-process>", protocol="legacy"),), timeouts=FAST)  # fmt: skip
    roots = Roots([tmp_path])
    with anyio.fail_after(10):
        async with ServerPool(
            config, inproc={"logs": server}, features=ClientFeatures(roots=roots)
        ) as pool:
            assert pool.capabilities("logs")["logging"] == {}
            roots.set([tmp_path / "elsewhere"])
            while len(heard) < 2:
                await pool.ping("logs")  # each a round trip while the notification lands
    assert heard == [("logging/setLevel", "info"), ("notifications/roots/list_changed",)]


# --------------------------------------------------------------------------- hostile forms


@pytest.mark.parametrize(
    ("schema", "named"),
    [
        ({"type": "object", "properties": {"who": {"type": "object", "properties": {}}}}, "'who'"),
        (
            {
                "type": "object",
                "properties": {"tags": {"type": "array", "items": {"type": "string"}}},
            },
            "'tags'",
        ),
        (
            {"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(33)}},
            "33 fields",
        ),
        (
            {
                "type": "object",
                "properties": {"x": {"type": "string", "description": "y" * 20_000}},
            },
            "bytes of schema",
        ),
        ({"type": "array"}, "not an object"),
        ({"type": "object", "properties": {"x": "string"}}, "'x'"),
    ],
)
def test_a_form_that_is_not_a_flat_set_of_primitive_fields_is_refused_naming_the_problem(
    schema: dict, named: str
) -> None:
    from weavehost.mcp.wire import check_form_schema

    with pytest.raises(ClientFeatureError, match=named):
        check_form_schema("f", schema)


def test_a_form_of_primitive_fields_and_a_multi_select_enum_is_asked() -> None:
    from weavehost.mcp.wire import check_form_schema

    check_form_schema(
        "f",
        {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "Bo"},
                "age": {"type": "integer"},
                "ok": {"type": "boolean"},
                "size": {"type": "string", "enum": ["s", "m"]},
                "colours": {"type": "array", "items": {"enum": ["red", "blue"]}},
            },
            "required": ["name"],
        },
    )
