"""ServerPool over real subprocesses (the scriptable raw fixture server, stdio).

RELIABILITY rows 1 (crash mid-call), 3 (timeout, cancel sent, ping after), 6 (garbage on
stdout), 7 (50 MB line), 8 (stubborn process tree), 10 and 19 end to end (a recording server
sees no early or invalid tools/call), 13 (same tool name on two servers, routed right), and
tools/list_changed refreshing the catalog.
"""

# ruff: noqa: E501 - test names are sentences and fault tables read best one row a line

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path

import anyio
import pytest

from tests import raw_eras
from tests.raw_eras import raw
from weavehost.config import HostConfig, ServerConfig, Timeouts
from weavehost.errors import (
    MessageTooLargeError,
    ServerDiedError,
    ServerStartError,
    ServerTimeoutError,
)
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import Executor
from weavehost.mcp.servers import ServerPool
from weavehost.mcp.transport import group_alive
from weavehost.testing.assertions import process_running

FAST = Timeouts(startup=10, list_tools=5, call=5, ping=5, shutdown_grace=0.5, kill_grace=0.5)


era = raw_eras.era  # an autouse fixture: every test here runs in both protocol eras


def config(*servers: ServerConfig, trusted: tuple[str, ...] = ()) -> HostConfig:
    return HostConfig(servers=servers, timeouts=FAST, trusted_servers=frozenset(trusted))


def recorded(path: Path, method: str) -> list[dict]:
    if not path.exists():
        return []
    return [m for m in map(json.loads, path.read_text().splitlines()) if m.get("method") == method]


@pytest.mark.anyio
async def test_the_pool_speaks_the_era_the_server_offers_and_reports_the_negotiated_version(
    era: str,
) -> None:
    async with ServerPool(config(raw("s"))) as pool:
        with anyio.fail_after(5):
            await pool.ping("s")
            protocol = pool.status()["s"].protocol
    assert protocol == ("2026-07-28" if era == "2026-07-28" else "2025-11-25")


@pytest.mark.anyio
async def test_a_server_that_crashes_mid_call_fails_the_call_at_once_and_the_others_keep_working() -> (
    None
):
    async with ServerPool(config(raw("a"), raw("b")), restart_backoff=0) as pool:
        pid = pool.status()["a"].pid
        assert pid is not None
        with anyio.fail_after(5):
            started = anyio.current_time()
            with pytest.raises(
                ServerDiedError,
                match=r"server 'a' died during tools/call 'crash': exited with code 1",
            ):
                await pool.call_tool("a", "crash", {})
            # A healthy run fails within milliseconds (the transport watches the process); under
            # the call timeout means the exit failed the call, not a wait for EOF or the clock.
            assert anyio.current_time() - started < FAST.call
            while process_running(pid):  # the runner reaps it; bounded by fail_after
                await anyio.lowlevel.checkpoint()
            reply = await pool.call_tool("b", "echo", {"text": "still here"})
            assert json.loads(reply.content[0].text)["server"] == "b"
            again = await pool.call_tool("a", "echo", {"text": "respawned"})
    assert json.loads(again.content[0].text)["arguments"] == {"text": "respawned"}
    assert pool.status()["a"].restarts == 1


@pytest.mark.anyio
async def test_a_server_that_never_answers_times_out_is_cancelled_and_still_answers_ping(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.jsonl"
    async with ServerPool(config(raw("slow", "--record", str(record)))) as pool:
        with anyio.fail_after(5):
            with pytest.raises(
                ServerTimeoutError,
                match=r"server 'slow' did not answer tools/call 'hang' within 0.3 s",
            ):
                await pool.call_tool("slow", "hang", {}, timeout=0.3)
            await pool.ping("slow")
    [cancel] = recorded(record, "notifications/cancelled")
    [call] = recorded(record, "tools/call")
    assert cancel["params"]["requestId"] == call["id"]


@pytest.mark.anyio
async def test_garbage_and_split_frames_on_stdout_are_skipped_and_the_session_goes_on() -> None:
    async with ServerPool(config(raw("noisy"))) as pool:
        with anyio.fail_after(5):
            reply = await pool.call_tool("noisy", "garbage", {})
            assert reply.content[0].text == "after garbage"
            await pool.ping("noisy")


def reset_peak_rss() -> int:
    """Reset this process's peak RSS to its current RSS (Linux) and return it in KiB.

    Without the reset, a higher peak reached earlier in the test session (loading the model)
    would hide any growth below it, and the bound below could not fail.
    """
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


@pytest.mark.anyio
async def test_a_50_mb_line_becomes_an_error_without_the_host_holding_it() -> None:
    before = reset_peak_rss()
    async with ServerPool(config(raw("big"))) as pool:
        with anyio.fail_after(30):
            with pytest.raises(MessageTooLargeError, match="exceeds the 4194304-byte cap"):
                await pool.call_tool("big", "huge", {"size": 50 * 1024 * 1024})
            reply = await pool.call_tool("big", "echo", {"text": "after"})
    assert "after" in reply.content[0].text
    grown_mib = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mib < 30  # a 50 MB line held whole costs ~300 MiB (bytes, str, pydantic)


@pytest.mark.anyio
async def test_a_stubborn_server_and_its_children_are_killed_with_no_orphans(
    tmp_path: Path,
) -> None:
    pidfile = tmp_path / "children"
    with anyio.fail_after(10):
        async with ServerPool(config(raw("stubborn", "--stubborn", str(pidfile)))) as pool:
            pgid = pool.status()["stubborn"].pid
            await pool.ping("stubborn")
            children = [int(p) for p in pidfile.read_text().split()]
            assert pgid is not None and all(process_running(c) for c in children)
    assert not group_alive(pgid)
    assert not any(process_running(c) for c in children)


@pytest.mark.anyio
async def test_a_server_that_exits_at_start_is_a_start_error_naming_it_and_its_exit_code() -> None:
    broken = ServerConfig(
        name="broken", command=sys.executable, args=("-c", "import sys; sys.exit(7)")
    )
    with anyio.fail_after(10):
        with pytest.raises(
            ServerStartError, match=r"server 'broken' .* failed to start: exited with code 7"
        ):
            async with ServerPool(config(broken, raw("fine"))):
                pass


@pytest.mark.anyio
async def test_a_lenient_pool_runs_the_servers_that_started() -> None:
    missing = ServerConfig(name="missing", command="/nonexistent/program")
    with anyio.fail_after(10):
        async with ServerPool(config(missing, raw("fine")), strict=False) as pool:
            assert pool.running() == ("fine",)
            assert "cannot run '/nonexistent/program'" in (
                pool.status()["missing"].last_error or ""
            )
            await pool.ping("fine")


@pytest.mark.anyio
async def test_the_same_tool_name_on_two_servers_is_prefixed_and_routed_to_the_right_server(
    tmp_path: Path,
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "search", "inputSchema": {"type": "object"},
                                  "annotations": {"readOnlyHint": True}}]))  # fmt: skip
    cfg = config(raw("alpha", "--tools-json", str(tools)), raw("beta", "--tools-json", str(tools)),
                 trusted=("alpha", "beta"))  # fmt: skip
    with anyio.fail_after(10):
        async with ServerPool(cfg) as pool:
            catalog = await Catalog.load(pool)
            executor = Executor(pool, catalog, cfg)
            assert sorted(catalog.names) == ["alpha_search", "beta_search"]
            a = await executor.run("alpha_search", {})
            b = await executor.run("beta_search", {})
    assert json.loads(a.text) == {"server": "alpha", "tool": "search", "arguments": {}}
    assert json.loads(b.text)["server"] == "beta"


@pytest.mark.anyio
async def test_a_recording_server_sees_no_early_call_for_a_destructive_tool_and_no_invalid_call(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record.jsonl"
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([
        {"name": "delete_all", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": "true"}},
        {"name": "lookup", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}},
                                           "required": ["n"]}, "annotations": {"readOnlyHint": True}},
    ]))  # fmt: skip
    cfg = config(raw("rec", "--tools-json", str(tools), "--record", str(record)), trusted=("rec",))
    with anyio.fail_after(10):
        async with ServerPool(cfg) as pool:
            catalog = await Catalog.load(pool)
            executor = Executor(pool, catalog, cfg)
            early = await executor.run("delete_all", {}, provisional=True)
            invalid = await executor.run("lookup", {"n": "three"}, provisional=True)
            assert recorded(record, "tools/call") == []
            fine = await executor.run("lookup", {"n": 3}, provisional=True)
    assert (early.status, invalid.status, fine.status) == (
        "not_provisional",
        "invalid_arguments",
        "ok",
    )
    assert [c["params"]["name"] for c in recorded(record, "tools/call")] == ["lookup"]


@pytest.mark.anyio
async def test_tools_list_changed_refreshes_the_catalog() -> None:
    cfg = config(raw("shifty"), trusted=("shifty",))
    with anyio.fail_after(10):
        async with ServerPool(cfg) as pool:
            catalog = await Catalog.load(pool)
            before = catalog.get("echo")
            assert before.read_only
            version = catalog.version
            await pool.call_tool("shifty", "flip", {})
            await catalog.wait_for_version(version + 1)
            after = catalog.get("echo")
    assert (after.description, after.read_only) == ("changed", False)
    assert after.schema_hash != before.schema_hash


@pytest.mark.anyio
async def test_list_tools_returns_raw_hints_so_a_string_true_is_not_read_only(
    tmp_path: Path,
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": "t", "inputSchema": {"type": "object"},
                                  "annotations": {"readOnlyHint": "true"}}]))  # fmt: skip
    async with ServerPool(config(raw("s", "--tools-json", str(tools)))) as pool:
        with anyio.fail_after(5):
            [listed] = await pool.list_tools("s")
    assert listed["annotations"] == {"readOnlyHint": "true"}


@pytest.mark.anyio
@pytest.mark.parametrize(
    "annotations",
    [{"readOnlyHint": 5}, {"readOnlyHint": None}, {"readOnlyHint": {"x": 1}}, "junk", [True], None],
)
async def test_odd_annotations_leave_the_tool_listed_and_not_read_only_and_spare_the_other_tools(
    tmp_path: Path, annotations: object
) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([
        {"name": "odd", "inputSchema": {"type": "object"}, "annotations": annotations},
        {"name": "fine", "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    ]))  # fmt: skip
    async with ServerPool(config(raw("s", "--tools-json", str(tools)), trusted=("s",))) as pool:
        with anyio.fail_after(5):
            catalog = await Catalog.load(pool)
    assert not catalog.get("odd").read_only
    assert catalog.get("fine").read_only
