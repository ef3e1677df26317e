"""Several calls in one step: the loop on the scripted model, the formats on the real models.

A reply may hold several calls (Qwen's ``<tool_call>`` blocks one after another, SmolLM2's
list). Read-only calls on trusted servers start as each is provisional; the others are
approved one by one; results go back in call order. On the real embedded SmolLM2 the format
machinery writes a two-call list and re-renders it as sequence 0 holds it; on Qwen2.5-Coder-0.5B
Q4_0 the weather in two cities is asked for in one step.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import threading
from pathlib import Path
from typing import Annotated, Any

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from tests.schemas import CURRENT_WEATHER
from tools import android
from weavehost import Host
from weavehost.agent.model import EngineModel
from weavehost.agent.session import MAX_CALLS_PER_STEP
from weavehost.decode import get_strategy
from weavehost.formats import FORMATS, ToolCall
from weavehost.formats.several import render_calls
from weavehost.mcp.executor import StaticApprover
from weavehost.testing import Events
from weavehost.testing.model import ScriptedCall, ScriptedModel

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
PARIS = ToolCall("get_current_weather", {"city": "Paris"})
OSLO = ToolCall("get_current_weather", {"city": "Oslo"})


def weather_server(log: list[str], started: dict[str, threading.Event]) -> MCPServer:
    """A read-only weather tool that records each city and signals that its call started."""
    server = MCPServer("weather", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def get_current_weather(city: Annotated[str, Field(description="City name.")]) -> str:
        """Get the current weather in a city."""
        log.append(city)
        started.setdefault(city, threading.Event()).set()
        return f"{city}: sunny"

    return server


async def collect(host: Host, prompt: str) -> Events:
    return await Events.collect(host.run(prompt), timeout=10)


async def test_two_trusted_read_only_calls_of_one_reply_both_start_before_the_second_is_final_and_their_results_come_back_in_order() -> (
    None
):
    log: list[str] = []
    started = {"Paris": threading.Event(), "Oslo": threading.Event()}
    # The first call is final only once Paris runs; the second only once Oslo runs too: both
    # started while the reply was still being written.
    reply = [
        ScriptedCall(final=PARIS, provisional=PARIS, hold=started["Paris"]),
        ScriptedCall(final=OSLO, provisional=OSLO, hold=started["Oslo"]),
    ]
    model = ScriptedModel([reply, "Sunny in both."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, started)},
                    trust=["weather"]) as host:  # fmt: skip
        events = await collect(host, "Weather in Paris and Oslo?")
    assert model.holds == [True, True]
    assert model.written == [2]  # one step wrote both calls
    assert sorted(log) == ["Oslo", "Paris"]  # each ran once, never again for its final call
    kinds = [(e.type, e.get("name") and e["arguments"]["city"]) for e in events
             if e.type in ("provisional_call", "final_call", "tool_result")]  # fmt: skip
    assert kinds == [  # each call told final as soon as it is, while the reply goes on
        ("provisional_call", "Paris"),
        ("final_call", "Paris"),
        ("provisional_call", "Oslo"),
        ("final_call", "Oslo"),
        ("tool_result", "Paris"),
        ("tool_result", "Oslo"),
    ]
    assert [e["source"] for e in events.of("tool_result")] == ["provisional", "provisional"]
    assert [e["started"] for e in events.of("provisional_call")] == [True, True]
    shown = model.synced[-1]
    assert shown[-3]["tool_calls"] == [
        {"name": "get_current_weather", "arguments": {"city": "Paris"}},
        {"name": "get_current_weather", "arguments": {"city": "Oslo"}},
    ]
    assert [m["content"] for m in shown[-2:]] == ["Paris: sunny", "Oslo: sunny"]
    assert events.of("done")[0].data == {"stop": "answer", "steps": 2}


async def test_a_second_call_that_is_not_read_only_waits_for_its_approval_after_the_first_runs() -> (
    None
):
    log: list[str] = []
    started: dict[str, threading.Event] = {}
    device = android.Device()
    text_bob = ToolCall("send_message", {"recipient": "Bob Okafor", "text": "sunny"})
    seen_at_approval: list[tuple[str, list[str], int]] = []

    class Recording(StaticApprover):
        async def approve(self, request: Any) -> bool:
            seen_at_approval.append((request.spec.name, list(log), len(device.messages)))
            return await StaticApprover.approve(self, request)

    reply = [ScriptedCall(final=OSLO, provisional=OSLO),
             ScriptedCall(final=text_bob, provisional=text_bob)]  # fmt: skip
    model = ScriptedModel([reply, "Done."])
    inproc = {"weather": weather_server(log, started), "android": android.build_server(device)}
    async with Host(agent_model=model, inproc=inproc, trust=["weather", "android"],
                    approver=Recording(True)) as host:  # fmt: skip
        events = await collect(host, "Weather in Oslo, then text it to Bob")
    assert [e["started"] for e in events.of("provisional_call")] == [True, False]
    # Asked once, for the message only, after the weather had run and before anything was sent.
    assert seen_at_approval == [("send_message", ["Oslo"], 0)]
    assert len(device.messages) == 1
    assert [e["name"] for e in events.of("tool_result")] == ["get_current_weather", "send_message"]
    assert [e["status"] for e in events.of("tool_result")] == ["ok", "ok"]


async def test_a_call_repeated_within_one_reply_is_dropped_and_the_others_run() -> None:
    log: list[str] = []
    reply = [ScriptedCall(final=OSLO), ScriptedCall(final=OSLO), ScriptedCall(final=PARIS)]
    model = ScriptedModel([reply, "Sunny."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, {})},
                    trust=["weather"]) as host:  # fmt: skip
        events = await collect(host, "Oslo and Paris?")
    assert sorted(log) == ["Oslo", "Paris"]  # each run once, side by side once final
    assert [e["arguments"]["city"] for e in events.of("tool_result")] == ["Oslo", "Paris"]
    assert len(events.of("final_call")) == 3
    assert "repeated get_current_weather" in events.of("notice")[0]["text"]
    calls = [m["tool_calls"] for m in model.synced[-1] if m.get("tool_calls")]
    assert [[c["arguments"]["city"] for c in cs] for cs in calls] == [["Oslo", "Paris"]]


async def test_a_reply_holds_at_most_the_named_number_of_calls() -> None:
    log: list[str] = []
    cities = [f"City{i}" for i in range(MAX_CALLS_PER_STEP + 2)]
    reply = [ScriptedCall(final=ToolCall("get_current_weather", {"city": c})) for c in cities]
    model = ScriptedModel([reply, "Sunny."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, {})},
                    trust=["weather"]) as host:  # fmt: skip
        events = await collect(host, "Everywhere?")
    assert model.written == [MAX_CALLS_PER_STEP]
    assert sorted(log) == sorted(cities[:MAX_CALLS_PER_STEP])  # each started once final
    results = [e["arguments"]["city"] for e in events.of("tool_result")]
    assert results == cities[:MAX_CALLS_PER_STEP]  # back to the model in call order


async def test_a_later_call_that_fails_to_decode_keeps_the_calls_before_it() -> None:
    log: list[str] = []
    reply = [ScriptedCall(final=OSLO), ScriptedCall(final=None, error="truncated")]
    model = ScriptedModel([reply, "Sunny."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, {})},
                    trust=["weather"]) as host:  # fmt: skip
        events = await collect(host, "Oslo?")
    assert log == ["Oslo"]
    assert not events.of("call_failed")
    assert events.of("done")[0]["stop"] == "answer"


# ------------------------------------------------------------------ real models


def _two_calls(first: str, second: str) -> dict[str, Any]:
    calls = [{"name": CURRENT_WEATHER.name, "arguments": {"city": c}} for c in (first, second)]
    return {"role": "assistant", "content": "", "tool_calls": calls}


# A turn that showed SmolLM2-135M a two-call list, then a question of the same shape.
TWO_CITY_HISTORY = [
    {"role": "user", "content": "Weather in Oslo and in Rome?"},
    _two_calls("Oslo", "Rome"),
    {"role": "tool", "content": "Oslo: sunny"},
    {"role": "tool", "content": "Rome: sunny"},
    {"role": "assistant", "content": "Sunny in both."},
    {"role": "user", "content": "Weather in Paris and in Berlin?"},
]
QWEN_TURN_BOUND_S = 600  # a hang guard on a busy 2-core machine, not a speed claim


@pytest.mark.parametrize("strategy", ["weave", "constrained"])
def test_smollm2_writes_a_reply_s_calls_as_one_list_that_the_next_step_re_renders_token_for_token(
    fresh_engine, strategy
):
    fmt = FORMATS["smollm2"]
    model = EngineModel(fresh_engine, fmt, get_strategy(strategy))
    model.sync(TWO_CITY_HISTORY, [CURRENT_WEATHER])
    model.free_decode(lambda _text: None, 0)  # a forced call, as tool_choice="required" does
    start = len(model.held)
    remembered = len(model._replies)
    results = model.write_calls([CURRENT_WEATHER], lambda _i, _call: None, 64, budget=512)
    calls = [call for result in results for call in result.calls]
    assert len(calls) == 2 and all(call.name == CURRENT_WEATHER.name for call in calls)
    # Sequence 0 holds the reply exactly as the format renders its calls: one closed list.
    reply = fresh_engine.detokenize(model.held[start:])
    assert reply == render_calls(fmt, calls)
    assert reply.startswith("<tool_call>[") and reply.endswith("]</tool_call>")
    # The reply is remembered once, whole (not once per call and again when closed).
    assert len(model._replies) == remembered + 1
    assert list(model._replies.values())[-1] == model.held[start:]
    # The next step's render of the message keeps every token of the reply.
    held = len(model.held)
    message = {"role": "assistant", "content": "",
               "tool_calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in calls]}  # fmt: skip
    synced = model.sync([*TWO_CITY_HISTORY, message], [CURRENT_WEATHER])
    assert synced.reused >= held


@pytest.mark.model
@pytest.mark.parametrize("tool_choice", ["auto", "required"])
async def test_qwen_asked_the_weather_in_paris_and_in_oslo_calls_for_both_in_one_step_and_runs_them(
    qwen_gguf: Path, tool_choice: str
):
    # Under auto Qwen2.5-Coder-0.5B begins a fenced ```json block, after which it would end the
    # reply; its call is held again as a <tool_call> block, after which it goes on.
    events, first_step = await _paris_and_oslo(qwen_gguf, tool_choice)
    calls = first_step.of("final_call")
    assert len(calls) >= 2, [e.to_json() for e in events]
    assert {"Paris", "Oslo"} <= {c["arguments"].get("city") for c in calls}
    results = first_step.of("tool_result")
    assert [r["arguments"] for r in results] == [c["arguments"] for c in calls]
    assert all(r["status"] == "ok" for r in results)
    answer = "".join(e["text"] for e in events if e.type == "text")
    assert "Oslo" in answer and "tool_call" not in answer and '"name"' not in answer


async def _paris_and_oslo(qwen_gguf: Path, tool_choice: str) -> tuple[Events, Events]:
    """Every event of the turn "What is the weather in Paris and in Oslo?" on Qwen with the
    weather server, and those of its first step. Without the host's guidance: with any of it
    in the system text (the shipped one, or shorter ones, after or beside Qwen's own), Qwen 0.5B
    calls for Paris only; what guidance does to success is bench-agent's A/B to measure."""
    async with Host(servers=[str(ROOT / "tools" / "weather.py")], trust=["weather"],
                    model=str(qwen_gguf), tool_choice=tool_choice, prompt_cache=False,
                    threads=2, guidance=False) as host:  # fmt: skip
        prompt = "What is the weather in Paris and in Oslo?"
        events = await Events.collect(host.run(prompt), timeout=QWEN_TURN_BOUND_S)
    first_step = []
    for event in events:
        if event.type == "step" and first_step:
            break
        first_step.append(event)
    return events, Events(first_step)
