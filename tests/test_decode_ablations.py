"""weave's ablations (``weave:no_drafts``, …) on the real embedded SmolLM2: each turns exactly one
component off, and each is still lossless (the call ``constrained`` writes).

Counted, never timed: what each variant leaves out shows in its passes, rows and phases.
"""

from __future__ import annotations

import pytest

from tests.schemas import FORECAST
from tests.test_decode import CASES, SMOLLM2, THERMOSTAT, _ask, _prefill_prompt
from weavehost.bench.runner import parse_strategies
from weavehost.decode import CallRequest, get_strategy, run_case
from weavehost.decode.drafts import DraftSource
from weavehost.decode.padding import DecodePlan
from weavehost.decode.state import DEFAULT_PRIOR, DraftAcceptance
from weavehost.decode.weave import ABLATIONS, WeaveOptions, WeaveStrategy
from weavehost.engine.calibrate import CostTable

# 2 and 3 rows cost more than 4: a padding plan pads every 2- or 3-row pass to 4 rows.
PADS_TO_FOUR = CostTable({1: 0.010, 2: 0.030, 3: 0.040, 4: 0.012}, 0.010, machine="test")


def test_every_ablation_is_a_strategy_named_for_the_component_it_turns_off():
    assert list(ABLATIONS) == [
        "weave:no_selector",
        "weave:no_forced",
        "weave:no_drafts",
        "weave:no_padding",
        "weave:no_provisional",
        "weave:serial_values",
        "weave:parallel_values",
    ]
    for name in ABLATIONS:
        assert get_strategy(name).name == name
    assert parse_strategies("weave,weave:no_drafts") == ("weave", "weave:no_drafts")
    assert WeaveOptions(drafts=False, values="serial").name == "weave:no_drafts+serial_values"
    assert WeaveStrategy().name == "weave"


def test_an_unknown_value_mode_is_refused():
    with pytest.raises(ValueError, match="plan, serial or parallel"):
        WeaveOptions(values="sometimes")


@pytest.mark.parametrize("name", list(ABLATIONS))
@pytest.mark.parametrize(("question", "tool"), CASES[:3], ids=[t.name for _, t in CASES[:3]])
def test_every_ablation_writes_the_call_constrained_writes(fresh_engine, name, question, tool):
    reference = run_case(fresh_engine, SMOLLM2, "constrained", _ask(question), [tool], max_calls=1)
    ablated = run_case(fresh_engine, SMOLLM2, name, _ask(question), [tool], max_calls=1)
    assert reference.result.calls
    assert ablated.result.calls == reference.result.calls
    assert ablated.result.strategy == name


def _weave(engine, options: WeaveOptions, question: str, tools, plan=None, on_provisional=None):
    _prefill_prompt(engine, SMOLLM2, question, tools)
    strategy = WeaveStrategy(plan=plan if plan is not None else DecodePlan({}), options=options)
    request = CallRequest(
        engine,
        SMOLLM2,
        tools,
        on_provisional=on_provisional,
        drafts=DraftSource.from_messages(_ask(question)),
    )
    return strategy.run(request)


def test_without_the_provisional_call_nothing_is_sent_early_and_the_tool_waits_for_the_final(
    fresh_engine,
):
    sent = []
    question = CASES[0][0]
    whole = _weave(fresh_engine, WeaveOptions(), question, [FORECAST], on_provisional=sent.append)
    assert sent and whole.provisional == sent[0]
    sent.clear()
    ablated = _weave(
        fresh_engine,
        WeaveOptions(provisional=False),
        question,
        [FORECAST],
        on_provisional=sent.append,
    )
    assert sent == [] and ablated.provisional is None
    assert ablated.tool_latency_s == ablated.final_latency_s
    assert ablated.calls == whole.calls


def test_serial_values_decode_no_value_sequences_and_parallel_values_always_do(fresh_engine):
    question = CASES[1][0]
    serial = _weave(fresh_engine, WeaveOptions(values="serial"), question, [THERMOSTAT])
    parallel = _weave(
        fresh_engine,
        WeaveOptions(values="parallel"),
        question,
        [THERMOSTAT],
        plan=DecodePlan({}, parallel_without_table=False),
    )
    assert "values" not in serial.phases
    assert "values" in parallel.phases
    assert serial.calls == parallel.calls


def test_without_forced_drafts_the_fixed_text_costs_passes(fresh_engine):
    question, tools = CASES[1][0], [THERMOSTAT, FORECAST]
    whole = _weave(fresh_engine, WeaveOptions(), question, tools)
    ablated = _weave(fresh_engine, WeaveOptions(forced=False), question, tools)
    assert ablated.calls == whole.calls
    assert ablated.stats.passes > whole.stats.passes


def test_without_the_selector_the_whole_head_is_decoded_even_for_one_tool(fresh_engine):
    question = CASES[0][0]
    whole = _weave(fresh_engine, WeaveOptions(), question, [FORECAST])
    ablated = _weave(fresh_engine, WeaveOptions(selector=False), question, [FORECAST])
    # One tool: the whole call selects nothing; the ablation decodes the head before the skeleton.
    assert ablated.stats.passes > whole.stats.passes
    assert ablated.calls == whole.calls


def test_without_drafts_no_lookup_token_is_proposed(fresh_engine):
    question = CASES[4][0]
    tool = CASES[4][1]
    plan = DecodePlan({}, parallel_without_table=False)
    strategy = WeaveStrategy(plan=plan, options=WeaveOptions(drafts=False))
    _prefill_prompt(fresh_engine, SMOLLM2, question, [tool])
    request = CallRequest(
        fresh_engine, SMOLLM2, [tool], drafts=DraftSource.from_messages(_ask(question))
    )
    result = strategy.run(request)
    assert result.calls
    acceptance = strategy.state_for(fresh_engine).acceptance(strategy.name)
    assert all(acceptance.reached(kind) == 0 for kind in ("string", "number", "start"))


def test_without_padding_no_pass_is_padded_where_the_plan_would_pad(fresh_engine):
    plan = DecodePlan.from_table(PADS_TO_FOUR)
    assert plan.width_for(2) == plan.width_for(3) == 4
    assert plan.without_padding().width_for(3) == 3
    question = CASES[1][0]
    options = WeaveOptions(values="parallel")
    padded = _weave(fresh_engine, options, question, [THERMOSTAT], plan=plan)
    unpadded = _weave(
        fresh_engine,
        WeaveOptions(values="parallel", padding=False),
        question,
        [THERMOSTAT],
        plan=plan,
    )
    assert padded.stats.padded_tokens > 0
    assert unpadded.stats.padded_tokens == 0
    assert unpadded.calls == padded.calls


def test_a_cost_model_gives_every_weave_variant_its_plan_and_keeps_its_options():
    plan = DecodePlan.from_table(PADS_TO_FOUR)
    variant = get_strategy("weave:no_drafts")
    assert isinstance(variant, WeaveStrategy)
    planned = variant.with_plan(plan)
    assert planned.options == variant.options and planned.name == "weave:no_drafts"


def test_acceptance_starts_at_each_kinds_prior_and_follows_what_passes_reached():
    acceptance = DraftAcceptance({"start": (0.5, 10)})
    assert acceptance.rate("start") == 0.5
    assert acceptance.rate("unknown") == DEFAULT_PRIOR[0]
    acceptance.add({"start": (10, 10)})
    assert acceptance.rate("start") == 15 / 20
    assert acceptance.reached("start") == 10 and acceptance.reached("unknown") == 0
