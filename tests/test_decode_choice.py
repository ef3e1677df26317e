"""A free token's choice and by how much it won: the top-two gap the reply writer records.

The gap itself is pure; the writer runs on the embedded SmolLM2, where the gaps it records must
be one per token of the text, each the chosen logit over the best other one (replayed by hand),
and recording them must not change a reply, drafted or not.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tests.schemas import CURRENT_WEATHER
from tests.test_decode_answer_drafts import WEATHER, Written, same_reply, weather, written
from tests.test_decode_reply import BARE_LIST_HISTORY, PROSE, prefilled
from weavehost.agent.model import FreeText
from weavehost.decode.choice import Margins, choose_token, top_two_gap
from weavehost.decode.reply import Continued
from weavehost.engine import Engine


def test_the_gap_is_the_chosen_logit_over_the_best_other_zero_only_at_an_exact_tie() -> None:
    logits = np.array([1.0, 3.5, -np.inf, 2.25], dtype=np.float32)
    assert top_two_gap(logits, choose_token(logits, None, None)) == 1.25
    assert top_two_gap(logits, 3) == -1.25  # a sampled token that was not the best
    tie = np.array([0.5, 2.0, 2.0], dtype=np.float32)
    assert choose_token(tie, None, None) == 1 and top_two_gap(tie, 1) == 0.0
    assert top_two_gap(np.array([-np.inf, 0.1, -np.inf], dtype=np.float32), 1) == math.inf


def test_a_place_chosen_again_after_a_take_back_keeps_only_its_last_gap() -> None:
    margins = Margins()
    for place, winner in [(0, 3.0), (1, 2.0), (2, 1.0), (1, 0.5), (2, 0.25)]:
        margins.record(place, np.array([winner, 0.0], dtype=np.float32), 0)
    ended = margins.recorded(Continued("ab", "end", tokens=2, token_ids=(7, 8)))
    assert (ended.token_ids, ended.margins, ended.stop_margin) == ((7, 8), (3.0, 0.5), 0.25)
    # The log keeps every choice in the order made, those taken back too.
    assert [gap for _, gap in ended.choices] == [3.0, 2.0, 1.0, 0.5, 0.25]
    bounded = margins.recorded(Continued("ab", "max_tokens", tokens=2))
    assert bounded.stop_margin is None  # no choice was left out of the text


def test_the_timings_keep_the_gaps_to_three_decimals_and_an_unopposed_choice_as_none() -> None:
    free = FreeText(
        "Hi", call=False, stop="end", tokens=2, token_ids=(5, 6), margins=(1.23456, math.inf),
        stop_margin=0.0004, seconds=0.123456,
    )  # fmt: skip
    assert free.choices() == {
        "free_token_ids": [5, 6],
        "free_margins": [1.235, None],
        "free_s": 0.1235,  # the wall time it took, what bench-agent's foresight re-times
        "free_stop": "end",
        "free_stop_margin": 0.0,
    }
    assert FreeText("Hi", call=False, stop="end").choices() == {}  # not recorded: nothing
    # Where it chose more than it kept (text taken back), every choice in the order made.
    log = ((9, 0.25), (5, 1.23456), (6, math.inf), (2, 0.0004))
    taken_back = FreeText(
        "Hi", call=False, stop="end", tokens=2, token_ids=(5, 6), margins=(1.23456, math.inf),
        stop_margin=0.0004, choice_log=log,
    )  # fmt: skip
    assert taken_back.choices()["free_log_ids"] == [9, 5, 6, 2]
    assert taken_back.choices()["free_log_margins"] == [0.25, 1.235, None, 0.0]
    assert "free_log_ids" not in dataclasses.replace(taken_back, choice_log=log[1:]).choices()


def replayed_gaps(
    engine: Engine, messages: Sequence[Mapping[str, Any]], tokens: Sequence[int]
) -> list[float]:
    """The top-two gap before each of ``tokens`` and after the last, read by hand one token a
    pass (the raw logits sorted: no mask applies to a plain greedy reply)."""
    prefilled(engine, messages, [])
    gaps = []
    logits = engine.last_logits(0)
    for token in [*tokens, None]:
        top, second = np.sort(logits)[-2:][::-1]
        gaps.append(float(top) - float(second))
        if token is not None:
            logits = engine.decode_one(0, token)
    return gaps


def test_a_plain_reply_records_one_gap_per_token_each_the_top_two_difference_of_its_logits(
    fresh_engine,
):
    for messages in (PROSE, WEATHER):
        free = written(fresh_engine, messages, drafts=False, margins=True).free
        assert free.stop == "end" and free.tokens > 3
        assert len(free.margins) == len(free.token_ids) == free.tokens
        expected = replayed_gaps(fresh_engine, messages, free.token_ids)
        assert np.allclose([*free.margins, free.stop_margin], expected, atol=1e-4, rtol=0)
        # Never below zero, and zero only where the top two logits are exactly equal.
        assert all(m >= 0 for m in free.margins) and free.stop_margin >= 0
        recorded = [*free.margins, free.stop_margin]
        assert all((m == 0) == (e == 0) for m, e in zip(recorded, expected, strict=True))


def same_with_margins(plain: Written, recorded: Written) -> None:
    same_reply(recorded, plain)
    assert plain.free.margins is None  # the tokens are returned always, the gaps where asked
    assert plain.free.token_ids == recorded.free.token_ids
    assert list(recorded.free.token_ids) == recorded.held[: recorded.free.tokens]
    assert len(recorded.free.margins) == recorded.free.tokens


def test_recording_the_gaps_changes_no_reply_drafted_or_not(fresh_engine):
    for messages in (WEATHER, weather("Oslo", "light rain", 3.5, 81)):
        for drafts in (False, True):
            plain = written(fresh_engine, messages, drafts=drafts)
            recorded = written(fresh_engine, messages, drafts=drafts, margins=True)
            same_with_margins(plain, recorded)
            assert all(m >= 0 for m in recorded.free.margins)


def test_a_drafted_reply_records_the_same_choices_as_an_undrafted_one(fresh_engine):
    plain = written(fresh_engine, WEATHER, drafts=False, margins=True).free
    drafted = written(fresh_engine, WEATHER, drafts=True, margins=True).free
    assert drafted.token_ids == plain.token_ids
    # The drafted pass reads several rows at once: its logits may differ in their last bits.
    assert np.allclose(drafted.margins, plain.margins, atol=0.5)


def test_a_reply_that_stops_at_a_call_records_the_trigger_s_choice_apart(fresh_engine):
    offered = {"offered": [CURRENT_WEATHER.name]}
    called = written(fresh_engine, BARE_LIST_HISTORY, drafts=False, margins=True, **offered)
    assert called.free.stop == "call"
    assert len(called.free.margins) == called.free.tokens
    assert called.free.stop_margin is not None and called.free.stop_margin >= 0


def test_call_text_taken_back_is_kept_in_the_log_of_choices_in_the_order_it_was_chosen(
    fresh_engine,
):
    no_call = {"offered": [CURRENT_WEATHER.name], "allow_call": False}
    free = written(fresh_engine, BARE_LIST_HISTORY, drafts=False, margins=True, **no_call).free
    logged = [token for token, _ in free.choices]
    assert len(logged) > free.tokens + 1  # the call's opening, chosen and taken back
    rest = iter(logged)  # the answer's tokens, then its end, in order among the choices
    assert all(token in rest for token in free.token_ids)
    assert free.stop == "end" and fresh_engine.is_end_of_generation(logged[-1])


def test_call_text_taken_back_leaves_one_gap_per_token_of_the_answer(fresh_engine):
    no_call = {"offered": [CURRENT_WEATHER.name], "allow_call": False}
    for drafts in (False, True):
        plain = written(fresh_engine, BARE_LIST_HISTORY, drafts=drafts, **no_call)
        recorded = written(fresh_engine, BARE_LIST_HISTORY, drafts=drafts, margins=True, **no_call)
        same_with_margins(plain, recorded)
