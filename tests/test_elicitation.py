"""Elicitation at the terminal (console.TerminalElicitor) with scripted input, and the elicitors
that need no person (mcp/elicitors.py).

Form mode asks each field of the requested schema, checks each answer against its schema, uses
defaults on empty input, insists on required fields, and ends with accept / decline / cancel.
URL mode shows the URL and opens it only after a yes. No terminal: declined.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import io
from typing import Any

import pytest

from weavehost.console import MAX_FIELD_ATTEMPTS, TerminalElicitor
from weavehost.errors import ClientFeatureError
from weavehost.mcp.elicitors import DecliningElicitor, ScriptedElicitor
from weavehost.mcp.features import ElicitationReply, ElicitationRequest
from weavehost.mcp.wire import check_form_schema

pytestmark = pytest.mark.anyio

FORM = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "title": "Your name", "minLength": 2},
        "age": {"type": "integer", "minimum": 0},
        "height": {"type": "number", "description": "in metres"},
        "subscribe": {"type": "boolean", "default": False},
        "colour": {"type": "string", "enum": ["red", "green"], "enumNames": ["Red", "Green"]},
        "size": {"type": "string", "oneOf": [{"const": "s", "title": "Small"}, {"const": "l", "title": "Large"}],
                 "default": "s"},
        "email": {"type": "string", "format": "email"},
    },
    "required": ["name", "age", "colour"],
}  # fmt: skip


class Terminal:
    """Scripted lines in, everything shown collected; ``opened`` records browser opens."""

    def __init__(self, *lines: str | None) -> None:
        self.lines = list(lines)
        self.prompts: list[str] = []
        self.err = io.StringIO()
        self.opened: list[str] = []

    async def ask(self, prompt: str) -> str | None:
        self.prompts.append(prompt)
        return self.lines.pop(0) if self.lines else None

    def elicitor(self, interactive: bool = True) -> TerminalElicitor:
        return TerminalElicitor(
            interactive=interactive, ask=self.ask, err=self.err, open_url=self.opened.append
        )

    @property
    def shown(self) -> str:
        return self.err.getvalue() + "".join(self.prompts)


def form(schema: dict[str, Any] = FORM) -> ElicitationRequest:
    return ElicitationRequest(server="crm", message="Tell us about you", mode="form", schema=schema)


async def test_a_form_is_asked_field_by_field_typed_and_accepted() -> None:
    # name, age, height, subscribe (default), colour (by number), size (by title), email (skipped), accept
    term = Terminal("Ada", "36", "1.7", "", "2", "large", "", "a")
    reply = await term.elicitor().elicit(form())
    assert reply == ElicitationReply("accept", {"name": "Ada", "age": 36, "height": 1.7, "subscribe": False,
                                                "colour": "green", "size": "l"})  # fmt: skip
    shown = term.shown
    assert "Tell us about you" in shown and "Your name (required)" in shown and "in metres" in shown
    assert "1. Red (red)" in shown and "2. Large (l)" in shown and 'default "s"' in shown


async def test_an_invalid_answer_is_explained_and_asked_again() -> None:
    schema = {"type": "object", "properties": {"age": {"type": "integer", "minimum": 0},
              "email": {"type": "string", "format": "email"}}, "required": ["age"]}  # fmt: skip
    term = Terminal("old", "-3", "", "12", "not an email", "ada@example.org", "")
    reply = await term.elicitor().elicit(form(schema))
    assert reply == ElicitationReply("accept", {"age": 12, "email": "ada@example.org"})
    shown = term.shown
    assert "'old' is not a whole number" in shown and "less than the minimum of 0" in shown
    assert "a value is required" in shown and "is not a 'email'" in shown


async def test_a_multi_select_enum_takes_several_choices() -> None:
    schema = {
        "type": "object",
        "properties": {"tags": {"type": "array", "items": {"enum": ["a", "b", "c"]}}},
    }
    reply = await Terminal("1, c", "").elicitor().elicit(form(schema))
    assert reply == ElicitationReply("accept", {"tags": ["a", "c"]})


def multi_select(items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"tags": {"type": "array", "items": items}}}


@pytest.mark.parametrize(
    "items",
    [
        {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        {"anyOf": []},
        {"enum": "red"},
        {"type": "array", "items": {"enum": ["a", "b"]}},
    ],
    ids=["anyOf without const", "an empty anyOf", "an enum that is not a list", "nested arrays"],
)
def test_a_multi_select_the_terminal_cannot_offer_as_choices_is_refused_when_the_form_is_checked(
    items: dict[str, Any],
) -> None:
    with pytest.raises(ClientFeatureError, match="'tags' as an array that is not a multi-select"):
        check_form_schema("crm", multi_select(items))


async def test_a_multi_select_of_titled_consts_passes_the_check_and_is_offered_as_choices() -> None:
    schema = multi_select(
        {"oneOf": [{"const": "a", "title": "Apple"}, {"const": "b", "title": "Beet"}]}
    )
    check_form_schema("crm", schema)
    term = Terminal("beet, 1", "")
    assert await term.elicitor().elicit(form(schema)) == ElicitationReply(
        "accept", {"tags": ["b", "a"]}
    )
    assert "1. Apple (a)" in term.shown


@pytest.mark.parametrize(("last", "action"), [("d", "decline"), ("c", "cancel"), (None, "cancel")])
async def test_the_person_may_decline_or_cancel_the_filled_form(
    last: str | None, action: str
) -> None:
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    reply = await Terminal("y", last).elicitor().elicit(form(schema))
    assert reply == ElicitationReply(action)  # type: ignore[arg-type]


async def test_end_of_input_in_the_middle_of_a_form_cancels_it() -> None:
    assert await Terminal("Ada").elicitor().elicit(form()) == ElicitationReply("cancel")


async def test_a_field_answered_wrongly_too_often_cancels_the_form() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    term = Terminal(*["x"] * MAX_FIELD_ATTEMPTS, "1", "")
    assert await term.elicitor().elicit(form(schema)) == ElicitationReply("cancel")
    assert f"after {MAX_FIELD_ATTEMPTS} tries" in term.shown


async def test_without_a_terminal_the_request_is_declined_and_nothing_is_asked() -> None:
    term = Terminal("Ada")
    reply = await term.elicitor(interactive=False).elicit(form())
    assert reply == ElicitationReply("decline") and term.prompts == []
    assert "no terminal" in term.err.getvalue()


def url(address: str = "https://auth.example.com/connect?id=7") -> ElicitationRequest:
    return ElicitationRequest(server="gh", message="Connect your account", mode="url", url=address,
                              elicitation_id="e1")  # fmt: skip


async def test_a_url_is_shown_and_without_consent_it_is_never_opened() -> None:
    term = Terminal("n")
    assert await term.elicitor().elicit(url()) == ElicitationReply("decline")
    assert term.opened == []
    assert (
        "https://auth.example.com/connect?id=7" in term.shown
        and "site: auth.example.com" in term.shown
    )


async def test_a_url_is_opened_only_after_the_person_says_yes() -> None:
    term = Terminal("y")
    assert await term.elicitor().elicit(url()) == ElicitationReply("accept")
    assert term.opened == ["https://auth.example.com/connect?id=7"]


@pytest.mark.parametrize("address", ["file:///etc/passwd", "javascript:alert(1)", "https://"])
async def test_a_url_that_is_not_http_is_declined_without_asking(address: str) -> None:
    term = Terminal("y")
    assert await term.elicitor().elicit(url(address)) == ElicitationReply("decline")
    assert term.opened == [] and term.prompts == []


async def test_a_url_request_without_a_terminal_is_declined_and_not_opened() -> None:
    term = Terminal("y")
    assert await term.elicitor(interactive=False).elicit(url()) == ElicitationReply("decline")
    assert term.opened == []


async def test_the_scripted_elicitor_answers_in_order_then_declines() -> None:
    elicitor = ScriptedElicitor([{"name": "Ada"}, "cancel", ElicitationReply("decline")])
    answers = [await elicitor.elicit(form()) for _ in range(4)]
    assert [a.action for a in answers] == ["accept", "cancel", "decline", "decline"]
    assert answers[0].content == {"name": "Ada"} and len(elicitor.seen) == 4


async def test_the_declining_elicitor_declines_everything() -> None:
    assert await DecliningElicitor().elicit(url()) == ElicitationReply("decline")
    assert await DecliningElicitor().elicit(form()) == ElicitationReply("decline")
