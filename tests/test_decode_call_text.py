"""Call-shaped text in an answer that may not call is found where it begins, and never shown."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import pytest

from weavehost.decode.call_text import CallText

TOOLS = ["get_current_weather", "get_forecast"]


def scan(text: str, names=TOOLS) -> tuple[int, int]:
    return CallText(names).scan(text.encode())


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ('{{"name": "get_current_weather", "arguments": {"city": "Paris"}}}', 0),
        (' \\"name": "get_current_weather", "arguments": {\\"city\\": "Paris"}}', 0),
        ('It is sunny. {"name": "get_forecast", "arguments": {}}', len("It is sunny.")),
        ('Here:\n```json\n{\n  "name": "get_forecast"\n}\n```', len("Here:")),
        ('[{"name" :\n "get_current_weather"', 0),
    ],
)
def test_a_json_object_naming_a_tool_on_offer_is_found_where_its_braces_and_fence_begin(
    text: str, found: int
) -> None:
    assert scan(text)[0] == found


@pytest.mark.parametrize(
    "text",
    [
        'He said "hello" and left.',
        '{"name": "get_time"}',  # a tool not on offer
        '"name": "get_current_weather_report"'[:20],  # not yet a naming: held, not found
        "The weather in Paris is sunny.",
    ],
)
def test_prose_and_namings_of_tools_not_on_offer_are_not_call_text(text: str) -> None:
    assert scan(text)[0] == -1


def test_text_that_could_still_become_call_text_is_held_back_from_its_braces() -> None:
    found, held = scan('Sunny. {"na')
    assert (found, held) == (-1, len("Sunny."))


def test_a_quote_in_prose_is_held_only_until_it_cannot_begin_a_naming() -> None:
    finder = CallText(TOOLS)
    assert finder.scan(b'He said "') == (-1, len(b"He said"))
    assert finder.scan(b'He said "hello" to') == (-1, len(b'He said "hello" to'))


def test_text_cut_back_shorter_is_scanned_again_from_where_it_now_ends() -> None:
    finder = CallText(TOOLS)
    finder.scan(b'a "b" c "d" e')
    finder.cut(len(b"a "))
    assert finder.scan(b'a {"name": "get_forecast"')[0] == len(b"a")


def test_with_no_tool_on_offer_nothing_is_call_text() -> None:
    assert scan('{"name": "get_forecast"}', names=[]) == (-1, len('{"name": "get_forecast"}'))
