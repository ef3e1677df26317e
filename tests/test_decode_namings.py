"""Where a reply's free text begins a call: a format's tag, judged by the name it goes on to
while a tool is refused, and a call the turn made written again (weavehost.decode.namings).
No model: bytes in, verdicts out."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import pytest

from weavehost.decode.namings import Namings, made_texts
from weavehost.formats import FORMATS, ToolCall

SMOLLM2 = FORMATS["smollm2"]
QWEN = FORMATS["qwen"]
OFFERED = ("get_current_weather", "get_forecast")


def _scan(
    fmt: object, refused: tuple[str, ...], text: str, made: tuple[ToolCall, ...] = ()
) -> tuple[int, str | None]:
    """Where the text begins a call and with which trigger's text (None: none yet)."""
    texts = made_texts(fmt, made)  # type: ignore[arg-type]
    namings = Namings(OFFERED, refused, fmt.layout, texts)  # type: ignore[attr-defined]
    triggers = [(t, t.text.encode()) for t in fmt.triggers]  # type: ignore[attr-defined]
    at, trigger, _ = namings.scan(text.encode(), triggers, 0)
    return at, None if trigger is None else trigger.text


@pytest.mark.parametrize("fmt", [SMOLLM2, QWEN], ids=["smollm2", "qwen"])
def test_a_tag_is_a_call_as_soon_as_it_is_written_while_no_tool_is_refused(fmt) -> None:
    assert _scan(fmt, (), "Sure. <tool_call>") == (6, "<tool_call>")


@pytest.mark.parametrize(
    ("fmt", "after"),
    [(SMOLLM2, '[{"name": "'), (QWEN, '\n{"name": "')],
    ids=["smollm2", "qwen"],
)
def test_while_a_tool_is_refused_a_tag_waits_for_its_name_then_is_a_call_only_where_it_names_another_tool(
    fmt, after: str
) -> None:
    refused = ("get_current_weather",)
    tag = "Sure. <tool_call>" + after
    assert _scan(fmt, refused, "Sure. <tool_call>") == (6, None)  # undecided: held back
    assert _scan(fmt, refused, tag) == (6, None)  # the name has not begun
    assert _scan(fmt, refused, tag + "get_") == (6, None)  # either tool's: not yet known
    assert _scan(fmt, refused, tag + "get_fore") == (6, None)
    assert _scan(fmt, refused, tag + 'get_forecast"') == (6, "<tool_call>")  # a call
    # It can be only the refused one: a trigger the reply takes back (Namings.refuses).
    namings = Namings(OFFERED, refused, fmt.layout)
    trigger = next(t for t in fmt.triggers if t.text == "<tool_call>")
    assert namings.refuses((tag + "get_cu")[6:].encode(), trigger)
    assert _scan(fmt, refused, tag + "get_cu") == (6, "<tool_call>")
    assert not namings.refuses((tag + "get_fo")[6:].encode(), trigger)


def test_while_a_tool_is_refused_a_tag_followed_by_text_its_layout_never_writes_is_a_call_as_before() -> (
    None
):
    # SmolLM2's prompt shows "<tool_call>[\n{…": not the layout, so the strategy writes the
    # call from the tag as it always did.
    assert _scan(SMOLLM2, ("get_current_weather",), "<tool_call>[\n{") == (0, "<tool_call>")


def test_a_tag_still_judged_is_found_as_undecided_and_a_decided_one_or_bare_json_is_not() -> None:
    namings = Namings(OFFERED, ("get_current_weather",), SMOLLM2.layout)
    triggers = [(t, t.text.encode()) for t in SMOLLM2.triggers]
    undecided = namings.undecided_tag(b'Sure. <tool_call>[{"name": "get_', triggers, 0)
    assert undecided is not None and undecided[0] == 6 and undecided[1].text == "<tool_call>"
    assert namings.undecided_tag(b'Sure. <tool_call>[{"name": "get_forecast"', triggers, 0) is None
    assert namings.undecided_tag(b'[{"name": "get_', triggers, 0) is None  # JSON of its own
    assert namings.undecided_tag(b"Sure.", triggers, 0) is None
    # Where calls may not be made (no layout to judge in), a tag is a trigger at once.
    assert (
        Namings(OFFERED, ("get_current_weather",)).undecided_tag(b"<tool_call>", triggers, 0)
        is None
    )


def test_llama3_s_bare_call_which_has_no_layout_of_its_own_is_judged_in_the_format_s_while_a_tool_is_refused() -> (
    None
):
    # Llama 3 writes its call as the whole reply, `{"name": …`, a trigger without a layout:
    # the format's own layout reads it (its head a template, `{{"name"`, as written `{"name"`).
    llama3 = FORMATS["llama3"]
    refused = ("get_current_weather",)
    assert _scan(llama3, (), '{"name"') == (0, '{"name"')
    assert _scan(llama3, refused, '{"name": "get_') == (0, None)
    assert _scan(llama3, refused, '{"name": "get_cu') == (0, '{"name"')  # taken back
    assert _scan(llama3, refused, '{"name": "get_forecast"') == (0, '{"name"')  # a call


LIMA = ToolCall("get_forecast", {"city": "Lima", "days": 3})


def test_a_call_the_turn_made_is_written_as_the_format_writes_it_up_to_its_arguments_closing_brace() -> (
    None
):
    texts = made_texts(SMOLLM2, [LIMA])
    assert texts[SMOLLM2.layout] == [
        '<tool_call>[{"name": "get_forecast", "arguments": {"city": "Lima", "days": 3}'
    ]
    bare = next(t.layout for t in SMOLLM2.triggers if t.layout is not None)
    assert texts[bare] == ['[{"name": "get_forecast", "arguments": {"city": "Lima", "days": 3}']
    assert made_texts(QWEN, [LIMA])[QWEN.layout] == [
        '<tool_call>\n{"name": "get_forecast", "arguments": {"city": "Lima", "days": 3}'
    ]


@pytest.mark.parametrize(
    ("fmt", "after"),
    [(SMOLLM2, '<tool_call>[{"name": "'), (QWEN, '<tool_call>\n{"name": "'), (QWEN, '{"name": "')],
    ids=["smollm2-tag", "qwen-tag", "qwen-bare"],
)
def test_a_call_the_turn_made_is_judged_to_its_arguments_close_then_taken_back_where_it_is_the_same(
    fmt, after: str
) -> None:
    lead = "Sure. " if after.startswith("<") else " " * 6  # bare JSON: only at the start
    call = lead + after + 'get_forecast", "arguments": {"city": "Lima", "days": 3'
    trigger = after[:11] if after.startswith("<") else '{"name"'
    # The name whole, the arguments still those of the call made: not yet known, held back.
    assert _scan(fmt, (), call[:-12], (LIMA,)) == (6, None)
    assert _scan(fmt, (), call, (LIMA,)) == (6, None)
    # Its arguments closed: the same call again, a trigger the reply takes back (refuses).
    assert _scan(fmt, (), call + "}", (LIMA,)) == (6, trigger)
    namings = Namings(OFFERED, (), fmt.layout, made_texts(fmt, [LIMA]))
    found = next(t for t in fmt.triggers if t.text == trigger)
    assert namings.refuses((call + "}")[6:].encode(), found)
    # Other arguments: a call the strategy writes, decided where they part.
    assert _scan(fmt, (), call[:-1] + "4", (LIMA,)) == (6, trigger)
    assert not namings.refuses((call[:-1] + "4")[6:].encode(), found)
    # Without the call made, the whole name is a call at once, as before.
    assert _scan(fmt, (), call[:-12]) == (6, trigger)


def test_a_call_made_is_not_judged_where_no_call_may_be_made_and_a_repeat_still_judged_at_the_end_is_a_call() -> (
    None
):
    triggers = [(t, t.text.encode()) for t in QWEN.triggers]
    text = b'{"name": "get_forecast", "arguments": {"city": "Li'
    # Calls not allowed (no own layout): the bare JSON names a tool, a trigger taken back at once.
    namings = Namings(OFFERED, (), None, made_texts(QWEN, [LIMA]))
    assert namings.scan(text, triggers, 0)[1] is not None
    # Calls allowed, the text stops while it may still be the repeat: a call there.
    namings = Namings(OFFERED, (), QWEN.layout, made_texts(QWEN, [LIMA]))
    assert namings.scan(text, triggers, 0)[1] is None
    undecided = namings.undecided_tag(text, triggers, 0)
    assert undecided is not None and undecided[0] == 0 and undecided[1].text == '{"name"'


def test_the_rest_of_a_call_made_is_offered_as_a_draft_once_its_tool_is_named_while_the_text_is_its_beginning() -> (
    None
):
    namings = Namings(OFFERED, (), SMOLLM2.layout, made_texts(SMOLLM2, [LIMA]))
    triggers = [(t, t.text.encode()) for t in SMOLLM2.triggers]

    def rest(text: str) -> str:
        return namings.repeat_rest(text.encode(), triggers, 0)

    named = 'Sure. <tool_call>[{"name": "get_forecast"'
    assert rest(named) == ', "arguments": {"city": "Lima", "days": 3}'
    assert rest(named + ', "arguments": {"city": "Li') == 'ma", "days": 3}'
    assert rest(named + ', "arguments": {"city": "Qu') == ""  # it parted: a call
    # Before the name is whole another tool may follow; no call begun; no call made.
    assert rest('Sure. <tool_call>[{"name": "get_fore') == ""
    assert rest("Sure, Lima.") == ""
    assert Namings(OFFERED, (), SMOLLM2.layout).repeat_rest(named.encode(), triggers, 0) == ""
    # The text ends inside a character (the first byte of "é"): nothing yet.
    inside = named.encode() + b', "arguments": {"city": "Lim' + b"\xc3"
    assert namings.repeat_rest(inside, triggers, 0) == ""
