"""Writing, reading and constraining JSON tool calls: the JSON formats (qwen, llama3, smollm2).

Guarantees: a call is returned only when its JSON parses completely and has a string ``name``
and an object of arguments; anything else raises :class:`FormatError` (truncated output is
never half a call). A value's grammar (:meth:`JsonValues.value_rule`) accepts exactly the
spacing :func:`encode_json_value` writes.
"""

from __future__ import annotations

import json
from typing import Any

from weavehost.errors import ConstraintError, FormatError
from weavehost.formats.base import ToolCall, leading_value_end
from weavehost.formats.declared import ValueSyntax
from weavehost.formats.lark import LarkRules, schema_object

__all__ = [
    "JSON_GRAMMAR_OPTIONS",
    "JSON_STRINGS",
    "JsonValues",
    "call_from_object",
    "decode_json_values",
    "encode_json_value",
    "json_key_text",
    "json_string_text",
    "tagged_json_values",
]


def encode_json_value(value: Any) -> str:
    """A value as the JSON formats write it (the spacing of Python's and Jinja's ``tojson``).

    DEL (U+007F) is written ``\\u007f``: JSON allows it raw, but the call constraint
    (llguidance's JSON strings) does not, and a rendered call must be one the constraint accepts.
    It can only stand inside a string, so the replacement never touches structure.
    """
    return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")


def json_string_text(text: str) -> str:
    """A text as it stands between the quotes of a JSON string value."""
    return encode_json_value(text)[1:-1]


# The JSON formats' strings, for drafts: ``"…"`` with JSON's backslash escapes.
JSON_STRINGS = ValueSyntax(quote='"', escape=json_string_text)


def json_key_text(key: str) -> str:
    """A name or key as it stands between the quotes of a JSON call's skeleton: JSON-escaped,
    with ``<`` written ``\\u003c`` so that no key can spell a special token (``<|im_end|>``)
    in skeleton text, which is tokenized with special tokens parsed."""
    return json_string_text(key).replace("<", "\\u003c")


# llguidance's JSON options for a value: the separators encode_json_value writes and no free
# whitespace, so the constraint accepts the text the format would render and nothing looser.
JSON_GRAMMAR_OPTIONS = {
    "whitespace_flexible": False,
    "key_separator": ": ",
    "item_separator": ", ",
}


class JsonValues:
    """Mixin for the JSON formats: values are written, read and constrained as JSON."""

    value_syntax = JSON_STRINGS

    def encode_value(self, value: Any) -> str:
        return encode_json_value(value)

    def value_rule(self, rules: LarkRules, schema: Any) -> str:
        """llguidance's own JSON-schema compiler (``%json``) with our separators."""
        with_options = dict(schema_object(schema))
        with_options["x-guidance"] = JSON_GRAMMAR_OPTIONS
        try:
            body = json.dumps(with_options, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:  # NaN or a non-JSON value in the schema
            raise ConstraintError(f"the schema is not plain JSON: {exc}") from exc
        return rules.add("%json " + body, "v")

    def value_end(self, text: str) -> int | None:
        return leading_value_end(text, json.JSONDecoder().raw_decode)


def call_from_object(obj: Any, arguments_key: str) -> ToolCall:
    """Turn ``{"name": ..., arguments_key: {...}}`` into a ToolCall, or raise FormatError."""
    if not isinstance(obj, dict):
        raise FormatError(f"a tool call must be a JSON object, got {type(obj).__name__}")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        raise FormatError("a tool call has no string 'name'")
    arguments = obj.get(arguments_key, {})
    if isinstance(arguments, str):
        # Some models write the arguments as a JSON string; accept it if it holds an object.
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            raise FormatError(f"the arguments of {name!r} are not JSON: {exc}") from exc
    if not isinstance(arguments, dict):
        raise FormatError(f"the {arguments_key!r} of {name!r} must be a JSON object")
    return ToolCall(name=name, arguments=arguments)


_SEPARATORS = " \t\r\n;,"


def tagged_json_values(text: str, opener: str, closer: str) -> list[Any]:
    """The JSON values inside every ``opener … closer`` block of ``text``.

    Values are decoded, not matched by a pattern, so a string value may hold the closer text;
    a block that is not closed right after its values is a :class:`FormatError`.
    """
    decoder = json.JSONDecoder()
    values: list[Any] = []
    start = text.find(opener)
    while start >= 0:
        index = start + len(opener)
        while True:
            while index < len(text) and text[index] in _SEPARATORS:
                index += 1
            if text.startswith(closer, index):
                break
            if index >= len(text):
                raise FormatError(f"a {opener} block is not closed")
            try:
                value, index = decoder.raw_decode(text, index)
            except json.JSONDecodeError as exc:
                raise FormatError(f"malformed JSON in a tool call: {exc.msg} at {exc.pos}") from exc
            values.append(value)
        start = text.find(opener, index + len(closer))
    return values


def decode_json_values(text: str) -> list[Any]:
    """Every JSON value in ``text``, separated by whitespace, ``;`` or ``,``."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    index = 0
    while True:
        while index < len(text) and text[index] in " \t\r\n;,":
            index += 1
        if index >= len(text):
            return values
        try:
            value, index = decoder.raw_decode(text, index)
        except json.JSONDecodeError as exc:
            raise FormatError(f"malformed JSON in a tool call: {exc.msg} at {exc.pos}") from exc
        values.append(value)
