"""The one place a reply is written: free text until a call, an end or a bound, then its calls.

The trigger and hold-back helpers are pure; the writer runs on the embedded SmolLM2, whose
greedy text it must write exactly, stopping at a trigger's first token or at its bound.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from tests.schemas import CURRENT_WEATHER
from weavehost.agent.prompt_cache import common_prefix
from weavehost.decode import ToolSchema, get_strategy
from weavehost.decode.reply import ReplyWriter, Sampling
from weavehost.decode.trigger_scan import first_trigger, held_back, opener_position
from weavehost.engine import Engine
from weavehost.formats import FORMATS, ToolCall, tool_to_openai

SMOLLM2 = FORMATS["smollm2"]

# SmolLM2-135M answers this in a few words and ends its turn: no trigger in it.
PROSE = [{"role": "user", "content": "What is the capital of France?"}]
# The pattern SmolLM2-135M then follows by itself: its calls as a bare list, no tags.
BARE_LIST_HISTORY = [
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "role": "assistant",
        "content": '[{"name": "get_current_weather", "arguments": {"city": "Oslo"}}]',
    },
    {"role": "user", "content": "Weather in Paris?"},
]


def test_prefix_helpers_find_the_opener_and_hold_back_what_could_become_it() -> None:
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2
    assert common_prefix([1, 2], [1, 2, 3]) == 2
    assert opener_position(b"Sure. <tool_call>[", b"<tool_call>", at_start_only=False) == 6
    assert opener_position(b'  {"name"', b'{"name"', at_start_only=True) == 2
    assert opener_position(b'Use {"name"', b'{"name"', at_start_only=True) == -1
    assert held_back(b"Sure. <tool", b"<tool_call>", at_start_only=False) == 5
    assert held_back(b"Sure.", b"<tool_call>", at_start_only=False) == 0


def test_the_earliest_trigger_wins_and_a_skipped_one_is_passed_over() -> None:
    qwen = FORMATS["qwen"]
    triggers = [(t, t.text.encode()) for t in qwen.triggers]
    at, trigger = first_trigger(b'  {"name": "x"}', triggers)
    assert (at, trigger.text) == (2, '{"name"')
    at, trigger = first_trigger(b'Here:\n```json\n{\n  "name"', triggers)
    assert (at, trigger.text) == (6, '```json\n{\n  "name"')
    assert first_trigger(b'  {"name": "x"}', triggers, skip=3)[0] == -1  # at the start only
    assert first_trigger(b"a <tool_call> b <tool_call>", triggers, skip=3)[0] == 16


def prefilled(
    engine: Engine, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
) -> list[int]:
    """The conversation rendered and prefilled on an empty sequence 0; its tokens."""
    engine.clear()
    offered = [tool_to_openai(t.name, t.description, t.parameters) for t in tools]
    tokens = engine.tokenize_segments(SMOLLM2.render_prompt(messages, offered, chat_template=None))
    engine.prefill(0, tokens)
    return tokens


def greedy(engine: Engine, bound: int) -> list[int]:
    """Sequence 0 continued by hand: the most likely token each time, until an end of turn."""
    logits, out = engine.last_logits(0), []
    for _ in range(bound):
        token = int(logits.argmax())
        if engine.is_end_of_generation(token):
            break
        out.append(token)
        logits = engine.decode_one(0, token)
    return out


def greedy_then_prefilled(
    engine: Engine, messages: Sequence[Mapping[str, Any]], bound: int = 64
) -> tuple[list[int], list[int]]:
    """The model's greedy reply to ``messages`` (no tools) written by hand, then the
    conversation prefilled again for the writer: the reply's tokens and the conversation's."""
    prefilled(engine, messages, [])
    reply = greedy(engine, bound)
    return reply, prefilled(engine, messages, [])


def test_a_reply_continued_until_its_end_is_the_model_s_greedy_text_streamed_whole(fresh_engine):
    expected, held = greedy_then_prefilled(fresh_engine, PROSE)
    start = len(held)
    shown: list[str] = []
    free = ReplyWriter(fresh_engine, SMOLLM2).continue_reply(held, 64, shown.append)
    assert (free.stop, free.call, free.trigger) == ("end", False, None)
    assert free.tokens == len(expected) < 64
    assert held[start:] == expected and fresh_engine.seq_len(0) == len(held)
    assert free.text == fresh_engine.detokenize(expected) == "".join(shown) != ""


def test_a_bound_cuts_the_reply_after_that_many_tokens_and_shows_all_of_them(fresh_engine):
    expected, held = greedy_then_prefilled(fresh_engine, PROSE)
    start = len(held)
    shown: list[str] = []
    free = ReplyWriter(fresh_engine, SMOLLM2).continue_reply(held, 3, shown.append)
    assert (free.stop, free.tokens) == ("max_tokens", 3)
    assert held[start:] == expected[:3] and fresh_engine.seq_len(0) == start + 3
    assert free.text == fresh_engine.detokenize(expected[:3]) == "".join(shown)


def test_a_trigger_stops_the_reply_at_its_first_token_and_the_call_is_written_in_its_layout(
    fresh_engine,
):
    prefilled(fresh_engine, BARE_LIST_HISTORY, [CURRENT_WEATHER])
    first = greedy(fresh_engine, 1)
    assert fresh_engine.token_bytes(first[0]).lstrip().startswith(b"[")  # the list begins at once
    held = prefilled(fresh_engine, BARE_LIST_HISTORY, [CURRENT_WEATHER])
    start = len(held)
    shown: list[str] = []
    writer = ReplyWriter(fresh_engine, SMOLLM2)
    prompt_logits = fresh_engine.last_logits(0)
    before = fresh_engine.stats.snapshot()
    free = writer.continue_reply(held, 40, shown.append, offered=[CURRENT_WEATHER.name])
    assert (free.stop, free.call, free.text, free.tokens, shown) == ("call", True, "", 0, [])
    assert free.trigger is not None and free.trigger.layout is not None  # the bare list's
    assert len(held) == start and fresh_engine.seq_len(0) == start
    # The tokens read while the list was undecided are taken back, and the call is written
    # from the prompt's own next-token logits, kept: no pass reads the prompt's last token again.
    assert free.passes > 0 and fresh_engine.stats.prefill_passes == before.prefill_passes
    assert fresh_engine.last_logits(0) is prompt_logits
    assert int(fresh_engine.last_logits(0).argmax()) == first[0]
    reply = writer.write_calls(get_strategy("weave"), [CURRENT_WEATHER], 64, max_calls=1)
    assert reply.calls == [ToolCall("get_current_weather", {"city": "Paris"})]
    assert reply.text.startswith('[{"name"')  # in the trigger's layout, not <tool_call>
    assert fresh_engine.seq_len(0) == start + len(reply.tokens)
    assert writer.trigger is None  # spent: the next reply's call uses the format's own layout


def test_json_naming_no_tool_on_offer_is_prose_and_the_reply_goes_on(fresh_engine):
    held = prefilled(fresh_engine, BARE_LIST_HISTORY, [CURRENT_WEATHER])
    start = len(held)
    shown: list[str] = []
    free = ReplyWriter(fresh_engine, SMOLLM2).continue_reply(
        held, 40, shown.append, offered=["get_forecast"]
    )
    assert not free.call and free.text.lstrip().startswith('[{"name": "get_current_weather"')
    assert free.text == "".join(shown) and len(held) == start + free.tokens


def test_a_stop_sequence_ends_the_text_before_it_and_nothing_of_it_is_shown(fresh_engine):
    reply, held = greedy_then_prefilled(fresh_engine, PROSE)
    whole = fresh_engine.detokenize(reply)
    stop = whole[len(whole) // 2 : len(whole) // 2 + 3]
    shown: list[str] = []
    writer = ReplyWriter(fresh_engine, SMOLLM2)
    free = writer.continue_reply(held, 64, shown.append, sampling=Sampling(stop=(stop,)))
    assert free.stop == "stop_sequence"
    assert free.text == whole[: whole.index(stop)] == "".join(shown)


@pytest.mark.parametrize("bound", [0, -1])
def test_a_reply_with_no_room_writes_nothing(fresh_engine, bound):
    held = prefilled(fresh_engine, PROSE, [])
    start = len(held)
    shown: list[str] = []
    free = ReplyWriter(fresh_engine, SMOLLM2).continue_reply(held, bound, shown.append)
    assert (free.stop, free.text, free.tokens, shown) == ("max_tokens", "", 0, [])
    assert fresh_engine.seq_len(0) == len(held) == start
