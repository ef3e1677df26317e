"""End-to-end tests of an MCP server with weavehost's test kit: copy this file and adapt it.

    pip install weavehost
    pytest test_my_server.py

Installing weavehost is enough: its pytest plugin provides the ``stub_server`` and
``weavehost_host`` fixtures. Each test runs a real host with real server processes; the model
is a ``ScriptedModel`` that makes the calls the test gives it, so no model file is needed and
every run is the same. ``my_server.py`` (beside this file) stands for your server;
``weather.stub.json`` is a stub for a server you do not own. See docs/testing.md.
"""

from __future__ import annotations

from pathlib import Path

from weavehost.testing import (
    ScriptedModel,
    assert_answer_contains,
    assert_called,
    assert_no_orphan_processes,
    assert_not_called,
    call,
)

HERE = Path(__file__).parent
MY_SERVER = HERE / "my_server.py"
WEATHER = HERE / "weather.stub.json"


def test_the_model_searches_the_list_and_answers_from_what_my_server_found(weavehost_host):
    host = weavehost_host(
        MY_SERVER,
        model=ScriptedModel([call("search_list", query="milk"), "Milk and oat milk."]),
    )
    events = host.run("Is there milk on my list?")
    found = assert_called(events, "search_list", query="milk")
    assert (found.status, found.text) == ("ok", "milk, oat milk")
    assert_answer_contains(events, "oat milk")


def test_a_destructive_tool_is_refused_without_approval_and_never_runs(weavehost_host):
    host = weavehost_host(
        MY_SERVER,
        model=ScriptedModel([call("clear_list"), call("search_list", query="bread"), "Kept."]),
        trust=True,  # its read-only tools run without asking
        approval="never",  # every other call is refused
    )
    events = host.run("Clear my list, then look for bread.")
    assert assert_called(events, "clear_list").status == "denied"
    assert assert_called(events, "search_list").text == "bread"  # the list was not cleared


def test_arguments_that_break_the_schema_never_reach_my_server(weavehost_host):
    host = weavehost_host(MY_SERVER, model=ScriptedModel([call("search_list", query=""), "?"]))
    events = host.run("Search for nothing.")
    assert assert_called(events, "search_list").status == "invalid_arguments"


def test_a_stub_answers_from_its_spec_and_records_every_call(stub_server, weavehost_host):
    weather = stub_server(WEATHER)
    host = weavehost_host(
        weather,
        MY_SERVER,
        model=ScriptedModel([call("get_forecast", city="Oslo"), "Sunny in Oslo."]),
    )
    events = host.run("Weather in Oslo?")
    assert assert_called(events, "get_forecast", city="Oslo").text == "Sunny, 21 C in Oslo"
    assert_not_called(events, "clear_list")
    assert [c["arguments"] for c in weather.calls("get_forecast")] == [{"city": "Oslo"}]


def test_a_server_that_crashes_mid_call_is_an_error_the_model_reads(stub_server, weavehost_host):
    spec = {"name": "flaky", "tools": [{"name": "ping", "behaviour": {"crash_after": 0}}]}
    flaky = stub_server(spec)
    host = weavehost_host(flaky, model=ScriptedModel([call("ping"), "The server is down."]))
    events = host.run("Ping the server.")
    assert assert_called(events, "ping").status == "server_error"
    assert events.stop == "answer"


def test_a_conversation_keeps_its_turns(weavehost_host):
    host = weavehost_host(
        MY_SERVER,
        model=ScriptedModel(
            [call("search_list", query="coffee"), "Yes.", "You asked about coffee."]
        ),
    )
    chat = host.session()
    assert_called(chat.run("Coffee on the list?"), "search_list", query="coffee")
    assert_answer_contains(chat.run("What did I ask?"), "coffee")


def test_closing_the_host_leaves_no_server_process_behind(weavehost_host):
    host = weavehost_host(MY_SERVER, model=ScriptedModel(["Hello."]))
    host.run("Hi")
    host.close()  # the fixture would close it when the test ends
    assert_no_orphan_processes()
