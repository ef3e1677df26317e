"""Lark grammars for tool calls and single values, written from a model format's layout.

Stage: constraint building (between the formats and the decoders); the grammars are compiled
and run by :mod:`weavehost.decode.constraint`. llguidance's "fast-forward" tokens are computed
canonically: a token is forced only when no continuation could fuse with it, which is exactly
where a skeleton may end so that no fused token is split between a key and its value.

Guarantees:

- :meth:`GrammarBuilder.call` accepts exactly the calls of one format for the offered tools: the
  format's head, a tool name among them, arguments that validate against the tool's schema
  written with the format's separators (required arguments first, then optional ones, each in
  schema order), and the format's tail.
- :meth:`GrammarBuilder.value` accepts a key prefix, one value of a sub-schema, and the first
  character of whatever may follow it (``,`` or ``}``), so a token carrying the value's end
  fused with the next separator is allowed; the format's ``value_end`` says where the value
  stops inside decoded text.
- A schema that cannot be expressed raises :class:`ConstraintError`; the grammar size is
  bounded by :data:`MAX_GRAMMAR_BYTES` and :data:`MAX_PROPERTIES` as it is built.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import llguidance

from weavehost.errors import ConstraintError, FormatError
from weavehost.formats.base import ModelFormat
from weavehost.formats.lark import LarkRules, lark_string

__all__ = [
    "LIMITS",
    "MAX_COMPILE_S",
    "MAX_GRAMMAR_BYTES",
    "MAX_PROPERTIES",
    "GrammarBuilder",
    "ordered_parameters",
]

MAX_GRAMMAR_BYTES = 1_000_000
# Properties in one schema, nested ones included: llguidance's JSON compiler took 5.8 s and
# 0.39 s per token mask for an object of 10k optional properties (a 289 KB grammar, under the
# byte cap), and a chain of 3k optional arguments overflowed its stack (SIGSEGV).
MAX_PROPERTIES = 1_000
# A compile slower than this is logged (llguidance cannot be interrupted mid-compile; the byte
# cap above is what keeps it bounded).
MAX_COMPILE_S = 2.0
LIMITS = llguidance.LLParserLimits(max_grammar_size=500_000, step_max_items=100_000)


def ordered_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with required properties first, then optional ones, each in schema order.

    Every strategy writes arguments in this order, so their call texts are comparable.
    """
    schema = dict(parameters)
    props = dict(schema.get("properties") or {})
    required = [k for k in schema.get("required", []) if k in props]
    # An optional property whose schema is ``false`` can only be left out.
    optional = [k for k in props if k not in required and props[k] is not False]
    schema["properties"] = {k: props[k] for k in [*required, *optional]}
    schema.setdefault("type", "object")
    schema["additionalProperties"] = False
    return schema


def _check_properties(schema: Any) -> None:
    """Raise ConstraintError if ``schema`` has more than MAX_PROPERTIES properties in all, or a
    nested key llguidance cannot match (an iterative walk: a deep schema cannot exhaust the
    stack)."""
    count = 0
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            props = node.get("properties")
            if isinstance(props, Mapping):
                count += len(props)
                if node is not schema and any("\x7f" in k for k in props):
                    # llguidance spells a nested key with a raw DEL, which its own JSON strings
                    # refuse (and which the formats write \u007f): no call could match.
                    raise ConstraintError("a nested property key holds DEL (U+007F)")
                if count > MAX_PROPERTIES:
                    raise ConstraintError(
                        f"the schema has over {MAX_PROPERTIES} properties, too many to constrain"
                    )
            stack.extend(node.values())
        elif isinstance(node, list | tuple):
            stack.extend(node)


class GrammarBuilder:
    """Lark grammars for one format and one vocabulary's special tokens."""

    def __init__(self, fmt: ModelFormat, specials: frozenset[str] = frozenset()) -> None:
        self.fmt = fmt
        self.specials = specials

    def text(self, fixed: str) -> str:
        return lark_string(fixed, self.specials)

    def _rules(self) -> LarkRules:
        # The cap is read here, at build time, so the decoder's policy is one module global.
        return LarkRules(self.specials, MAX_GRAMMAR_BYTES)

    def _pair(self, rules: LarkRules, key: str, schema: Mapping[str, Any], *, first: bool) -> str:
        try:
            prefix = self.text(self.fmt.layout.prefix_for(key, first=first))
        except FormatError as exc:
            raise ConstraintError(str(exc)) from exc
        return f"{prefix} {self.fmt.value_rule(rules, schema)}"

    def _optional_rest(
        self, rules: LarkRules, props: Mapping[str, Any], optional: Sequence[str], tag: str
    ) -> str:
        """A rule for any subset of ``optional``, in order, after at least one argument:
        ``rest_k: (pair_k)? rest_(k+1)``, one rule per argument."""
        after = ""
        for index in range(len(optional) - 1, -1, -1):
            key = optional[index]
            name = f"{tag}_rest{index}"
            rules.define(name, f"({self._pair(rules, key, props[key], first=False)})? {after}")
            after = name
        return after

    def _optional_chain(
        self, rules: LarkRules, props: Mapping[str, Any], optional: Sequence[str], tag: str
    ) -> str:
        """A rule for a non-empty subset of ``optional`` in order; the first present one opens
        the list: ``chain_k: first_k rest_(k+1) | chain_(k+1)``."""
        self._optional_rest(rules, props, optional, tag)
        after = ""
        for index in range(len(optional) - 1, -1, -1):
            key = optional[index]
            name = f"{tag}_chain{index}"
            body = self._pair(rules, key, props[key], first=True)
            if index + 1 < len(optional):
                body += f" {tag}_rest{index + 1}"
            rules.define(name, f"({body})" + (f" | {after}" if after else ""))
            after = name
        return after

    def _arguments(self, rules: LarkRules, parameters: Mapping[str, Any], tag: str) -> str:
        _check_properties(parameters)
        schema = ordered_parameters(parameters)
        props: dict[str, Any] = schema["properties"]
        required = [k for k in schema.get("required", []) if k in props]
        optional = [k for k in props if k not in required]
        if not required:
            return f"({self._optional_chain(rules, props, optional, tag)})?" if optional else ""
        body = " ".join(
            self._pair(rules, k, props[k], first=i == 0) for i, k in enumerate(required)
        )
        if optional:
            body += " " + self._optional_rest(rules, props, optional, tag)
        return body

    def call(self, tools: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
        """Lark for one whole call to one of ``tools`` ((name, parameters) pairs)."""
        if not tools:
            raise ConstraintError("a call grammar needs at least one tool")
        rules, alternatives = self._rules(), []
        for index, (name, parameters) in enumerate(tools):
            head = self.text(self._head(name))
            tail = self.text(self.fmt.layout.tail)
            arguments = self._arguments(rules, parameters, f"t{index}")
            rules.define(f"call_{index}", f"{head} {arguments} {tail}")
            alternatives.append(f"call_{index}")
        return rules.grammar(" | ".join(alternatives))

    def value(self, lead: str, schema: Mapping[str, Any]) -> str:
        """Lark for ``lead`` (fixed text), one value of ``schema``, then one follow character."""
        layout = self.fmt.layout
        follow = sorted({layout.next_prefix[:1], layout.tail[:1]} - {""})
        ends = " | ".join(self.text(c) for c in follow)
        _check_properties(schema)
        rules = self._rules()
        rules.define("value", self.fmt.value_rule(rules, schema))
        return rules.grammar(f"{self.text(lead)} value ({ends})")

    def _head(self, name: str) -> str:
        try:
            return self.fmt.layout.head_for(name)
        except FormatError as exc:
            raise ConstraintError(str(exc)) from exc
