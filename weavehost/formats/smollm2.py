"""SmolLM2 tool calls: ``<tool_call>[{"name": ..., "arguments": {...}}]</tool_call>``.

SmolLM2-Instruct was tuned for function calling with a list of calls inside ``<tool_call>``
tags and the tools listed in the system prompt between ``<tools>`` tags. The chat template in
SmolLM2's GGUF files knows nothing of tools, so this format writes that system prompt itself and
renders the conversation with the GGUF's ChatML template (or our copy of it).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from weavehost.formats.base import (
    CallLayout,
    LayoutCalls,
    Segment,
    ToolCall,
    Trigger,
    merge_segments,
    render_chat_template,
)
from weavehost.formats.jsoncalls import (
    JsonValues,
    call_from_object,
    json_key_text,
    tagged_json_values,
)

__all__ = ["SMOLLM2"]

_CHATML = """\
{%- for message in messages %}<|im_start|>{{ message.role }}
{{ message.content }}<|im_end|>
{% endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% endif %}"""

_SYSTEM_HEAD = (
    "You are an expert in composing functions. You are given a question and a set of possible "
    "functions. Based on the question, you will need to make one or more function/tool calls to "
    "achieve the purpose. If none of the functions can be used, point it out and refuse to "
    "answer. If the given question lacks the parameters required by the function, also point "
    "it out.\n\nYou have access to the following tools:\n<tools>"
)
_SYSTEM_TAIL = (
    "</tools>\n\nThe output MUST strictly adhere to the following format, and NO other text "
    "MUST be included.\nThe example format is as follows. Please make sure the parameter type "
    "is correct. If no function call is needed, please make the tool calls an empty list "
    "'[]'.\n<tool_call>[\n"
    '{"name": "func_name1", "arguments": {"argument1": "value1", "argument2": "value2"}},\n'
    "... (more tool calls as required)\n]</tool_call>"
)


class SmolLM2Format(JsonValues, LayoutCalls):
    name = "smollm2"
    description = 'SmolLM2: <tool_call>[{"name": ..., "arguments": {...}}]</tool_call>'
    layout = CallLayout(
        opener="<tool_call>",
        head='<tool_call>[{{"name": "{name}", "arguments": {{',
        first_prefix='"{key}": ',
        next_prefix=', "{key}": ',
        tail="}}]</tool_call>",
        closer="</tool_call>",
        escape=json_key_text,
    )
    triggers = (Trigger("<tool_call>"),)

    def render_prompt(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
        *,
        chat_template: str | None,
        add_generation_prompt: bool = True,
    ) -> list[Segment]:
        template = chat_template or _CHATML
        plain: list[dict[str, Any]] = []
        for message in messages:
            if message.get("role") == "assistant" and message.get("tool_calls"):
                calls = [
                    ToolCall(c["function"]["name"], c["function"]["arguments"])
                    if "function" in c
                    else ToolCall(c["name"], c["arguments"])
                    for c in message["tool_calls"]
                ]
                text = (message.get("content") or "") + "".join(self.render_call(c) for c in calls)
                plain.append({"role": "assistant", "content": text})
            elif message.get("role") == "tool":
                plain.append({"role": "user", "content": str(message.get("content", ""))})
            else:
                plain.append({"role": message["role"], "content": message.get("content") or ""})
        if not tools:
            return render_chat_template(
                template, plain, None, add_generation_prompt=add_generation_prompt
            )
        user_system = ""
        if plain and plain[0]["role"] == "system":
            user_system = plain.pop(0)["content"] + "\n\n"
        # The system message is ours except the tool definitions and the user's own system text,
        # which are untrusted: render with a placeholder, then splice the parts in as segments.
        marker = "\U000f0fffWEAVEHOST_TOOLS\U000f0fff"
        rendered = render_chat_template(
            template,
            [{"role": "system", "content": marker}, *plain],
            None,
            add_generation_prompt=add_generation_prompt,
        )
        tools_text = "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools) + "\n"
        out: list[Segment] = []
        for segment in rendered:
            if not segment.special and segment.text == marker:
                out.append(Segment(user_system, special=False))
                out.append(Segment(_SYSTEM_HEAD, special=False))
                out.append(Segment(tools_text, special=False))
                out.append(Segment(_SYSTEM_TAIL, special=False))
            else:
                out.append(segment)
        return merge_segments(out)

    def parse_calls(self, text: str) -> list[ToolCall]:
        calls = []
        for value in tagged_json_values(text, "<tool_call>", "</tool_call>"):
            items = value if isinstance(value, list) else [value]
            calls.extend(call_from_object(item, "arguments") for item in items)
        return calls


SMOLLM2 = SmolLM2Format()
