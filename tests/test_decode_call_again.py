"""A call begun again in an answer: how far it is drafted, and when the token its take-back would
choose instead is read beside it (the pricing; the reply's use of both is tested on Qwen in
test_agent_triggers)."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

from functools import partial

from tests.test_decode_answer_drafts import CHEAP_ROWS, DEAR_ROWS, WEATHER
from weavehost.decode.answer_drafts import START, AnswerDrafts, DraftPricing
from weavehost.decode.call_again import BRANCH_KIND, branch_pays
from weavehost.decode.padding import NO_PLAN, DecodePlan
from weavehost.engine.calibrate import CostTable
from weavehost.formats.base import call_texts
from weavehost.formats.qwen import QWEN

# Qwen2.5-Coder-0.5B's calibration on the 2-core Xeon, rounded: a row past four costs about a
# fifth of a one-row pass.
XEON = DecodePlan.from_table(
    CostTable({1: 0.038, 2: 0.041, 4: 0.045, 8: 0.077, 16: 0.120}, 0.0037, machine="xeon")
)


def test_a_branch_s_row_is_added_where_rows_are_cheap_and_never_where_each_costs_a_pass() -> None:
    assert branch_pays(DraftPricing(CHEAP_ROWS), 4)
    assert not branch_pays(DraftPricing(DEAR_ROWS), 4)


def test_without_a_cost_table_no_branch_is_read() -> None:
    assert not branch_pays(DraftPricing(NO_PLAN), 1)


def test_branches_seldom_taken_stop_paying_for_their_row() -> None:
    pricing = DraftPricing(XEON)
    assert branch_pays(pricing, 4)
    for _ in range(40):
        pricing.count(BRANCH_KIND, False, False)
    assert not branch_pays(pricing, 4)
    for _ in range(200):
        pricing.count(BRANCH_KIND, False, True)
    assert branch_pays(pricing, 4)


def test_a_call_begun_again_is_drafted_to_where_it_is_decided_where_that_costs_less_than_the_pass_after() -> (
    None
):
    pricing = DraftPricing(XEON)
    start = DraftPricing.kind(START, 1)
    assert pricing.reaching(start, 3, 4) == 4  # one row more saves the pass after
    assert pricing.reaching(start, 3, 20) == 3  # 17 rows more cost more than that pass
    assert pricing.reaching(start, 3, None) == 3  # not decided within the draft
    assert pricing.reaching(start, 5, 4) == 5  # decided within the rows it pays for anyway
    assert DraftPricing(NO_PLAN).reaching(start, 3, 4) == 3


def test_the_draft_of_a_call_begun_again_runs_to_where_the_reply_decides_it_where_that_pays() -> (
    None
):
    # One character a token: the call made's rest after `{"`, priced alone to a few rows.
    drafts = AnswerDrafts.from_messages(WEATHER, render_calls=partial(call_texts, QWEN))
    pricing = DraftPricing(XEON)
    priced, kind, _ = drafts.tokens_after(b'{"', pricing, 64, list)
    assert kind[0] == START and 0 < len(priced) < 12

    def decided_at(at: int):
        return lambda _draft: at

    reaching, _, _ = drafts.tokens_after(b'{"', pricing, 64, list, decided_at(len(priced) + 1))
    assert "".join(reaching) == 'name": "get_current_weather"'[: len(priced) + 1]
    far, _, _ = drafts.tokens_after(b'{"', pricing, 64, list, decided_at(30))
    assert far == priced  # 30 rows cost more than the pass they would save
