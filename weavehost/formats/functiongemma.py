"""FunctionGemma tool calls: ``<start_function_call>call:NAME{key:value,...}<end_function_call>``.

Strings are written between ``<escape>`` tokens (``city:<escape>Tokyo<escape>``); numbers,
booleans and ``null`` bare; arrays ``[a,b]`` and objects ``{k:v}`` with the same rules inside.
The GGUF's template declares the tools when it has one that knows ``<start_function_declaration>``;
otherwise our template below writes them the same way. A value's grammar
(:meth:`FunctionGemmaFormat.value_rule`) is written in Lark here, since llguidance's JSON
compiler knows only JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from weavehost.errors import ConstraintError, FormatError
from weavehost.formats.base import (
    CallLayout,
    LayoutCalls,
    ToolCall,
    Trigger,
    leading_value_end,
)
from weavehost.formats.declared import Clue, ValueSyntax
from weavehost.formats.lark import LarkRules, bare_scalar_rule, schema_object
from weavehost.formats.prompt import PromptStyle, StyledPrompt

if TYPE_CHECKING:
    from weavehost.gguf import GGUFMetadata

__all__ = ["FUNCTIONGEMMA", "encode_gemma_value", "writable_key"]

ESCAPE = "<escape>"

_FALLBACK_TEMPLATE = """\
{{- bos_token }}
{%- if tools or messages[0].role == 'developer' or messages[0].role == 'system' %}\
<start_of_turn>developer
{% if messages[0].role in ['developer', 'system'] %}{{ messages[0].content }}{% else %}\
You are a model that can do function calling with the following functions{% endif %}
{%- for tool in tools or [] %}<start_function_declaration>{{ tool | tojson }}<end_function_declaration>\
{% endfor %}<end_of_turn>
{% endif %}
{%- for message in messages %}
{%- if loop.first and message.role in ['developer', 'system'] %}
{%- elif message.role == 'assistant' %}<start_of_turn>model
{% if message.content %}{{ message.content }}{% endif %}
{%- for call in message.tool_calls or [] %}<start_function_call>call:{{ call.function.name }}\
{{ call.function.arguments | gemma_value }}<end_function_call>{% endfor %}<end_of_turn>
{% elif message.role == 'tool' %}<start_function_response>response:{{ message.name or 'tool' }}\
{value:{{ message.content }}}<end_function_response>
{% else %}<start_of_turn>{{ message.role }}
{{ message.content }}<end_of_turn>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<start_of_turn>model
{% endif %}"""

_OPEN = "<start_function_call>call:"
_CLOSE = "<end_function_call>"
_NUMBER_RE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?")
_KEY_RE = re.compile(r"[A-Za-z0-9_.\-]+")


def writable_key(key: str) -> bool:
    """Whether FunctionGemma can write ``key`` as a tool name or argument key (its parser,
    like the model's own, reads ``[A-Za-z0-9_.-]+``)."""
    return _KEY_RE.fullmatch(key) is not None


def _key(key: Any) -> str:
    if not isinstance(key, str) or not writable_key(key):
        raise FormatError(f"FunctionGemma cannot write the name or key {key!r}")
    return key


def _grammar_key(key: str) -> str:
    if not writable_key(key):
        raise ConstraintError(f"FunctionGemma cannot write the name or key {key!r}")
    return key


def encode_gemma_value(value: Any) -> str:
    if isinstance(value, str):
        return f"{ESCAPE}{value}{ESCAPE}"
    if isinstance(value, bool) or value is None or isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, Mapping):
        return "{" + ",".join(f"{_key(k)}:{encode_gemma_value(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(encode_gemma_value(v) for v in value) + "]"
    raise FormatError(f"FunctionGemma cannot write a value of type {type(value).__name__}")


class _ValueParser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, what: str) -> FormatError:
        return FormatError(f"malformed FunctionGemma call: {what} at {self.pos} in {self.text!r}")

    def value(self) -> Any:
        text = self.text
        if text.startswith(ESCAPE, self.pos):
            end = text.find(ESCAPE, self.pos + len(ESCAPE))
            if end < 0:
                raise self.fail("unterminated <escape> string")
            out = text[self.pos + len(ESCAPE) : end]
            self.pos = end + len(ESCAPE)
            return out
        if text.startswith("{", self.pos):
            return self.object()
        if text.startswith("[", self.pos):
            self.pos += 1
            items = []
            while not text.startswith("]", self.pos):
                items.append(self.value())
                if text.startswith(",", self.pos):
                    self.pos += 1
                elif not text.startswith("]", self.pos):
                    raise self.fail("expected ',' or ']'")
            self.pos += 1
            return items
        for word, result in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, self.pos):
                self.pos += len(word)
                return result
        match = _NUMBER_RE.match(text, self.pos)
        if match:
            self.pos = match.end()
            number = match.group(0)
            return float(number) if any(c in number for c in ".eE") else int(number)
        raise self.fail("expected a value")

    def object(self) -> dict[str, Any]:
        if not self.text.startswith("{", self.pos):
            raise self.fail("expected '{'")
        self.pos += 1
        out: dict[str, Any] = {}
        while not self.text.startswith("}", self.pos):
            key = _KEY_RE.match(self.text, self.pos)
            if not key or not self.text.startswith(":", key.end()):
                raise self.fail("expected 'key:'")
            self.pos = key.end() + 1
            out[key.group(0)] = self.value()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith("}", self.pos):
                raise self.fail("expected ',' or '}'")
        self.pos += 1
        return out


def _as_written(text: str) -> str:
    """A text between ``<escape>`` markers is written as it is: nothing inside is escaped."""
    return text


def _read_value(body: str) -> tuple[Any, int]:
    parser = _ValueParser(body)
    return parser.value(), parser.pos


class FunctionGemmaFormat(LayoutCalls, StyledPrompt):
    name = "functiongemma"
    description = "FunctionGemma: <start_function_call>call:name{key:<escape>value<escape>}"
    aliases = ("gemma",)
    control_markers = frozenset({
        "<start_of_turn>",
        "<end_of_turn>",
        "<start_function_call>",
        "<end_function_call>",
        "<start_function_response>",
        "<end_function_response>",
        "<start_function_declaration>",
        "<end_function_declaration>",
        ESCAPE,
    })  # fmt: skip
    value_syntax = ValueSyntax(quote=ESCAPE, escape=_as_written, backslash_escapes=False)
    layout = CallLayout(
        opener="<start_function_call>",
        head="<start_function_call>call:{name}{{",
        first_prefix="{key}:",
        next_prefix=",{key}:",
        tail="}<end_function_call>",
        closer="<end_function_call>",
        escape=_key,
    )
    triggers = (Trigger("<start_function_call>"),)
    prompt = PromptStyle(
        fallback_template=_FALLBACK_TEMPLATE,
        template_marker="<start_function_declaration>",
        bos_token="<bos>",
        filters={"gemma_value": encode_gemma_value},
        guidance=(
            "Answer from the function responses. Reply in the language the user writes in. Call "
            "a function only when the answer needs it; otherwise answer directly. Write each "
            "argument in the form its declaration's description asks for."
        ),
    )

    def detect(self, metadata: GGUFMetadata) -> Clue | None:
        if "<start_function_call>" in metadata.tokens:
            return Clue("the vocabulary has <start_function_call>")
        return None

    def encode_value(self, value: Any) -> str:
        return encode_gemma_value(value)

    def value_rule(self, rules: LarkRules, schema: Any) -> str:
        """Strings in <escape>, bare numbers, ``{k:v}``, ``[a,b]``: one named rule per
        sub-schema, so nested objects grow the grammar linearly."""
        schema = schema_object(schema)
        escape = rules.literal(ESCAPE)
        if "enum" in schema:
            members = list(schema["enum"])
            strings = [v for v in members if isinstance(v, str)]
            others = [encode_gemma_value(v) for v in members if not isinstance(v, str)]
            # Members as one lexeme each (a terminal): llguidance masks one lexeme of 50k
            # alternatives fast, 50k rule alternatives slowly.
            choices = []
            if strings:
                lexeme = " | ".join(json.dumps(v, ensure_ascii=False) for v in strings)
                choices.append(f"{escape} {rules.add(lexeme, 'e', terminal=True)} {escape}")
            if others:
                lexeme = " | ".join(json.dumps(v, ensure_ascii=False) for v in others)
                choices.append(rules.add(lexeme, "e", terminal=True))
            if not choices:
                raise ConstraintError("an empty enum allows no value")
            return rules.add(" | ".join(choices))
        kind = schema.get("type")
        if kind == "string":
            return rules.add(f"{escape} /[^<]*/ {escape}", "s")
        scalar = bare_scalar_rule(rules, kind)
        if scalar is not None:
            return scalar
        if kind == "array":
            item = self.value_rule(rules, schema.get("items") or {})
            return rules.add(f'"[" ({item} ("," {item})*)? "]"', "a")
        if kind == "object":
            props = schema.get("properties") or {}
            if not props:
                return rules.add('"{" "}"', "o")
            pairs = [
                f"{rules.literal(_grammar_key(k) + ':')} {self.value_rule(rules, v)}"
                for k, v in props.items()
            ]
            pair = rules.add(" | ".join(pairs), "p")
            return rules.add(f'"{{" ({pair} ("," {pair})*)? "}}"', "o")
        any_of = schema.get("anyOf") or schema.get("oneOf")
        if any_of:
            return rules.add(" | ".join(self.value_rule(rules, s) for s in any_of), "u")
        string = rules.add(f"{escape} /[^<]*/ {escape}", "s")
        return rules.add(f'{string} | /-?[0-9]+(\\.[0-9]+)?/ | "true" | "false" | "null"', "x")

    def value_end(self, text: str) -> int | None:
        return leading_value_end(text, _read_value)

    def parse_calls(self, text: str) -> list[ToolCall]:
        """Scan call by call: the arguments are parsed, not matched by a pattern, so a string
        value may hold ``<end_function_call>`` (it sits between ``<escape>`` markers)."""
        calls = []
        start = text.find(_OPEN)
        while start >= 0:
            name = _KEY_RE.match(text, start + len(_OPEN))
            if not name:
                raise FormatError("a <start_function_call> names no tool")
            parser = _ValueParser(text)
            parser.pos = name.end()
            arguments = parser.object()
            if not text.startswith(_CLOSE, parser.pos):
                raise parser.fail("expected <end_function_call>")
            calls.append(ToolCall(name=name.group(0), arguments=arguments))
            start = text.find(_OPEN, parser.pos + len(_CLOSE))
        return calls


FUNCTIONGEMMA = FunctionGemmaFormat()
