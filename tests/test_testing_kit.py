"""The test kit as its users meet it: the pytest plugin's fixtures, the scripted model through
the real host, the assertions and their messages, and no process left behind.

The plugin is exercised in a pytester run (a fresh test session that found it through the
``pytest11`` entry point); the rest drives real stub server processes over stdio and HTTP.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

# Loaded before pytester's inline runs, which unload what they load. httpx2 imports httpcore2
# lazily: unloaded and imported again, its errors are new classes httpx2's error map does not
# know, and a later test of a refused connection sees httpcore2.ConnectError.
import httpcore2  # noqa: F401
import pytest

import weavehost.host  # noqa: F401
from weavehost.agent.events import Event
from weavehost.config import ServerConfig
from weavehost.errors import ConfigError
from weavehost.mcp.executor import StaticApprover
from weavehost.testing import (
    Events,
    ScriptedModel,
    assert_answer_contains,
    assert_called,
    assert_no_orphan_processes,
    assert_not_called,
    call,
)
from weavehost.testing.assertions import child_processes
from weavehost.testing.driver import open_host
from weavehost.testing.model import SCRIPT_DONE
from weavehost.testing.stub_server import StubServer

pytest_plugins = ["pytester"]

WEATHER = {
    "name": "weather",
    "tools": [
        {
            "name": "get_forecast",
            "inputSchema": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
            "annotations": {"readOnlyHint": True},
            "response": {"text": "Sunny in {{city}}"},
        },
        {"name": "delete_city", "annotations": {"destructiveHint": True}},
    ],
}

# A user's whole test file: the fixtures come from the entry point, nothing else is set up.
USER_TEST = """
from weavehost.testing import ScriptedModel, assert_answer_contains, assert_called, call

SPEC = {"name": "weather", "tools": [{"name": "get_forecast",
        "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}}},
        "response": {"text": "Sunny in {{city}}"}}]}

def test_the_forecast(stub_server, weavehost_host):
    weather = stub_server(SPEC, http=HTTP)
    host = weavehost_host(weather, model=ScriptedModel([call("get_forecast", city="Oslo"),
                                                        "Sunny in Oslo."]))
    events = host.run("Weather in Oslo?")
    assert assert_called(events, "get_forecast", city="Oslo").text == "Sunny in Oslo"
    assert_answer_contains(events, "Sunny")
    assert [c["arguments"] for c in weather.calls()] == [{"city": "Oslo"}]
"""


def turn(*events: tuple[str, dict[str, Any]]) -> Events:
    return Events(Event(kind, data) for kind, data in events)


PARIS = turn(
    ("step", {"step": 1}),
    ("tool_result", {"name": "get_forecast", "arguments": {"city": "Paris", "days": 2},
                     "status": "ok", "text": "Sunny in Paris", "source": "final"}),
    ("step", {"step": 2}),
    ("text", {"text": "It is sunny "}),
    ("text", {"text": "in Paris."}),
    ("done", {"stop": "answer", "steps": 2}),
)  # fmt: skip


# ------------------------------------------------------------------ the plugin


def test_installing_weavehost_is_enough_for_a_fresh_pytest_to_offer_the_fixtures(
    pytester: pytest.Pytester,
) -> None:
    pytester.makepyfile(test_user="HTTP = False\n" + USER_TEST)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_an_http_stub_and_its_host_are_closed_when_the_test_ends_with_no_process_left(
    pytester: pytest.Pytester,
) -> None:
    before = {p.pid for p in child_processes()}
    pytester.makepyfile(test_user="HTTP = True\n" + USER_TEST)
    result = pytester.runpytest("-p", "no:cacheprovider")  # in this process: its children are ours
    result.assert_outcomes(passed=1)
    assert_no_orphan_processes(allowed=before)


def test_a_failing_user_test_shows_what_the_turn_did_instead(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        test_user=USER_TEST.replace("HTTP", "False").replace(
            'city="Oslo").text', 'city="Lima").text'
        )
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        '*expected a call of get_forecast with city="Lima"; the turn did this:*',
        '*call get_forecast(city="Oslo") -> ok: "Sunny in Oslo"*',
        '*answer: "Sunny in Oslo."*',
    ])  # fmt: skip


def test_the_plugin_can_be_turned_off_by_name(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user="def test_it(weavehost_host):\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", "-p", "no:weavehost")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*fixture 'weavehost_host' not found*"])


# ------------------------------------------------------------------ assertions


def test_assert_called_matches_a_subset_of_the_arguments_and_returns_the_call() -> None:
    found = assert_called(PARIS, "get_forecast", city="Paris")
    assert (found.status, found.text, found.arguments) == (
        "ok",
        "Sunny in Paris",
        {"city": "Paris", "days": 2},
    )
    assert_called(PARIS, "get_forecast")


def test_assert_called_names_the_call_it_wanted_and_lists_the_ones_made_instead() -> None:
    with pytest.raises(AssertionError) as failure:
        assert_called(PARIS, "get_forecast", city="Oslo")
    assert str(failure.value) == (
        'expected a call of get_forecast with city="Oslo"; the turn did this:\n'
        '  call get_forecast(city="Paris", days=2) -> ok: "Sunny in Paris"\n'
        "  stopped: answer\n"
        '  answer: "It is sunny in Paris."'
    )


def test_assert_not_called_passes_for_other_arguments_and_fails_naming_the_matching_call() -> None:
    assert_not_called(PARIS, "delete_city")
    assert_not_called(PARIS, "get_forecast", city="Oslo")
    with pytest.raises(
        AssertionError,
        match=r"expected no call of get_forecast, but the turn made 1:\n  call get_forecast\(city=\"Paris\"",
    ):
        assert_not_called(PARIS, "get_forecast")


def test_the_answer_is_the_last_steps_text_and_a_missing_word_is_shown_with_it() -> None:
    assert assert_answer_contains(PARIS, "sunny in Paris") == "It is sunny in Paris."
    with pytest.raises(
        AssertionError,
        match=r'(?s)expected the answer to contain "Oslo"; .*answer: "It is sunny in Paris\."',
    ):
        assert_answer_contains(PARIS, "Oslo")
    assert (PARIS.stop, PARIS.of("step")[-1]["step"], len(PARIS.calls)) == ("answer", 2, 1)


def test_a_turn_without_calls_says_so_when_a_call_was_expected() -> None:
    with pytest.raises(AssertionError, match=r"the turn did this:\n  no call\n"):
        assert_called(turn(("text", {"text": "Hi"})), "get_forecast")


def test_assert_no_orphan_processes_names_a_child_left_running_and_passes_once_it_is_reaped() -> (
    None
):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(AssertionError, match=rf"pid {child.pid}: .*time\.sleep\(30\)"):
            assert_no_orphan_processes(wait_s=0)
    finally:
        child.kill()
        child.wait()
    assert_no_orphan_processes(wait_s=0)


def test_an_unreaped_child_is_a_leak_too() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        with pytest.raises(AssertionError, match=rf"pid {child.pid} \(exited, not reaped\)"):
            assert_no_orphan_processes(wait_s=1)  # it exits at once, and nobody waits for it
    finally:
        child.wait()
    assert_no_orphan_processes(wait_s=0)


# ------------------------------------------------------------------ the scripted model


def test_a_bad_script_step_is_a_config_error_naming_it() -> None:
    with pytest.raises(
        ConfigError,
        match=r"scripted model, step 2: expected answer text, call\(\.\.\.\) or a non-empty list of call\(\.\.\.\), got 42",
    ):
        ScriptedModel(["Hi.", 42])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="pass a list of steps"):
        ScriptedModel("Hi.")  # type: ignore[arg-type]


def test_a_scripted_call_runs_on_the_stub_and_the_model_reads_its_result() -> None:
    model = ScriptedModel([call("get_forecast", city="Oslo"), "Sunny."])
    with StubServer(WEATHER) as weather, open_host(weather, model=model) as host:
        events = host.run("Weather in Oslo?")
        received = weather.calls("get_forecast")
    assert_called(events, "get_forecast", city="Oslo")
    assert [c["arguments"] for c in received] == [{"city": "Oslo"}]
    assert model.synced[-1][-1] == {
        "role": "tool",
        "name": "get_forecast",
        "content": "Sunny in Oslo",
    }
    assert (model.remaining, events.stop, events.answer) == (0, "answer", "Sunny.")


def test_a_trusted_read_only_call_starts_on_its_provisional_call_as_under_a_real_model() -> None:
    model = ScriptedModel([call("get_forecast", city="Oslo"), "Sunny."])
    with StubServer(WEATHER) as weather, open_host(weather, model=model, trust=True) as host:
        events = host.run("Weather in Oslo?")
    assert [e["started"] for e in events.of("provisional_call")] == [True]
    assert events.calls[0].source == "provisional"


def test_several_calls_in_one_step_run_in_order() -> None:
    step = [call("get_forecast", city="Oslo"), call("get_forecast", city="Lima")]
    with (
        StubServer(WEATHER) as weather,
        open_host(weather, model=ScriptedModel([step, "Both sunny."])) as host,
    ):
        events = host.run("Oslo and Lima?")
    assert [c.text for c in events.calls] == ["Sunny in Oslo", "Sunny in Lima"]
    assert len(events.of("step")) == 2


def test_a_call_the_approver_refuses_never_reaches_the_server_and_the_model_reads_the_refusal() -> (
    None
):
    approver = StaticApprover(False)
    model = ScriptedModel([call("delete_city", city="Oslo"), "I may not."])
    with StubServer(WEATHER) as weather, open_host(weather, model=model, approver=approver) as host:
        events = host.run("Delete Oslo.")
        received = weather.calls()
    assert assert_called(events, "delete_city").status == "denied"
    assert [r.spec.name for r in approver.seen] == ["delete_city"] and received == []
    assert model.synced[-1][-1]["role"] == "tool"


def test_an_unknown_tool_or_bad_arguments_are_refused_by_the_executor_as_a_models_would_be() -> (
    None
):
    model = ScriptedModel(
        [call("get_weather", city="Oslo"), call("get_forecast", city=7), "Sorry."]
    )
    with StubServer(WEATHER) as weather, open_host(weather, model=model, max_steps=3) as host:
        events = host.run("Weather?")
        received = weather.calls()
    assert [c.status for c in events.calls] == ["unknown_tool", "invalid_arguments"]
    assert received == []


def test_a_host_without_a_model_calls_tools_directly_and_refuses_a_turn_saying_why() -> None:
    with StubServer(WEATHER) as weather, open_host(weather) as host:
        events = host.call("get_forecast", city="Oslo")
        with pytest.raises(RuntimeError, match=r"this host has no model: give it one"):
            host.run("Hi")
    assert assert_called(events, "get_forecast", city="Oslo").source == "direct"


def test_a_session_keeps_its_conversation_across_turns_and_a_dry_script_says_so() -> None:
    with open_host(model=ScriptedModel(["One."])) as host:
        chat = host.session()
        first, second = chat.run("1"), chat.run("2")
        messages = chat.messages
    assert (first.answer, second.answer) == ("One.", SCRIPT_DONE)
    assert [m["role"] for m in messages] == ["user", "assistant", "user", "assistant"]


def test_bad_host_options_are_config_errors_before_anything_starts() -> None:
    weather = ServerConfig(name="weather", command="python")
    with pytest.raises(ConfigError, match=r"trust 'nope': no such server \(have: weather\)"):
        open_host(weather, trust=["nope"])
    with pytest.raises(ConfigError, match="two servers are named 'weather'"):
        open_host(weather, weather)
    with pytest.raises(ConfigError, match="approval must be 'ask', 'always' or 'never'"):
        open_host(approval="sometimes")


@pytest.mark.anyio
async def test_an_async_test_drives_the_host_without_blocking_its_own_loop() -> None:
    model = ScriptedModel([call("get_forecast", city="Oslo"), "Sunny."])
    with StubServer(WEATHER) as weather, open_host(weather, model=model) as host:
        events = await host.arun("Weather in Oslo?")
    assert_called(events, "get_forecast", city="Oslo")


# ------------------------------------------------------------------ no orphans


def test_closing_a_driven_host_fails_when_a_server_left_a_process_behind(tmp_path: Path) -> None:
    pidfile = tmp_path / "escaped"
    server = tmp_path / "leaky.py"
    server.write_text(
        textwrap.dedent(f"""
        import subprocess, sys
        escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                   start_new_session=True)  # out of the server's group
        open({str(pidfile)!r}, "w").write(str(escaped.pid))
        sys.argv = [sys.argv[0]]
        exec(open({str(Path(__file__).parents[1] / "examples" / "my_server.py")!r}).read())
    """)
    )
    with pytest.raises(
        AssertionError,
        match=r"the host's servers left 1 process\(es\) running 0\.3 s after closing:\n  pid \d+: .*time\.sleep\(30\)",
    ):
        with open_host(server, wait_s=0.3):
            pass
    os.kill(int(pidfile.read_text()), signal.SIGKILL)


def test_a_driven_host_leaves_no_process_once_closed() -> None:
    with StubServer(WEATHER) as weather, open_host(weather, model=ScriptedModel(["Hi."])) as host:
        host.run("Hi")
        running = [p.pid for p in child_processes()]
    assert running  # the stub server ran as a child of this process
    assert_no_orphan_processes()
