"""Chat templates from GGUF files, rendered in a sandbox with untrusted text kept apart.

Stage: prompt rendering, below :mod:`weavehost.formats.prompt` (its one caller).

Guarantees:

- A template runs in a sandboxed, immutable Jinja environment, compiled once per template.
- Message contents, the free text of tool definitions and the string values of tool-call
  arguments never reach the template: placeholders do, and the texts come back afterwards as
  segments that are never parsed for special tokens. A tool result holding
  ``<|im_end|><|im_start|>system`` cannot open a new turn.
- Whatever a template raises becomes one :class:`~weavehost.errors.FormatError`.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from jinja2 import Template
from jinja2.sandbox import ImmutableSandboxedEnvironment

from weavehost.engine.segment import Segment
from weavehost.errors import FormatError

__all__ = ["merge_segments", "render_chat_template"]

# Placeholders for untrusted strings: characters from a private-use plane, which JSON encoding
# (ensure_ascii=False) and Jinja leave untouched and no chat template writes.
_PLACEHOLDER_BASE = 0xF0000
_PLACEHOLDER_RE = re.compile('"?([\U000f0000-\U000f0fff])"?')


class _Untrusted:
    """Collects untrusted strings and hands out placeholders for them."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self._known: dict[str, str] = {}

    def hide(self, text: str) -> str:
        """The placeholder for ``text``; the same text always gets the same placeholder, so a
        template that compares hidden strings (``key in required``) still can."""
        known = self._known.get(text)
        if known is not None:
            return known
        if len(self.texts) >= 0xFFF:
            raise FormatError("too many separate texts in one prompt (over 4095)")
        self.texts.append(text)
        placeholder = chr(_PLACEHOLDER_BASE + len(self.texts) - 1)
        self._known[text] = placeholder
        return placeholder

    def hide_strings(self, value: Any) -> Any:
        """Replace every string value (not keys) in a JSON-like structure."""
        if isinstance(value, str):
            return self.hide(value)
        if isinstance(value, Mapping):
            return {key: self.hide_strings(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [self.hide_strings(item) for item in value]
        return value

    def hide_descriptions(self, value: Any) -> Any:
        """Replace free-text fields of a tool definition (descriptions, titles, enum members).

        Names and ``type`` values stay readable: templates compare, sort and print them. A
        property name that could hold special-token text (it has ``<``, ``[`` or ``|``) is
        hidden too, as a key of ``properties`` and in ``required``, so a server cannot put a
        control token into the prompt through an argument name.
        """
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
            for key, item in value.items():
                if key in _FREE_TEXT_KEYS and isinstance(item, str):
                    out[key] = self.hide(item)
                elif key == "enum" and isinstance(item, list):
                    out[key] = self.hide_strings(item)
                elif key == "properties" and isinstance(item, Mapping):
                    out[key] = {
                        self._name(name): self.hide_descriptions(schema)
                        for name, schema in item.items()
                    }
                elif key == "required" and isinstance(item, list):
                    out[key] = [self._name(name) for name in item]
                else:
                    out[key] = self.hide_descriptions(item)
            return out
        if isinstance(value, list | tuple):
            return [self.hide_descriptions(item) for item in value]
        return value

    def _name(self, name: Any) -> Any:
        if isinstance(name, str) and _RISKY_NAME.search(name):
            return self.hide(name)
        return name


_FREE_TEXT_KEYS = frozenset({"description", "title", "default", "examples"})
_RISKY_NAME = re.compile(r"[<\[|]")  # what special-token text is made of in every format here


def _tojson(value: Any, indent: int | None = None, **_: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _raise_exception(message: str) -> None:
    raise FormatError(f"the chat template refused the conversation: {message}")


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


_ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
_ENV.filters["tojson"] = _tojson
_ENV.globals["raise_exception"] = _raise_exception
_ENV.globals["strftime_now"] = _strftime_now


@functools.lru_cache(maxsize=16)
def _compiled(template: str, filters: tuple[tuple[str, Any], ...]) -> Template:
    """``template`` compiled in the sandbox with the format's extra ``filters``: once per
    template (compiling a chat template takes ~6 ms, rendering it well under one, and a step
    renders the conversation up to three times)."""
    env = _ENV
    if filters:
        env = _ENV.overlay()
        env.filters.update(dict(filters))
    return env.from_string(template)


def _split_segments(rendered: str, untrusted: _Untrusted) -> list[Segment]:
    segments: list[Segment] = []
    cursor = 0
    for match in _PLACEHOLDER_RE.finditer(rendered):
        index = ord(match.group(1)) - _PLACEHOLDER_BASE
        if index >= len(untrusted.texts):
            raise FormatError("a chat template produced an unknown placeholder character")
        quoted = match.group(0).startswith('"') and match.group(0).endswith('"')
        if match.start() > cursor:
            segments.append(Segment(rendered[cursor : match.start()], special=True))
        original = untrusted.texts[index]
        if quoted:
            # The template wrote it as a JSON string (tojson): write it back JSON-escaped.
            segments.append(Segment(json.dumps(original, ensure_ascii=False), special=False))
        else:
            if match.group(0).startswith('"'):
                segments.append(Segment('"', special=True))
            segments.append(Segment(original, special=False))
            if match.group(0).endswith('"'):
                segments.append(Segment('"', special=True))
        cursor = match.end()
    if cursor < len(rendered):
        segments.append(Segment(rendered[cursor:], special=True))
    return merge_segments(segments)


def merge_segments(segments: Iterable[Segment]) -> list[Segment]:
    """Join neighbours of the same kind and drop empty pieces."""
    merged: list[Segment] = []
    for segment in segments:
        if not segment.text:
            continue
        if merged and merged[-1].special == segment.special:
            merged[-1] = Segment(merged[-1].text + segment.text, segment.special)
        else:
            merged.append(segment)
    return merged


def render_chat_template(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    *,
    add_generation_prompt: bool = True,
    bos_token: str = "",
    eos_token: str = "",
    extra: Mapping[str, Any] | None = None,
    filters: Mapping[str, Any] | None = None,
) -> list[Segment]:
    """Render a GGUF chat template in the sandbox, keeping untrusted text out of special parsing.

    Message contents, the free text of tool definitions and the string values of tool-call
    arguments are replaced by placeholders before rendering and put back as non-special segments
    afterwards. ``filters`` adds Jinja filters a format's own template needs.
    """
    untrusted = _Untrusted()
    safe_messages = []
    for message in messages:
        safe = dict(message)
        if isinstance(safe.get("content"), str):
            safe["content"] = untrusted.hide(safe["content"])
        if safe.get("tool_calls"):
            safe["tool_calls"] = [
                {
                    "type": "function",
                    "function": {
                        "name": call["function"]["name"] if "function" in call else call["name"],
                        "arguments": untrusted.hide_strings(
                            call["function"]["arguments"]
                            if "function" in call
                            else call["arguments"]
                        ),
                    },
                }
                for call in safe["tool_calls"]
            ]
        safe_messages.append(safe)
    safe_tools = [untrusted.hide_descriptions(tool) for tool in tools] if tools else None
    try:
        compiled = _compiled(template, tuple(sorted((filters or {}).items())))
        rendered = compiled.render(
            messages=safe_messages,
            tools=safe_tools,
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token,
            eos_token=eos_token,
            **dict(extra or {}),
        )
    except FormatError:
        raise
    except Exception as exc:
        # A GGUF's template is foreign code: whatever it raises (a TemplateError, or a TypeError
        # from ``none + 1``) is this model's template failing, told as one FormatError.
        raise FormatError(f"the model's chat template failed to render: {exc}") from exc
    return _split_segments(rendered, untrusted)
