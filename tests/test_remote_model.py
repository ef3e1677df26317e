"""The remote model behind the agent's seam, against a scripted OpenAI-compatible server
(tests/remote_fake_server.py): streamed text and calls, provisional starts from a stream in
small pieces, forced calls, and every fault of the issue's item 4 as an error event that runs
nothing (RELIABILITY rows "remote model")."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

from tests.remote_fake_server import (
    DONE,
    HOLD,
    HOLD_BOUND_S,
    FakeOpenAI,
    Reply,
    chunk,
    streamed_call,
)
from tools import weather
from weavehost import Host
from weavehost.agent.lock import ModelLock
from weavehost.agent.model import Sampling
from weavehost.agent.remote import open_remote_model
from weavehost.agent.sampling import ModelSampler
from weavehost.cli import main
from weavehost.config import HostConfig, RemoteModelConfig, parse_config
from weavehost.decode import ToolSchema
from weavehost.errors import AbortedError, ConfigError, RemoteConnectionError
from weavehost.formats import ToolCall
from weavehost.mcp.features import SamplingMessage, SamplingRequest
from weavehost.testing import Events

pytestmark = pytest.mark.anyio

PARIS = '{"city": "Paris", "units": "metric"}'


def answer(text: str = "It is -2.9 C in Paris.") -> Reply:
    return Reply(events=[chunk(text=text[:6]), chunk(text=text[6:]), chunk(finish="stop"), DONE])


def a_call(arguments: str = PARIS, *extra: Any) -> Reply:
    return Reply(events=[*streamed_call("get_current_weather", arguments), *extra,
                         chunk(finish="tool_calls"), DONE])  # fmt: skip


def host_for(fake: FakeOpenAI, **kwargs: Any) -> Host:
    remote = kwargs.pop("remote", None) or RemoteModelConfig(url=fake.url)
    return Host(HostConfig(remote=remote), inproc={"weather": weather.server}, trust=["weather"],
                approval="always", **kwargs)  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


# ---------------------------------------------------------------- what works as it does locally


async def test_remote_turn_streams_text_runs_the_servers_call_and_answers(fake: FakeOpenAI) -> None:
    fake.replies = [a_call(), answer()]
    async with host_for(fake) as host:
        events = await Events.collect(host.run("What is the weather in Paris?"))
    assert events.stop == "answer", events.describe()
    (final,) = events.of("final_call")
    assert final["name"] == "get_current_weather" and final["arguments"] == {
        "city": "Paris",
        "units": "metric",
    }
    (result,) = events.of("tool_result")
    assert result["status"] == "ok" and "Paris" in result["text"]
    assert events.text == "It is -2.9 C in Paris."
    first, second = fake.posts()
    assert first["stream"] is True and first["tool_choice"] == "auto"
    assert first["tools"][0]["function"]["name"] == "get_current_weather"
    # The second request carries the call (with an id) and its result answering that id.
    call = second["messages"][-2]["tool_calls"][0]
    assert json.loads(call["function"]["arguments"]) == {"city": "Paris", "units": "metric"}
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": call["id"],
        "content": result["text"],
    }


async def test_remote_call_streamed_in_small_pieces_starts_the_trusted_read_only_tool_before_the_stream_ends(
    fake: FakeOpenAI,
) -> None:
    # The stream stops after `"Paris",` until the test has seen the provisional start.
    pieces = streamed_call("get_current_weather", '{"city": "Paris",')
    rest = streamed_call("get_current_weather", ' "units": "metric"}')[1:]
    fake.replies = [
        Reply(events=[*pieces, HOLD, *rest, chunk(finish="tool_calls"), DONE]),
        answer(),
    ]
    seen: list[Any] = []
    async with host_for(fake) as host:
        with anyio.fail_after(30):
            async for event in host.run("What is the weather in Paris?"):
                if event.type == "provisional_call":
                    seen.append((event.data, "held" if not fake._release.is_set() else "released"))
                    fake.release()
                seen.append(event)
    (provisional, when), *_ = [s for s in seen if isinstance(s, tuple)]
    assert provisional["arguments"] == {"city": "Paris"} and provisional["started"] is True
    assert when == "held"  # the tool started while the server still held the rest of the call
    events = Events(e for e in seen if not isinstance(e, tuple))
    (final,) = events.of("final_call")
    assert final["arguments"] == {"city": "Paris", "units": "metric"} and final["replaced"] is True
    assert events.of("tool_result")[0]["source"] == "final"  # the corrected call ran anew


async def test_remote_final_call_equal_to_its_provisional_one_uses_the_early_result(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [a_call('{"city": "Paris"}', HOLD), answer()]
    async with host_for(fake) as host:
        got = []
        with anyio.fail_after(30):
            async for event in host.run("Weather in Paris?"):
                got.append(event)
                if event.type == "provisional_call":
                    fake.release()
    events = Events(got)
    assert events.of("provisional_call")[0]["started"] is True
    assert events.of("final_call")[0]["replaced"] is False
    assert events.of("tool_result")[0]["source"] == "provisional"


async def test_remote_early_start_off_runs_the_call_only_when_the_reply_ends(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [a_call('{"city": "Paris"}'), answer()]
    remote = RemoteModelConfig(url=fake.url, early_start=False)
    async with host_for(fake, remote=remote) as host:
        events = await Events.collect(host.run("Weather in Paris?"))
    assert events.of("provisional_call") == []
    assert events.of("tool_result")[0]["source"] == "final"


async def test_remote_forced_tool_choice_names_the_tool_in_the_request(fake: FakeOpenAI) -> None:
    fake.replies = [a_call(), answer()]
    async with host_for(fake, tool_choice="get_current_weather") as host:
        events = await Events.collect(host.run("Paris?"))
    assert events.of("final_call")
    first, second = fake.posts()
    assert first["tool_choice"] == {"type": "function", "function": {"name": "get_current_weather"}}
    assert second["tool_choice"] == "auto"


async def test_remote_required_tool_choice_over_several_tools_asks_for_required(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [a_call(), answer()]
    async with host_for(fake, tool_choice="required") as host:
        await Events.collect(host.run("Paris?"))
    assert fake.posts()[0]["tool_choice"] == "required"


async def test_remote_answer_longer_than_its_bound_is_cut_with_a_notice(fake: FakeOpenAI) -> None:
    fake.replies = [Reply(events=[chunk(text=c) for c in "abcdef"] + [chunk(finish="stop"), DONE])]
    async with host_for(fake, max_answer_tokens=2) as host:
        events = await Events.collect(host.run("Say something"))
    assert events.text == "ab"
    assert any("bound of 2 tokens" in n for n in events.notices)


async def test_remote_unstreamed_reply_gives_the_same_call(fake: FakeOpenAI) -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "x",
                "type": "function",
                "function": {"name": "get_current_weather", "arguments": PARIS},
            }
        ],
    }
    whole = {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    done = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Cold."},
                "finish_reason": "stop",
            }
        ]
    }
    fake.replies = [Reply(body=whole), Reply(body=done)]
    async with host_for(fake, remote=RemoteModelConfig(url=fake.url, stream=False)) as host:
        events = await Events.collect(host.run("Paris?"))
    assert events.stop == "answer" and events.text == "Cold."
    assert events.of("final_call")[0]["arguments"] == {"city": "Paris", "units": "metric"}
    assert [p["stream"] for p in fake.posts()] == [False, False]


async def test_remote_stream_forced_streams_only_requests_that_force_the_call(
    fake: FakeOpenAI,
) -> None:
    done = {
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Cold."},
                "finish_reason": "stop",
            }
        ]
    }
    fake.replies = [a_call(), Reply(body=done)]
    remote = RemoteModelConfig(url=fake.url, stream="forced")
    async with host_for(fake, remote=remote, tool_choice="get_current_weather") as host:
        events = await Events.collect(host.run("Paris?"))
    assert events.stop == "answer"
    assert [p["stream"] for p in fake.posts()] == [True, False]


def test_remote_prompt_tokens_the_server_reports_are_counted_for_an_answer_without_a_call(
    fake: FakeOpenAI,
) -> None:
    usage = {"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 1}}
    fake.replies = [Reply(events=[chunk(text="hello"), chunk(finish="stop"), usage, DONE])]
    with open_remote_model(RemoteModelConfig(url=fake.url), n_ctx=2048) as model:
        model.sync([{"role": "user", "content": "hi"}], [])
        free = model.free_decode(lambda _t: None, 16, False)
        assert free.text == "hello" and not free.call
        assert model.stats().prefilled_tokens == 42


def test_remote_sampling_request_asks_the_server_for_its_temperature_seed_and_stops(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [Reply(events=[chunk(text="hello"), chunk(finish="stop"), DONE])]
    with open_remote_model(RemoteModelConfig(url=fake.url), n_ctx=2048) as model:
        model.sync([{"role": "user", "content": "hi"}], [])
        free = model.free_decode(
            lambda _t: None, 16, False, sampling=Sampling(0.7, seed=3, stop=("END",))
        )
    assert free.text == "hello" and free.stop == "end" and not free.call
    body = fake.posts()[0]
    assert (body["temperature"], body["seed"], body["stop"]) == (0.7, 3, ["END"])
    assert "tools" not in body  # a request offering no tools sends none


def test_remote_context_size_comes_from_props_then_models_then_the_config(fake: FakeOpenAI) -> None:
    fake.props = {"default_generation_settings": {"n_ctx": 8192}}
    with open_remote_model(RemoteModelConfig(url=fake.url, context_size=1000), n_ctx=4096) as model:
        assert (model.n_ctx, model.info.context_source, model.name) == (
            8192,
            "/props",
            "fake-model",
        )
    fake.props = None
    with open_remote_model(RemoteModelConfig(url=fake.url, context_size=1000), n_ctx=4096) as model:
        assert (model.n_ctx, model.info.context_source) == (1000, "config")
    with open_remote_model(RemoteModelConfig(url=fake.url), n_ctx=4096) as model:
        assert (model.n_ctx, model.info.context_source) == (4096, "default")


@pytest.mark.parametrize("body", [[1, 2], {"data": None}, {"data": "x"}])
def test_remote_a_models_listing_of_the_wrong_shape_falls_back_to_the_configured_name(
    fake: FakeOpenAI, body: Any
) -> None:
    fake.models_body = body
    with open_remote_model(RemoteModelConfig(url=fake.url, name="mine"), n_ctx=4096) as model:
        assert (model.name, model.n_ctx) == ("mine", 4096)


def test_remote_models_command_shows_the_engine_url_name_and_context(fake: FakeOpenAI) -> None:
    fake.props = {"default_generation_settings": {"n_ctx": 8192}}
    result = CliRunner().invoke(main, ["models", "--model", fake.url])
    assert result.exit_code == 0, result.output
    assert "remote (OpenAI-compatible)" in result.output
    assert fake.url in result.output and "fake-model" in result.output
    assert "8192 tokens (from /props)" in result.output


def test_remote_config_takes_a_url_name_headers_from_the_environment_and_timeouts(
    monkeypatch: pytest.MonkeyPatch, fake: FakeOpenAI
) -> None:
    monkeypatch.setenv("LLM_KEY", "s3cret")
    config = parse_config({"weavehost": {"model": {
        "url": fake.url, "name": "big", "headers": {"Authorization": "Bearer ${LLM_KEY}"},
        "timeouts": {"connect": 3, "read": 7}, "retries": 0, "stream": "forced"}}})  # fmt: skip
    remote = config.remote
    assert remote is not None and remote.name == "big" and remote.read_timeout == 7
    assert remote.headers == {"Authorization": "Bearer s3cret"} and remote.stream == "forced"
    with open_remote_model(remote, n_ctx=2048) as model:
        assert model.name == "big"
    assert fake.requests[0][3]["authorization"] == "Bearer s3cret"
    with pytest.raises(ConfigError, match="weavehost.model.stream"):
        parse_config({"weavehost": {"model": {"url": fake.url, "stream": "sometimes"}}})
    with pytest.raises(ConfigError, match="LLM_MISSING"):
        parse_config(
            {"weavehost": {"model": {"url": fake.url, "headers": {"a": "${LLM_MISSING}"}}}}
        )


# ---------------------------------------------------------------- faults: an error, nothing run


def assert_failed_running_nothing(events: Events, kind: str, words: str) -> None:
    (error,) = events.of("error")
    assert error["kind"] == kind, events.describe()
    assert words in error["error"], error["error"]
    assert events.stop == "error"
    assert events.of("tool_result") == [] and events.of("final_call") == []


async def test_remote_connection_refused_mid_session_ends_the_turn_with_an_error_event(
    fake: FakeOpenAI,
) -> None:
    async with host_for(fake) as host:
        fake.stop()  # the server went away after the host connected
        events = await Events.collect(host.run("Paris?"))
    assert_failed_running_nothing(events, "RemoteConnectionError", "connection refused")


async def test_remote_server_that_refuses_at_start_fails_the_host_after_its_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    remote = RemoteModelConfig(url=url, retries=1, connect_timeout=2)
    with pytest.raises(RemoteConnectionError, match="cannot connect to the model server"):
        async with Host(HostConfig(remote=remote), inproc={"weather": weather.server}):
            pass


def test_remote_run_command_against_a_refused_port_prints_one_error_line_and_exits_non_zero() -> (
    None
):
    url = f"http://127.0.0.1:{free_port()}/v1"
    result = CliRunner().invoke(
        main, ["run", "hi", "--server", "tools/weather.py", "--model", url, "--json"]
    )
    assert result.exit_code == 1
    assert "Error: cannot connect to the model server" in result.output
    assert "Traceback" not in result.output


async def test_remote_http_500_to_a_chat_completion_is_an_error_event_and_is_not_retried(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [Reply(500, body={"error": {"message": "CUDA out of memory"}})]
    async with host_for(fake) as host:
        events = await Events.collect(host.run("Paris?"))
    assert_failed_running_nothing(events, "RemoteResponseError", "HTTP 500")
    assert "CUDA out of memory" in events.errors[0]
    assert len(fake.posts()) == 1  # a chat completion that may have started is never sent again


def test_remote_model_listing_that_fails_with_5xx_is_retried_with_back_off(
    fake: FakeOpenAI,
) -> None:
    fake.models_failures = 2
    with open_remote_model(RemoteModelConfig(url=fake.url, retries=2), n_ctx=2048) as model:
        assert model.name == "fake-model"
    gets = [
        path for method, path, _b, _h in fake.requests if method == "GET" and path == "/v1/models"
    ]
    assert len(gets) == 3


async def test_remote_stream_that_ends_mid_call_is_an_error_event_and_runs_nothing(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [
        Reply(events=streamed_call("get_current_weather", '{"city": "Pa'))
    ]  # no finish, no [DONE]
    async with host_for(fake) as host:
        events = await Events.collect(host.run("Paris?"))
    assert_failed_running_nothing(
        events, "RemoteStreamError", "in the middle of a call to get_current_weather"
    )
    assert events.of("provisional_call") == []


async def test_remote_call_with_invalid_json_arguments_is_an_error_event_and_runs_nothing(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [a_call('{"city": "Paris" "units": }')]
    async with host_for(fake) as host:
        events = await Events.collect(host.run("Paris?"))
    assert_failed_running_nothing(events, "RemoteStreamError", "not valid JSON")


async def test_remote_call_of_a_tool_not_on_offer_is_an_error_event_and_runs_nothing(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [Reply(events=[*streamed_call("rm_rf", "{}"), chunk(finish="tool_calls"), DONE])]
    async with host_for(fake) as host:
        events = await Events.collect(host.run("Paris?"))
    assert_failed_running_nothing(events, "RemoteStreamError", "not a tool on offer")


async def test_remote_server_silent_past_the_read_timeout_is_an_error_event_naming_the_setting(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [Reply(events=[HOLD, *streamed_call("get_current_weather", PARIS)])]
    remote = RemoteModelConfig(url=fake.url, read_timeout=0.5)
    async with host_for(fake, remote=remote) as host:
        events = await Events.collect(host.run("Paris?"))
    assert_failed_running_nothing(
        events, "RemoteConnectionError", "within 0.5 s (weavehost.model.timeouts.read)"
    )


async def test_remote_stream_that_ends_before_sending_anything_says_how_to_configure_such_a_server(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [
        Reply(events=[])
    ]  # what llama-cpp-python's server does for a streamed auto choice
    async with host_for(fake) as host:
        events = await Events.collect(host.run("Paris?"))
    assert_failed_running_nothing(events, "RemoteStreamError", '"stream": "forced"')


async def test_remote_conversation_goes_on_after_a_failed_turn(fake: FakeOpenAI) -> None:
    fake.replies = [Reply(503, body={"error": "busy"}), answer("Hello there.")]
    async with host_for(fake) as host:
        session = host.session()
        failed = await Events.collect(session.run("Hi"))
        events = await Events.collect(session.run("Hi again"))
    assert failed.stop == "error"
    assert events.stop == "answer" and events.text == "Hello there."


def test_remote_tool_schema_required_arguments_decide_the_provisional_start(
    fake: FakeOpenAI,
) -> None:
    tool = ToolSchema("f", "", {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
                                "required": ["b"]})  # fmt: skip
    fake.replies = [Reply(events=[*streamed_call("f", '{"a": 1, "b": "x", "c": 2}', size=1),
                                  chunk(finish="tool_calls"), DONE])]  # fmt: skip
    fired: list[Any] = []
    with open_remote_model(RemoteModelConfig(url=fake.url), n_ctx=2048) as model:
        model.sync([{"role": "user", "content": "go"}], [tool])
        free = model.free_decode(lambda _t: None, 0)
        assert free.text == ""
        (result,) = model.write_calls([tool], lambda i, c: fired.append((i, c)), 64, budget=64)
    assert [(i, c.name, dict(c.arguments)) for i, c in fired] == [(0, "f", {"b": "x"})]
    assert result.provisional is not None and dict(result.calls[0].arguments) == {
        "a": 1,
        "b": "x",
        "c": 2,
    }
    assert result.tool_latency_s <= result.final_latency_s


def test_remote_reply_ends_at_a_call_made_earlier_in_the_turn(fake: FakeOpenAI) -> None:
    tool = ToolSchema("f", "", {"type": "object", "properties": {"b": {"type": "string"}}})
    events = [*streamed_call("f", '{"b": "x"}'), *streamed_call("f", '{"b": "y"}', index=1)]
    fake.replies = [Reply(events=[*events, chunk(finish="tool_calls"), DONE]) for _ in range(2)]
    made = {ToolCall("f", {"b": "x"}).canonical()}
    with open_remote_model(RemoteModelConfig(url=fake.url), n_ctx=2048) as model:
        written = []
        for earlier in ((), made):
            model.sync([{"role": "user", "content": "go"}], [tool])
            model.free_decode(lambda _t: None, 0)
            results = model.write_calls([tool], lambda *_: None, 64, budget=64, made=earlier)
            written.append([dict(call.arguments) for r in results for call in r.calls])
    assert written == [[{"b": "x"}, {"b": "y"}], [{"b": "x"}]]


# ---------------------------------------------------------------- MCP sampling answered remotely


def remote_sampler(model: Any) -> ModelSampler:
    lock = ModelLock()

    async def provider() -> tuple[Any, ModelLock]:
        return model, lock

    return ModelSampler(provider, approval="always")


async def test_remote_model_answers_a_servers_sampling_request_with_its_system_prompt(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [answer("A calm sea.")]
    with open_remote_model(RemoteModelConfig(url=fake.url), n_ctx=2048) as model:
        request = SamplingRequest(server="srv", messages=(SamplingMessage("user", "The sea?"),),
                                  max_tokens=20, system_prompt="Be a poet.")  # fmt: skip
        with anyio.fail_after(30):
            reply = await remote_sampler(model).sample(request)
    assert reply.text == "A calm sea." and reply.stop_reason == "endTurn"
    body = fake.posts()[0]
    assert body["messages"][0] == {"role": "system", "content": "Be a poet."}
    assert body["temperature"] == 0.0 and "tools" not in body


async def test_remote_model_answers_a_sampling_request_that_requires_a_call_with_the_servers_call(
    fake: FakeOpenAI,
) -> None:
    lookup = {"name": "lookup", "inputSchema": {"type": "object", "properties": {
        "q": {"type": "string"}}, "required": ["q"]}}  # fmt: skip
    fake.replies = [Reply(events=[*streamed_call("lookup", '{"q": "tides"}'),
                                  chunk(finish="tool_calls"), DONE])]  # fmt: skip
    with open_remote_model(RemoteModelConfig(url=fake.url), n_ctx=2048) as model:
        request = SamplingRequest(server="srv", messages=(SamplingMessage("user", "Tides?"),),
                                  max_tokens=40, tools=(lookup,), tool_choice="required")  # fmt: skip
        with anyio.fail_after(30):
            reply = await remote_sampler(model).sample(request)
    assert reply.stop_reason == "toolUse"
    assert [(u.name, dict(u.arguments)) for u in reply.tool_uses] == [("lookup", {"q": "tides"})]
    assert fake.posts()[0]["tool_choice"] == {"type": "function", "function": {"name": "lookup"}}


def test_remote_abort_closes_the_stream_being_read_and_the_reader_stops_with_aborted(
    fake: FakeOpenAI,
) -> None:
    fake.replies = [Reply(events=[chunk(text="one"), HOLD, chunk(text="two"), DONE])]
    failures: list[BaseException] = []
    shown: list[str] = []
    with open_remote_model(RemoteModelConfig(url=fake.url), n_ctx=2048) as model:
        model.sync([{"role": "user", "content": "count"}], [])

        def read() -> None:
            try:
                model.free_decode(shown.append, 50)
            except BaseException as exc:  # noqa: BLE001 - handed to the test
                failures.append(exc)

        reader = threading.Thread(target=read)
        reader.start()
        deadline = time.monotonic() + 10
        while not shown and time.monotonic() < deadline:  # the first chunk arrived: now held
            time.sleep(0.01)
        model.abort()
        reader.join(timeout=5)
        assert not reader.is_alive()  # stopped while the server still held the stream
    assert shown == ["one"]
    assert len(failures) == 1 and isinstance(failures[0], AbortedError)


def test_remote_abort_stops_a_whole_reply_whose_body_the_server_holds_after_its_headers(
    fake: FakeOpenAI,
) -> None:
    # Not streamed: the headers arrive at once, then the server holds the body (for up to
    # HOLD_BOUND_S); the reader must stop at the abort, not when the body or a timeout comes.
    fake.replies = [Reply(events=[HOLD, "{}"])]
    failures: list[BaseException] = []
    remote = RemoteModelConfig(url=fake.url, stream=False)
    with open_remote_model(remote, n_ctx=2048) as model:
        model.sync([{"role": "user", "content": "count"}], [])

        reader = _free_decode_in_thread(model, failures)
        deadline = time.monotonic() + 10
        while not fake.posts() and time.monotonic() < deadline:  # the request arrived
            time.sleep(0.01)
        model.abort()
        reader.join(timeout=HOLD_BOUND_S / 2)
        assert not reader.is_alive()  # stopped while the server still held the body
    assert len(failures) == 1 and isinstance(failures[0], AbortedError)


def _free_decode_in_thread(model: Any, failures: list[BaseException]) -> threading.Thread:
    """``model.free_decode`` started on a thread of its own; what it raises goes to
    ``failures``."""

    def read() -> None:
        try:
            model.free_decode(lambda _text: None, 50)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            failures.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    return reader


@pytest.fixture
def silent() -> Iterator[tuple[str, threading.Event]]:
    """A server that lists a model, then holds every POST without a byte of answer (for up to
    HOLD_BOUND_S): a non-streamed completion still being computed. Yields its API base and an
    event set once a POST has arrived."""
    release, posted = threading.Event(), threading.Event()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_args: Any) -> None:
            pass

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            data = json.dumps({"data": [{"id": "slow"}]}).encode()
            self.send_response(200)
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_POST(self) -> None:  # noqa: N802
            self.rfile.read(int(self.headers.get("content-length") or 0))
            posted.set()
            release.wait(HOLD_BOUND_S)
            self.send_error(503)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", posted
    finally:
        release.set()
        server.shutdown()
        server.server_close()


def test_remote_abort_stops_a_request_the_server_has_not_begun_to_answer(
    silent: tuple[str, threading.Event],
) -> None:
    url, posted = silent
    failures: list[BaseException] = []
    with open_remote_model(RemoteModelConfig(url=url, stream=False), n_ctx=2048) as model:
        model.sync([{"role": "user", "content": "count"}], [])

        reader = _free_decode_in_thread(model, failures)
        assert posted.wait(5)  # the request is on the server, which says nothing yet
        model.abort()
        reader.join(timeout=HOLD_BOUND_S / 2)
        assert not reader.is_alive()  # stopped while the server was still silent
    assert len(failures) == 1 and isinstance(failures[0], AbortedError)
