"""Qwen / Hermes tool calls: ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``.

Used by Qwen2.5, Qwen3 and Hermes-style fine-tunes. Values are JSON. The GGUF's own chat
template renders the tools when it knows them (it says ``<tool_call>``); otherwise our template
below, which writes the same system prompt as Qwen2.5's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from weavehost.formats.base import CallLayout, LayoutCalls, ToolCall, Trigger
from weavehost.formats.declared import Clue
from weavehost.formats.jsoncalls import (
    JsonValues,
    call_from_object,
    decode_json_values,
    json_key_text,
    tagged_json_values,
)
from weavehost.formats.prompt import PromptStyle, StyledPrompt
from weavehost.formats.several import SeveralCalls

if TYPE_CHECKING:
    from weavehost.gguf import GGUFMetadata

__all__ = [
    "BARE_CALL",
    "BARE_INDENTED_CALL",
    "CHATML_MARKERS",
    "DOUBLED_BRACES",
    "FENCED_CALL",
    "FENCED_INDENTED_CALL",
    "QWEN",
]

# The turn markers of ChatML (Qwen, Hermes, SmolLM2).
CHATML_MARKERS = frozenset({"<|im_start|>", "<|im_end|>", "<|endoftext|>"})

_FALLBACK_TEMPLATE = """\
{%- if tools %}<|im_start|>system
{% if messages[0].role == 'system' %}{{ messages[0].content }}{% else %}You are a helpful assistant.{% endif %}


# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{%- for tool in tools %}
{{ tool | tojson }}
{%- endfor %}

</tools>

For each function call, return a json object with function name and arguments within \
<tool_call></tool_call> XML tags:
<tool_call>
{"name": <function-name>, "arguments": <args-json-object>}
</tool_call><|im_end|>
{% elif messages[0].role == 'system' %}<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- for message in messages %}
{%- if message.role == 'system' and loop.first %}
{%- elif message.role == 'assistant' and message.tool_calls %}<|im_start|>assistant
{% if message.content %}{{ message.content }}
{% endif %}
{%- for call in message.tool_calls %}<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments | tojson }}}
</tool_call>{% endfor %}<|im_end|>
{% elif message.role == 'tool' %}<|im_start|>user
<tool_response>
{{ message.content }}
</tool_response><|im_end|>
{% else %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

# Some Qwen2.5 GGUFs (Qwen2.5-Coder-1.5B-Instruct's) write the call example of the system prompt
# with doubled braces, as the text of a Python format string, so the model reads
# {{"name": ...}}; repaired, the template is the 0.5B's to the byte, and so is the prompt.
DOUBLED_BRACES = (
    r"{{\"name\": <function-name>, \"arguments\": <args-json-object>}}",
    r"{\"name\": <function-name>, \"arguments\": <args-json-object>}",
)


def _json_layout(
    opener: str, before: str, after: str, closer: str, *, indent: str = ""
) -> CallLayout:
    """``before + {"name": …, "arguments": {…}} + after``: one call object, however wrapped.
    ``indent``: the object's first lines as ``json.dumps(indent=2)`` writes them (the model
    starts so); the arguments are written compactly, which JSON reads the same."""
    newline = "\n" + indent if indent else ""
    return CallLayout(
        opener=opener,
        head=before + "{{" + newline + '"name": "{name}",' + (newline or " ") + '"arguments": {{',
        first_prefix='"{key}": ',
        next_prefix=', "{key}": ',
        tail=("}\n}" if indent else "}}") + after,  # the tail is plain text, not a template
        closer=closer,
        escape=json_key_text,
    )


# How small Qwen models write a call when they skip the tags (Qwen2.5-Coder-0.5B asked "What
# time is it in Tokyo?" answers with the bare object; on BFCL questions it mostly writes a
# fenced block, indented): the whole reply, or a fenced block, compact or indented.
BARE_CALL = _json_layout('{"name"', "", "", "<|im_end|>")
BARE_INDENTED_CALL = _json_layout('{\n  "name"', "", "", "<|im_end|>", indent="  ")
FENCED_CALL = _json_layout('```json\n{"name"', "```json\n", "\n```", "\n```")
FENCED_INDENTED_CALL = _json_layout(
    '```json\n{\n  "name"', "```json\n", "\n```", "\n```", indent="  "
)


class QwenFormat(JsonValues, LayoutCalls, StyledPrompt):
    name = "qwen"
    description = 'Qwen/Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>'
    aliases = ("hermes", "qwen3", "qwen2.5")
    # ``<tool_call>`` is an added token that llama.cpp matches even in plain text.
    control_markers = CHATML_MARKERS | {
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
    }
    layout = _json_layout("<tool_call>", "<tool_call>\n", "\n</tool_call>", "</tool_call>")
    triggers = (
        Trigger("<tool_call>"),
        Trigger(BARE_CALL.opener, at_start=True, layout=BARE_CALL),
        # After a tool result the same model often "answers" with the call again, indented.
        Trigger(BARE_INDENTED_CALL.opener, at_start=True, layout=BARE_INDENTED_CALL),
        Trigger(FENCED_CALL.opener, layout=FENCED_CALL),
        Trigger(FENCED_INDENTED_CALL.opener, layout=FENCED_INDENTED_CALL),
    )
    # Several calls are several blocks: after a call's </tool_call> the model may begin another.
    several = SeveralCalls(more=Trigger("<tool_call>", at_start=True))
    prompt = PromptStyle(
        fallback_template=_FALLBACK_TEMPLATE,
        template_marker="<tool_call>",
        guidance=(
            "Answer from the results within <tool_response></tool_response> tags. Reply in the "
            "language the user writes in. Call a function only when the answer needs it; "
            "otherwise answer directly. Write each argument in the form its description within "
            "<tools></tools> asks for."
        ),
        repairs=(DOUBLED_BRACES,),
    )

    def detect(self, metadata: GGUFMetadata) -> Clue | None:
        """A chat template that writes ``<tool_call>`` (Qwen2.5, Qwen3, Hermes); weakly, any
        ChatML model (its template or vocabulary has ``<|im_start|>``): the Hermes prompt."""
        template = metadata.chat_template or ""
        if "<tool_call>" in template:
            return Clue("the chat template writes <tool_call>")
        if "<|im_start|>" in template or "<|im_start|>" in metadata.tokens:
            return Clue("a ChatML model with no tool syntax: using the Hermes prompt", weak=True)
        return None

    def parse_calls(self, text: str) -> list[ToolCall]:
        """The calls in ``<tool_call>`` blocks; without any, those of a fenced ``json`` block
        or of a reply that is bare JSON (how the triggers' layouts write them)."""
        if "<tool_call>" in text:
            values = tagged_json_values(text, "<tool_call>", "</tool_call>")
        elif "```json" in text:
            values = tagged_json_values(text, "```json", "```")
        elif text.lstrip().startswith((BARE_CALL.opener, BARE_INDENTED_CALL.opener)):
            values = decode_json_values(text.replace("<|im_end|>", "").strip())
        else:
            values = []
        return [call_from_object(obj, "arguments") for obj in values]


QWEN = QwenFormat()
