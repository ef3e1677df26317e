"""Constraint limits and broken grammars (RELIABILITY rows 16 and 24), on the real SmolLM2.

Row 16: a huge enum, ``maxItems: 1e5`` and 10k properties either compile under the named caps
(:data:`~weavehost.decode.grammar.MAX_GRAMMAR_BYTES`, :data:`~weavehost.decode.grammar.MAX_COMPILE_S`,
:data:`~weavehost.decode.grammar.MAX_PROPERTIES`) or are refused quickly, and the call is then decoded
loosely and validated afterwards, with a warning. Row 24: a broken grammar is a ConstraintError
before use; a call the model cannot finish, or whose loose output does not validate, fails
clearly and leaves sequence 0 holding only the prompt.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import logging
import time
from typing import Any

import jsonschema
import pytest

from weavehost.decode import CallRequest, CaseOutcome, ToolSchema, get_strategy, grammar, run_case
from weavehost.decode.constraint import constraints_for
from weavehost.decode.grammar import MAX_COMPILE_S, MAX_GRAMMAR_BYTES
from weavehost.errors import ConstraintError
from weavehost.formats import FORMATS

SMOLLM2 = FORMATS["smollm2"]
# Refusing a schema over the caps must be cheap: it happens while the grammar text is built.
REFUSE_S = 1.0
# Masking one token may cost at most this inside a grammar at the caps (a pass is ~7 ms).
MASK_S = 0.05


def _obj(props: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required}


HUGE_ENUM = _obj({"x": {"enum": [f"v{i}" for i in range(50_000)]}}, ["x"])
HUGE_MAX_ITEMS = _obj(
    {"x": {"type": "array", "items": {"type": "integer"}, "maxItems": 100_000}}, ["x"]
)
HUGE_MIN_ITEMS = _obj(
    {"x": {"type": "array", "items": {"type": "integer"}, "minItems": 100_000}}, ["x"]
)
MANY_PROPERTIES = _obj({f"p{i}": {"type": "string"} for i in range(10_000)}, [])
MANY_REQUIRED = _obj(
    {f"p{i}": {"type": "string"} for i in range(10_000)}, [f"p{i}" for i in range(10_000)]
)
MANY_NESTED = _obj({"o": _obj({f"p{i}": {"type": "string"} for i in range(10_000)}, [])}, ["o"])
ENUM_OVER_CAP = _obj({"x": {"enum": [f"value-{i}" for i in range(100_000)]}}, ["x"])


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize(
    "schema",
    [HUGE_ENUM, HUGE_MAX_ITEMS, HUGE_MIN_ITEMS],
    ids=["enum-50k", "maxItems-1e5", "minItems-1e5"],
)
def test_a_huge_enum_or_item_count_compiles_under_the_caps_and_masks_fast(engine, name, schema):
    factory = constraints_for(engine)
    started = time.perf_counter()
    lark = factory.grammars(FORMATS[name]).call([("f", schema)])
    constraint = factory.new(lark)
    compile_s = time.perf_counter() - started
    assert len(lark.encode()) <= MAX_GRAMMAR_BYTES
    assert compile_s < MAX_COMPILE_S, compile_s
    started = time.perf_counter()
    assert constraint.allowed().any() or constraint.forced()
    assert time.perf_counter() - started < MASK_S


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize(
    "schema",
    [MANY_PROPERTIES, MANY_REQUIRED, MANY_NESTED, ENUM_OVER_CAP],
    ids=[
        "10k-optional-properties",
        "10k-required-properties",
        "10k-nested-properties",
        "enum-over-the-byte-cap",
    ],
)
def test_a_schema_over_the_caps_is_refused_quickly_with_a_constraint_error(engine, name, schema):
    factory = constraints_for(engine)
    grammars = factory.grammars(FORMATS[name])
    started = time.perf_counter()
    with pytest.raises(ConstraintError, match="too many|too large|over the"):
        factory.new(grammars.call([("f", schema)]))
    assert time.perf_counter() - started < REFUSE_S


QUESTION = [{"role": "user", "content": "What's the weather in Paris for the next 3 days?"}]


def _assert_valid_or_failed_leaving_the_prompt(engine, outcome, tool: ToolSchema) -> None:
    result = outcome.result
    if result.calls:
        assert result.error is None
        [call] = result.calls
        jsonschema.validate(dict(call.arguments), dict(tool.parameters))
        assert engine.seq_len(0) == outcome.prompt_tokens + len(result.tokens)
    else:
        assert result.error
        assert engine.seq_len(0) == outcome.prompt_tokens
    assert all(engine.seq_len(seq) == 0 for seq in range(1, engine.n_seq_max))


@pytest.mark.parametrize("strategy", ["constrained", "jump_forward", "weave"])
def test_a_tool_too_large_to_constrain_is_decoded_loosely_and_validated_after_with_a_warning(
    fresh_engine, strategy, caplog
):
    props = {"city": {"type": "string"}, "days": {"type": "integer"}}
    props |= {f"extra_{i}": {"type": "string"} for i in range(10_000)}
    tool = ToolSchema(
        "get_weather", "Get the weather forecast for a city", _obj(props, ["city", "days"])
    )
    caplog.set_level(logging.WARNING, logger="weavehost.decode.guided")
    # The prompt names no tools (10k would not fit n_ctx); the strategy gets the huge one.
    fresh_engine.clear()
    segments = SMOLLM2.render_prompt(QUESTION, [], chat_template=None)
    prompt = fresh_engine.tokenize_segments(segments)
    fresh_engine.prefill(0, prompt)
    result = get_strategy(strategy).run(CallRequest(fresh_engine, SMOLLM2, [tool], max_tokens=48))
    assert any("no constraint for get_weather" in r.getMessage() for r in caplog.records)
    outcome = CaseOutcome(result=result, prompt_tokens=len(prompt), prompt_prefill_s=0.0)
    _assert_valid_or_failed_leaving_the_prompt(fresh_engine, outcome, tool)


@pytest.mark.parametrize("cap", [200, 20], ids=["loose-grammar", "no-grammar"])
def test_a_loose_call_that_does_not_validate_is_a_clear_failure_leaving_only_the_prompt(
    fresh_engine, monkeypatch, caplog, cap
):
    """The model writes days=3, which the schema forbids; with the constraint out of reach
    (the byte cap lowered), the loose or free call is caught by validation, not passed on."""
    monkeypatch.setattr(grammar, "MAX_GRAMMAR_BYTES", cap)
    strict = ToolSchema(
        "get_weather",
        "Get the weather forecast for a city",
        _obj(
            {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 100}},
            ["city", "days"],
        ),
    )
    caplog.set_level(logging.WARNING, logger="weavehost.decode.guided")
    outcome = run_case(fresh_engine, SMOLLM2, "jump_forward", QUESTION, [strict], max_tokens=48)
    result = outcome.result
    assert any("validated after" in r.getMessage() for r in caplog.records)
    _assert_valid_or_failed_leaving_the_prompt(fresh_engine, outcome, strict)
    assert result.calls == [] and result.error


@pytest.mark.parametrize(
    "lark",
    [
        "root ::= ",
        'root ::= "a" | ',
        "start: undefined_rule\n",
        "start: (\n",
        "",
        'start: %json {"type": 5}\n',
    ],
    ids=[
        "gbnf-empty-root",
        "gbnf-dangling-alternative",
        "undefined-rule",
        "unbalanced",
        "empty",
        "bad-json-schema",
    ],
)
def test_an_invalid_grammar_is_refused_with_a_constraint_error_before_use(engine, lark):
    with pytest.raises(ConstraintError, match="could not build a constraint"):
        constraints_for(engine).new(lark)


UNSATISFIABLE = [
    _obj({"x": {"type": "string", "minLength": 5, "maxLength": 2}}, ["x"]),
    _obj({"x": {"type": "integer", "minimum": 5, "maximum": 2}}, ["x"]),
    _obj({"x": {"not": {}}}, ["x"]),
    _obj({"x": {"type": "string", "pattern": "^[0-9a-f]{600}$"}}, ["x"]),
]


@pytest.mark.parametrize("strategy", ["constrained", "jump_forward", "weave"])
@pytest.mark.parametrize(
    "schema",
    UNSATISFIABLE,
    ids=["minLength-over-maxLength", "empty-range", "not-anything", "unreachable-pattern"],
)
def test_a_call_no_token_sequence_can_finish_in_budget_is_a_clear_failure_leaving_only_the_prompt(
    fresh_engine, strategy, schema
):
    tool = ToolSchema("f", "Impossible tool", schema)
    outcome = run_case(fresh_engine, SMOLLM2, strategy, QUESTION, [tool], max_tokens=32)
    result = outcome.result
    assert result.calls == []
    assert result.error
    assert fresh_engine.seq_len(0) == outcome.prompt_tokens
    assert all(fresh_engine.seq_len(seq) == 0 for seq in range(1, fresh_engine.n_seq_max))
