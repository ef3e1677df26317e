"""The agent's bounds around a tool run and its rule for entering the model.

A trusted read-only run that outlives its bound becomes a ``timeout`` result the model reads,
never an exception out of the turn; a model call runs only on a worker thread, from the task
that holds the model lock. Scripted model, in-process MCP servers.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import threading
from typing import Annotated, Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from weavehost import Host
from weavehost.agent.events import Event
from weavehost.agent.lock import ModelLock
from weavehost.agent.session import Session, run_bound
from weavehost.config import Timeouts
from weavehost.formats import ToolCall
from weavehost.mcp.executor import REFRESH_WAIT_MARGIN
from weavehost.mcp.supervisor import RESTART_BACKOFF_MAX
from weavehost.testing import Events
from weavehost.testing.model import ScriptedCall, ScriptedModel

pytestmark = pytest.mark.anyio

RUN_BOUND_S = 0.2  # the test's bound for one run: far below the server's 30 s call timeout
LOOKUP = ToolCall("lookup", {"key": "a"})


def stuck_server(started: anyio.Event) -> MCPServer:
    """A read-only tool that starts and never answers (its call timeout is the default 30 s)."""
    server = MCPServer("slow", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    async def lookup(key: Annotated[str, Field(description="The key.")]) -> str:
        """Look a key up."""
        started.set()
        await anyio.sleep_forever()
        return key

    return server


@pytest.mark.parametrize("provisional", [True, False], ids=["provisional-run", "final-run"])
async def test_a_trusted_read_only_call_that_outlives_its_bound_becomes_a_timeout_result_the_model_reads(
    provisional: bool,
) -> None:
    started = anyio.Event()
    script = ScriptedCall(final=LOOKUP, provisional=LOOKUP if provisional else None)
    model = ScriptedModel([script, "It did not answer."])
    async with Host(
        agent_model=model, inproc={"slow": stuck_server(started)}, trust=["slow"]
    ) as host:
        assert host.catalog and host.executor
        session = Session(
            model, host._lock, host.catalog, host.executor, host.config, run_bound_s=RUN_BOUND_S
        )
        events: list[Event] = []
        with anyio.fail_after(10):
            await session.turn("Look a up", events.append)  # ends normally: nothing escapes
        assert started.is_set()  # the tool did start, and was stopped at the bound
        assert len(session.cache) == 0  # a timed-out run is not cached: the next call tries again
    turn = Events(events)
    (result,) = turn.of("tool_result")
    assert result["status"] == "timeout"
    assert result["source"] == ("provisional" if provisional else "final")
    assert (
        result["text"]
        == f"lookup did not finish within {RUN_BOUND_S:g} s and was stopped; its result is unknown"
    )
    assert model.synced[-1][-1] == {"role": "tool", "name": "lookup", "content": result["text"]}
    assert turn.of("done")[0].data == {"stop": "answer", "steps": 2}


def test_the_default_run_bound_outlasts_a_run_that_waits_for_a_relisting_a_restart_and_a_startup_before_its_call() -> (
    None
):
    timeouts = Timeouts()
    slowest_healthy_run = (
        timeouts.list_tools
        + REFRESH_WAIT_MARGIN
        + RESTART_BACKOFF_MAX
        + timeouts.startup
        + timeouts.call
    )
    assert run_bound(timeouts) > slowest_healthy_run
    assert run_bound(Timeouts(call=60.0)) - run_bound(timeouts) == 30.0  # it follows the config


async def test_a_model_call_from_a_task_that_does_not_hold_the_model_lock_is_refused() -> None:
    lock = ModelLock()
    with pytest.raises(RuntimeError, match="does not hold the model lock"):
        await lock.run(threading.get_ident)
    holding, release = anyio.Event(), anyio.Event()

    async def hold() -> None:
        async with lock:
            holding.set()
            await release.wait()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(hold)
            await holding.wait()
            with pytest.raises(RuntimeError):  # another task holds it: still refused
                await lock.run(threading.get_ident)
            release.set()
        async with lock:
            assert await lock.run(threading.get_ident) != threading.get_ident()  # a worker thread


class ThreadRecordingModel(ScriptedModel):
    """Records whether each model call ran on the event loop's thread."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.on_loop: list[tuple[str, bool]] = []

    def _note(self, name: str) -> None:
        self.on_loop.append((name, threading.current_thread() is threading.main_thread()))

    def count_tokens(self, text: str) -> int:
        self._note("count_tokens")
        return super().count_tokens(text)

    def prompt_tokens(self, *args: Any) -> int:
        self._note("prompt_tokens")
        return super().prompt_tokens(*args)

    def sync(self, *args: Any) -> Any:
        self._note("sync")
        return super().sync(*args)

    def free_decode(self, *args: Any, **kw: Any) -> Any:
        self._note("free_decode")
        return super().free_decode(*args, **kw)


async def test_every_model_call_of_a_turn_including_offering_tools_runs_on_a_worker_thread() -> (
    None
):
    model = ThreadRecordingModel(["Hello."])
    async with Host(agent_model=model, inproc={"slow": stuck_server(anyio.Event())}) as host:
        with anyio.fail_after(10):
            events = await Events.collect(host.run("Hi"))
    assert events.of("done")[0]["stop"] == "answer"
    assert {name for name, _ in model.on_loop} >= {
        "count_tokens",
        "prompt_tokens",
        "sync",
        "free_decode",
    }
    assert [name for name, on_loop in model.on_loop if on_loop] == []
