"""The remote model's wire side without a network: SSE events, chunks, partial arguments, the
conversation as OpenAI messages (weavehost.agent.openai_stream, weavehost.agent.remote)."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from weavehost.agent.openai_stream import ArgumentScanner, parse_chunk, sse_data
from weavehost.agent.remote import approx_tokens, wire_messages
from weavehost.errors import RemoteResponseError, RemoteStreamError

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
OBJECTS = st.dictionaries(st.text(max_size=10), JSON_VALUES, max_size=6)
LAYOUTS = st.sampled_from([{}, {"separators": (",", ":")}, {"indent": 2}, {"ensure_ascii": False}])


def pieces_of(text: str, cuts: list[int]) -> list[str]:
    points = sorted({min(c, len(text)) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in zip(points, points[1:], strict=False)]


@settings(max_examples=300, deadline=None)
@given(OBJECTS, LAYOUTS, st.lists(st.integers(min_value=0, max_value=400), max_size=30))
def test_remote_scanner_reports_every_member_with_its_final_value_however_the_text_is_split(
    document: dict[str, Any], layout: dict[str, Any], cuts: list[int]
) -> None:
    text = json.dumps(document, **layout)
    scanner = ArgumentScanner()
    seen = ""
    for piece in pieces_of(text, cuts):
        completed = scanner.feed(piece)
        seen += piece
        for name in completed:
            # Complete means the scanner read past the value: the prefix parses up to it.
            assert scanner.members[name] == document[name]
        # Nothing is reported before its value is closed by a following ',' or '}'.
        assert set(scanner.members) <= set(document)
    assert not scanner.broken
    assert scanner.closed
    assert scanner.members == document


@settings(max_examples=200, deadline=None)
@given(OBJECTS, LAYOUTS)
def test_remote_scanner_never_reports_a_member_from_a_prefix_that_stops_inside_its_value(
    document: dict[str, Any], layout: dict[str, Any]
) -> None:
    text = json.dumps(document, **layout)
    for end in range(len(text) + 1):
        scanner = ArgumentScanner()
        scanner.feed(text[:end])
        assert not scanner.broken
        for name, value in scanner.members.items():
            assert value == document[name]
        # A member counts only once the text after its value began: the prefix holds it whole.
        assert len(scanner.members) <= text[:end].count(",") + text[:end].count("}")


def test_remote_scanner_waits_for_the_comma_before_reporting_a_number_that_could_still_grow() -> (
    None
):
    scanner = ArgumentScanner()
    assert scanner.feed('{"days": 1') == []
    assert scanner.feed("2") == []
    assert scanner.feed(', "city": "Par') == ["days"]
    assert scanner.members == {"days": 12}
    assert scanner.feed('is"}') == ["city"]
    assert scanner.closed


def test_remote_scanner_reads_braces_and_quotes_inside_strings_as_text() -> None:
    scanner = ArgumentScanner()
    scanner.feed('{"q": "a } b, \\" c", "n": {"x": [1, "]"]}}')
    assert scanner.members == {"q": 'a } b, " c', "n": {"x": [1, "]"]}}
    assert scanner.closed and not scanner.broken


@pytest.mark.parametrize(
    "text", ['["a"]', '{"a" 1}', '{"a": 1,, "b": 2}', '{"a": }', '{"a": 1} x', "{'a': 1}"]
)
def test_remote_scanner_marks_text_that_is_no_json_object_broken_and_reports_nothing_more(
    text: str,
) -> None:
    scanner = ArgumentScanner()
    scanner.feed(text)
    assert scanner.broken


def test_remote_sse_yields_complete_events_and_drops_one_cut_before_its_blank_line() -> None:
    lines = [
        ": ping",
        'data: {"a": 1}',
        "",
        "event: x",
        "data: two",
        "data: lines",
        "",
        'data: {"cut',
    ]
    assert list(sse_data(lines)) == ['{"a": 1}', "two\nlines"]


def test_remote_chunk_reads_text_call_pieces_finish_and_usage() -> None:
    chunk = parse_chunk(json.dumps({
        "choices": [{"delta": {"content": "hi", "tool_calls": [
            {"index": 1, "id": "c1", "function": {"name": "get", "arguments": "{\"a"}}]},
            "finish_reason": None}],
        "usage": {"prompt_tokens": 3},
    }))  # fmt: skip
    assert chunk.text == "hi"
    assert chunk.calls[0].index == 1 and chunk.calls[0].name == "get"
    assert chunk.calls[0].arguments == '{"a'
    assert chunk.finish is None and chunk.usage == {"prompt_tokens": 3}


def test_remote_chunk_that_is_not_json_is_a_stream_error_and_an_error_object_a_response_error() -> (
    None
):
    with pytest.raises(RemoteStreamError, match="not JSON"):
        parse_chunk('{"choices": [')
    with pytest.raises(RemoteResponseError, match="out of memory"):
        parse_chunk(json.dumps({"error": {"message": "out of memory"}}))


def test_remote_conversation_gives_calls_ids_and_each_result_the_id_of_its_call() -> None:
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"name": "a", "arguments": {"x": 1}}, {"name": "b", "arguments": {}}]},
        {"role": "tool", "name": "b", "content": "B"},
        {"role": "tool", "name": "a", "content": "A"},
    ]  # fmt: skip
    wire = wire_messages(messages)
    calls = wire[2]["tool_calls"]
    assert [c["id"] for c in calls] == ["call_1", "call_2"]
    assert calls[0]["function"] == {"name": "a", "arguments": '{"x": 1}'}
    assert wire[2]["content"] == ""  # a string: some servers refuse null
    assert wire[3] == {"role": "tool", "tool_call_id": "call_2", "content": "B"}
    assert wire[4] == {"role": "tool", "tool_call_id": "call_1", "content": "A"}


def test_remote_token_estimate_over_counts_plain_english() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 20
    assert approx_tokens(text) >= len(text.split()) * 1.2


@pytest.mark.parametrize(
    "chunk",
    [
        {"choices": [{"delta": "text"}]},
        {"choices": "abc"},
        {"choices": [{"delta": {"tool_calls": {"index": 0}}}]},
        {"choices": [{"delta": {"tool_calls": [{"index": 0, "function": "get_weather"}]}}]},
    ],
    ids=["delta-a-string", "choices-a-string", "tool-calls-an-object", "function-a-string"],
)
def test_remote_a_chunk_of_the_wrong_shape_is_a_stream_error_not_a_crash(chunk):
    with pytest.raises(RemoteStreamError, match="model server streamed"):
        parse_chunk(json.dumps(chunk))
