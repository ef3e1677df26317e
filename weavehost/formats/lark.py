"""The Lark vocabulary formats write their value grammars in.

Stage: constraint building. Each format says how one value of a JSON sub-schema is written as a
Lark rule (``ModelFormat.value_rule``); :mod:`weavehost.decode.grammar` assembles those rules
into whole-call and single-value grammars. This module sits under both, so a format never
imports the decoder.

Guarantees:

- :class:`LarkRules` writes each distinct rule body once, as a named rule that others
  reference, so a grammar grows linearly with its schema; the text is checked against the byte
  cap it was given as every rule is added, and passing it raises :class:`ConstraintError`
  before anything larger is built or compiled.
- :meth:`LarkRules.literal` never spells a special token of the model: it references it by
  name, so ``<tool_call>`` in a grammar is the one control token, not text that happens to read
  the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from weavehost.errors import ConstraintError

__all__ = ["LarkRules", "bare_scalar_rule", "lark_string", "schema_object"]


def lark_string(text: str, specials: frozenset[str] = frozenset()) -> str:
    """Lark for the fixed ``text``: string literals (JSON escaping is valid Lark escaping), with
    the model's special tokens (``<tool_call>`` in Qwen) referenced as tokens, not spelled."""
    if not text:
        return '""'
    parts: list[str] = []
    cursor = 0
    while cursor < len(text):
        hit = None
        for special in specials:
            at = text.find(special, cursor)
            if at < 0:
                continue
            if hit is None or at < hit[0] or (at == hit[0] and len(special) > len(hit[1])):
                hit = (at, special)
        if hit is None:
            parts.append(json.dumps(text[cursor:], ensure_ascii=False))
            break
        if hit[0] > cursor:
            parts.append(json.dumps(text[cursor : hit[0]], ensure_ascii=False))
        parts.append(hit[1])
        cursor = hit[0] + len(hit[1])
    return " ".join(parts)


def schema_object(schema: Any) -> Mapping[str, Any]:
    """A boolean schema as an object: ``true`` allows anything; ``false`` allows nothing, so no
    value of it can be written (a property with it can only be left out)."""
    if schema is True:
        return {}
    if schema is False or not isinstance(schema, Mapping):
        raise ConstraintError(f"no value can be written for the schema {schema!r}")
    return schema


class LarkRules:
    """The rules of one grammar being built, for one vocabulary's special tokens.

    Each sub-grammar is written once as a named rule and referenced (an optional argument list
    or a nested FunctionGemma object inlined would grow quadratically or exponentially).
    ``max_bytes`` is the caller's cap: the decoder owns the policy, this class enforces it.
    """

    def __init__(self, specials: frozenset[str], max_bytes: int) -> None:
        self.specials = specials
        self.max_bytes = max_bytes
        self.lines: list[str] = []
        self.size = 0
        self._by_body: dict[str, str] = {}

    def literal(self, text: str) -> str:
        """Lark for the fixed ``text``, special tokens referenced by name."""
        return lark_string(text, self.specials)

    def add(self, body: str, kind: str = "r", *, terminal: bool = False) -> str:
        """A rule with ``body`` (an existing one if the body is the same); returns its name."""
        name = self._by_body.get(body)
        if name is not None:
            return name
        name = f"{kind}{len(self.lines)}"
        name = name.upper() if terminal else name
        self._by_body[body] = name
        self.define(name, body)
        return name

    def define(self, name: str, body: str) -> None:
        line = f"{name}: {body}"
        self.size += len(line.encode("utf-8")) + 1
        if self.size > self.max_bytes:
            raise ConstraintError(
                f"the grammar would pass {self.max_bytes} bytes (the schema is too large to "
                "constrain; it is decoded loosely and validated afterwards)"
            )
        self.lines.append(line)

    def grammar(self, start: str) -> str:
        return f"start: {start}\n" + "\n".join(self.lines) + "\n"


def bare_scalar_rule(rules: LarkRules, kind: Any) -> str | None:
    """The rule for a value of JSON ``type`` ``kind`` when it is an integer, a number, a boolean
    or null, written bare as JSON writes it (``-3``, ``0.25``, ``true``, ``null``); ``None`` for
    any other type. For a format whose own syntax is in its strings, arrays and objects."""
    if kind == "integer":
        return rules.add("/-?(0|[1-9][0-9]*)/", "i")
    if kind == "number":
        return rules.add("/-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?/", "n")
    if kind == "boolean":
        return rules.add('"true" | "false"', "b")
    if kind == "null":
        return rules.add('"null"', "z")
    return None
