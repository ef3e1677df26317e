"""ServerPool over streamable HTTP: a real SDK server on 127.0.0.1 (uvicorn, its own process).

RELIABILITY row 2: an HTTP server that dies mid-call, answers 500, or closes its SSE stream
without a response fails that call promptly with a clear error, never a hang; a server that
never answers the closing DELETE does not hold the pool's exit. Plus the happy path: tools are
listed and called through ServerPool, Catalog and Executor like any stdio server's.

The fixture is tests/host_fixtures/http_server.py (the SDK's MCPServer behind a small ASGI layer
that injects the faults). The SDK's server speaks both protocol eras, so every test runs in both:
``"auto"`` (2026-07-28) and ``"legacy"`` (the initialize handshake).
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import selectors
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from weavehost.config import HostConfig, ServerConfig, Timeouts
from weavehost.errors import ServerStartError
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import Executor
from weavehost.mcp.servers import ServerPool

HTTP = str(Path(__file__).parent / "host_fixtures" / "http_server.py")
FAST = Timeouts(startup=10, list_tools=5, call=5, ping=5, shutdown_grace=0.5, kill_grace=0.5)
SERVER_START_TIMEOUT = 30.0  # importing mcp and uvicorn on a busy 2-core machine


def start_http_server(*args: str) -> tuple[subprocess.Popen[bytes], str]:
    process = subprocess.Popen([sys.executable, HTTP, *args], stdout=subprocess.PIPE)  # noqa: S603
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        ready = selector.select(SERVER_START_TIMEOUT)
    line = process.stdout.readline().decode() if ready else ""
    if not line.startswith("PORT "):
        process.kill()
        process.wait()
        raise AssertionError(f"the HTTP fixture did not start: {line!r}")
    return process, f"http://127.0.0.1:{int(line.split()[1])}/mcp"


ERAS = {"2026-07-28": "auto", "handshake": "legacy"}
protocol = "auto"


@pytest.fixture(autouse=True, params=list(ERAS))
def era(request: pytest.FixtureRequest) -> Iterator[str]:
    global protocol
    protocol = ERAS[request.param]
    yield request.param
    protocol = "auto"


@pytest.fixture
def http_server() -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    process, url = start_http_server()
    try:
        yield process, url
    finally:
        process.kill()
        process.wait()


def config(url: str) -> HostConfig:
    return HostConfig(
        servers=(ServerConfig(name="web", url=url, protocol=protocol),),
        timeouts=FAST,
        trusted_servers=frozenset({"web"}),
        approval="always",
    )


@pytest.mark.anyio
async def test_a_real_streamable_http_server_lists_and_calls_its_tools_through_the_pool(
    http_server: tuple[subprocess.Popen[bytes], str], era: str
) -> None:
    _, url = http_server
    cfg = config(url)
    with anyio.fail_after(15):
        async with ServerPool(cfg) as pool:
            catalog = await Catalog.load(pool)
            executor = Executor(pool, catalog, cfg)
            early = await executor.run("echo", {"text": "über HTTP"}, provisional=True)
            final = await executor.run("echo", {"text": "again"})
            invalid = await executor.run("echo", {"text": 3})
            await pool.ping("web")
            status = pool.status()["web"]
    assert status.protocol == ("2026-07-28" if era == "2026-07-28" else "2025-11-25")
    assert {"echo", "crash", "fail500", "drop_sse", "die_before_answer"} <= set(catalog.names)
    assert catalog.get("echo").read_only and catalog.get("echo").required == ("text",)
    assert (early.status, early.text, early.provisional) == ("ok", "echo: über HTTP", True)
    assert (final.status, final.text) == ("ok", "echo: again")
    assert invalid.status == "invalid_arguments"
    assert (status.transport, status.state, status.restarts) == ("http", "running", 0)


@pytest.mark.anyio
async def test_an_http_500_fails_the_call_at_once_with_a_server_error_and_the_session_goes_on(
    http_server: tuple[subprocess.Popen[bytes], str],
) -> None:
    _, url = http_server
    cfg = config(url)
    with anyio.fail_after(15):
        async with ServerPool(cfg) as pool:
            executor = Executor(pool, await Catalog.load(pool), cfg)
            started = anyio.current_time()
            failed = await executor.run("fail500", {})
            elapsed = anyio.current_time() - started
            after = await executor.run("echo", {"text": "after"})
            status = pool.status()["web"]
    # A healthy run answers the 500 in milliseconds; under the call timeout means the call failed
    # by the server's answer, not by waiting the timeout out (the text says the same).
    assert failed.status == "server_error" and elapsed < FAST.call
    assert (
        failed.text
        == "server 'web' rejected tools/call 'fail500': Server returned an error response"
    )
    assert after.text == "echo: after"
    assert (status.state, status.restarts) == ("running", 0)


@pytest.mark.anyio
async def test_an_sse_stream_closed_without_a_response_fails_only_that_call_and_the_session_stays_up(
    http_server: tuple[subprocess.Popen[bytes], str],
) -> None:
    _, url = http_server
    cfg = config(url)
    with anyio.fail_after(15):
        async with ServerPool(cfg) as pool:
            executor = Executor(pool, await Catalog.load(pool), cfg)
            dropped, took = [], []
            for _ in range(6):
                started = anyio.current_time()
                dropped.append(await executor.run("drop_sse", {}))
                took.append(anyio.current_time() - started)
            after = await executor.run("echo", {"text": "after"})
            status = pool.status()["web"]
    assert {r.status for r in dropped} == {"server_error"}
    assert dropped[0].text == (
        "server 'web' ended its response to tools/call 'drop_sse' without answering "
        "(SSE stream ended without a response); the server itself still answers"
    )
    # Each fails when its stream ends (a healthy run: a localhost round trip and a liveness ping),
    # none by waiting out the call timeout.
    assert max(took) < FAST.call
    # Six in a row would have passed the restart limit had each one counted as a death.
    assert after.text == "echo: after"
    assert (status.state, status.restarts) == ("running", 0)


@pytest.mark.anyio
@pytest.mark.parametrize("tool", ["crash", "die_before_answer"])
async def test_an_http_server_that_dies_during_a_call_fails_it_promptly_and_the_next_call_reports_it_down(
    http_server: tuple[subprocess.Popen[bytes], str], tool: str
) -> None:
    process, url = http_server
    cfg = config(url)
    with anyio.fail_after(15):
        async with ServerPool(cfg, restart_backoff=0.05) as pool:
            executor = Executor(pool, await Catalog.load(pool), cfg)
            started = anyio.current_time()
            died = await executor.run(tool, {})
            elapsed = anyio.current_time() - started
            next_call = await executor.run("echo", {"text": "anyone?"})
            status = pool.status()["web"]
    assert process.wait(timeout=5) == 1
    # A healthy run fails at once (the connection drops; the liveness ping is refused); under the
    # call timeout means the death failed the call, not the clock.
    assert died.status == "server_error" and elapsed < FAST.call
    assert died.text.startswith(f"server 'web' died during tools/call '{tool}': ")
    assert next_call.status == "server_error"
    assert "failed to start: All connection attempts failed" in next_call.text
    assert status.state == "dead"


@pytest.mark.anyio
async def test_an_http_server_that_never_answers_the_closing_delete_does_not_hold_the_pool_exit() -> (
    None
):
    process, url = start_http_server("--hang-delete")
    try:
        with anyio.fail_after(15):
            async with ServerPool(config(url)) as pool:
                await pool.ping("web")
                closing = anyio.current_time()
            closed_in = anyio.current_time() - closing
    finally:
        process.kill()
        process.wait()
    assert closed_in < FAST.shutdown_grace + FAST.kill_grace + 1.0
    assert pool.status()["web"].state == "stopped"


@pytest.mark.anyio
async def test_an_http_server_that_is_not_there_is_a_clear_start_error() -> None:
    process, url = start_http_server()
    process.kill()
    process.wait()
    with anyio.fail_after(15):
        async with ServerPool(config(url), strict=False, restart_backoff=0.05) as pool:
            status = pool.status()["web"]
            with pytest.raises(
                ServerStartError, match="failed to start: All connection attempts failed"
            ):
                await pool.call_tool("web", "echo", {"text": "hello?"})
    assert status.state == "dead"
    assert (
        status.last_error == f"server 'web' ({url}) failed to start: All connection attempts failed"
    )
