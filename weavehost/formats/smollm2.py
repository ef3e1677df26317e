"""SmolLM2 tool calls: ``<tool_call>[{"name": ..., "arguments": {...}}]</tool_call>``.

SmolLM2-Instruct was tuned for function calling with a list of calls inside ``<tool_call>``
tags and the tools listed in the system prompt between ``<tools>`` tags. The chat template in
SmolLM2's GGUF files knows nothing of tools, so this format writes that system prompt itself and
renders the conversation with the GGUF's ChatML template (or our copy of it).
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
from weavehost.formats.prompt import PromptStyle, StyledPrompt, ToolsInText
from weavehost.formats.qwen import CHATML_MARKERS
from weavehost.formats.several import SeveralCalls

if TYPE_CHECKING:
    from weavehost.gguf import GGUFMetadata

__all__ = ["BARE_LIST", "CHATML_TEMPLATE", "LIST_FIRST", "LIST_NEXT", "SMOLLM2"]

# Plain ChatML, no tools: SmolLM2's own template (the format writes the tools itself).
CHATML_TEMPLATE = """\
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


BARE_LIST = CallLayout(
    opener='[{"name"',
    head='[{{"name": "{name}", "arguments": {{',
    first_prefix='"{key}": ',
    next_prefix=', "{key}": ',
    tail="}}]",
    closer="<|im_end|>",
    escape=json_key_text,
)


# Several calls are one list. The first call stops after its arguments' ``}``, so the model
# writes the token it would write anyway, ``},`` (another call, in LIST_NEXT) or ``}]`` (done:
# the list is closed for it); a tail of ``}}`` would make it decide after a token split it never
# writes (SmolLM2-135M then ranks ``},`` over ``]``).
LIST_FIRST = CallLayout(
    opener="<tool_call>",
    head='<tool_call>[{{"name": "{name}", "arguments": {{',
    first_prefix='"{key}": ',
    next_prefix=', "{key}": ',
    tail="}",
    closer="</tool_call>",
    escape=json_key_text,
    reads_as=("", "}]</tool_call>"),
)
LIST_NEXT = CallLayout(
    opener="},",
    head='}}, {{"name": "{name}", "arguments": {{',
    first_prefix='"{key}": ',
    next_prefix=', "{key}": ',
    tail="}",
    closer="</tool_call>",
    escape=json_key_text,
    reads_as=("<tool_call>[", "}]</tool_call>"),
    joins="}, ",
)


class SmolLM2Format(JsonValues, LayoutCalls, StyledPrompt):
    name = "smollm2"
    description = 'SmolLM2: <tool_call>[{"name": ..., "arguments": {...}}]</tool_call>'
    aliases = ("smollm2-list",)
    control_markers = CHATML_MARKERS
    layout = CallLayout(
        opener="<tool_call>",
        head='<tool_call>[{{"name": "{name}", "arguments": {{',
        first_prefix='"{key}": ',
        next_prefix=', "{key}": ',
        tail="}}]</tool_call>",
        closer="</tool_call>",
        escape=json_key_text,
    )
    # SmolLM2 often writes its list of calls without the tags, as the whole reply.
    triggers = (Trigger("<tool_call>"), Trigger(BARE_LIST.opener, at_start=True, layout=BARE_LIST))
    several = SeveralCalls(
        more=Trigger(LIST_NEXT.opener, at_start=True, layout=LIST_NEXT),
        first=LIST_FIRST,
        close="}]</tool_call>",
    )
    # Any GGUF template will do (SmolLM2's is plain ChatML): the tools are ours to write.
    prompt = PromptStyle(
        fallback_template=CHATML_TEMPLATE,
        template_marker="",
        tools_in_text=ToolsInText(system_head=_SYSTEM_HEAD, system_tail=_SYSTEM_TAIL),
        guidance=(
            "Once you have the tools' results, answer the question from them, in the language "
            "the user writes in. Make tool calls only when the answer needs them. Give each "
            "argument in the form its description in <tools></tools> asks for."
        ),
    )

    def detect(self, metadata: GGUFMetadata) -> Clue | None:
        basename = str(metadata.get("general.basename", "")).lower()
        if "smollm" in basename or metadata.get("tokenizer.ggml.pre") == "smollm":
            return Clue("the model is SmolLM2 (GGUF basename/pre-tokenizer)")
        return None

    def parse_calls(self, text: str) -> list[ToolCall]:
        """The calls in ``<tool_call>`` blocks; without any, those of a reply that is a bare
        list of calls (how :data:`BARE_LIST` writes them)."""
        if "<tool_call>" in text:
            values = tagged_json_values(text, "<tool_call>", "</tool_call>")
        elif text.lstrip().startswith(BARE_LIST.opener):
            values = decode_json_values(text.replace("<|im_end|>", "").strip())
        else:
            values = []
        calls = []
        for value in values:
            items = value if isinstance(value, list) else [value]
            calls.extend(call_from_object(item, "arguments") for item in items)
        return calls


SMOLLM2 = SmolLM2Format()
