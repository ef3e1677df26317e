"""Arguments for ``weavehost check``: valid and invalid values generated from a tool's schema.

Stage: testing (under :mod:`weavehost.testing.check`, which sends what this module makes).

A small generator of our own rather than ``hypothesis``: ``hypothesis-jsonschema`` covers
drafts 4, 6 and 7 but not 2020-12 (``prefixItems``, the 2020-12 ``items``), and hypothesis's
engine is built to run inside a test (``.example()`` warns outside one, and shrinking would call
a crashed server again and again). A seeded :class:`random.Random` gives a short, reproducible
list instead (``--seed``), and ``tests/test_testing_check.py`` holds the generator to its
invariants with hypothesis.

Invariants:

* Every value :func:`valid_arguments` returns validates against the schema (Draft 2020-12, with
  format assertions, an empty ``referencing.Registry``: nothing is fetched); every value
  :func:`invalid_arguments` returns fails it (without format assertions, so a value is never
  "invalid" only by a format a server may not check), and comes with the reason it is invalid.
* Everything is bounded: at most ``count`` values of each kind, at most :data:`MAX_TRIES`
  candidates tried, nesting at most :data:`MAX_DEPTH` deep; a schema it cannot satisfy (an odd
  ``pattern``, ``false``) yields fewer values, never an exception.
* Keywords understood: ``type`` (a list too), ``enum``, ``const``, ``default``, ``examples``,
  ``properties``, ``required``, ``additionalProperties``, ``items``, ``prefixItems``,
  ``minItems``/``maxItems``, ``minimum``/``maximum`` and the exclusive pair, ``multipleOf``,
  ``minLength``/``maxLength``, common ``format`` values, ``anyOf``/``oneOf`` (one branch) and
  ``allOf`` (merged); the rest is left to the final validation, which drops what misses.
  The schema should be normalised first (:func:`~weavehost.mcp.schemas.normalize_schema`:
  local ``$ref`` inlined).
"""

from __future__ import annotations

import copy
import json
import math
import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator
from referencing import Registry

__all__ = ["MAX_DEPTH", "MAX_TRIES", "InvalidArguments", "invalid_arguments", "valid_arguments"]

MAX_TRIES = 64  # candidates tried for each kind before giving up on more
MAX_DEPTH = 8  # nesting the generator descends; deeper, only what is required is made
MAX_EXTRA_ITEMS = 3  # items past minItems in a generated array
_WORDS = ("Oslo", "hello", "São Paulo", "test value", "x", "Zürich 🌦", "42", "a" * 40)
_FORMATS = {
    "date": "2024-02-29",
    "date-time": "2024-02-29T12:30:00+00:00",
    "time": "12:30:00+00:00",
    "email": "someone@example.com",
    "uri": "https://example.com/path",
    "uri-reference": "/path",
    "url": "https://example.com/path",
    "uuid": "123e4567-e89b-12d3-a456-426614174000",
    "ipv4": "192.0.2.1",
    "ipv6": "2001:db8::1",
    "hostname": "example.com",
}
_WRONG_TYPES: tuple[Any, ...] = (12345, "not a number", True, None, [1, 2], {"a": 1}, 1.5)


class _Unsatisfiable(Exception):
    """This branch of the schema cannot be generated (the caller tries another)."""


@dataclass(frozen=True, slots=True)
class InvalidArguments:
    """Arguments the schema rejects, and why (``"without required 'city'"``)."""

    arguments: dict[str, Any]
    reason: str


def _validator(schema: Mapping[str, Any], *, formats: bool) -> Draft202012Validator:
    checker = Draft202012Validator.FORMAT_CHECKER if formats else None
    return Draft202012Validator(schema, registry=Registry(), format_checker=checker)


def _key(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


# --------------------------------------------------------------------------- valid values


def valid_arguments(schema: Mapping[str, Any], count: int, seed: int = 0) -> list[dict[str, Any]]:
    """Up to ``count`` distinct argument objects the schema accepts: the smallest (required
    properties only), the fullest (every property), then random ones."""
    validator = _validator(schema, formats=True)
    rng = random.Random(seed)
    found: dict[str, dict[str, Any]] = {}
    modes = ["minimal", "full"] + ["random"] * MAX_TRIES
    for mode in modes[:MAX_TRIES]:
        if len(found) >= count:
            break
        try:
            value = _value(schema, rng, 0, mode)
        except _Unsatisfiable:
            continue
        if isinstance(value, dict) and validator.is_valid(value):
            found.setdefault(_key(value), value)
    return list(found.values())[:count]


def _merged(schema: Mapping[str, Any], rng: random.Random) -> dict[str, Any]:
    """``schema`` with ``allOf`` merged in and one ``anyOf``/``oneOf`` branch chosen."""
    out = {k: v for k, v in schema.items() if k not in ("allOf", "anyOf", "oneOf")}
    parts = [p for p in schema.get("allOf", []) if isinstance(p, dict)]
    for key in ("anyOf", "oneOf"):
        branches = [b for b in schema.get(key, []) if isinstance(b, dict)]
        if branches:
            parts.append(rng.choice(branches))
    for part in parts:
        part = _merged(part, rng)
        for key, value in part.items():
            if key == "properties" and isinstance(out.get(key), dict):
                out[key] = {**out[key], **value}
            elif key == "required" and isinstance(out.get(key), list):
                out[key] = sorted({*out[key], *value})
            else:
                out.setdefault(key, value)
    return out


def _type_of(schema: Mapping[str, Any], rng: random.Random) -> str:
    kind = schema.get("type")
    if isinstance(kind, list) and kind:
        return str(rng.choice(kind))
    if isinstance(kind, str):
        return kind
    if "properties" in schema or "required" in schema:
        return "object"
    if "items" in schema or "prefixItems" in schema:
        return "array"
    if any(k in schema for k in ("minLength", "maxLength", "pattern", "format")):
        return "string"
    if any(k in schema for k in ("minimum", "maximum", "multipleOf")):
        return "number"
    return rng.choice(("string", "integer", "boolean"))


def _value(schema: Any, rng: random.Random, depth: int, mode: str) -> Any:
    if schema is True:
        return rng.choice(_WORDS)
    if not isinstance(schema, Mapping):
        raise _Unsatisfiable
    schema = _merged(schema, rng)
    if "const" in schema:
        return copy.deepcopy(schema["const"])
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return copy.deepcopy(rng.choice(schema["enum"]))
    examples = schema.get("examples")
    samples = list(examples) if isinstance(examples, list) else []
    if "default" in schema:
        samples.append(schema["default"])
    if samples and mode == "random" and rng.random() < 0.3:
        return copy.deepcopy(rng.choice(samples))
    kind = _type_of(schema, rng)
    if kind == "object":
        return _object(schema, rng, depth, mode)
    if kind == "array":
        return _array(schema, rng, depth, mode)
    if kind == "string":
        return _string(schema, rng, mode)
    if kind in ("integer", "number"):
        return _number(schema, rng, mode, integer=kind == "integer")
    if kind == "boolean":
        return rng.random() < 0.5 if mode == "random" else True
    if kind == "null":
        return None
    raise _Unsatisfiable


def _object(schema: Mapping[str, Any], rng: random.Random, depth: int, mode: str) -> dict:
    properties = schema.get("properties") or {}
    required = [r for r in schema.get("required", []) if isinstance(r, str)]
    if mode == "minimal" or depth >= MAX_DEPTH:
        names = list(required)
    elif mode == "full":
        names = list(dict.fromkeys([*required, *properties]))
    else:
        names = list(dict.fromkeys([*required, *(p for p in properties if rng.random() < 0.6)]))
    out: dict[str, Any] = {}
    for name in names:
        sub = properties.get(name, schema.get("additionalProperties", True))
        if sub is False:
            sub = True  # required but not described: anything
        out[name] = _value(sub if sub is not None else True, rng, depth + 1, mode)
    return out


def _array(schema: Mapping[str, Any], rng: random.Random, depth: int, mode: str) -> list:
    prefix = schema.get("prefixItems") or []
    items = schema.get("items", True)
    low = max(int(schema.get("minItems", 0)), 0)
    high = min(int(schema.get("maxItems", low + MAX_EXTRA_ITEMS)), low + MAX_EXTRA_ITEMS)
    if high < low:
        raise _Unsatisfiable
    size = low if mode == "minimal" or depth >= MAX_DEPTH else rng.randint(low, high)
    if mode == "full":
        size = min(high, max(low, 1))
    out = []
    for i in range(size):
        sub = prefix[i] if i < len(prefix) else items
        if sub is False:
            break
        out.append(_value(sub, rng, depth + 1, mode))
    return out


def _string(schema: Mapping[str, Any], rng: random.Random, mode: str) -> str:
    low = max(int(schema.get("minLength", 0)), 0)
    high = int(schema.get("maxLength", max(low, 64)))
    fmt = schema.get("format")
    pattern = schema.get("pattern")
    if isinstance(fmt, str) and fmt in _FORMATS:
        candidates = [_FORMATS[fmt]]
    elif mode == "random":
        candidates = [rng.choice(_WORDS), "", " ", *_WORDS]
    else:
        candidates = list(_WORDS)
    for text in candidates:
        if len(text) < low:
            text = text + "x" * (low - len(text))
        text = text[:high]
        if len(text) >= low and (not isinstance(pattern, str) or _matches(pattern, text)):
            return text
    raise _Unsatisfiable


def _matches(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def _number(schema: Mapping[str, Any], rng: random.Random, mode: str, *, integer: bool) -> float:
    low = _bound(schema, "minimum", "exclusiveMinimum", +1, integer)
    high = _bound(schema, "maximum", "exclusiveMaximum", -1, integer)
    if low is None:
        low = min(-1000.0, high if high is not None else -1000.0)
    if high is None:
        high = max(low, 1000.0)
    if high < low:
        raise _Unsatisfiable
    if mode == "minimal":
        value = low if low > 0 or high < 0 else 0
    elif mode == "full":
        value = high
    else:
        value = rng.choice((low, high, rng.uniform(low, high), 0 if low <= 0 <= high else low))
    step = schema.get("multipleOf")
    if isinstance(step, int | float) and step > 0:
        value = math.ceil(value / step) * step
        if value > high:
            raise _Unsatisfiable
    return int(math.ceil(value)) if integer else float(value)


def _bound(
    schema: Mapping[str, Any], inclusive: str, exclusive: str, sign: int, integer: bool
) -> float | None:
    values = []
    if isinstance(schema.get(inclusive), int | float):
        values.append(float(schema[inclusive]))
    if isinstance(schema.get(exclusive), int | float):
        values.append(float(schema[exclusive]) + sign * (1 if integer else 1e-6))
    if not values:
        return None
    edge = max(values) if sign > 0 else min(values)
    if integer:
        return float(math.ceil(edge) if sign > 0 else math.floor(edge))
    return edge


# --------------------------------------------------------------------------- invalid values


def invalid_arguments(
    schema: Mapping[str, Any], base: Mapping[str, Any], count: int
) -> list[InvalidArguments]:
    """Up to ``count`` argument objects the schema rejects, each ``base`` (a valid set, such as
    the first :func:`valid_arguments` gave; ``{}`` when there is none) with one fault, one kind
    after another: a required property left out, a property of the wrong type, a value out of
    range or not in its enum, an unknown property where ``additionalProperties`` is ``false``."""
    validator = _validator(schema, formats=False)
    seen: set[str] = set()
    kinds = [list(make(schema, dict(base))) for make in _MUTATIONS]
    out: list[InvalidArguments] = []
    round_ = 0
    while len(out) < count and any(round_ < len(k) for k in kinds):
        for candidates in kinds:
            if round_ < len(candidates) and len(out) < count:
                candidate = candidates[round_]
                key = _key(candidate.arguments)
                if key not in seen and not validator.is_valid(candidate.arguments):
                    seen.add(key)
                    out.append(candidate)
        round_ += 1
    return out


def _properties(schema: Mapping[str, Any]) -> dict[str, Any]:
    properties = schema.get("properties")
    return dict(properties) if isinstance(properties, Mapping) else {}


def _missing_required(schema: Mapping[str, Any], base: dict) -> Iterator[InvalidArguments]:
    for name in schema.get("required", []):
        if isinstance(name, str):
            args = {k: v for k, v in base.items() if k != name}
            yield InvalidArguments(args, f"without required {name!r}")


def _wrong_type(schema: Mapping[str, Any], base: dict) -> Iterator[InvalidArguments]:
    for name, sub in _properties(schema).items():
        if not isinstance(sub, Mapping) or "type" not in sub:
            continue
        check = _validator({"type": sub["type"]}, formats=False)  # the type alone, not a range
        for wrong in _WRONG_TYPES:
            if not check.is_valid(wrong):
                kind = type(wrong).__name__ if wrong is not None else "null"
                yield InvalidArguments({**base, name: wrong}, f"{name!r} as a {kind}")
                break


def _out_of_range(schema: Mapping[str, Any], base: dict) -> Iterator[InvalidArguments]:
    for name, sub in _properties(schema).items():
        if not isinstance(sub, Mapping):
            continue
        if isinstance(sub.get("enum"), list):
            yield InvalidArguments({**base, name: "not-in-the-enum"}, f"{name!r} not in its enum")
        for key, delta in (("minimum", -1), ("exclusiveMinimum", 0), ("maximum", 1),
                           ("exclusiveMaximum", 0)):  # fmt: skip
            if isinstance(sub.get(key), int | float) and not isinstance(sub.get(key), bool):
                yield InvalidArguments({**base, name: sub[key] + delta}, f"{name!r} past {key}")
        if isinstance(sub.get("maxLength"), int):
            too_long = "x" * (sub["maxLength"] + 1)
            yield InvalidArguments({**base, name: too_long}, f"{name!r} over maxLength")
        if isinstance(sub.get("minLength"), int) and sub["minLength"] > 0:
            too_short = "x" * (sub["minLength"] - 1)
            yield InvalidArguments({**base, name: too_short}, f"{name!r} under minLength")


def _unknown_property(schema: Mapping[str, Any], base: dict) -> Iterator[InvalidArguments]:
    if schema.get("additionalProperties") is False:
        name = "weavehost_check_unknown"
        while name in _properties(schema):
            name += "_"
        yield InvalidArguments({**base, name: 1}, f"unknown property {name!r}")


_MUTATIONS = (_missing_required, _wrong_type, _out_of_range, _unknown_property)
