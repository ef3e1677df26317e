"""What every model format provides, and the pieces they share.

Stage: prompt rendering and call parsing (between the catalog and the engine). A model format
is explicit data plus a few functions: how a conversation with tools becomes prompt text, how a
tool call is written and read back, and how a value's grammar is written. Its call layout is given as a *skeleton*: a head that
names the tool, one prefix per argument, a value encoding per JSON type, and a tail. Rendering a
call is exactly ``head + prefix(k1) + value(v1) + prefix(k2) + value(v2) + ... + tail``, so the
decoder can prefill the fixed parts and decode only the holes.

Guarantees:

- ``render_prompt`` returns :class:`Segment` s. Only text written by the chat template (or by the
  format itself) is tokenized with special-token parsing; every message content and every string
  inside a tool definition is untrusted text and is never parsed for special tokens, so a tool
  result holding ``<|im_end|><|im_start|>system`` cannot open a new turn.
- ``parse_calls(render_call(c)) == [c]`` for every call whose values the format can encode.
- Chat templates from GGUF files run in a sandbox (:mod:`weavehost.formats.chat_template`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from weavehost.engine.segment import Segment
from weavehost.errors import FormatError
from weavehost.formats.declared import Clue, ValueSyntax
from weavehost.formats.lark import LarkRules
from weavehost.formats.toolprompt import prompt_parameters

if TYPE_CHECKING:
    from weavehost.formats.several import SeveralCalls
    from weavehost.gguf import GGUFMetadata

__all__ = [
    "CallLayout",
    "LayoutCalls",
    "LayoutView",
    "ModelFormat",
    "Segment",
    "ToolCall",
    "Trigger",
    "call_format",
    "call_texts",
    "call_parts",
    "complete_value_end",
    "leading_value_end",
    "message_calls",
    "read_call",
    "tool_to_openai",
]

JSONValue = Any


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call: the tool's name and its arguments (a JSON object)."""

    name: str
    arguments: Mapping[str, JSONValue] = field(default_factory=dict)

    def canonical(self) -> str:
        """A stable text for comparing and caching calls (sorted keys, no spaces)."""
        return json.dumps(
            {"name": self.name, "arguments": self.arguments},
            sort_keys=True,
            separators=(",", ":"),
            ensure_ascii=False,
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ToolCall) and self.canonical() == other.canonical()

    def __hash__(self) -> int:
        return hash(self.canonical())


def read_call(call: Any) -> tuple[Any, Any]:
    """The name and arguments of one entry of an OpenAI-style message's ``tool_calls``:
    ``{"name", "arguments"}`` or ``{"function": {...}}``, arguments an object or its JSON text
    (parsed where it parses, else left as the text); ``(None, None)`` for an entry that is not
    an object."""
    if not isinstance(call, Mapping):
        return None, None
    function = call.get("function")
    body = function if isinstance(function, Mapping) else call
    arguments = body.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            pass
    return body.get("name"), arguments


def message_calls(message: Mapping[str, Any]) -> list[ToolCall]:
    """The calls of an assistant ``message`` (:func:`read_call`); one that names no tool or
    whose arguments are not an object is left out."""
    calls: list[ToolCall] = []
    for call in message.get("tool_calls") or ():
        name, arguments = read_call(call)
        if isinstance(name, str) and name and isinstance(arguments, Mapping):
            calls.append(ToolCall(name, dict(arguments)))
    return calls


@dataclass(frozen=True, slots=True)
class CallLayout:
    """The fixed text of one format's tool call, with holes for values.

    ``head`` holds ``{name}``; ``first_prefix`` / ``next_prefix`` hold ``{key}``. ``opener`` is
    the text whose appearance in free decoding means a call has begun (a prefix of ``head``).
    ``escape`` writes a name or key into its hole (JSON string escaping in the JSON formats, so
    a key holding ``"`` stays one key); it raises :class:`FormatError` for one the format cannot
    write.
    """

    opener: str
    head: str
    first_prefix: str
    next_prefix: str
    tail: str
    closer: str
    escape: Callable[[str], str] | None = None
    # The text around a call written in this layout that makes it one the format's parse_calls
    # reads (a call of an open list, ``[{…}``, reads as ``<tool_call>[{…}]</tool_call>``).
    reads_as: tuple[str, str] = ("", "")
    # Text the head opens with that ends the call before it (SmolLM2's ``}, ``), not this call's.
    joins: str = ""

    def head_for(self, name: str) -> str:
        return self.head.format(name=self.escape(name) if self.escape else name)

    def naming(self, name: str) -> str:
        """The head up to one character past the name (its closing quote): enough to tell
        which tool a call written in this layout names, whatever follows."""
        before, after = self.head.split("{name}", 1)
        written = self.escape(name) if self.escape else name
        return before.format() + written + after.format()[:1]

    def prefix_for(self, key: str, *, first: bool) -> str:
        text = self.escape(key) if self.escape else key
        return (self.first_prefix if first else self.next_prefix).format(key=text)


@dataclass(frozen=True, slots=True)
class Trigger:
    """Text in the model's free output that means a call has begun (``<tool_call>``).

    ``at_start``: it counts only at the start of the reply, after leading whitespace (Llama 3
    writes a call as the whole reply, so ``{"name"`` later in prose is not a call).
    ``layout``: the layout a call begun this way is written in, when it is not the format's own
    (Qwen's bare ``{"name": …}`` reply); its head starts with ``text``, so the strategy rewrites
    what the model wrote and goes on under the constraint, and the format's ``parse_calls``
    reads it back. The conversation then records the call, which renders in the canonical form.
    """

    text: str
    at_start: bool = False
    layout: CallLayout | None = None


NUMBER_CONTINUES = frozenset("0123456789.eE+-")


def complete_value_end(value: Any, end: int, body: str, start: int) -> int | None:
    """``start + end`` for a value parsed from ``body`` that ended at ``end``, or ``None`` when
    it is a number that the next character could still continue (``21`` may become ``215``)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if end == len(body) or body[end] in NUMBER_CONTINUES:
            return None
    return start + end


def leading_value_end(text: str, read: Callable[[str], tuple[Any, int]]) -> int | None:
    """``value_end`` for a format that reads a value with ``read(body) -> (value, end)``, which
    raises :class:`FormatError` or ``ValueError`` where ``body`` does not begin with a whole
    value: leading spaces are skipped, and a number is complete only once a character that
    cannot continue it follows (:func:`complete_value_end`)."""
    start = len(text) - len(text.lstrip(" "))
    body = text[start:]
    if not body:
        return None
    try:
        value, end = read(body)
    except (FormatError, ValueError):
        return None
    return complete_value_end(value, end, body, start)


@runtime_checkable
class ModelFormat(Protocol):
    """A model family's tool-call format, and the only place that knows it: shared code asks
    the format (how it is detected, its layout, triggers, prompt, control markers, value syntax
    and grammar) and never its name. Implementations are plain module-level objects; the
    shipped ones render prompts from a :class:`~weavehost.formats.prompt.PromptStyle`."""

    name: str
    description: str
    aliases: tuple[str, ...]  # other names a user may give it (``--format hermes``)
    layout: CallLayout
    triggers: tuple[Trigger, ...]
    several: SeveralCalls | None  # how one reply holds several calls (None: one block each)
    # The texts of its special tokens that open or close a turn, a call or a result: broken in
    # tool results by the executor (the union over every format, :mod:`~weavehost.formats`).
    control_markers: frozenset[str]
    value_syntax: ValueSyntax  # how its string values are written, for drafts

    def detect(self, metadata: GGUFMetadata) -> Clue | None:
        """Why the model whose GGUF ``metadata`` this is uses this format, or ``None``."""
        ...

    def render_prompt(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        *,
        chat_template: str | None,
        add_generation_prompt: bool = True,
        guidance: bool = False,
    ) -> list[Segment]:
        """The prompt for ``messages`` with ``tools`` offered (OpenAI-style tool dicts);
        ``guidance``: with the host's guidance in the format's words (where tools are offered)."""
        ...

    def encode_value(self, value: JSONValue) -> str:
        """How a value is written inside a call."""
        ...

    def value_rule(self, rules: LarkRules, schema: Any) -> str:
        """The name of a rule, added to ``rules``, that matches exactly the texts this format
        writes for values of the JSON ``schema``; raises ConstraintError for a schema no
        grammar can express (see :mod:`weavehost.formats.lark`)."""
        ...

    def value_end(self, text: str) -> int | None:
        """Where the value written at the start of ``text`` ends (after leading spaces), or
        ``None`` if it may still continue. A number is complete only once a character that
        cannot continue it follows; strings, arrays, objects, booleans and null end at their
        own last character."""
        ...

    def render_call(self, call: ToolCall) -> str:
        """The full text of ``call`` from opener to closer."""
        ...

    def parse_calls(self, text: str) -> list[ToolCall]:
        """Every call in ``text`` (assistant output); raises FormatError if one is malformed."""
        ...


def tool_to_openai(name: str, description: str, parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAI/HF ``{"type": "function", "function": {...}}`` record templates expect, with
    the clean prompt view of the tool (:mod:`weavehost.formats.toolprompt`): every prompt's
    tools pass through here, while constraints and validation keep the full schema. The
    description is shown as given: the catalog capped it (``limits.maxDescriptionChars``)."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": prompt_parameters(parameters),
        },
    }


class LayoutView:
    """``fmt`` writing a call in another of its layouts (a :class:`Trigger`'s ``layout``).

    The decoding strategies read only ``layout``, ``value_rule``, ``value_end``,
    ``encode_value`` and ``parse_calls`` of a format, so a call begun as Qwen's bare JSON is
    written by the same strategy, under the same value grammar, and read back by the same
    parser. Everything but the layout is the format's own.
    """

    __slots__ = ("base", "layout")

    def __init__(self, base: ModelFormat, layout: CallLayout) -> None:
        self.base, self.layout = base, layout

    @property
    def name(self) -> str:
        return self.base.name

    @property
    def description(self) -> str:
        return self.base.description

    @property
    def triggers(self) -> tuple[Trigger, ...]:
        return self.base.triggers

    @property
    def several(self) -> SeveralCalls | None:
        return self.base.several

    @property
    def aliases(self) -> tuple[str, ...]:
        return self.base.aliases

    @property
    def control_markers(self) -> frozenset[str]:
        return self.base.control_markers

    @property
    def value_syntax(self) -> ValueSyntax:
        return self.base.value_syntax

    def detect(self, metadata: GGUFMetadata) -> Clue | None:
        return self.base.detect(metadata)

    def render_prompt(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        *,
        chat_template: str | None,
        add_generation_prompt: bool = True,
        guidance: bool = False,
    ) -> list[Segment]:
        return self.base.render_prompt(
            messages,
            tools,
            chat_template=chat_template,
            add_generation_prompt=add_generation_prompt,
            guidance=guidance,
        )

    def encode_value(self, value: JSONValue) -> str:
        return self.base.encode_value(value)

    def value_rule(self, rules: LarkRules, schema: Any) -> str:
        return self.base.value_rule(rules, schema)

    def value_end(self, text: str) -> int | None:
        return self.base.value_end(text)

    def render_call(self, call: ToolCall) -> str:
        return render_call_from_layout(self, call)

    def parse_calls(self, text: str) -> list[ToolCall]:
        before, after = self.layout.reads_as
        return self.base.parse_calls(before + text.removeprefix(self.layout.joins) + after)


def call_texts(fmt: ModelFormat, call: ToolCall) -> list[str]:
    """``call`` as ``fmt`` writes it in its own layout and in each layout its triggers read
    (Qwen's bare, fenced and indented JSON): the texts a model may write the call in."""
    views = [fmt] + [LayoutView(fmt, t.layout) for t in fmt.triggers if t.layout is not None]
    return [view.render_call(call) for view in views]


def call_format(fmt: ModelFormat, trigger: Trigger | None) -> ModelFormat:
    """The format a call begun by ``trigger`` is written in (``fmt`` itself for its own
    layout, or for a call the loop asks for without a trigger)."""
    if trigger is None or trigger.layout is None:
        return fmt
    return LayoutView(fmt, trigger.layout)


class LayoutCalls:
    """Mixin for formats: a call is written from the format's layout and value encoding."""

    several: SeveralCalls | None = None

    def render_call(self, call: ToolCall) -> str:
        return render_call_from_layout(self, call)  # type: ignore[arg-type]


def render_call_from_layout(fmt: ModelFormat, call: ToolCall) -> str:
    """``head + prefix + value ... + tail``: the one way every format writes a call."""
    return "".join(text for text, _fixed in call_parts(fmt, call))


def call_parts(fmt: ModelFormat, call: ToolCall) -> list[tuple[str, bool]]:
    """The text of ``call`` in ``fmt``'s layout as ``(text, fixed)`` parts: the layout's head,
    prefixes and tail are fixed (the format's special tokens may appear there), the encoded
    values are not."""
    layout = fmt.layout
    parts = [(layout.head_for(call.name), True)]
    for index, (key, value) in enumerate(call.arguments.items()):
        parts.append((layout.prefix_for(key, first=index == 0), True))
        parts.append((fmt.encode_value(value), False))
    parts.append((layout.tail, True))
    return parts
