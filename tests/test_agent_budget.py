"""A step's bounds: its answer's bound leaves the reply a whole call, the decision after it and
the format's close, so a call is never cut by the bound. Scripted model, in-process server."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Annotated, Any

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from pydantic import Field

from weavehost import Host
from weavehost.agent.budget import StepBudget
from weavehost.agent.events import Event
from weavehost.agent.model import FreeText, SyncReport
from weavehost.agent.session import Session
from weavehost.decode.several import DECISION_TOKENS
from weavehost.formats.smollm2 import SMOLLM2
from weavehost.testing import Events
from weavehost.testing.model import ScriptedModel, call

pytestmark = pytest.mark.anyio


def weather_server() -> MCPServer:
    server = MCPServer("weather", log_level="WARNING")

    @server.tool()
    def get_weather(city: Annotated[str, Field(description="City name.")]) -> str:
        """The weather in a city."""
        return f"Sunny in {city}."

    return server


class TightModel(ScriptedModel):
    """A scripted model that writes calls in SmolLM2's format (whose reply ends with
    ``}]</tool_call>``), whose conversation fills all the room the session leaves it, and
    whose answer runs to its bound before it opens a call. It records each step's bounds."""

    format = SMOLLM2

    def __post_init__(self) -> None:
        super().__post_init__()
        self.prompt_total = 0
        self.free_bounds: list[int] = []
        self.reply_bounds: list[tuple[int, int]] = []  # (one call's max_tokens, the budget)

    def sync(self, messages: Sequence[Any], tools: Sequence[Any]) -> SyncReport:
        super().sync(messages, tools)
        return SyncReport(total=self.prompt_total, reused=0, prefilled=self.prompt_total)

    def free_decode(
        self, on_text: Any, max_tokens: int, allow_call: bool = True, **kw: Any
    ) -> FreeText:
        self.free_bounds.append(max_tokens)
        free = super().free_decode(on_text, max_tokens, allow_call, **kw)
        return dataclasses.replace(free, tokens=max_tokens) if free.call else free

    def write_calls(
        self, tools: Any, on_provisional: Any, max_tokens: int, *, budget: int, **kw: Any
    ) -> Any:
        self.reply_bounds.append((max_tokens, budget))
        return super().write_calls(tools, on_provisional, max_tokens, budget=budget, **kw)


async def test_a_step_whose_answer_ran_to_its_bound_leaves_the_reply_a_whole_call_the_decision_after_it_and_the_close() -> (
    None
):
    model = TightModel([call("get_weather", city="Paris"), "Sunny."])
    weather = {"weather": weather_server()}
    async with Host(agent_model=model, inproc=weather, approval="always") as host:
        assert host.catalog and host.executor
        session = Session(model, host._lock, host.catalog, host.executor, host.config)
        model.prompt_total = model.n_ctx - session.reserve_tokens  # the fullest prompt allowed
        seen: list[Event] = []
        with anyio.fail_after(10):
            await session.turn("Is it sunny in Paris?", seen.append)  # names no tool: free text
    assert Events(seen).of("tool_result")[0]["status"] == "ok"
    call_tokens, budget = model.reply_bounds[0]
    close = model.count_tokens(SMOLLM2.several.close)
    # As the decoder's driver spends a reply's budget: the first call's bound, then the room
    # after it, where another call is decided on only past DECISION_TOKENS.
    assert min(call_tokens, budget - close) == call_tokens == session.call_tokens
    assert budget - call_tokens - close > DECISION_TOKENS
    assert model.free_bounds[0] > 0  # the answer still had room of its own


def test_a_small_context_gives_the_reply_half_of_what_is_left() -> None:
    budget = StepBudget(call_tokens=256, close_tokens=4)
    assert budget.free_bound(left=100, free_tokens=512) == 50
    assert budget.free_bound(left=10_000, free_tokens=512) == 512
    assert budget.free_bound(left=0, free_tokens=512) == 0
