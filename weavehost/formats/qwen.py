"""Qwen / Hermes tool calls: ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``.

Used by Qwen2.5, Qwen3 and Hermes-style fine-tunes. Values are JSON. The GGUF's own chat
template renders the tools when it knows them (it says ``<tool_call>``); otherwise our template
below, which writes the same system prompt as Qwen2.5's.
"""

from __future__ import annotations

from weavehost.formats.base import CallLayout, LayoutCalls, ToolCall, Trigger
from weavehost.formats.jsoncalls import (
    JsonValues,
    call_from_object,
    json_key_text,
    tagged_json_values,
)
from weavehost.formats.prompt import PromptStyle, StyledPrompt

__all__ = ["QWEN"]

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


class QwenFormat(JsonValues, LayoutCalls, StyledPrompt):
    name = "qwen"
    description = 'Qwen/Hermes: <tool_call>{"name": ..., "arguments": {...}}</tool_call>'
    layout = CallLayout(
        opener="<tool_call>",
        head='<tool_call>\n{{"name": "{name}", "arguments": {{',
        first_prefix='"{key}": ',
        next_prefix=', "{key}": ',
        tail="}}\n</tool_call>",
        closer="</tool_call>",
        escape=json_key_text,
    )
    triggers = (Trigger("<tool_call>"),)
    prompt = PromptStyle(fallback_template=_FALLBACK_TEMPLATE, template_marker="<tool_call>")

    def parse_calls(self, text: str) -> list[ToolCall]:
        return [
            call_from_object(obj, "arguments")
            for obj in tagged_json_values(text, "<tool_call>", "</tool_call>")
        ]


QWEN = QwenFormat()
