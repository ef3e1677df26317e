"""The agent loop's control flow on a scripted model, with in-process MCP servers.

Provisional and corrected execution, approvals, the result cache, the step bound, failed calls,
large catalogs and the thermal back-off. The real model is in ``test_agent_e2e.py``.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import functools
import threading
from dataclasses import replace
from typing import Annotated, Any, Literal

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

from tools import android
from weavehost import Host
from weavehost.agent.cache import ResultCache
from weavehost.agent.model import FreeText
from weavehost.agent.session import Session
from weavehost.agent.tools import named_not_called, names_tool, rank_tools, select_tools
from weavehost.decode import ToolSchema
from weavehost.engine.thermal import (
    CRITICAL_PAUSE_S,
    ThermalStatus,
    backoff_for,
    performance_cores,
    read_thermal_status,
    status_from_celsius,
)
from weavehost.errors import ConfigError
from weavehost.formats import ToolCall
from weavehost.mcp.executor import StaticApprover
from weavehost.testing import Events
from weavehost.testing.model import ScriptedCall, ScriptedModel

pytestmark = pytest.mark.anyio


def weather_server(
    log: list[dict[str, Any]],
    started: threading.Event,
    imperial: threading.Event | None = None,
) -> MCPServer:
    """A read-only weather tool that records each call and signals that one started (and,
    with ``imperial``, that one in Fahrenheit did)."""
    server = MCPServer("weather", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def get_current_weather(
        city: Annotated[str, Field(description="City name.")],
        units: Annotated[Literal["metric", "imperial"], Field(description="Units.")] = "metric",
    ) -> str:
        """Get the current weather in a city."""
        log.append({"city": city, "units": units})
        started.set()
        if imperial is not None and units == "imperial":
            imperial.set()
        return f"{city}: sunny, {'68 F' if units == 'imperial' else '20 C'}"

    return server


async def collect(host: Host, prompt: str) -> Events:
    return await Events.collect(host.run(prompt), timeout=10)


OSLO = ToolCall("get_current_weather", {"city": "Oslo"})
OSLO_F = ToolCall("get_current_weather", {"city": "Oslo", "units": "imperial"})


async def test_a_trusted_read_only_call_starts_on_the_provisional_call_and_its_result_is_used() -> (
    None
):
    log: list[dict[str, Any]] = []
    started = threading.Event()
    model = ScriptedModel([ScriptedCall(final=OSLO, provisional=OSLO, hold=started), "Sunny."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, started)},
                    trust=["weather"]) as host:  # fmt: skip
        events = await collect(host, "Weather in Oslo?")
    assert model.holds == [True]  # the tool had started before the final call was returned
    assert log == [{"city": "Oslo", "units": "metric"}]  # run once, not again for the final call
    assert [e["started"] for e in events.of("provisional_call")] == [True]
    assert events.of("final_call")[0]["replaced"] is False
    assert events.of("tool_result")[0]["source"] == "provisional"
    assert model.synced[-1][-1] == {
        "role": "tool",
        "name": "get_current_weather",
        "content": "Oslo: sunny, 20 C",
    }
    assert events.of("done")[0]["stop"] == "answer"


async def test_an_untrusted_servers_read_only_call_waits_for_the_final_call_and_approval() -> None:
    log: list[dict[str, Any]] = []
    started = threading.Event()
    approver = StaticApprover(True)
    model = ScriptedModel([ScriptedCall(final=OSLO, provisional=OSLO), "Sunny."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, started)},
                    approver=approver) as host:  # fmt: skip
        events = await collect(host, "Weather in Oslo?")
    assert [e["started"] for e in events.of("provisional_call")] == [False]
    assert [r.spec.name for r in approver.seen] == ["get_current_weather"]
    assert log == [{"city": "Oslo", "units": "metric"}]
    assert events.of("tool_result")[0]["source"] == "final"


async def test_a_final_call_that_an_optional_argument_changed_replaces_the_provisional_one() -> (
    None
):
    log: list[dict[str, Any]] = []
    started = threading.Event()
    model = ScriptedModel([ScriptedCall(final=OSLO_F, provisional=OSLO, hold=started), "68 F."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, started)},
                    trust=["weather"]) as host:  # fmt: skip
        events = await collect(host, "Weather in Oslo in Fahrenheit?")
    assert model.holds == [True]
    assert log[0] == {"city": "Oslo", "units": "metric"}  # the provisional run happened...
    assert log[-1] == {"city": "Oslo", "units": "imperial"}  # ...and the corrected call ran
    assert events.of("final_call")[0]["replaced"] is True
    result = events.of("tool_result")[0]
    assert (result["source"], result["text"]) == ("final", "Oslo: sunny, 68 F")
    shown = [m["content"] for m in model.synced[-1] if m["role"] == "tool"]
    assert shown == ["Oslo: sunny, 68 F"]  # the provisional result never reached the model


async def test_a_corrected_call_of_a_trusted_read_only_tool_starts_once_final_while_the_reply_goes_on() -> (
    None
):
    log: list[dict[str, Any]] = []
    imperial = threading.Event()
    rome = ToolCall("get_current_weather", {"city": "Rome"})
    # The reply's second call is written only once the first call's final run has started.
    reply = [ScriptedCall(final=OSLO_F, provisional=OSLO),
             ScriptedCall(final=rome, provisional=rome, hold=imperial)]  # fmt: skip
    model = ScriptedModel([reply, "68 F and 20 C."], hold_timeout_s=2)
    server = weather_server(log, threading.Event(), imperial)
    async with Host(agent_model=model, inproc={"weather": server}, trust=["weather"]) as host:
        events = await collect(host, "Weather in Oslo in Fahrenheit, and in Rome?")
    assert model.holds == [True]
    assert log.count({"city": "Oslo", "units": "imperial"}) == 1
    assert log.count({"city": "Rome", "units": "metric"}) == 1
    told = [(e.type, e["arguments"]["city"]) for e in events
            if e.type in ("provisional_call", "final_call")]  # fmt: skip
    assert told == [("provisional_call", "Oslo"), ("final_call", "Oslo"),
                    ("provisional_call", "Rome"), ("final_call", "Rome")]  # fmt: skip
    assert [e["replaced"] for e in events.of("final_call")] == [True, False]
    results = [(e["source"], e["text"]) for e in events.of("tool_result")]
    assert results == [("final", "Oslo: sunny, 68 F"), ("provisional", "Rome: sunny, 20 C")]
    shown = [m["content"] for m in model.synced[-1] if m["role"] == "tool"]
    assert shown == ["Oslo: sunny, 68 F", "Rome: sunny, 20 C"]


@pytest.mark.parametrize("answer", [False, True], ids=["denied", "approved"])
async def test_a_message_sending_tool_never_starts_before_approval_and_never_runs_when_denied(
    answer: bool,
) -> None:
    call = ToolCall("send_message", {"recipient": "Bob Okafor", "text": "hi"})
    device = android.Device()
    sent_at_approval: list[int] = []

    class Recording(StaticApprover):
        async def approve(self, request: Any) -> bool:
            sent_at_approval.append(len(device.messages))
            return await StaticApprover.approve(self, request)

    model = ScriptedModel([ScriptedCall(final=call, provisional=call), "Done."])
    async with Host(agent_model=model, inproc={"android": android.build_server(device)},
                    trust=["android"], approver=Recording(answer)) as host:  # fmt: skip
        events = await collect(host, "Text Bob hi")
    assert [e["started"] for e in events.of("provisional_call")] == [False]
    assert sent_at_approval == [0]
    assert events.of("tool_result")[0]["status"] == ("ok" if answer else "denied")
    assert len(device.messages) == (1 if answer else 0)


async def test_an_identical_read_only_call_in_the_same_session_is_served_from_the_cache() -> None:
    log: list[dict[str, Any]] = []
    model = ScriptedModel([ScriptedCall(final=OSLO), "One.", ScriptedCall(final=OSLO), "Two."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, threading.Event())},
                    trust=["weather"]) as host:  # fmt: skip
        session = host.session()
        with anyio.fail_after(10):
            first = await Events.collect(session.run("Oslo?"))
            second = await Events.collect(session.run("Oslo again?"))
    assert len(log) == 1
    assert first.of("tool_result")[0]["source"] == "final"
    assert second.of("tool_result")[0]["source"] == "cache"
    assert second.of("tool_result")[0]["text"] == "Oslo: sunny, 20 C"


async def test_a_call_repeated_in_the_same_turn_is_not_run_again_and_the_model_must_answer() -> (
    None
):
    log: list[dict[str, Any]] = []
    model = ScriptedModel([ScriptedCall(final=OSLO), ScriptedCall(final=OSLO), "Sunny, 20 C."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, threading.Event())},
                    trust=["weather"]) as host:  # fmt: skip
        events = await collect(host, "Oslo?")
    assert len(log) == 1 and len(events.of("tool_result")) == 1
    assert model.allowed_calls == [True, True, False]
    # The writer is told the turn's calls (a real model's repeat is taken back once written
    # whole); a scripted one writes it anyway, and the session drops it.
    assert model.made == [frozenset(), {OSLO.canonical()}, {OSLO.canonical()}]
    assert "repeated get_current_weather" in events.of("notice")[0]["text"]
    assert events.of("done")[0].data == {"stop": "answer", "steps": 3}
    assert sum(1 for m in model.synced[-1] if m.get("tool_calls")) == 1  # the repeat was dropped


class ResumingModel(ScriptedModel):
    """A scripted model that can go on with a reply whose calls were not run, as the engine's
    does: the script's next reply (a text) follows the text the dropped reply began with."""

    def __init__(self, steps: list[Any]) -> None:
        super().__init__(steps)
        self.began: list[str] = []  # the text each reply began with
        self.resumed: list[int] = []  # the bound each resume was given

    def free_decode(self, on_text: Any, max_tokens: int, *args: Any, **kw: Any) -> FreeText:
        free = super().free_decode(on_text, max_tokens, *args, **kw)
        self.began.append(free.text)
        return free

    def resume_free(self, on_text: Any, max_tokens: int, **kw: Any) -> FreeText | None:
        self.resumed.append(max_tokens)
        more = super().free_decode(on_text, max_tokens, False, **kw)
        return replace(more, text=self.began[-1] + more.text)


async def test_a_reply_whose_only_call_is_a_repeat_goes_on_after_its_text_shown_once() -> None:
    log: list[dict[str, Any]] = []
    again = ScriptedCall(final=OSLO, text="Let me check once more. ")
    model = ResumingModel([ScriptedCall(final=OSLO), again, "Oslo is sunny, 20 C."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, threading.Event())},
                    trust=["weather"]) as host:  # fmt: skip
        conversation = host.session()
        events = await Events.collect(conversation.run("Oslo?"), timeout=10)
        transcript = conversation.messages
    assert len(log) == 1 and "repeated get_current_weather" in events.of("notice")[0]["text"]
    shown = "".join(e["text"] for e in events.of("text"))
    assert shown == "Let me check once more. Oslo is sunny, 20 C."  # the first part shown once
    assert len(model.resumed) == 1 and len(model.synced) == 2  # step 3 read no new prompt
    assert model.allowed_calls == [True, True, False]
    assert events.of("done")[0].data == {"stop": "answer", "steps": 3}
    (third,) = [t for t in events.of("timings") if t["step"] == 3]
    assert third["prefilled_tokens"] == 0 and third["prompt_cache"] == "off"
    assert transcript[-1] == {"role": "assistant", "content": shown}  # the answer, whole


async def test_a_turn_that_hits_the_step_bound_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    # A model that keeps calling one tool; the steering that answers after a tool's good result
    # (tests/test_agent_steering.py) would end this turn before the bound, so it is off here.
    monkeypatch.setattr(Session, "answer_after_result", False)
    log: list[dict[str, Any]] = []
    calls = [ScriptedCall(final=ToolCall("get_current_weather", {"city": c})) for c in "ABC"]
    model = ScriptedModel(list(calls))
    async with Host(agent_model=model, inproc={"weather": weather_server(log, threading.Event())},
                    trust=["weather"], max_steps=2) as host:  # fmt: skip
        events = await collect(host, "Weather everywhere")
    assert len(log) == 2
    assert events.of("done")[0].data == {"stop": "max_steps", "steps": 2}
    assert "step bound" in events.of("notice")[-1]["text"]


async def test_a_call_that_failed_to_decode_runs_nothing_and_ends_the_turn() -> None:
    log: list[dict[str, Any]] = []
    model = ScriptedModel([ScriptedCall(final=None, text="Let me check. ", error="truncated JSON")])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, threading.Event())},
                    trust=["weather"]) as host:  # fmt: skip
        events = await collect(host, "Oslo?")
    assert log == []
    assert events.of("call_failed")[0]["error"] == "truncated JSON"
    assert events.of("done")[0]["stop"] == "call_failed"
    assert "".join(e["text"] for e in events.of("text")) == "Let me check. "


async def test_a_call_whose_optional_arguments_did_not_finish_runs_as_its_provisional_call() -> (
    None
):
    log: list[dict[str, Any]] = []
    unfinished = ScriptedCall(final=None, provisional=OSLO, error="did not finish in 243 tokens")
    model = ScriptedModel([unfinished, "Sunny in Oslo."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, threading.Event())},
                    trust=["weather"]) as host:  # fmt: skip
        events = await collect(host, "Oslo?")
    assert [r["arguments"] for r in events.of("tool_result")] == [dict(OSLO.arguments)]
    assert not events.of("call_failed") and events.of("done")[0]["stop"] == "answer"
    assert "did not finish in 243 tokens" in events.of("notice")[-1]["text"]


async def test_a_large_catalog_offers_only_the_most_relevant_tools_and_says_so() -> None:
    model = ScriptedModel(["ok"], n_ctx=600)
    async with Host(agent_model=model, inproc={"android": android.build_server()}) as host:
        events = await collect(host, "Send a message to Bob")
    offered = model.offered[0]
    assert "send_message" in offered and len(offered) < 10
    assert "most relevant" in events.of("notice")[0]["text"]


# --------------------------------------------------------------------------- tool choice, answer bound


class RecordingModel(ScriptedModel):
    """A scripted model that also records the tools each call was written with, and answers
    as if its free text ran into the step's token bound."""

    def __init__(self, replies: list[Any], *, cut: bool = False) -> None:
        super().__init__(replies)
        self.call_tools: list[list[str]] = []
        self.cut = cut

    def write_call(self, tools: Any, on_provisional: Any, max_tokens: int) -> Any:
        self.call_tools.append([t.name for t in tools])
        return super().write_call(tools, on_provisional, max_tokens)

    def free_decode(
        self, on_text: Any, max_tokens: int, allow_call: bool = True, **kw: Any
    ) -> FreeText:
        free = super().free_decode(on_text, max_tokens, allow_call, **kw)
        return replace(free, stop="max_tokens") if self.cut and not free.call else free


async def test_tool_choice_none_never_lets_a_call_begin_and_shows_the_model_no_tools() -> None:
    log: list[dict[str, Any]] = []
    model = ScriptedModel([ScriptedCall(final=OSLO, text="Checking. "), "Never mind."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, threading.Event())},
                    trust=["weather"], tool_choice="none") as host:  # fmt: skip
        events = await collect(host, "Weather in Oslo?")
    assert log == [] and events.of("final_call") == []
    assert model.allowed_calls == [False]
    assert model.offered[0] == []  # the prompt describes no tool: none may be called
    assert events.of("done")[0].data == {"stop": "answer", "steps": 1}


async def test_tool_choice_naming_a_tool_writes_the_first_call_with_only_that_tool_offered() -> (
    None
):
    log: list[dict[str, Any]] = []
    model = RecordingModel([ScriptedCall(final=OSLO), "Sunny."])
    inproc = {"weather": weather_server(log, threading.Event()), "android": android.build_server()}
    async with Host(agent_model=model, inproc=inproc, trust=["weather"],
                    tool_choice="get_current_weather") as host:  # fmt: skip
        events = await collect(host, "How is it outside in Oslo?")
    assert model.call_tools == [["get_current_weather"]]
    assert len(model.offered[0]) > 1  # the prompt still shows the other tools
    assert model.allowed_calls == [True, True]  # the first step wrote no free text; then auto
    assert log == [{"city": "Oslo", "units": "metric"}]
    assert events.of("done")[0].data == {"stop": "answer", "steps": 2}


async def test_a_tool_choice_that_names_no_tool_is_a_config_error_naming_the_known_tools() -> None:
    model = ScriptedModel(["unused"])
    with anyio.fail_after(10), pytest.raises(ConfigError) as failure:
        async with Host(agent_model=model, inproc={"weather": weather_server([], threading.Event())},
                        tool_choice="get_wether"):  # fmt: skip
            pass
    assert "known tools: get_current_weather" in str(failure.value)
    assert failure.value.exit_code == 2


async def test_an_answer_cut_by_its_token_bound_ends_the_turn_with_a_notice() -> None:
    model = RecordingModel(["Sunny, and then some more and more"], cut=True)
    async with Host(agent_model=model, inproc={"weather": weather_server([], threading.Event())},
                    max_answer_tokens=7) as host:  # fmt: skip
        events = await collect(host, "Oslo?")
    assert "bound of 7 tokens" in events.of("notice")[0]["text"]
    assert events.of("done")[0].data == {"stop": "answer", "steps": 1}


async def test_an_answer_that_ends_by_itself_has_no_notice() -> None:
    model = ScriptedModel(["Sunny."])
    async with Host(agent_model=model, inproc={"weather": weather_server([], threading.Event())},
                    max_answer_tokens=7) as host:  # fmt: skip
        events = await collect(host, "Oslo?")
    assert events.of("notice") == []


# --------------------------------------------------------------------------- pure parts


def tool(name: str, description: str) -> ToolSchema:
    return ToolSchema(name, description, {"type": "object", "properties": {}})


def test_tools_rank_by_words_shared_with_the_request_and_ties_keep_catalog_order() -> None:
    tools = [tool("set_alarm", "Set an alarm"), tool("get_forecast", "Weather forecast for a city"),
             tool("send_message", "Send a text message"), tool("open_app", "Open an app")]  # fmt: skip
    ranked = [t.name for t in rank_tools(tools, "What is the weather forecast in Paris?")]
    assert ranked == ["get_forecast", "set_alarm", "send_message", "open_app"]


def test_a_request_names_a_tool_by_a_word_of_its_name_not_of_its_description() -> None:
    weather = tool("get_current_weather", "Get the current weather in a city.")
    volume = tool("set_volume", "Set the volume of a sound stream.")
    assert names_tool(weather, "How is the Weather in Tokyo?")
    assert names_tool(volume, "Set the ring volume to 3.")
    assert not names_tool(weather, "What is the capital city of France?")  # its description's
    assert not names_tool(volume, "Can you set a timer?")  # "set" is a stop word


def test_after_a_call_a_tool_is_still_named_only_by_a_word_no_called_tool_s_name_holds() -> None:
    now, convert = tool("get_current_time", "Now."), tool("convert_time", "Convert a time.")
    weather, battery = (
        tool("get_current_weather", "Weather."),
        tool("get_battery_status", "Battery."),
    )
    assert named_not_called([now, convert], "What time is it in Tokyo?", {"get_current_time"}) == []
    rome = "How is the weather in Rome, and how much battery do I have?"
    assert named_not_called([weather, battery], rome, {"get_current_weather"}) == [battery]


def test_select_tools_keeps_everything_under_budget_and_the_best_that_fit_over_it() -> None:
    tools = [tool(f"tool_{i}", "x " * 40) for i in range(10)] + [tool("get_weather", "weather")]
    every, total = select_tools(tools, "weather", budget_tokens=10_000, count_tokens=len)
    assert every == tools
    some, _ = select_tools(tools, "weather", budget_tokens=total // 4, count_tokens=len)
    assert some[0].name == "get_weather" and 1 < len(some) < len(tools)  # best first
    one, _ = select_tools(tools, "weather", budget_tokens=1, count_tokens=len)
    assert [t.name for t in one] == ["get_weather"]


def test_the_result_cache_forgets_entries_past_their_age_and_beyond_its_size() -> None:
    now = [0.0]
    cache = ResultCache(max_entries=2, max_age_s=10, clock=lambda: now[0])
    a, b, c = (ToolCall("f", {"x": i}) for i in range(3))
    for call in (a, b):
        cache.open(call)
    assert cache.get(ToolCall("f", {"x": 0})) is not None  # canonical: a fresh equal object hits
    cache.open(c)  # evicts b, the least recently used
    assert cache.get(b) is None and cache.get(a) is not None
    now[0] = 11.0
    assert cache.get(a) is None and len(cache) == 1


def test_thermal_back_off_follows_the_seed_table() -> None:
    assert backoff_for(None, 4, 256).threads == 4
    assert backoff_for(ThermalStatus.LIGHT, 4, 256) == backoff_for(ThermalStatus.NONE, 4, 256)
    moderate = backoff_for(ThermalStatus.MODERATE, 4, 256)
    assert (moderate.threads, moderate.step_pause_s, moderate.max_tokens) == (2, 0.2, 128)
    severe = backoff_for(ThermalStatus.SEVERE, 4, 256)
    assert (severe.threads, severe.step_pause_s, severe.max_tokens) == (1, 0.5, 64)
    critical = backoff_for(ThermalStatus.CRITICAL, 4, 256)
    assert critical.paused and critical.step_pause_s == CRITICAL_PAUSE_S
    assert [status_from_celsius(c) for c in (35, 55, 65, 75, 90)] == list(ThermalStatus)


def test_performance_cores_leave_out_the_slowest_cluster_of_a_big_little_phone() -> None:
    phone = {0: 1_800_000, 1: 1_800_000, 2: 2_400_000, 3: 2_400_000, 4: 3_000_000}
    assert performance_cores(phone, set(phone)) == 3
    assert performance_cores({0: 2_000_000, 1: 2_000_000}, {0, 1}) == 2
    assert performance_cores({}, {0, 1, 2}) == 3


def test_the_thermal_status_is_read_only_on_android(tmp_path: Any, monkeypatch: Any) -> None:
    zone = tmp_path / "thermal_zone0"
    zone.mkdir()
    (zone / "temp").write_text("72000\n")
    monkeypatch.delenv("ANDROID_ROOT", raising=False)
    monkeypatch.delenv("TERMUX_VERSION", raising=False)
    assert read_thermal_status(str(tmp_path)) is None
    monkeypatch.setenv("TERMUX_VERSION", "0.118")
    assert read_thermal_status(str(tmp_path)) == ThermalStatus.SEVERE


class CountingModel(ScriptedModel):
    """Records how many model calls were ever in progress at once."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.inside, self.most = 0, 0
        self.guard = threading.Lock()

    def _enter(self, method: Any, *args: Any) -> Any:
        with self.guard:
            self.inside += 1
            self.most = max(self.most, self.inside)
        try:
            return method(*args)
        finally:
            with self.guard:
                self.inside -= 1

    def sync(self, *args: Any) -> Any:
        return self._enter(super().sync, *args)

    def free_decode(self, *args: Any, **kw: Any) -> Any:
        return self._enter(functools.partial(super().free_decode, **kw), *args)

    def write_call(self, *args: Any) -> Any:
        return self._enter(super().write_call, *args)


async def test_two_sessions_never_enter_the_model_at_once() -> None:
    log: list[dict[str, Any]] = []
    started = threading.Event()
    model = CountingModel([ScriptedCall(final=OSLO, provisional=OSLO, hold=started), "A.", "B."])
    async with Host(agent_model=model, inproc={"weather": weather_server(log, started)},
                    trust=["weather"]) as host:  # fmt: skip
        first, second = host.session(), host.session()

        async def drain(session: Any, prompt: str) -> None:
            async for _ in session.run(prompt):
                pass

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(drain, first, "Oslo?")
                tg.start_soon(drain, second, "Hello")
    assert model.holds == [True]  # the first call was held open while the second turn waited
    assert model.most == 1


async def test_a_hot_phone_runs_the_model_on_fewer_threads_and_a_cool_one_gets_them_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    statuses = iter([ThermalStatus.MODERATE, ThermalStatus.NONE])
    monkeypatch.setattr("weavehost.host.read_thermal_status", lambda: next(statuses))
    model = ScriptedModel(["Warm.", "Cool."], threads=4)
    async with Host(agent_model=model) as host:
        session = host.session()
        with anyio.fail_after(10):
            await Events.collect(session.run("one"))
            assert model.thread_changes == [2]  # MODERATE: half the threads
            await Events.collect(session.run("two"))
    assert model.thread_changes == [2, 4]  # cool again: every thread back
