"""The console's lines never run into each other: events that arrive while a person is asked
wait and are printed after the answer, in order; one question at a time; the loading spinner's
line is cleared before anything else; the host's housekeeping (a repeated call not run, a call
taken back) only at ``-v``. The whole chat in a real terminal: ``test_console_tmux.py``.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import io
from typing import Any

import anyio
import pytest

from weavehost.agent import Event
from weavehost.config import HostConfig
from weavehost.console import EventPrinter, Spinner, TerminalApprover, TerminalElicitor
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import ApprovalRequest, Executor
from weavehost.mcp.features import ElicitationRequest

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
UNITS = {"type": "object", "properties": {"units": {"type": "string"}}}
PARIS = {"name": "get_current_weather", "arguments": {"city": "Paris"}}


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def printer(verbose: int = 0) -> tuple[EventPrinter, io.StringIO, io.StringIO]:
    out, err = io.StringIO(), io.StringIO()
    return EventPrinter(as_json=False, verbose=verbose, out=out, err=err), out, err


def request() -> ApprovalRequest:
    catalog = Catalog.from_listings(
        {"weather": [{"name": "get_current_weather", "description": "d", "inputSchema": SCHEMA}]},
        HostConfig(),
    )
    return ApprovalRequest(catalog.get("get_current_weather"), {"city": "Paris"})


async def test_events_that_arrive_while_the_approval_prompt_is_open_are_printed_after_the_answer_in_order() -> (
    None
):
    shown, _, err = printer()

    async def ask(prompt: str) -> str:
        err.write(prompt)
        shown(Event("final_call", {**PARIS, "replaced": False}))  # the turn goes on meanwhile
        shown(Event("notice", {"text": "first"}))
        err.write("y\n")  # what the person typed, as the terminal echoes it
        return "y"

    approver = TerminalApprover(interactive=True, ask=ask, err=err, printer=shown)
    assert await approver.approve(request()) == "yes"
    lines = err.getvalue().splitlines()
    asked = next(i for i, line in enumerate(lines) if line.startswith("  run it?"))
    assert lines[asked].endswith(" y")
    assert lines[asked + 1 :] == [
        '  ✓ final get_current_weather({"city": "Paris"})',
        "  note: first",
    ]


async def test_a_question_first_ends_the_assistants_unfinished_line() -> None:
    shown, out, err = printer()
    shown(Event("text", {"text": "Let me check"}))

    async def ask(prompt: str) -> str:
        return "n"

    await TerminalApprover(interactive=True, ask=ask, err=err, printer=shown).approve(request())
    assert out.getvalue() == "Let me check\n"


async def test_without_a_terminal_the_refusal_is_one_line_and_the_held_events_follow_it() -> None:
    shown, _, err = printer()

    async def ask(prompt: str) -> str:
        raise AssertionError("nobody to ask")

    approver = TerminalApprover(interactive=False, ask=ask, err=err, printer=shown)
    async with shown.dialogue():
        shown(Event("notice", {"text": "held"}))
    assert await approver.approve(request()) == "no"
    lines = err.getvalue().splitlines()
    assert lines[0] == "  note: held" and "no terminal to ask: refused" in lines[1]


async def test_two_questions_at_once_are_asked_one_after_the_other() -> None:
    shown, _, err = printer()
    opened: list[str] = []
    order: list[str] = []

    async def ask(prompt: str) -> str:
        opened.append(prompt)
        assert len(opened) - len(order) == 1, "a second question opened inside the first"
        await anyio.sleep(0.01)
        order.append(prompt)
        return "y"

    approver = TerminalApprover(interactive=True, ask=ask, err=err, printer=shown)
    elicitor = TerminalElicitor(interactive=True, ask=ask, err=err, printer=shown)
    form = ElicitationRequest("weather", "Which units?", "form", UNITS)
    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(approver.approve, request())
            tg.start_soon(elicitor.elicit, form)
    assert len(order) == 3  # the approval, then the form's field and its "send?"


async def test_an_elicitation_form_holds_the_events_until_it_is_sent() -> None:
    shown, _, err = printer()

    async def ask(prompt: str) -> str:
        shown(Event("notice", {"text": "meanwhile"}))
        return "metric" if prompt.lstrip().startswith("units") else "a"

    elicitor = TerminalElicitor(interactive=True, ask=ask, err=err, printer=shown)
    form = ElicitationRequest("weather", "Which units?", "form", UNITS)
    reply = await elicitor.elicit(form)
    assert reply.action == "accept" and reply.content == {"units": "metric"}
    assert err.getvalue().endswith("  note: meanwhile\n  note: meanwhile\n")


async def test_a_refusal_without_a_terminal_names_the_flags_that_would_have_run_the_call() -> None:
    async def ask(prompt: str) -> str:
        raise AssertionError("nobody to ask")

    read_only = Catalog.from_listings(
        {"weather": [{"name": "get_current_weather", "description": "d", "inputSchema": SCHEMA,
                      "annotations": {"readOnlyHint": True}}]},
        HostConfig(),
    ).get("get_current_weather")  # fmt: skip
    for spec, also in [(request().spec, ""), (read_only, ", or --trust weather")]:
        shown, _, err = printer()
        approver = TerminalApprover(interactive=False, ask=ask, err=err, printer=shown)
        assert await approver.approve(ApprovalRequest(spec, {"city": "Paris"})) == "no"
        assert (
            err.getvalue()
            .strip()
            .endswith(
                f'refused (to allow it: --approval always{also}, or "approval": "always" in the config)'
            )
        )


def test_housekeeping_notices_are_shown_only_at_verbose() -> None:
    repeat = Event(
        "notice", {"text": "the model repeated f; the repeat is not run", "housekeeping": True}
    )
    cut = Event("notice", {"text": "the answer reached its bound"})
    quiet, _, quiet_err = printer()
    loud, _, loud_err = printer(verbose=1)
    for event in (repeat, cut):
        quiet(event)
        loud(event)
    assert quiet_err.getvalue() == "  note: the answer reached its bound\n"
    assert "the repeat is not run" in loud_err.getvalue()


def test_a_call_repeated_in_one_turn_is_shown_once_and_again_in_the_next_turn() -> None:
    def turn(shown: EventPrinter) -> None:
        for event in (
            Event("provisional_call", {**PARIS, "started": False, "cached": False}),
            Event("final_call", {**PARIS, "replaced": False}),
            Event("tool_result", {**PARIS, "status": "ok", "text": "sunny", "source": "final"}),
            Event("provisional_call", {**PARIS, "started": False, "cached": False}),
            Event("final_call", {**PARIS, "replaced": False}),
            Event("done", {"stop": "answer", "steps": 2}),
        ):
            shown(event)

    quiet, _, err = printer()
    turn(quiet)
    assert err.getvalue().count("get_current_weather") == 2  # provisional and final, once
    turn(quiet)
    assert err.getvalue().count("get_current_weather") == 4
    loud, _, loud_err = printer(verbose=1)
    turn(loud)
    assert loud_err.getvalue().count("get_current_weather") == 4


def test_a_provisional_line_whose_final_call_is_a_repeat_is_closed_as_not_run() -> None:
    # Qwen, refused its weather call, writes it again without the units its first call got
    # from the strategy; the final call is the first one, which the agent does not run again.
    paris_metric = {"name": "get_current_weather", "arguments": {"city": "Paris", "units": "C"}}
    quiet, _, err = printer()
    for event in (
        Event("provisional_call", {**PARIS, "started": False, "cached": False}),
        Event("final_call", {**paris_metric, "replaced": True}),
        Event("tool_result", {**paris_metric, "status": "denied", "text": "no", "source": "final"}),
        Event("provisional_call", {**PARIS, "started": False, "cached": False}),
        Event("final_call", {**paris_metric, "replaced": True}),
        Event("done", {"stop": "answer", "steps": 3}),
    ):
        quiet(event)
    lines = err.getvalue().splitlines()
    assert lines[-2].startswith("  ⋯ provisional get_current_weather")
    assert lines[-1] == '  ✗ not run: get_current_weather({"city": "Paris", "units": "C"}) again'


async def test_the_spinners_line_is_cleared_when_it_stops_and_no_frame_follows() -> None:
    stream = Tty()
    spinner = Spinner(stream, animate=True)
    async with anyio.create_task_group() as tg:
        tg.start_soon(spinner.run, "loading m.gguf")
        await anyio.wait_all_tasks_blocked()  # the first frame is drawn
        assert "loading m.gguf" in stream.getvalue()
        spinner.stop()
        assert stream.getvalue().endswith("\r\033[K")
        stream.write("m.gguf ready\n")
    assert stream.getvalue().endswith("\r\033[Km.gguf ready\n")


async def test_a_spinner_that_may_not_animate_is_one_plain_line() -> None:
    stream = Tty()
    spinner = Spinner(stream, animate=False)
    with anyio.fail_after(5):
        await spinner.run("loading m.gguf")
    spinner.stop()
    assert stream.getvalue() == "loading m.gguf …\n"


async def test_a_declined_call_tells_the_model_plainly_that_it_was_not_run() -> None:
    catalog = Catalog.from_listings(
        {"weather": [{"name": "get_current_weather", "description": "d", "inputSchema": SCHEMA}]},
        HostConfig(approval="ask"),
    )

    class Caller:
        async def call_tool(self, *args: Any, **kwargs: Any) -> Any:
            raise AssertionError("a declined call reached the server")

    async def no(prompt: str) -> str:
        return "n"

    approver = TerminalApprover(interactive=True, ask=no, err=io.StringIO())
    executor = Executor(Caller(), catalog, HostConfig(approval="ask"), approver)
    result = await executor.run("get_current_weather", {"city": "Paris"})
    assert result.status == "denied"
    assert result.text == "get_current_weather was not run: the user did not approve it"
