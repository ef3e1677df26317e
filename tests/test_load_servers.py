"""Load on the host layer: many servers, many restarts, many calls while the model decodes.

RELIABILITY row 18 at scale (10 servers x 100 tools started, listed and routed), row 1 under
repetition (a stdio server killed or crashed 20 times, each time respawned by the next call,
leaves no process, file descriptor or task behind), and row 26's host side (50 tool calls in
flight on the event loop while llama.cpp decodes in a worker thread).

The tests assert behaviour; their time bounds only catch hangs. Measured numbers are printed:
``pytest -s -q tests/test_load_servers.py``.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from weavehost.config import HostConfig, ServerConfig, Timeouts
from weavehost.errors import ServerDiedError
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import Executor
from weavehost.mcp.servers import ServerPool
from weavehost.mcp.supervisor import MAX_CONSECUTIVE_RESTARTS
from weavehost.testing.assertions import child_processes

RAW = str(Path(__file__).parent / "host_fixtures" / "raw_server.py")
FAST = Timeouts(startup=20, list_tools=20, call=10, ping=5, shutdown_grace=0.5, kill_grace=0.5)
PROMPT = (
    "<|im_start|>user\nTell me a long story about a lighthouse.<|im_end|>\n<|im_start|>assistant\n"
)


def raw(name: str, *args: str) -> ServerConfig:
    return ServerConfig(name=name, command=sys.executable, args=(RAW, "--name", name, *args))


def config(*servers: ServerConfig) -> HostConfig:
    return HostConfig(
        servers=servers, timeouts=FAST, trusted_servers=frozenset(s.name for s in servers)
    )


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def child_pids() -> list[int]:
    """Processes this one started, zombies included (an unreaped child is a leak too)."""
    return [p.pid for p in child_processes()]


def tasks() -> int:
    return len(asyncio.all_tasks())


@pytest.mark.anyio
async def test_ten_servers_with_100_tools_each_start_list_and_route_every_call_to_its_own_server() -> (
    None
):
    servers = [raw(f"s{i}", "--generate", "100") for i in range(10)]
    cfg = config(*servers)
    with anyio.fail_after(60):
        started = time.perf_counter()
        async with ServerPool(cfg) as pool:
            catalog = await Catalog.load(pool)
            ready_s = time.perf_counter() - started
            executor = Executor(pool, catalog, cfg)
            results: dict[str, Any] = {}

            async def run(name: str, n: int) -> None:
                results[name] = await executor.run(name, {"n": n}, provisional=True)

            async with anyio.create_task_group() as tg:
                for i in range(10):
                    for tool in (0, 57, 99):
                        tg.start_soon(run, f"s{i}_tool_{tool:04d}", i * 1000 + tool)
            routed_s = time.perf_counter() - started - ready_s
    print(
        f"\n[load] 10 servers x 100 tools: started and listed in {ready_s:.2f} s; 30 concurrent calls in {routed_s:.2f} s"
    )
    assert len(catalog) == 1000 and catalog.omitted == []
    assert catalog.get("s3_tool_0042").server == "s3"
    assert len(results) == 30
    for name, result in results.items():
        server, tool = name.split("_", 1)
        assert result.status == "ok", result.text
        assert json.loads(result.text) == {
            "server": server,
            "tool": tool,
            "arguments": {"n": int(server[1:]) * 1000 + int(tool[-4:])},
        }


@pytest.mark.anyio
async def test_a_server_killed_or_crashed_20_times_is_respawned_each_time_and_leaves_no_process_fd_or_task_behind() -> (
    None
):
    fds_before, children_before = open_fds(), child_pids()
    pids: list[int] = []
    with anyio.fail_after(60):
        async with ServerPool(config(raw("phoenix")), restart_backoff=0.01) as pool:
            await pool.ping("phoenix")
            steady = (open_fds(), tasks(), len(child_pids()))
            for round_ in range(20):
                pid = pool.status()["phoenix"].pid
                assert pid is not None
                pids.append(pid)
                if round_ % 2:
                    with pytest.raises(ServerDiedError, match="died during tools/call 'crash'"):
                        await pool.call_tool("phoenix", "crash", {})
                else:
                    os.kill(pid, signal.SIGKILL)
                # The next call respawns it; one right after a SIGKILL may still meet the old
                # connection and fail first, so allow one ServerDiedError, never two.
                for attempt in range(2):
                    try:
                        reply = await pool.call_tool("phoenix", "echo", {"text": str(round_)})
                        break
                    except ServerDiedError:
                        assert attempt == 0
                assert json.loads(reply.content[0].text)["arguments"] == {"text": str(round_)}
                # A success resets the failure count, so 20 deaths never reach the limit of 5.
                assert (open_fds(), tasks(), len(child_pids())) == steady
            status = pool.status()["phoenix"]
    assert status.restarts == 20 > MAX_CONSECUTIVE_RESTARTS
    assert len(set(pids)) == 20
    assert open_fds() == fds_before
    assert child_pids() == children_before
    print(
        f"\n[load] 20 restarts: {steady[0]} fds, {steady[1]} tasks, {steady[2]} child while running; back to {fds_before} fds after"
    )


async def _fifty_calls(executor: Executor) -> list[Any]:
    results: list[Any] = [None] * 50

    async def run(i: int) -> None:
        results[i] = await executor.run("echo", {"text": f"call {i}"}, provisional=True)

    async with anyio.create_task_group() as tg:
        for i in range(50):
            tg.start_soon(run, i)
    return results


@pytest.mark.anyio
async def test_fifty_tool_calls_in_flight_complete_correctly_while_the_model_decodes_in_a_worker_thread(
    fresh_engine: Any,
) -> None:
    engine = fresh_engine
    cfg = config(raw("echoer"))
    decoded: list[int] = []
    with anyio.fail_after(120):
        async with ServerPool(cfg) as pool:
            executor = Executor(pool, await Catalog.load(pool), cfg)
            await _fifty_calls(executor)  # warm up: imports, first-call paths
            started = time.perf_counter()
            alone = await _fifty_calls(executor)
            alone_s = time.perf_counter() - started

            prompt = engine.tokenize(PROMPT, special=True)
            limiter = anyio.CapacityLimiter(1)
            calls_done, decoding = anyio.Event(), anyio.Event()
            logits = await anyio.to_thread.run_sync(engine.prefill, 0, prompt, limiter=limiter)

            async def decode() -> None:
                nonlocal logits
                # Decode for as long as the calls are in flight (and at least 16 tokens).
                while not calls_done.is_set() or len(decoded) < 16:
                    token = int(np.argmax(logits))
                    decoded.append(token)
                    logits = await anyio.to_thread.run_sync(
                        engine.decode_one, 0, token, limiter=limiter
                    )
                    if len(decoded) == 2:
                        decoding.set()  # the model is mid-generation: now send the calls

            async with anyio.create_task_group() as tg:
                tg.start_soon(decode)
                await decoding.wait()
                started = time.perf_counter()
                during = await _fifty_calls(executor)
                during_s = time.perf_counter() - started
                tokens_at_calls_done = len(decoded)
                calls_done.set()
    print(
        f"\n[load] 50 concurrent calls: {alone_s * 1000:.0f} ms alone, {during_s * 1000:.0f} ms "
        f"while decoding ({tokens_at_calls_done} tokens decoded meanwhile, {len(decoded)} in all)"
    )
    for results in (alone, during):
        assert [r.status for r in results] == ["ok"] * 50
        assert [json.loads(r.text)["arguments"]["text"] for r in results] == [
            f"call {i}" for i in range(50)
        ]
    assert len(decoded) >= 16 and tokens_at_calls_done >= 2
    assert engine.seq_len(0) == len(prompt) + len(decoded), (
        "every decoded token reached the KV cache"
    )
    assert engine.detokenize(decoded).strip(), "the model wrote text"
