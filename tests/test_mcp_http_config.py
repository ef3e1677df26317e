"""HTTP servers as users configure them, end to end through ServerPool and real SDK servers.

* ``headers`` (with ``${ENV}`` expanded) reach a real streamable-HTTP server on 127.0.0.1 on every
  request, and the secret shows nowhere else;
* ``"type": "sse"`` speaks the legacy SSE transport to a real SDK SSE server;
* a VS Code ``mcp.json`` (``"servers"``, ``"type"``, ``"inputs"``) starts a real stdio server;
* ``"protocol"`` from the file decides the era the pool speaks.

The HTTP servers are the SDK's ``MCPServer`` behind a small ASGI layer that records the request
headers, served by uvicorn in a thread of the test (tests/host_fixtures/threaded_asgi.py).
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from tests.host_fixtures.threaded_asgi import serve_asgi
from weavehost.config import HostConfig, Timeouts, load_config
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import Executor
from weavehost.mcp.servers import ServerPool

ROOT = Path(__file__).resolve().parents[1]
FAST = Timeouts(startup=20, list_tools=10, call=10, ping=5, shutdown_grace=0.5, kill_grace=0.5)
SECRET = "s3cr3t-token-from-the-environment"


class RecordHeaders:
    """ASGI middleware: keeps (method, path, headers) of every HTTP request, then passes it on."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.seen: list[tuple[str, str, dict[str, str]]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            self.seen.append((scope["method"], scope["path"], headers))
        await self.app(scope, receive, send)


def echo_server() -> MCPServer:
    server = MCPServer("echo-fixture", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    return server


@pytest.fixture
def streamable() -> Iterator[tuple[str, RecordHeaders]]:
    recorder = RecordHeaders(echo_server().streamable_http_app())
    with serve_asgi(lambda _base: recorder) as base:
        yield f"{base}/mcp", recorder


@pytest.fixture
def sse() -> Iterator[tuple[str, RecordHeaders]]:
    recorder = RecordHeaders(echo_server().sse_app())
    with serve_asgi(lambda _base: recorder) as base:
        yield f"{base}/sse", recorder


def config_file(tmp_path: Path, document: dict[str, Any]) -> HostConfig:
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps(document))
    return replace(load_config(path), timeouts=FAST, approval="always")


async def echo_through_pool(config: HostConfig, text: str) -> tuple[Catalog, str, Any]:
    async with ServerPool(config) as pool:
        catalog = await Catalog.load(pool)
        result = await Executor(pool, catalog, config).run("echo", {"text": text})
        status = pool.status()[config.servers[0].name]
    return catalog, result.text, status


@pytest.mark.anyio
async def test_configured_headers_reach_the_streamable_http_server_on_every_request(
    streamable: tuple[str, RecordHeaders], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, recorder = streamable
    monkeypatch.setenv("WEB_TOKEN", SECRET)
    config = config_file(tmp_path, {"mcpServers": {"web": {
        "url": url, "headers": {"Authorization": "Bearer ${WEB_TOKEN}", "X-Team": "tools"}
    }}})  # fmt: skip
    with anyio.fail_after(20):
        catalog, text, status = await echo_through_pool(config, "with headers")
    posts = [headers for method, _, headers in recorder.seen if method == "POST"]
    assert catalog.names == ("echo",) and text == "echo: with headers"
    assert status.transport == "http" and len(posts) >= 3  # connect, tools/list, tools/call
    assert all(
        h.get("authorization") == f"Bearer {SECRET}" and h.get("x-team") == "tools" for h in posts
    )
    assert SECRET not in config.server("web").describe()


@pytest.mark.anyio
async def test_an_sse_server_is_reached_over_the_legacy_sse_transport_with_its_headers(
    sse: tuple[str, RecordHeaders], tmp_path: Path
) -> None:
    url, recorder = sse
    config = config_file(
        tmp_path, {"servers": {"old": {"type": "sse", "url": url, "headers": {"X-Team": "tools"}}}}
    )
    with anyio.fail_after(20):
        catalog, text, status = await echo_through_pool(config, "over SSE")
    methods = {(method, path.rstrip("/")) for method, path, _ in recorder.seen}
    assert catalog.names == ("echo",) and text == "echo: over SSE"
    assert status.transport == "sse"
    assert {("GET", "/sse"), ("POST", "/messages")} <= methods
    assert all(headers.get("x-team") == "tools" for _, _, headers in recorder.seen)


@pytest.mark.anyio
async def test_a_vs_code_mcp_json_with_inputs_starts_its_stdio_server_as_written(
    tmp_path: Path,
) -> None:
    document = {
        "inputs": [
            {"type": "promptString", "id": "unused", "description": "Not read", "password": True}
        ],
        "servers": {
            "weather": {
                "type": "stdio",
                "command": "python",
                "args": [str(ROOT / "tools" / "weather.py")],
            }
        },
    }
    config = config_file(tmp_path, document)
    with anyio.fail_after(30):
        async with ServerPool(config) as pool:
            catalog = await Catalog.load(pool)
            result = await Executor(pool, catalog, config).run(
                "get_current_weather", {"city": "Oslo"}
            )
    assert config.server("weather").transport == "stdio"
    assert set(catalog.names) == {"get_current_weather", "get_forecast"}
    assert result.status == "ok" and result.text.startswith("Oslo: ")


@pytest.mark.anyio
async def test_the_protocol_in_the_file_decides_the_era_the_pool_speaks(
    streamable: tuple[str, RecordHeaders], tmp_path: Path
) -> None:
    url, _ = streamable
    config = config_file(
        tmp_path, {"servers": {"web": {"type": "http", "url": url, "protocol": "2025-06-18"}}}
    )
    with anyio.fail_after(20):
        _, text, status = await echo_through_pool(config, "handshake")
    assert config.server("web").protocol == "legacy"
    assert text == "echo: handshake" and status.protocol in HANDSHAKE_PROTOCOL_VERSIONS
