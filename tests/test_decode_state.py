"""One decode state per opened model: what the decoder learns on one model stays with it.

Two engines are opened on the real embedded SmolLM2 in one process, each as the host opens a
model (:func:`~weavehost.decode.calibration.open_calibrated`, with its own
:class:`~weavehost.decode.state.DecodeState`); what ``weave`` learns writing a call on one
(acceptance rates, the model's token splits, its constraint factory) is not seen by the other.
"""

from __future__ import annotations

import pytest

from tests.schemas import FORECAST
from weavehost.decode import DecodeState, get_strategy, run_case
from weavehost.decode.answer_drafts import CONVERSATION, MIN_MATCH, DraftPricing
from weavehost.decode.calibration import open_calibrated
from weavehost.decode.padding import DecodePlan
from weavehost.decode.proposals import learn_split, model_split
from weavehost.decode.reply import ReplyWriter
from weavehost.decode.state import HELD_STEP, Bounded
from weavehost.engine.calibrate import CostTable
from weavehost.errors import ConfigError
from weavehost.formats import FORMATS

SMOLLM2 = FORMATS["smollm2"]
PARIS = [{"role": "user", "content": "What's the weather in Paris for the next 3 days?"}]
KINDS = ("grammar", "end", "close", "name", "start", "string", "number", "repeat")


def test_a_model_opened_with_another_machine_s_plan_decodes_by_it_at_every_thread_count(
    embedded_model_path,
):
    table = CostTable({1: 0.050, 4: 0.060, 8: 0.070}, 0.002, machine="phone-like")
    plan = DecodePlan.from_table(table)
    with open_calibrated(embedded_model_path, n_ctx=512, n_threads=1, plan=plan) as opened:
        assert opened.state.plan(opened.engine) is plan
        opened.engine.set_threads(2)
        assert opened.state.plan(opened.engine) is plan
        assert opened.state.answer_pricing(opened.engine).plan is plan


def test_what_one_opened_model_learns_does_not_reach_another(embedded_model_path):
    with (
        open_calibrated(embedded_model_path, n_ctx=1024, n_threads=1) as first,
        open_calibrated(embedded_model_path, n_ctx=1024, n_threads=1) as second,
    ):
        weave = get_strategy("weave", first.state)
        outcome = run_case(first.engine, SMOLLM2, weave, PARIS, [FORECAST], max_calls=1)
        assert outcome.result.calls
        learned = first.state.acceptance("weave")
        assert sum(learned.reached(kind) for kind in KINDS) > 0
        # The other model's weave starts from the priors.
        assert all(second.state.acceptance("weave").reached(kind) == 0 for kind in KINDS)

        [paris] = first.engine.tokenize(" Paris")
        [start] = first.engine.tokenize(" P")
        learn_split(first.state, first.engine, paris, start)
        assert model_split(first.state, first.engine, [paris])[0] == start
        assert model_split(second.state, second.engine, [paris]) == [paris]

        assert first.state.constraints(first.engine) is not second.state.constraints(second.engine)


def test_a_strategy_made_for_one_model_refuses_another(embedded_model_path):
    with (
        open_calibrated(embedded_model_path, n_ctx=1024, n_threads=1) as first,
        open_calibrated(embedded_model_path, n_ctx=512, n_threads=1) as other,
    ):
        weave = get_strategy("weave", first.state)
        with pytest.raises(ConfigError, match="open each model with its own state"):
            run_case(other.engine, SMOLLM2, weave, PARIS, [FORECAST], max_calls=1)


def test_strategies_made_alone_learn_apart(fresh_engine):
    one, two = get_strategy("weave"), get_strategy("weave")
    run_case(fresh_engine, SMOLLM2, one, PARIS, [FORECAST], max_calls=1)
    assert one.state_for(fresh_engine) is not two.state_for(fresh_engine)
    learned = one.state_for(fresh_engine).acceptance("weave")
    assert sum(learned.reached(kind) for kind in KINDS) > 0
    assert all(two.state_for(fresh_engine).acceptance("weave").reached(k) == 0 for k in KINDS)


def test_a_bounded_cache_drops_the_entry_used_least_recently():
    cache: Bounded[str, int] = Bounded(2)
    cache["a"], cache["b"] = 1, 2
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache["c"] = 3
    assert "b" not in cache and cache.get("a") == 1 and cache.get("c") == 3
    assert len(cache) == 2
    with pytest.raises(ValueError, match="at least one"):
        Bounded(0)


def test_a_state_without_a_plan_source_decodes_with_the_neutral_plan(fresh_engine):
    from weavehost.decode.padding import NO_PLAN

    state = DecodeState()
    assert state.plan(fresh_engine) is NO_PLAN
    assert state.plan(fresh_engine, padding=False) is state.plan(fresh_engine, padding=False)


def test_what_the_reply_writer_learns_of_drafted_answers_is_the_model_s_state_s(fresh_engine):
    state, other = DecodeState(), DecodeState()
    mine = ReplyWriter(fresh_engine, SMOLLM2, state=state)
    kind = DraftPricing.kind(CONVERSATION, MIN_MATCH)
    prior = mine.pricing.rates(kind)
    for _ in range(10):  # ten drafts reached, their first tokens not accepted
        mine.pricing.count(kind, False, False)
    again = ReplyWriter(fresh_engine, SMOLLM2, state=state)  # the same model, a new writer
    assert again.pricing is mine.pricing and again.pricing.rates(kind)[0] < 0.2
    elsewhere = ReplyWriter(fresh_engine, SMOLLM2, state=other)  # another opened model
    assert elsewhere.pricing is not mine.pricing and elsewhere.pricing.rates(kind) == prior


# Passes measured after 50 held tokens and after 1,050: each row reads each token in 2 us.
READING = CostTable(
    {1: 0.010, 2: 0.012, 4: 0.016, 8: 0.024},
    0.002,
    held_s={1: 0.012, 2: 0.016, 4: 0.024, 8: 0.040},
    held_tokens=1050,
    base_tokens=50,
)


def test_the_plan_is_the_one_for_as_many_tokens_as_the_conversation_holds(fresh_engine):
    state = DecodeState(plans=lambda _threads: DecodePlan.from_table(READING))
    state.serve(fresh_engine)
    writer = ReplyWriter(fresh_engine, SMOLLM2, state=state)
    short = state.plan(fresh_engine)
    assert short.pass_cost(4, 4) == pytest.approx(0.016 + 4 * (HELD_STEP // 2 - 50) * 2e-6)
    pricing = writer.pricing
    fresh_engine.prefill(0, fresh_engine.tokenize("The weather in Paris. " * 200))
    held = fresh_engine.seq_len(0)
    middle = held // HELD_STEP * HELD_STEP + HELD_STEP // 2
    long = state.plan(fresh_engine)
    assert long.pass_cost(4, 4) == pytest.approx(0.016 + 4 * (middle - 50) * 2e-6)
    assert state.plan(fresh_engine) is long  # made once for its step
    assert writer.pricing is pricing and pricing.plan is long  # the acceptance kept
    assert state.plan(fresh_engine, padding=False).pass_cost(4, 4) == long.pass_cost(4, 4)
    assert state.table(fresh_engine) is READING  # as calibrated, held costs and all


def test_a_state_without_a_plan_source_has_no_table(fresh_engine):
    assert DecodeState().table(fresh_engine) is None


def test_a_table_that_knows_no_held_costs_gives_one_plan_at_every_length(fresh_engine):
    plan = DecodePlan.from_table(CostTable({1: 0.010, 4: 0.016}, 0.002))
    state = DecodeState(plans=lambda _threads: plan)
    assert state.plan(fresh_engine) is plan
    fresh_engine.prefill(0, fresh_engine.tokenize("The weather in Paris. " * 200))
    assert state.plan(fresh_engine) is plan
