"""Llama 3.2 JSON tool calls: ``{"name": ..., "parameters": {...}}`` as the whole reply.

Llama 3.1/3.2 instruct models answer a tool request with a bare JSON object (optionally after
``<|python_tag|>``) and end the turn with ``<|eot_id|>``. The GGUF's chat template renders the
tools into the first user message when it knows them (it mentions ``parameters``); otherwise our
template below, which follows Meta's wording for zero-shot JSON tool calling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from weavehost.errors import FormatError
from weavehost.formats.base import CallLayout, LayoutCalls, ToolCall, Trigger
from weavehost.formats.declared import Clue
from weavehost.formats.jsoncalls import (
    JsonValues,
    call_from_object,
    decode_json_values,
    json_key_text,
)
from weavehost.formats.prompt import PromptStyle, StyledPrompt

if TYPE_CHECKING:
    from weavehost.gguf import GGUFMetadata

__all__ = ["LLAMA3", "TYPED_CALL"]

_FALLBACK_TEMPLATE = """\
{{- bos_token }}
{%- if messages[0].role == 'system' %}{% set system = messages[0].content %}{% set rest = messages[1:] %}\
{% else %}{% set system = '' %}{% set rest = messages %}{% endif %}
<|start_header_id|>system<|end_header_id|>

Environment: ipython
{{ system }}<|eot_id|>
{%- for message in rest %}
{%- if loop.first and tools and message.role == 'user' %}<|start_header_id|>user<|end_header_id|>

Given the following functions, please respond with a JSON for a function call with its proper \
arguments that best answers the given prompt.

Respond in the format {"name": function name, "parameters": dictionary of argument name and its \
value}. Do not use variables.

{% for tool in tools %}{{ tool | tojson(indent=4) }}

{% endfor %}{{ message.content }}<|eot_id|>
{%- elif message.role == 'assistant' and message.tool_calls %}\
<|start_header_id|>assistant<|end_header_id|>

{% for call in message.tool_calls %}\
{"name": "{{ call.function.name }}", "parameters": {{ call.function.arguments | tojson }}}\
{% endfor %}<|eot_id|>
{%- elif message.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>

{{ message.content }}<|eot_id|>
{%- else %}<|start_header_id|>{{ message.role }}<|end_header_id|>

{{ message.content }}<|eot_id|>
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>

{% endif %}"""


# Llama 3.2 also writes a call tagged with its type (the OpenAI shape): ``{"type": "function",
# "name": ..., "parameters": {...}}``. It is read back like the plain one ("type" is ignored).
TYPED_CALL = CallLayout(
    opener='{"type": "function"',
    head='{{"type": "function", "name": "{name}", "parameters": {{',
    first_prefix='"{key}": ',
    next_prefix=', "{key}": ',
    tail="}}",
    closer="<|eot_id|>",
    escape=json_key_text,
)
_OPENERS = ('{"name"', TYPED_CALL.opener)


class Llama3Format(JsonValues, LayoutCalls, StyledPrompt):
    name = "llama3"
    description = 'Llama 3.2 JSON: {"name": ..., "parameters": {...}}'
    aliases = ("llama3-json",)
    control_markers = frozenset({
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eot_id|>",
        "<|eom_id|>",
        "<|python_tag|>",
    })  # fmt: skip
    layout = CallLayout(
        opener='{"name"',
        head='{{"name": "{name}", "parameters": {{',
        first_prefix='"{key}": ',
        next_prefix=', "{key}": ',
        tail="}}",
        closer="<|eot_id|>",
        escape=json_key_text,
    )
    triggers = (
        Trigger('{"name"', at_start=True),
        Trigger(TYPED_CALL.opener, at_start=True, layout=TYPED_CALL),
    )
    prompt = PromptStyle(
        fallback_template=_FALLBACK_TEMPLATE,
        template_marker="parameters",
        bos_token="<|begin_of_text|>",
        extra={"tools_in_user_message": True, "date_string": "26 Jul 2024"},
        guidance=(
            "Answer from the output of the functions you called. Reply in the language the user "
            "writes in. Respond with a function call only when the answer needs one; otherwise "
            "answer in plain text. Give each parameter in the form its description asks for."
        ),
    )

    def detect(self, metadata: GGUFMetadata) -> Clue | None:
        if "<|start_header_id|>" in metadata.tokens:
            return Clue("the vocabulary has Llama 3 header tokens")
        return None

    def parse_calls(self, text: str) -> list[ToolCall]:
        body = (
            text.replace("<|python_tag|>", "").replace("<|eot_id|>", "").replace("<|eom_id|>", "")
        )
        starts = [at for at in (body.find(o) for o in _OPENERS) if at >= 0]
        if not starts:
            return []
        start = min(starts)
        body = body[start:].strip()
        calls = []
        for obj in decode_json_values(body):
            key = "parameters" if isinstance(obj, dict) and "parameters" in obj else "arguments"
            calls.append(call_from_object(obj, key))
        if not calls:
            raise FormatError("a JSON tool call was started but holds no call")
        return calls


LLAMA3 = Llama3Format()
