"""A toy model format in one module: what a new model family needs, and nothing outside it.

Calls read ``<<call get_weather {city: 'Paris', days: 3}>>``: keys bare, strings in single
quotes (``\\'``, ``\\\\``, ``\\n`` and ``\\uXXXX`` escapes), numbers, ``true``, ``false`` and
``null`` as JSON writes them, ``[a, b]`` and ``{k: v}`` with JSON's spacing. A model is this
format's when its GGUF architecture is ``toyformer``; its one control marker is ``<<call``.
The prompt lists the tools in a ChatML system message (any ChatML model can read it).

``tests/test_toy_format.py`` registers it with one line (``FORMATS["toy"] = TOY``, through
``monkeypatch.setitem``) and shows that detection, the prompt, every strategy, parsing and the
executor's markers all work through it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from weavehost.errors import ConstraintError, FormatError
from weavehost.formats import Clue, ValueSyntax
from weavehost.formats.base import CallLayout, LayoutCalls, ToolCall, Trigger, leading_value_end
from weavehost.formats.lark import LarkRules, bare_scalar_rule, schema_object
from weavehost.formats.prompt import PromptStyle, StyledPrompt, ToolsInText
from weavehost.formats.smollm2 import CHATML_TEMPLATE
from weavehost.gguf import GGUFMetadata

__all__ = ["TOY"]

_SYSTEM_HEAD = "You call tools. The tools:\n"
_SYSTEM_TAIL = (
    "\nTo call a tool, write <<call NAME {key: value, ...}>> with strings in single quotes, "
    "for example <<call get_time {zone: 'Asia/Tokyo'}>>."
)
_OPEN, _CLOSE = "<<call ", ">>"
_WORD = re.compile(r"[A-Za-z0-9_.\-]+")  # a tool's name or an argument's key
_HEX4 = re.compile(r"[0-9a-fA-F]{4}")
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_ESCAPES = {"'": "'", "\\": "\\", "n": "\n"}
# The grammar's string: exactly the texts string_text writes between the quotes.
_STRING = r"""/'([^'\\\x00-\x1f\x7f]|\\['\\n]|\\u[0-9a-f]{4})*'/"""


def string_text(text: str) -> str:
    """A text as it stands between a toy string's single quotes."""
    out = []
    for char in text:
        if char in "'\\":
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif ord(char) < 0x20 or char == "\x7f":
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def _key(key: Any) -> str:
    if not isinstance(key, str) or not _WORD.fullmatch(key):
        raise FormatError(f"the toy format cannot write the name or key {key!r}")
    return key


def _grammar_key(key: str) -> str:
    if not _WORD.fullmatch(key):
        raise ConstraintError(f"the toy format cannot write the key {key!r}")
    return key


def encode_toy_value(value: Any) -> str:
    if isinstance(value, str):
        return "'" + string_text(value) + "'"
    if isinstance(value, bool) or value is None or isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)}: {encode_toy_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(encode_toy_value(v) for v in value) + "]"
    raise FormatError(f"the toy format cannot write a value of type {type(value).__name__}")


class _Reader:
    """Reads one value (or object) of toy text from ``pos``; FormatError where it is not one."""

    def __init__(self, text: str, pos: int = 0) -> None:
        self.text, self.pos = text, pos

    def fail(self, what: str) -> FormatError:
        return FormatError(f"malformed toy call: {what} at {self.pos} in {self.text!r}")

    def expect(self, literal: str) -> None:
        if not self.text.startswith(literal, self.pos):
            raise self.fail(f"expected {literal!r}")
        self.pos += len(literal)

    def value(self) -> Any:
        text = self.text
        if text.startswith("'", self.pos):
            return self.string()
        if text.startswith("{", self.pos):
            return self.object()
        if text.startswith("[", self.pos):
            self.pos += 1
            items = []
            while not text.startswith("]", self.pos):
                if items:
                    self.expect(", ")
                items.append(self.value())
            self.pos += 1
            return items
        for word, result in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, self.pos):
                self.pos += len(word)
                return result
        match = _NUMBER.match(text, self.pos)
        if not match:
            raise self.fail("expected a value")
        self.pos = match.end()
        return json.loads(match.group())

    def string(self) -> str:
        self.expect("'")
        out = []
        while True:
            if self.pos >= len(self.text):
                raise self.fail("unterminated string")
            char = self.text[self.pos]
            if char == "'":
                self.pos += 1
                return "".join(out)
            if char == "\\":
                escaped = self.text[self.pos + 1 : self.pos + 2]
                if escaped == "u" and _HEX4.fullmatch(self.text, self.pos + 2, self.pos + 6):
                    out.append(chr(int(self.text[self.pos + 2 : self.pos + 6], 16)))
                    self.pos += 6
                    continue
                if escaped not in _ESCAPES:
                    raise self.fail("bad escape")
                out.append(_ESCAPES[escaped])
                self.pos += 2
                continue
            out.append(char)
            self.pos += 1

    def object(self) -> dict[str, Any]:
        self.expect("{")
        out: dict[str, Any] = {}
        while not self.text.startswith("}", self.pos):
            if out:
                self.expect(", ")
            key = _WORD.match(self.text, self.pos)
            if not key:
                raise self.fail("expected a key")
            self.pos = key.end()
            self.expect(": ")
            out[key.group()] = self.value()
        self.pos += 1
        return out


def _read_value(body: str) -> tuple[Any, int]:
    reader = _Reader(body)
    return reader.value(), reader.pos


class ToyFormat(LayoutCalls, StyledPrompt):
    name = "toy"
    description = "Toy: <<call name {key: 'value'}>>"
    aliases = ("toy-format",)
    layout = CallLayout(
        opener=_OPEN,
        head=_OPEN + "{name} {{",
        first_prefix="{key}: ",
        next_prefix=", {key}: ",
        tail="}" + _CLOSE,
        closer=_CLOSE,
        escape=_key,
    )
    triggers = (Trigger(_OPEN),)
    control_markers = frozenset({"<<call"})
    value_syntax = ValueSyntax(quote="'", escape=string_text)
    prompt = PromptStyle(
        fallback_template=CHATML_TEMPLATE,
        template_marker="",
        tools_in_text=ToolsInText(system_head=_SYSTEM_HEAD, system_tail=_SYSTEM_TAIL),
    )

    def detect(self, metadata: GGUFMetadata) -> Clue | None:
        if metadata.architecture == "toyformer":
            return Clue("the architecture is toyformer")
        return None

    def encode_value(self, value: Any) -> str:
        return encode_toy_value(value)

    def value_rule(self, rules: LarkRules, schema: Any) -> str:
        schema = schema_object(schema)
        if "enum" in schema:
            members = [json.dumps(encode_toy_value(v), ensure_ascii=False) for v in schema["enum"]]
            if not members:
                raise ConstraintError("an empty enum allows no value")
            return rules.add(" | ".join(members), "e")
        kind = schema.get("type")
        if kind == "string":
            return rules.add(_STRING, "s")
        scalar = bare_scalar_rule(rules, kind)
        if scalar is not None:
            return scalar
        if kind == "array":
            item = self.value_rule(rules, schema.get("items") or {})
            return rules.add(f'"[" ({item} (", " {item})*)? "]"', "a")
        if kind == "object":
            pairs = [
                f"{rules.literal(_grammar_key(k) + ': ')} {self.value_rule(rules, v)}"
                for k, v in (schema.get("properties") or {}).items()
            ]
            if not pairs:
                return rules.add('"{" "}"', "o")
            pair = rules.add(" | ".join(pairs), "p")
            return rules.add(f'"{{" ({pair} (", " {pair})*)? "}}"', "o")
        any_of = schema.get("anyOf") or schema.get("oneOf")
        if any_of:
            return rules.add(" | ".join(self.value_rule(rules, s) for s in any_of), "u")
        number = "/-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?/"
        return rules.add(f'{_STRING} | {number} | "true" | "false" | "null"', "x")

    def value_end(self, text: str) -> int | None:
        return leading_value_end(text, _read_value)

    def parse_calls(self, text: str) -> list[ToolCall]:
        calls = []
        start = text.find(_OPEN)
        while start >= 0:
            name = _WORD.match(text, start + len(_OPEN))
            if not name:
                raise FormatError("a <<call names no tool")
            reader = _Reader(text, name.end())
            reader.expect(" ")
            arguments = reader.object()
            reader.expect(_CLOSE)
            calls.append(ToolCall(name=name.group(), arguments=arguments))
            start = text.find(_OPEN, reader.pos)
        return calls


TOY = ToyFormat()
