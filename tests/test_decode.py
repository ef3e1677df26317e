"""The decoding strategies on the real embedded SmolLM2: valid calls, counted passes, write-back.

SmolLM2-135M is small; the prompts name their values plainly so that greedy decoding ends.
Everything here is counted (passes, tokens, sequences), never timed.
"""

from __future__ import annotations

import jsonschema
import numpy as np
import pytest

from tests.schemas import FORECAST, LIGHTS
from weavehost.decode import STRATEGIES, CallRequest, ToolSchema, get_strategy, run_case
from weavehost.decode.constraint import ConstraintFactory
from weavehost.decode.padding import DecodePlan
from weavehost.decode.values import ValueTask, decode_values, prefill_skeleton
from weavehost.decode.weave import ABLATIONS, WeaveStrategy
from weavehost.formats import FORMATS, ToolCall, tool_to_openai

THERMOSTAT = ToolSchema(
    "set_thermostat",
    "Set the thermostat temperature",
    {
        "type": "object",
        "properties": {
            "temperature": {"type": "number"},
            "mode": {"type": "string", "enum": ["eco", "comfort", "off"]},
        },
        "required": ["temperature", "mode"],
    },
)
SHOPPING = ToolSchema(
    "add_items",
    "Add items to the shopping list",
    {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"type": "string"}}},
        "required": ["items"],
    },
)
CONTACT = ToolSchema(
    "create_contact",
    "Create a contact",
    {
        "type": "object",
        "properties": {
            "contact": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "phone": {"type": "string"}},
                "required": ["name", "phone"],
            }
        },
        "required": ["contact"],
    },
)
ROBOT = ToolSchema(
    "move_robot",
    "Move the robot forward (positive) or back (negative)",
    {"type": "object", "properties": {"steps": {"type": "integer"}}, "required": ["steps"]},
)

# One case per JSON type: string+integer(+enum optional), number+enum, boolean, array, object.
CASES = [
    ("What's the weather in Paris for the next 3 days?", FORECAST),
    ("Set the thermostat to 21.5 degrees in eco mode.", THERMOSTAT),
    ("Turn on the kitchen lights.", LIGHTS),
    ("Add milk, eggs and bread to my shopping list.", SHOPPING),
    ("Create a contact named Ann with phone 555-1234.", CONTACT),
    ("Move the robot 5 steps back.", ROBOT),
]
SMOLLM2 = FORMATS["smollm2"]


def _ask(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]


@pytest.mark.parametrize("strategy", ["constrained", "jump_forward", "weave"])
@pytest.mark.parametrize(("question", "tool"), CASES, ids=[tool.name for _, tool in CASES])
def test_every_constrained_strategy_writes_a_call_that_validates_against_the_schema(
    fresh_engine, strategy, question, tool
):
    outcome = run_case(fresh_engine, SMOLLM2, strategy, _ask(question), [tool], max_calls=1)
    result = outcome.result
    assert result.error is None, result.error
    [call] = result.calls
    assert call.name == tool.name
    jsonschema.validate(dict(call.arguments), dict(tool.parameters))
    assert fresh_engine.detokenize(result.tokens) == result.text
    assert fresh_engine.seq_len(0) == outcome.prompt_tokens + len(result.tokens)
    assert all(fresh_engine.seq_len(seq) == 0 for seq in range(1, fresh_engine.n_seq_max))


def test_jump_forward_writes_the_same_call_as_constrained_in_fewer_passes(fresh_engine):
    question, tool = CASES[1]
    constrained = _one_call(fresh_engine, "constrained", question, [tool])
    jumped = _one_call(fresh_engine, "jump_forward", question, [tool])
    assert jumped.calls == constrained.calls
    assert constrained.stats.passes == len(constrained.tokens)
    assert jumped.stats.passes < constrained.stats.passes
    assert jumped.stats.prefilled_tokens > 0


def test_jump_forward_reads_each_chosen_token_with_the_forced_run_after_it_in_one_pass(
    fresh_engine,
):
    question, tool = CASES[0]
    constrained = _one_call(fresh_engine, "constrained", question, [tool])
    jumped = _one_call(fresh_engine, "jump_forward", question, [tool])
    assert jumped.calls == constrained.calls
    stats = jumped.stats
    # One chosen token a pass; a pass of forced tokens alone only before the first choice.
    assert stats.decode_passes == stats.decoded_tokens
    assert stats.prefill_passes <= 1
    assert stats.decoded_tokens + stats.prefilled_tokens == len(jumped.tokens)


def test_the_selector_picks_among_several_tools_and_weave_still_parallelises(fresh_engine):
    tools = [FORECAST, THERMOSTAT, LIGHTS]
    result = run_case(fresh_engine, SMOLLM2, "weave", _ask(CASES[1][0]), tools).result
    assert result.error is None
    assert [c.name for c in result.calls] == ["set_thermostat"]
    assert result.phases["select"] > 0


def _value_tasks(engine, fmt, tool: ToolSchema) -> list[ValueTask]:
    factory = ConstraintFactory(engine)
    grammars = factory.grammars(fmt)
    head = fmt.layout.head_for(tool.name)
    props = tool.parameters["properties"]
    tasks = []
    for index, key in enumerate(tool.required):
        lead = head + fmt.layout.prefix_for(key, first=True)
        tasks.append(ValueTask(key, index + 1, factory.new(grammars.value(lead, props[key])), lead))
    return tasks


def _prefill_prompt(engine, fmt, question, tools):
    engine.clear()
    segments = fmt.render_prompt(
        _ask(question),
        [tool_to_openai(t.name, t.description, t.parameters) for t in tools],
        chat_template=None,
    )
    prompt = engine.tokenize_segments(segments)
    engine.prefill(0, prompt)
    return prompt


def test_weave_decodes_k_values_in_max_length_passes_not_the_sum(fresh_engine):
    engine = fresh_engine
    _prefill_prompt(engine, SMOLLM2, CASES[1][0], [THERMOSTAT])
    tasks = _value_tasks(engine, SMOLLM2, THERMOSTAT)
    before = engine.stats.snapshot()
    prefill_skeleton(engine, tasks)
    skeleton = engine.stats.since(before)
    assert skeleton.passes == 1
    assert [engine.seq_len(t.seq) > 0 for t in tasks] == [True, True]

    before = engine.stats.snapshot()
    decode_values(engine, SMOLLM2, tasks, plan=DecodePlan({}), scratch_seq=15, max_tokens=64)
    values = engine.stats.since(before)
    assert [t.value for t in tasks] == ["21.5", '"eco"']
    # A value of L tokens takes L - 1 passes (its first token comes from the skeleton pass).
    lengths = [len(t.tokens) for t in tasks]
    assert min(lengths) >= 2
    assert values.passes <= max(lengths) - 1
    assert values.passes < sum(lengths) - len(lengths)
    assert any(width >= 2 for width in values.width_counts)


def test_padding_widens_a_pass_with_rows_on_a_scratch_sequence_that_is_emptied(fresh_engine):
    engine = fresh_engine
    _prefill_prompt(engine, SMOLLM2, CASES[0][0], [FORECAST])
    tasks = _value_tasks(engine, SMOLLM2, FORECAST)
    prefill_skeleton(engine, tasks)
    before = engine.stats.snapshot()
    decode_values(
        engine,
        SMOLLM2,
        tasks,
        plan=DecodePlan({1: 4, 2: 4, 3: 4}),
        scratch_seq=15,
        max_tokens=64,
    )
    cost = engine.stats.since(before)
    assert set(cost.width_counts) == {4}
    assert cost.padded_tokens == 4 * cost.passes - cost.decoded_tokens - cost.prefilled_tokens
    assert engine.seq_len(15) == 0
    assert [t.value for t in tasks] == ['"Paris"', "3"]


def _kl(p_logits: np.ndarray, q_logits: np.ndarray) -> float:
    p = np.exp(p_logits - p_logits.max())
    p /= p.sum()
    q = np.exp(q_logits - q_logits.max())
    q /= q.sum()
    return float((p * (np.log(p + 1e-30) - np.log(q + 1e-30))).sum())


# llama.cpp's numbers depend on how tokens are batched: prefilling the same 124 tokens split at
# different points moved logits by up to 0.63 and KL by up to 0.0024 here (docs/decoder.md).
# weave's passes mix widths and refill the cells of rejected guesses: on the thermostat case
# below its KV cache (the same tokens, the same number of cells in llama.cpp's state) moved
# the probe by 1.13 and KL 0.0073 from a serial decode, where prefills of 2-41 tokens at a time
# moved it by 1.20 and 0.0031. A KV cache that differs by one token moves them by > 2 and
# > 0.02. The bounds sit between.
SAME_KV_MAX_LOGIT_DIFF = 1.5
SAME_KV_MAX_KL = 0.012


def _probe_logits(engine, probe: list[int]) -> list[np.ndarray]:
    """Logits at each token of ``probe`` decoded serially on sequence 0."""
    return [engine.decode_one(0, token) for token in probe]


def _serial_probe(engine, prompt: list[int], call: list[int], probe: list[int]):
    engine.clear()
    engine.prefill(0, prompt, logits_last=False)
    for token in call:  # the call decoded serially, one token per pass
        engine.decode_one(0, token)
    return _probe_logits(engine, probe)


def _same_kv(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    """Same predictions within batch-shape noise: the greedy token agrees wherever the
    reference's top two are more than 1.0 apart, logits within 1.5, KL below 0.012."""
    for x, y in zip(a, b, strict=True):
        top2 = np.sort(y)[-2:]
        if top2[1] - top2[0] > 1.0 and int(x.argmax()) != int(y.argmax()):
            return False
        if np.abs(x - y).max() >= SAME_KV_MAX_LOGIT_DIFF or _kl(y, x) >= SAME_KV_MAX_KL:
            return False
    return True


def test_after_write_back_the_main_sequence_matches_a_serial_decode_of_the_call(fresh_engine):
    engine = fresh_engine
    outcome = run_case(engine, SMOLLM2, "weave", _ask(CASES[1][0]), [THERMOSTAT])
    result = outcome.result
    assert result.error is None
    # Structure: sequence 0 holds exactly prompt + call tokens, at positions 0..n-1, and no
    # other sequence holds anything.
    assert engine.detokenize(result.tokens) == result.text
    n = outcome.prompt_tokens + len(result.tokens)
    assert engine.seq_len(0) == n
    assert engine.kv_span(0) == (0, n - 1)
    assert all(engine.kv_span(seq) == (-1, -1) for seq in range(1, engine.n_seq_max))
    # Numbers: the next predictions match a serial decode of the same tokens.
    probe = engine.tokenize("<|im_end|>\n<|im_start|>user\nSo the temperature is", special=True)
    after_weave = _probe_logits(engine, probe)
    segments = SMOLLM2.render_prompt(
        _ask(CASES[1][0]),
        [tool_to_openai(THERMOSTAT.name, THERMOSTAT.description, THERMOSTAT.parameters)],
        chat_template=None,
    )
    prompt = engine.tokenize_segments(segments)
    assert len(prompt) == outcome.prompt_tokens
    after_serial = _serial_probe(engine, prompt, result.tokens, probe)
    assert _same_kv(after_weave, after_serial)

    # The same check tells a cache that lost one token of the call apart.
    missing_one = result.tokens[:5] + result.tokens[6:]
    assert not _same_kv(after_weave, _serial_probe(engine, prompt, missing_one, probe))


def test_the_provisional_call_is_emitted_before_write_back_starts(fresh_engine):
    engine = fresh_engine
    seen = {}

    def on_provisional(call: ToolCall) -> None:
        seen["call"] = call
        # The first value runs on sequence 0, the second on a fork that write-back drops.
        seen["fork_alive"] = engine.seq_len(1) > 0
        seen["passes"] = engine.stats.passes

    _prefill_prompt(engine, SMOLLM2, CASES[0][0], [FORECAST])
    start = engine.stats.passes
    result = WeaveStrategy(plan=DecodePlan({})).run(
        CallRequest(engine, SMOLLM2, [FORECAST], on_provisional=on_provisional)
    )
    assert seen["call"] == ToolCall("get_weather", {"city": "Paris", "days": 3})
    assert seen["fork_alive"]
    assert engine.seq_len(1) == 0
    assert seen["passes"] < start + result.stats.passes
    assert result.provisional == seen["call"]
    # Optional arguments are decided after write-back, on sequence 0, in the verified run.
    assert list(result.phases) == ["select", "skeleton", "values", "provisional", "writeback"]


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize(
    ("schema", "value"),
    [({"type": "integer"}, -5), ({"type": "number"}, -0.5), ({"type": "string"}, " New York")],
    ids=["negative-integer", "negative-number", "string-with-leading-space"],
)
def test_a_value_survives_the_key_value_boundary_in_every_format(fresh_engine, name, schema, value):
    """The skeleton's forced tokens are a token-prefix of the natural tokenization of the whole
    text, so the value's first token (fused with the space or quote) is still reachable, the
    constraint accepts the natural rest, and the value is cut back out intact."""
    engine = fresh_engine
    fmt = FORMATS[name]
    factory = ConstraintFactory(engine)
    lead = fmt.layout.head_for("f") + fmt.layout.prefix_for("x", first=True)
    constraint = factory.new(factory.grammars(fmt).value(lead, schema))
    encoded = fmt.encode_value(value)
    full = engine.tokenize(lead + encoded + fmt.layout.tail[:1], special=True)
    forced = constraint.forced()
    assert forced == full[: len(forced)]
    for token in full:
        assert constraint.consume(token), engine.token_bytes(token)
    written = engine.detokenize(full)[len(lead) :]
    end = fmt.value_end(written)
    assert end is not None
    assert fmt.parse_calls(lead + written[:end] + fmt.layout.tail)[0].arguments == {"x": value}


def test_a_number_is_not_cut_while_it_can_still_grow():
    fmt = SMOLLM2
    assert fmt.value_end(" 21") is None
    assert fmt.value_end(" 21.") is None
    assert fmt.value_end(" 21.5,") == 5
    assert fmt.value_end(' "Paris"}') == 8
    assert fmt.value_end(' "Par') is None
    assert fmt.value_end(" true") == 5


def test_strategies_are_listed_in_one_dict_the_whole_decoders_then_weaves_ablations():
    assert list(STRATEGIES) == ["serial", "constrained", "jump_forward", "weave", *ABLATIONS]


@pytest.mark.parametrize("strategy", ["constrained", "jump_forward", "weave"])
def test_a_call_that_cannot_finish_is_an_error_and_leaves_only_the_prompt(fresh_engine, strategy):
    engine = fresh_engine
    outcome = run_case(engine, SMOLLM2, strategy, _ask(CASES[4][0]), [CONTACT], max_tokens=4)
    result = outcome.result
    assert result.calls == []
    assert "within 4 tokens" in (result.error or "")
    assert engine.seq_len(0) == outcome.prompt_tokens
    assert all(engine.seq_len(seq) == 0 for seq in range(1, engine.n_seq_max))


def test_a_value_too_long_to_decode_alone_is_decoded_with_the_whole_call_in_view(
    fresh_engine, monkeypatch
):
    import weavehost.decode.weave as weave_module

    engine = fresh_engine
    question, tool = CASES[1]  # 21.5 takes more than two tokens
    expected = _one_call(engine, "constrained", question, [tool])
    monkeypatch.setattr(weave_module, "VALUE_TOKEN_CAP", 2)
    _prefill_prompt(engine, SMOLLM2, question, [tool])
    prompt_len = engine.seq_len(0)
    result = WeaveStrategy(plan=DecodePlan({})).run(CallRequest(engine, SMOLLM2, [tool]))
    assert "values" in result.phases and "fallback" not in result.phases
    assert result.error is None
    assert (result.calls, result.tokens) == (expected.calls, expected.tokens)
    assert result.provisional is None  # no parallel values to assemble one from
    assert engine.seq_len(0) == prompt_len + len(result.tokens)


def test_an_optional_argument_after_the_required_values_is_the_one_constrained_writes(
    fresh_engine,
):
    """The last required value's closing quote is verified like any token, so the model may
    write it fused with its decision about optional arguments (``",``) as it would alone."""
    engine = fresh_engine
    question = "Forecast: city Paris, days 3, units celsius."
    expected = _one_call(engine, "constrained", question, [FORECAST])
    assert "units" in expected.calls[0].arguments
    _prefill_prompt(engine, SMOLLM2, question, [FORECAST])
    result = WeaveStrategy(plan=DecodePlan({})).run(CallRequest(engine, SMOLLM2, [FORECAST]))
    assert result.error is None
    assert (result.calls, result.tokens) == (expected.calls, expected.tokens)
    assert result.provisional == ToolCall("get_weather", {"city": "Paris", "days": 3})
    assert engine.detokenize(result.tokens) == result.text


def _one_call(engine, strategy: str, question: str, tools: list[ToolSchema]):
    _prefill_prompt(engine, SMOLLM2, question, tools)
    return get_strategy(strategy).run(CallRequest(engine, SMOLLM2, tools))
