"""Fuzz targets for the schema → skeleton → constraint pipeline and for argument validation.

Each target runs a small fixed budget of examples in CI and ``FUZZ_FACTOR`` times that under
``pytest --fuzz`` (see ``tests/conftest.py``); the summary prints how many inputs each ran.

- Any schema, well-formed or not, either becomes a tool whose prompt, skeleton and every
  constraint build in every format, or is refused with a weavehost error; no other exception,
  and each example within a named time bound (RELIABILITY rows 14, 16, 17, 24).
- Valid arguments are accepted and mutated ones refused before anything reaches a server
  (row 19, broader than ``tests/test_executor.py``'s fixed schema: random schemas, ``$ref``,
  BFCL spellings, and an independent check of normalisation against jsonschema itself).
- A valid call round-trips through every format, and the call constraint accepts the call as
  the format writes it.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from referencing import Registry

from tests.conftest import FuzzLog, fuzz_examples
from weavehost.config import HostConfig
from weavehost.decode.base import read_calls
from weavehost.decode.call_tokens import tokenize_call_text
from weavehost.decode.constraint import ConstraintFactory
from weavehost.decode.grammar import ordered_parameters
from weavehost.errors import (
    ArgumentValidationError,
    ConstraintError,
    FormatError,
    WeavehostError,
)
from weavehost.formats import FORMATS, ToolCall, tool_to_openai
from weavehost.formats.functiongemma import writable_key
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import Executor

# A hang guard on one example (schema normalisation, four prompts, every constraint), not a
# benchmark: a healthy example takes ~70 ms on 2 cores (3 s for the 45 of the schema target),
# so this is reached only by a grammar that compiles or masks without bound, or by a hang,
# never by a busy machine.
FUZZ_EXAMPLE_S = 30.0
SLOW = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]


class ExampleTimeout(Exception):
    pass


@contextlib.contextmanager
def time_bound(seconds: float) -> Iterator[None]:
    """Fail an example that runs past ``seconds``: interrupted if it is stuck in Python, and
    checked on return if it was stuck in native code (which signals cannot interrupt)."""

    def expire(signum: int, frame: object) -> None:
        raise ExampleTimeout(f"one example ran past {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    started = time.perf_counter()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert time.perf_counter() - started < seconds


# --------------------------------------------------------------------------- random schemas

ODD_KEYS = st.sampled_from(
    ['"', "\\", 'a"b', "{key}", "{name}", "</tool_call>", "<escape>", "\x00", "\n", "é",
     "🙂", "", " ", "a:b", "}", ",", "$ref", "<|im_end|>", "a\u2028b"]
)  # fmt: skip
KEYS = st.one_of(
    st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True), ODD_KEYS, st.text(max_size=6)
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**20), 10**20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
TYPES = st.sampled_from(
    ["string", "integer", "number", "boolean", "null", "array", "object", "dict", "float",
     "int", "any", "tuple", "list", "bool", "str", 5, None, ["string", "null"], [], "foo",
     {"a": 1}, ["any", "int"], "String "]
)  # fmt: skip
SIZES = st.sampled_from([0, 1, 2, 3, 100_000, 10**18, -1, 2.5, "3", None])
PATTERNS = st.sampled_from(
    ["^[a-z]+$", "(", "[a-", "\\d{3}", "a{1000}", ".*", "(?=a)", "\\p{L}", ""]
)
REFS = st.sampled_from(
    ["#", "#/$defs/a", "#/$defs/b", "#/$defs/loop", "#/properties", "#/nope", "#anchor",
     "http://127.0.0.1:9/schema.json", "other.json#/a", "#/$defs/a/../b", "#/definitions/c"]
)  # fmt: skip
HUGE_ENUM = [f"v{i}" for i in range(3000)]  # ~24 KB: under the catalog's 64 KB schema cap


def _leaves() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.fixed_dictionaries({"type": TYPES}),
        st.fixed_dictionaries({"enum": st.lists(SCALARS, max_size=5)}),
        st.just({"enum": HUGE_ENUM}),
        st.just({"enum": []}),
        st.fixed_dictionaries({"const": SCALARS}),
        st.fixed_dictionaries(
            {"type": st.just("string")},
            optional={
                "minLength": SIZES,
                "maxLength": SIZES,
                "pattern": PATTERNS,
                "format": st.sampled_from(["email", "date-time", "uri", "nonsense"]),
            },
        ),  # fmt: skip
        st.fixed_dictionaries(
            {"type": st.sampled_from(["integer", "number"])},
            optional={
                "minimum": SCALARS,
                "maximum": SCALARS,
                "exclusiveMinimum": SCALARS,
                "multipleOf": st.sampled_from([0, -1, 0.1, 3, 1e-300]),
            },
        ),  # fmt: skip
        st.fixed_dictionaries({"$ref": REFS}),
        st.booleans(),
        st.sampled_from(
            [
                5,
                "x",
                [],
                None,
                {"type": 5},
                {"$ref": 5},
                {"required": "x"},
                {"properties": []},
                {"$schema": "http://example.com/weird"},
                {"$dynamicRef": "#a"},
            ]
        ),  # fmt: skip
    )


def _extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    props = st.dictionaries(KEYS, children, max_size=4)
    return st.one_of(
        st.builds(
            lambda p, req, extra, add: {
                "type": "object",
                "properties": p,
                "required": [k for k in p if k in req] + extra,
                **({"additionalProperties": add} if add is not None else {}),
            },
            props,
            st.sets(KEYS, max_size=4),
            st.lists(KEYS, max_size=1),
            st.one_of(st.none(), st.booleans(), children),
        ),  # fmt: skip
        st.fixed_dictionaries(
            {"type": st.sampled_from(["array", "list", "tuple"]), "items": children},
            optional={"minItems": SIZES, "maxItems": SIZES, "uniqueItems": st.booleans()},
        ),
        st.fixed_dictionaries({"prefixItems": st.lists(children, max_size=3)}),
        st.builds(
            lambda key, items: {key: items},
            st.sampled_from(["anyOf", "oneOf", "allOf"]),
            st.lists(children, max_size=3),
        ),  # fmt: skip
        st.fixed_dictionaries({"not": children}),
        st.fixed_dictionaries({"if": children, "then": children, "else": children}),
        st.fixed_dictionaries({"type": st.just("object"), "additionalProperties": children}),
    )


SUBSCHEMAS = st.recursive(_leaves(), _extend, max_leaves=12)
DEFS = st.fixed_dictionaries(
    {},
    optional={
        "a": SUBSCHEMAS,
        "b": st.one_of(SUBSCHEMAS, st.just({"$ref": "#/$defs/a"})),
        "loop": st.sampled_from([{"$ref": "#/$defs/loop"}, {"allOf": [{"$ref": "#"}]},
                                 {"type": "array", "items": {"$ref": "#/$defs/loop"}},
                                 {"anyOf": [{"$ref": "#/$defs/a"}, {"$ref": "#/$defs/loop"}]}]),
    },
)  # fmt: skip
TOOL_SCHEMAS = st.one_of(
    st.builds(
        lambda props, req, defs, add: {
            "type": "object",
            "properties": props,
            "required": [k for k in props if k in req],
            **({"$defs": defs} if defs else {}),
            **({"additionalProperties": add} if add is not None else {}),
        },
        st.dictionaries(KEYS, SUBSCHEMAS, max_size=5),
        st.sets(KEYS, max_size=5),
        DEFS,
        st.one_of(st.none(), st.booleans()),
    ),  # fmt: skip
    SUBSCHEMAS,
    st.builds(
        lambda s: {"$schema": s, "type": "object"},
        st.sampled_from(
            [
                "https://json-schema.org/draft/2020-12/schema",
                "http://json-schema.org/draft-07/schema#",
                "urn:weird",
                5,
            ]
        ),
    ),  # fmt: skip
)

MESSAGES = [{"role": "user", "content": "Please call the tool."}]


def _build_everything(engine: Any, name: str, parameters: dict[str, Any]) -> int:
    """Render the prompt and every constraint for ``parameters`` in every format; returns how
    many constraints were built. Raises only weavehost errors."""
    factory = ConstraintFactory(engine)
    built = 0
    for fmt in FORMATS.values():
        segments = fmt.render_prompt(
            MESSAGES, [tool_to_openai(name, "fuzzed", parameters)], chat_template=None
        )
        engine.tokenize_segments(segments)
        grammars = factory.grammars(fmt)
        layout = fmt.layout
        schema = ordered_parameters(parameters)
        props = schema["properties"]
        required = [k for k in schema.get("required", []) if k in props]
        grammars_to_build = [grammars.call([(name, parameters)])]
        for key in required[:3]:
            lead = layout.head_for(name) + layout.prefix_for(key, first=True)
            grammars_to_build.append(grammars.value(lead, props[key]))
        for lark in grammars_to_build:
            constraint = factory.new(lark)
            # A built constraint is usable: it allows a token, or it is already complete.
            assert constraint.allowed().any() or constraint.accepting or constraint.forced()
            built += 1
    return built


@given(schema=TOOL_SCHEMAS)
@settings(max_examples=fuzz_examples(40), suppress_health_check=SLOW)
def test_any_schema_becomes_a_usable_tool_in_every_format_or_a_clear_weavehost_error(
    engine: Any, fuzz_log: FuzzLog, schema: Any
) -> None:
    with time_bound(FUZZ_EXAMPLE_S):
        catalog = Catalog.from_listings({"s": [{"name": "t", "inputSchema": schema}]})
        if "t" not in catalog:
            [omitted] = catalog.omitted
            assert omitted.reason.startswith("tool 't' of server 's'")
            fuzz_log.record("schemas", "refused by the catalog")
            return
        parameters = catalog.get("t").schema_dict()
        try:
            _build_everything(engine, "t", parameters)
        except WeavehostError as exc:
            fuzz_log.record("schemas", type(exc).__name__)
            assert str(exc)
            return
        fuzz_log.record("schemas", "constraints built")


# --------------------------------------------------------------------------- schema + instances


@dataclass
class Node:
    """A sub-schema with generators of values it accepts and values it refuses."""

    schema: Any
    valid: Callable[[Any], Any]  # draw -> a valid value
    invalid: Callable[[Any], Any] | None  # draw -> a value the schema refuses, or None
    bfcl: bool = False  # written with BFCL spellings (the raw schema is not plain JSON Schema)


WRONG_FOR = {
    "string": st.one_of(
        st.integers(), st.none(), st.booleans(), st.lists(st.integers(), max_size=2)
    ),
    "integer": st.one_of(st.text(max_size=3), st.none(), st.booleans(), st.just(0.5), st.just([1])),
    "number": st.one_of(st.text(max_size=3), st.none(), st.booleans(), st.just({"n": 1})),
    "boolean": st.one_of(st.integers(0, 1), st.sampled_from(["true", "false", None, []])),
    "null": st.one_of(st.integers(), st.just(""), st.booleans(), st.just({})),
    "array": st.one_of(st.text(max_size=3), st.just({}), st.integers()),
    "object": st.one_of(st.just([]), st.text(max_size=3), st.integers(), st.none()),
}
SPELLINGS = {"string": ["str"], "integer": ["int"], "number": ["float"], "boolean": ["bool"],
             "array": ["list"], "object": ["dict"], "null": []}  # fmt: skip
PLAIN_KEYS = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True)
ANY_KEYS = st.one_of(PLAIN_KEYS, st.text(min_size=1, max_size=5))


@st.composite
def nodes(draw: Any, depth: int = 0, keys: st.SearchStrategy[str] = PLAIN_KEYS) -> Node:
    kinds = ["string", "integer", "number", "boolean", "null", "enum"]
    if depth < 3:
        kinds += ["array", "object", "object", "anyOf"]
    kind = draw(st.sampled_from(kinds))
    if kind == "enum":
        values = draw(
            st.lists(
                st.one_of(st.text(max_size=6), st.integers(-5, 5)),
                min_size=1,
                max_size=6,
                unique=True,
            )
        )
        return Node(
            {"enum": values},
            lambda d: d(st.sampled_from(values)),
            lambda d: d(
                st.one_of(st.text(max_size=6), st.integers(-5, 5)).filter(lambda v: v not in values)
            ),
        )
    if kind == "anyOf":
        a, b = draw(nodes(depth + 1, keys)), draw(nodes(depth + 1, keys))
        return Node(
            {"anyOf": [a.schema, b.schema]},
            lambda d: d(st.sampled_from([a, b])).valid(d),
            None,
            a.bfcl or b.bfcl,
        )
    bfcl = draw(st.booleans()) and bool(SPELLINGS[kind])
    schema: dict[str, Any] = {"type": SPELLINGS[kind][0] if bfcl else kind}
    wrong = WRONG_FOR[kind]
    if kind == "string":
        low, high = draw(st.integers(0, 3)), draw(st.one_of(st.none(), st.integers(3, 8)))
        schema["minLength"] = low
        if high is not None:
            schema["maxLength"] = high
        alphabet = st.characters(codec="utf-8", exclude_categories=["Cs"])
        valid = st.text(alphabet, min_size=low, max_size=high if high is not None else 10)
        invalid = wrong | (
            st.text(alphabet, min_size=high + 1, max_size=high + 3) if high is not None else wrong
        )
        if low:
            invalid = invalid | st.text(alphabet, max_size=low - 1)
        return Node(schema, lambda d: d(valid), lambda d: d(invalid), bfcl)
    if kind in ("integer", "number"):
        low = draw(st.integers(-1000, 1000))
        # llguidance writes a one-point number range [0, 0] as "0" only, not "0.0", and a
        # bounded number without an exponent (8.7e-134 in [0, 1] is refused): stricter grammars,
        # not wrong ones, so number ranges here have room and floats are drawn as decimals.
        high = low + draw(st.integers(0 if kind == "integer" else 1, 1000))
        schema.update(minimum=low, maximum=high)
        decimals = st.floats(low, high, allow_nan=False).filter(lambda x: "e" not in repr(x))
        valid = st.integers(low, high) if kind == "integer" else decimals | st.integers(low, high)
        return Node(
            schema,
            lambda d: d(valid),
            lambda d: d(wrong | st.sampled_from([low - 1, high + 1])),
            bfcl,
        )
    if kind == "boolean":
        return Node(schema, lambda d: d(st.booleans()), lambda d: d(wrong), bfcl)
    if kind == "null":
        return Node(schema, lambda d: None, lambda d: d(wrong), bfcl)
    if kind == "array":
        item = draw(nodes(depth + 1, keys))
        most = draw(st.integers(0, 3))
        schema.update(items=item.schema, maxItems=most)

        def valid_list(d: Any) -> list[Any]:
            return [item.valid(d) for _ in range(d(st.integers(0, most)))]

        def invalid_list(d: Any) -> Any:
            choices = ["long", "type"] + (["item"] if item.invalid else [])
            how = d(st.sampled_from(choices))
            if how == "long":
                return [item.valid(d) for _ in range(most + 1)]
            if how == "type":
                return d(wrong)
            good = valid_list(d) or [item.valid(d)]
            good[d(st.integers(0, len(good) - 1))] = item.invalid(d)  # type: ignore[misc]
            return good

        return Node(schema, valid_list, invalid_list, bfcl or item.bfcl)
    # object
    props = draw(st.dictionaries(keys, nodes(depth + 1, keys), max_size=4))
    required = [k for k in props if draw(st.booleans())]
    closed = draw(st.booleans())
    schema.update(properties={k: n.schema for k, n in props.items()}, required=required)
    if closed:
        schema["additionalProperties"] = False
    return Node(schema, lambda d: _valid_object(d, props, required), lambda d: _invalid_object(d, props, required, closed, wrong),
                bfcl or any(n.bfcl for n in props.values()))  # fmt: skip


def _valid_object(draw: Any, props: dict[str, Node], required: list[str]) -> dict[str, Any]:
    return {k: n.valid(draw) for k, n in props.items() if k in required or draw(st.booleans())}


def _invalid_object(
    draw: Any, props: dict[str, Node], required: list[str], closed: bool, wrong: Any
) -> Any:
    ways = ["type"] + (["drop"] if required else []) + (["extra"] if closed else [])
    ways += ["value" for k, n in props.items() if n.invalid]
    how = draw(st.sampled_from(ways))
    value = _valid_object(draw, props, required)
    if how == "type":
        return draw(wrong)
    if how == "drop":
        del value[draw(st.sampled_from(required))]
    elif how == "extra":
        value[draw(st.text(min_size=1, max_size=5).filter(lambda k: k not in props))] = 1
    else:
        key = draw(st.sampled_from([k for k, n in props.items() if n.invalid]))
        value[key] = props[key].invalid(draw)  # type: ignore[misc]
    return value


@st.composite
def tools(draw: Any, keys: st.SearchStrategy[str] = PLAIN_KEYS) -> tuple[dict[str, Any], Node]:
    """A tool's input schema (an object, sometimes with a property behind a local $ref)."""
    top = draw(
        nodes(0, keys).filter(
            lambda n: isinstance(n.schema, dict) and n.schema.get("type") in ("object", "dict")
        )
    )
    schema = dict(top.schema)
    props = dict(schema.get("properties", {}))
    if props and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(props)))
        schema["$defs"] = {"shared": props[key]}
        props[key] = {"$ref": "#/$defs/shared"}
        schema["properties"] = props
    return schema, top


@dataclass
class Recorder:
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Any = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - mirrors ServerPool.call_tool
    ) -> types.CallToolResult:
        self.calls.append((server, tool, dict(arguments or {})))
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])


@given(tool=tools(ANY_KEYS), data=st.data())
@settings(max_examples=fuzz_examples(60), suppress_health_check=SLOW)
def test_valid_arguments_are_accepted_and_mutated_ones_never_reach_the_server(
    fuzz_log: FuzzLog, tool: tuple[dict[str, Any], Node], data: Any
) -> None:
    schema, node = tool
    config = HostConfig(approval="always")
    catalog = Catalog.from_listings({"s": [{"name": "t", "inputSchema": schema}]}, config)
    assert "t" in catalog, catalog.omitted
    good = node.valid(data.draw)
    catalog.validate_arguments("t", good)
    if not node.bfcl:
        # Normalisation keeps the meaning: jsonschema on the raw schema agrees.
        assert Draft202012Validator(schema, registry=Registry()).is_valid(good)
    recorder = Recorder()
    executor = Executor(recorder, catalog, config)
    assert anyio.run(executor.run, "t", good).status == "ok"
    assert len(recorder.calls) == 1
    fuzz_log.record("arguments", "valid accepted")

    assert node.invalid is not None
    bad = node.invalid(data.draw)
    with pytest.raises(ArgumentValidationError):
        catalog.validate_arguments("t", bad)
    if not node.bfcl:
        assert not Draft202012Validator(schema, registry=Registry()).is_valid(bad)
    result = anyio.run(executor.run, "t", bad)
    assert result.status == "invalid_arguments"
    assert len(recorder.calls) == 1  # nothing more reached the server
    fuzz_log.record("arguments", "mutated refused")


# --------------------------------------------------------------------------- round trip


def _call_parts(fmt: Any, call: ToolCall) -> list[tuple[str, bool]]:
    """The call as (text, fixed) parts: the skeleton fixed, values plain (FunctionGemma's
    ``<escape>`` markers, which are special tokens, fixed too)."""
    layout = fmt.layout
    parts = [(layout.head_for(call.name), True)]
    for index, (key, value) in enumerate(call.arguments.items()):
        parts.append((layout.prefix_for(key, first=index == 0), True))
        encoded = fmt.encode_value(value)
        if fmt.name == "functiongemma":
            pieces = encoded.split("<escape>")
            for i, piece in enumerate(pieces):
                if i:
                    parts.append(("<escape>", True))
                parts.append((piece, False))
        else:
            parts.append((encoded, False))
    parts.append((layout.tail, True))
    return [(text, fixed) for text, fixed in parts if text]


def _schema_keys_ok(schema: Any) -> bool:
    """Whether every property key in ``schema`` is one FunctionGemma can write."""
    if isinstance(schema, dict):
        keys = schema.get("properties", {})
        if isinstance(keys, dict) and not all(writable_key(k) for k in keys):
            return False
        return all(_schema_keys_ok(v) for v in schema.values())
    if isinstance(schema, list):
        return all(_schema_keys_ok(v) for v in schema)
    return True


def _gemma_keys_ok(value: Any) -> bool:
    if isinstance(value, dict):
        return all(writable_key(k) and _gemma_keys_ok(v) for k, v in value.items())
    if isinstance(value, list):
        return all(_gemma_keys_ok(v) for v in value)
    return True


def _writable(fmt: Any, value: Any) -> bool:
    """Whether ``fmt`` can write ``value`` at all (FunctionGemma strings hold no ``<``, its
    keys are ``[A-Za-z0-9_.-]+``)."""
    if fmt.name != "functiongemma":
        return True
    if isinstance(value, str):
        return "<" not in value
    if isinstance(value, dict):
        return all(writable_key(k) and _writable(fmt, v) for k, v in value.items())
    if isinstance(value, list):
        return all(_writable(fmt, v) for v in value)
    return True


@given(tool=tools(ANY_KEYS), data=st.data())
@settings(max_examples=fuzz_examples(30), suppress_health_check=SLOW)
def test_a_valid_call_round_trips_through_every_format_and_its_constraint_accepts_it(
    engine: Any, fuzz_log: FuzzLog, tool: tuple[dict[str, Any], Node], data: Any
) -> None:
    schema, node = tool
    catalog = Catalog.from_listings({"s": [{"name": "t", "inputSchema": schema}]})
    parameters = catalog.get("t").schema_dict()
    arguments = node.valid(data.draw)
    order = list(ordered_parameters(parameters)["properties"])
    call = ToolCall("t", {k: arguments[k] for k in order if k in arguments})
    factory = ConstraintFactory(engine)
    with time_bound(FUZZ_EXAMPLE_S):
        for fmt in FORMATS.values():
            if fmt.name == "functiongemma" and not _schema_keys_ok(parameters):
                # A key FunctionGemma cannot write is refused, never written broken.
                with pytest.raises(ConstraintError):
                    factory.grammars(fmt).call([("t", parameters)])
                if not _gemma_keys_ok(dict(call.arguments)):
                    with pytest.raises(FormatError):
                        fmt.render_call(call)
                continue
            if not _writable(fmt, dict(call.arguments)):
                continue
            text = fmt.render_call(call)
            assert fmt.parse_calls(text) == [call]
            assert read_calls(fmt, "Sure. " + text) == ([call], None)
            tokens = tokenize_call_text(engine, _call_parts(fmt, call))
            if engine.detokenize(tokens) != text:
                # llama.cpp's tokenizer drops bytes of some unassigned code points (U+40000
                # becomes three lone continuation bytes): no model could write this call.
                fuzz_log.record("round trip", f"{fmt.name}: text llama.cpp cannot tokenize")
                continue
            try:
                constraint = factory.new(factory.grammars(fmt).call([("t", parameters)]))
            except ConstraintError as exc:
                # Decoded loosely and validated after (test_constraint_limits.py).
                fuzz_log.record("round trip", f"{fmt.name}: not constrained ({exc})")
                continue
            for token in tokens:
                assert constraint.consume(token), (fmt.name, text, engine.token_bytes(token))
            assert constraint.accepting or constraint.stopped, (fmt.name, text)
    fuzz_log.record("round trip", "calls")
