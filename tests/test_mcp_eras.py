"""Both protocol eras in one pool: a 2026-07-28 server in its own protocol, an older one through
the initialize handshake, and ``ServerConfig.protocol`` choosing between them.

The servers are the SDK's own: tests/host_fixtures/features_server.py over stdio (a dual-era
process, and one that serves only the handshake, as a pre-2026 server does) and in-process. The
wire is checked with the scriptable raw fixture, which records every message it receives.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from tests.host_fixtures.features_server import build
from weavehost.config import HostConfig, ServerConfig, Timeouts
from weavehost.errors import ServerStartError
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import Executor
from weavehost.mcp.features import ClientFeatures, SamplingReply, SamplingRequest
from weavehost.mcp.servers import ServerPool

FIXTURES = Path(__file__).parent / "host_fixtures"
FEATURES = str(FIXTURES / "features_server.py")
RAW = str(FIXTURES / "raw_server.py")
FAST = Timeouts(startup=20, list_tools=10, call=10, ping=5, shutdown_grace=0.5, kill_grace=0.5)


class EchoingSampler:
    """Answers each sampling request with the server's name, so a reply shows whose it was."""

    async def sample(self, request: SamplingRequest) -> SamplingReply:
        return SamplingReply(text=f"hello {request.server}", model="smollm2", stop_reason="endTurn")


def recorded(path: Path) -> list[str]:
    return [json.loads(line).get("method") for line in path.read_text().splitlines()]


@pytest.mark.anyio
@pytest.mark.parametrize("wire", ["stdio", "in-process"])
async def test_a_2026_07_28_server_and_a_handshake_era_server_are_used_by_the_same_pool(
    wire: str,
) -> None:
    if wire == "stdio":
        servers = (
            ServerConfig(name="new", command=sys.executable, args=(FEATURES,)),
            ServerConfig(name="old", command=sys.executable, args=(FEATURES, "--legacy")),
        )
        inproc = None
    else:  # the in-process server speaks whichever era the client opens with
        servers = (
            ServerConfig(name="new", command="<in-process>", protocol="auto"),
            ServerConfig(name="old", command="<in-process>", protocol="legacy"),
        )
        inproc = {"new": build(), "old": build()}
    config = HostConfig(servers=servers, timeouts=FAST, trusted_servers=frozenset({"new", "old"}), approval="always")  # fmt: skip
    features = ClientFeatures(sampler=EchoingSampler())
    with anyio.fail_after(30):
        async with ServerPool(config, inproc=inproc, features=features) as pool:
            status = pool.status()
            catalog = await Catalog.load(pool)
            executor = Executor(pool, catalog, config)
            replies = {
                name: await executor.run(f"{name}_ask_model", {"prompt": "hi"})
                for name in ("new", "old")
            }
            version = catalog.version
            for name in ("new", "old"):  # each server adds a tool and says so, in its own era
                await pool.call_tool(name, "flip", {})
            await catalog.wait_for_version(version + 2)
            added = {name: catalog.get(f"{name}_added").description for name in ("new", "old")}
            for name in ("new", "old"):
                await pool.ping(name)
    assert (status["new"].protocol, status["old"].protocol) == ("2026-07-28", "2025-11-25")
    assert {name: r.text for name, r in replies.items()} == {
        "new": "smollm2 said: hello new (endTurn)",
        "old": "smollm2 said: hello old (endTurn)",
    }
    assert added == {"new": "Added by flip.", "old": "Added by flip."}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("protocol", "modern", "opening", "listens"),
    [
        ("auto", False, ["server/discover", "initialize", "notifications/initialized"], False),
        ("auto", True, ["server/discover"], True),
        ("legacy", True, ["initialize", "notifications/initialized"], False),
        ("2026-07-28", True, [], False),
    ],
)
async def test_the_protocol_setting_decides_how_the_pool_opens_a_connection(
    tmp_path: Path, protocol: str, modern: bool, opening: list[str], listens: bool
) -> None:
    record = tmp_path / "record.jsonl"
    args = (RAW, "--record", str(record), *(("--modern",) if modern else ()))
    server = ServerConfig(name="raw", command=sys.executable, args=args, protocol=protocol)
    with anyio.fail_after(10):
        async with ServerPool(HostConfig(servers=(server,), timeouts=FAST)) as pool:
            expected = (
                "2026-07-28"
                if protocol == "2026-07-28" or (modern and protocol == "auto")
                else "2025-11-25"
            )
            assert pool.status()["raw"].protocol == expected
            await pool.call_tool("raw", "echo", {"text": "hi"})
    methods = recorded(record)
    # "auto" probes with server/discover; a server that refuses it gets the handshake. "legacy"
    # never probes; a pinned version adopts itself, capabilities unknown. A 2026-07-28 server
    # that declares tools is then asked to stream tools/list_changed (the raw server refuses
    # subscriptions/listen; its tools still work).
    rest = [m for m in methods[len(opening) :] if m != "subscriptions/listen"]
    assert methods[: len(opening)] == opening and rest[0] == "tools/call"
    assert ("subscriptions/listen" in methods) == listens


@pytest.mark.anyio
async def test_every_2026_07_28_request_carries_the_envelope_and_no_handshake_request_does(
    tmp_path: Path,
) -> None:
    new, old = tmp_path / "new.jsonl", tmp_path / "old.jsonl"
    servers = (
        ServerConfig(name="new", command=sys.executable, args=(RAW, "--modern", "--record", str(new))),
        ServerConfig(name="old", command=sys.executable, args=(RAW, "--record", str(old))),
    )  # fmt: skip
    with anyio.fail_after(10):
        async with ServerPool(HostConfig(servers=servers, timeouts=FAST)) as pool:
            for name in ("new", "old"):
                await pool.list_tools(name)
                await pool.call_tool(name, "echo", {"text": name})

    def calls(path: Path) -> list[dict]:
        return [
            m
            for m in map(json.loads, path.read_text().splitlines())
            if m.get("method") == "tools/call"
        ]

    [modern_call], [legacy_call] = calls(new), calls(old)
    envelope = modern_call["params"]["_meta"]
    assert envelope["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    assert envelope["io.modelcontextprotocol/logLevel"] == "info"  # logs arrive only when asked
    assert envelope["io.modelcontextprotocol/clientInfo"]["name"] == "weavehost"
    assert "_meta" not in legacy_call["params"]


@pytest.mark.anyio
async def test_an_unknown_protocol_setting_is_a_start_error_naming_the_server() -> None:
    server = ServerConfig(name="odd", command=sys.executable, args=(RAW,), protocol="2099-01-01")
    with (
        anyio.fail_after(10),
        pytest.raises(
            ServerStartError,
            match=r"server 'odd' .* failed to start: mode must be 'legacy', 'auto'",
        ),
    ):
        async with ServerPool(HostConfig(servers=(server,), timeouts=FAST)):
            pass
