"""The context policy (RELIABILITY row 22): what of a conversation the model is shown.

A character-counting ``measure`` stands in for the tokenizer here; the real tokenizer and a
512-token context are in ``tests/test_reliability_agent.py``.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import copy

import pytest

from weavehost.agent.context import CUT_MARKER, fit_conversation
from weavehost.errors import ContextOverflowError


def measure(messages) -> int:
    """About a token per 4 characters, plus 4 per message for the template's markers."""
    return sum(4 + len(str(m.get("content", ""))) // 4 for m in messages)


def turn(n: int, *, tool_chars: int = 0, words: int = 40) -> list[dict]:
    user = {"role": "user", "content": f"question {n} " + "word " * words}
    answer = {"role": "assistant", "content": f"answer {n} " + "word " * words}
    if not tool_chars:
        return [user, answer]
    call = {"role": "assistant", "content": "", "tool_calls": [{"name": "t", "arguments": {}}]}
    return [user, call, {"role": "tool", "name": "t", "content": "x" * tool_chars}, answer]


SYSTEM = {"role": "system", "content": "You are helpful."}


def test_a_conversation_that_fits_is_shown_whole() -> None:
    transcript = [SYSTEM, *turn(1), *turn(2)]
    view = fit_conversation(transcript, measure, room=1000)
    assert view.messages == transcript
    assert view.start == 1  # right after the system message
    assert view.dropped_turns == 0 and not view.cuts


def test_old_turns_are_dropped_whole_oldest_first_down_to_the_low_water_mark_keeping_the_system_message() -> (
    None
):
    transcript = [SYSTEM]
    for n in range(1, 11):
        transcript += turn(n)
    transcript.append({"role": "user", "content": "the current question"})
    room = 400
    assert measure(transcript) > room

    view = fit_conversation(transcript, measure, room=room, low_water=0.6)

    assert view.messages[0] == SYSTEM
    assert view.messages[-1]["content"] == "the current question"
    assert view.tokens == measure(view.messages) <= int(room * 0.6)
    assert view.messages[1]["role"] == "user"  # starts at a turn boundary, never mid-turn
    kept = [m["content"].split()[1] for m in view.messages[1:-1] if m["role"] == "user"]
    assert kept == [str(n) for n in range(11 - len(kept), 11)]  # the newest turns stay
    assert view.dropped_turns == 10 - len(kept) > 0


def test_a_later_step_keeps_the_views_start_so_the_cache_prefix_survives() -> None:
    transcript = [SYSTEM]
    for n in range(1, 11):
        transcript += turn(n)
    transcript.append({"role": "user", "content": "now"})
    first = fit_conversation(transcript, measure, room=400)

    transcript.append({"role": "assistant", "content": "short reply"})
    transcript.append({"role": "user", "content": "and again"})
    second = fit_conversation(transcript, measure, room=400, start=first.start, cuts=first.cuts)

    assert second.start == first.start and second.dropped_turns == 0
    assert second.messages[: len(first.messages)] == first.messages


def test_the_current_turns_tool_output_is_cut_longest_first_with_a_marker_and_the_transcript_is_untouched() -> (
    None
):
    transcript = [SYSTEM, *turn(1, tool_chars=300)]
    transcript[-1:] = []  # the turn is still going: no answer yet
    transcript += [
        {"role": "assistant", "content": "", "tool_calls": [{"name": "u", "arguments": {}}]},
        {"role": "tool", "name": "u", "content": "y" * 4000},
    ]
    before = copy.deepcopy(transcript)
    room = 300

    view = fit_conversation(transcript, measure, room=room, min_tool_chars=50)

    assert transcript == before
    assert view.tokens == measure(view.messages) <= room
    cut = view.messages[-1]["content"]
    assert cut.startswith("y" * 50)
    assert CUT_MARKER.format(n=4000 - view.cuts[len(transcript) - 1]) in cut
    assert view.cut_now[0] == len(transcript) - 1  # the longest result was cut first
    assert view.messages[3]["content"] == "x" * 300  # the short one was enough to keep


def test_a_result_is_cut_below_the_minimum_only_when_the_minimum_is_not_enough() -> None:
    transcript = [
        SYSTEM,
        {"role": "user", "content": "word " * 200},
        {"role": "assistant", "content": "", "tool_calls": [{"name": "u", "arguments": {}}]},
        {"role": "tool", "name": "u", "content": "y" * 4000},
    ]
    roomy = fit_conversation(transcript, measure, room=400, min_tool_chars=400)
    assert roomy.cuts[3] >= 400
    tight = fit_conversation(transcript, measure, room=300, min_tool_chars=400)
    assert tight.cuts[3] < 400 and tight.tokens <= 300
    assert tight.messages[-1]["content"].endswith(CUT_MARKER.format(n=4000 - tight.cuts[3]))


def test_a_message_too_long_even_with_its_tool_output_cut_away_is_a_clear_error() -> None:
    transcript = [
        SYSTEM,
        {"role": "user", "content": "word " * 2000},  # the user's own message is too long
        {"role": "assistant", "content": "", "tool_calls": [{"name": "u", "arguments": {}}]},
        {"role": "tool", "name": "u", "content": "y" * 4000},
    ]
    with pytest.raises(
        ContextOverflowError, match=r"takes \d+ tokens .* leaves 300 for the prompt"
    ):
        fit_conversation(transcript, measure, room=300, min_tool_chars=100)


def test_cuts_of_dropped_turns_are_forgotten() -> None:
    transcript = [SYSTEM, *turn(1, tool_chars=2000), *turn(2, words=300)]
    transcript.append({"role": "user", "content": "next"})
    view = fit_conversation(transcript, measure, room=250, cuts={3: 100})
    assert view.start >= 5 and 3 not in view.cuts
