"""How a format's prompt is rendered: one function over each format's :class:`PromptStyle`.

Stage: prompt rendering. The formats differ here only in data: which GGUF chat templates they
trust to render tools, their own template for the others, the ``bos_token``, extra template
variables and Jinja filters, whether the format writes tools, calls and results as plain
text itself (:class:`ToolsInText`, SmolLM2's way), and the host's guidance in the format's own
words. :func:`render_prompt` is the one function that turns a style and a conversation into
segments.

Guarantees: every rendering goes through
:func:`~weavehost.formats.chat_template.render_chat_template`, so the sandbox and the
untrusted-text segments of :mod:`weavehost.formats.chat_template` hold for every
format; text a format writes itself around a conversation (:class:`ToolsInText`) is never
parsed for special tokens.

The host's guidance (:attr:`PromptStyle.guidance`: answer from the tool results, in the user's
language, call only when the answer needs it, write arguments as the schema describes) is
written only when asked for and tools are on offer. It follows the system text the model would
have had: the user's own system prompt (which still comes first), or else the model's default
one (the text its template writes when the conversation has no system message, found by
rendering); SmolLM2's way, after the tool definitions. Like every message's text, it is
never parsed for special tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from weavehost.formats.base import Segment, ToolCall, message_calls
from weavehost.formats.chat_template import merge_segments, render_chat_template
from weavehost.formats.several import render_calls

__all__ = ["PromptStyle", "StyledPrompt", "ToolsInText", "render_prompt"]


@dataclass(frozen=True, slots=True)
class ToolsInText:
    """A model whose chat template knows no tools: the format writes them as plain text.

    The tool definitions go into the system message between ``system_head`` and
    ``system_tail`` (after the user's own system text), each assistant call is written into the
    assistant's text as the format writes calls, and each tool result becomes a user message.
    """

    system_head: str
    system_tail: str


@dataclass(frozen=True, slots=True)
class PromptStyle:
    """Everything that tells one format's prompt from another's.

    ``template_marker``: a model's own chat template is used only when it holds this text (it
    then renders tools the way the format reads calls); ``""`` takes any template. Otherwise,
    and when the model has none, ``fallback_template`` renders the prompt. ``guidance``: the
    host's short system text, in the words the format's prompt uses for calls and results
    (``""``: none). ``repairs``: known flaws of templates the format uses, each
    ``(flaw, fix)`` replaced before it renders.
    """

    fallback_template: str
    template_marker: str
    bos_token: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    filters: Mapping[str, Callable[..., str]] = field(default_factory=dict)
    tools_in_text: ToolsInText | None = None
    guidance: str = ""
    repairs: tuple[tuple[str, str], ...] = ()

    def template(self, chat_template: str | None) -> str:
        if chat_template and self.template_marker in chat_template:
            for flaw, fix in self.repairs:
                chat_template = chat_template.replace(flaw, fix)
            return chat_template
        return self.fallback_template


class _Styled(Protocol):
    prompt: PromptStyle

    def render_call(self, call: ToolCall) -> str: ...


def render_prompt(
    fmt: _Styled,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    *,
    chat_template: str | None,
    add_generation_prompt: bool = True,
    guidance: bool = False,
) -> list[Segment]:
    """The prompt for ``messages`` with ``tools`` offered, in ``fmt``'s style; ``guidance``:
    with the style's guidance in its system text (only where tools are on offer)."""
    style = fmt.prompt
    template = style.template(chat_template)
    text = style.guidance if guidance and tools else ""
    if style.tools_in_text is not None:
        return _render_tools_in_text(
            fmt, style.tools_in_text, template, messages, tools, add_generation_prompt, text
        )
    if text:
        messages = _with_guidance(style, template, messages, tools, text)
    return _render(style, template, messages, tools, add_generation_prompt)


def _with_guidance(
    style: PromptStyle,
    template: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    guidance: str,
) -> list[Mapping[str, Any]]:
    """``messages`` whose system message ends with ``guidance``: after the user's own system
    text, or after the model's default one where the user gave none."""
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        first["content"] = f"{first.get('content') or ''}\n\n{guidance}"
        return [first, *messages[1:]]
    own = _default_system(style, template, tools)
    system = f"{own}\n\n{guidance}" if own else guidance
    return [{"role": "system", "content": system}, *messages]


def _default_system(style: PromptStyle, template: str, tools: Sequence[Mapping[str, Any]]) -> str:
    """The system text ``template`` writes when a conversation has none (Qwen2.5's "You are
    Qwen, created by Alibaba Cloud…"; ``""`` for a template that writes none): the text that
    stands where a system message's content would, found by rendering both."""
    user = {"role": "user", "content": "a"}
    bare = _text(_render(style, template, [user], tools, True))
    marked = _text(_render(style, template, [{"role": "system", "content": _SYSTEM_MARKER}, user],
                           tools, True))  # fmt: skip
    before, found, after = marked.partition(_SYSTEM_MARKER)
    if not found or not (bare.startswith(before) and bare.endswith(after)):
        return ""
    return bare[len(before) : len(bare) - len(after)].strip()


def _text(segments: Sequence[Segment]) -> str:
    return "".join(segment.text for segment in segments)


def _render(
    style: PromptStyle,
    template: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None,
    add_generation_prompt: bool,
) -> list[Segment]:
    return render_chat_template(
        template,
        messages,
        tools,
        add_generation_prompt=add_generation_prompt,
        bos_token=style.bos_token,
        extra=style.extra,
        filters=style.filters,
    )


class StyledPrompt:
    """Mixin for formats: ``render_prompt`` is :func:`render_prompt`, with the format itself as
    its first argument (one function, not a copy of its signature per format)."""

    prompt: PromptStyle
    render_prompt = render_prompt


# Stands for the format's system text while the template renders; a private-use character
# around it, as the placeholders of untrusted text, so no template writes it by chance.
_SYSTEM_MARKER = "\U000f0fffWEAVEHOST_TOOLS\U000f0fff"


def _render_tools_in_text(
    fmt: _Styled,
    own: ToolsInText,
    template: str,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]],
    add_generation_prompt: bool,
    guidance: str,
) -> list[Segment]:
    plain: list[dict[str, Any]] = []
    for message in messages:
        if message.get("role") == "assistant" and message.get("tool_calls"):
            calls = message_calls(message)
            text = (message.get("content") or "") + render_calls(fmt, calls)  # type: ignore[arg-type]
            plain.append({"role": "assistant", "content": text})
        elif message.get("role") == "tool":
            plain.append({"role": "user", "content": str(message.get("content", ""))})
        else:
            plain.append({"role": message["role"], "content": message.get("content") or ""})
    if not tools:
        return _render(fmt.prompt, template, plain, None, add_generation_prompt)
    user_system = ""
    if plain and plain[0]["role"] == "system":
        user_system = plain.pop(0)["content"] + "\n\n"
    # The system message is ours except the tool definitions and the user's own system text,
    # which are untrusted: render with a placeholder, then splice the parts in as segments.
    system = [{"role": "system", "content": _SYSTEM_MARKER}]
    rendered = _render(fmt.prompt, template, [*system, *plain], None, add_generation_prompt)
    tools_text = "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools) + "\n"
    out: list[Segment] = []
    for segment in rendered:
        if segment.special or _SYSTEM_MARKER not in segment.text:
            out.append(segment)
            continue
        # A template that writes the messages back to back, with no text of its own between
        # them, leaves the marker inside the next message's text: spliced there too.
        before, _, after = segment.text.partition(_SYSTEM_MARKER)
        out += [Segment(before, special=False)] if before else []
        out.append(Segment(user_system, special=False))
        out.append(Segment(own.system_head, special=False))
        out.append(Segment(tools_text, special=False))
        out.append(Segment(own.system_tail, special=False))
        if guidance:
            out.append(Segment("\n\n" + guidance, special=False))
        out += [Segment(after, special=False)] if after else []
    return merge_segments(out)
