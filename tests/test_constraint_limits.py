"""Constraint limits and broken grammars (RELIABILITY rows 16 and 24), on the real SmolLM2.

Row 16: a huge enum, ``maxItems: 1e5`` and 10k properties either compile under the named caps
(:data:`~weavehost.decode.grammar.MAX_GRAMMAR_BYTES`, :data:`~weavehost.decode.grammar.MAX_PROPERTIES`)
into a grammar whose size is a count of the schema's members, or are refused while the grammar
is built, and the call is then decoded
loosely and validated afterwards, with a warning. Row 24: a broken grammar is a ConstraintError
before use; a call the model cannot finish, or whose loose output does not validate, fails
clearly and leaves sequence 0 holding only the prompt.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import jsonschema
import pytest

from weavehost.decode import CallRequest, CaseOutcome, ToolSchema, get_strategy, grammar, run_case
from weavehost.decode.constraint import ConstraintFactory
from weavehost.decode.grammar import MAX_GRAMMAR_BYTES
from weavehost.errors import ConstraintError
from weavehost.formats import FORMATS

SMOLLM2 = FORMATS["smollm2"]
# Hang guards, not benchmarks. A healthy run on 2 busy cores compiles these grammars in
# 0.13-0.21 s, masks a token inside them in ~0.3 ms, and refuses a schema over the caps in
# ~0.2 s (docs/decoder.md); these deadlines are two to three orders of magnitude above that,
# so only a hang, an unbounded compile or a mask that scans the grammar per member reaches
# them. What the caps bound is checked as a count: the grammar's bytes.
COMPILE_DEADLINE_S = 30.0
MASK_DEADLINE_S = 1.0
REFUSE_DEADLINE_S = 30.0
# The most grammar one enum member may cost: a member is written once, in one lexeme
# ('"v123", ' in JSON, '"v123" | ' in FunctionGemma: ~10 bytes); a rule per member or a
# grammar that repeats the enum would pass it.
ENUM_BYTES_PER_MEMBER = 16


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


def _timed(action: Callable[[], object]) -> tuple[object, float]:
    started = time.perf_counter()
    result = action()
    return result, time.perf_counter() - started


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize(
    "schema",
    [HUGE_ENUM, HUGE_MAX_ITEMS, HUGE_MIN_ITEMS],
    ids=["enum-50k", "maxItems-1e5", "minItems-1e5"],
)
def test_a_huge_enum_or_item_count_compiles_under_the_caps_and_masks_fast(engine, name, schema):
    factory = ConstraintFactory(engine)
    lark = factory.grammars(FORMATS[name]).call([("f", schema)])
    constraint, compile_s = _timed(lambda: factory.new(lark))
    assert compile_s < COMPILE_DEADLINE_S, compile_s
    assert len(lark.encode()) <= MAX_GRAMMAR_BYTES
    if schema is HUGE_ENUM:
        assert len(lark.encode()) <= ENUM_BYTES_PER_MEMBER * 50_000
    else:
        # An item count is a number in the grammar, not unrolled items: 1e5 costs what 2 does.
        small = _obj({"x": {**schema["properties"]["x"], "maxItems": 2, "minItems": 2}}, ["x"])
        assert len(lark) <= len(factory.grammars(FORMATS[name]).call([("f", small)])) + 10
    # The costly mask is inside the value, after the forced head and key, where the enum's
    # lexeme or the array's items are live.
    for token in constraint.forced():
        assert constraint.consume(token)
    allowed, mask_s = _timed(constraint.allowed)
    assert allowed.any() and not constraint.failed
    assert mask_s < MASK_DEADLINE_S, mask_s


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
    grammars = ConstraintFactory(engine).grammars(FORMATS[name])
    started = time.perf_counter()
    # Refused while the grammar text is built: nothing over the caps is built whole or compiled.
    with pytest.raises(ConstraintError, match="too many|too large"):
        grammars.call([("f", schema)])
    assert time.perf_counter() - started < REFUSE_DEADLINE_S


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
        ConstraintFactory(engine).new(lark)


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
