"""The clean prompt view of a tool's schema is built once per schema and never stale."""

from __future__ import annotations

from types import MappingProxyType

from tests.schemas import CURRENT_WEATHER
from weavehost.formats import FORMATS, tool_to_openai
from weavehost.formats.toolprompt import prompt_parameters

SCHEMA = {
    "type": "object",
    "title": "get_weatherArguments",
    "properties": {"city": {"type": "string", "title": "City"}},
    "required": ["city"],
}


def test_rendering_the_same_tool_again_reuses_its_view() -> None:
    first = tool_to_openai("get_weather", "The weather.", SCHEMA)["function"]["parameters"]
    again = tool_to_openai("get_weather", "The weather.", dict(SCHEMA))["function"]["parameters"]
    assert again is first
    assert first == {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    }


def test_a_schema_that_changed_gets_its_own_view_never_a_stale_one() -> None:
    before = prompt_parameters(SCHEMA)
    changed = {**SCHEMA, "properties": {**SCHEMA["properties"], "units": {"type": "string"}}}
    after = prompt_parameters(changed)
    assert after is not before
    assert list(after["properties"]) == ["city", "units"]
    reordered = {**SCHEMA, "properties": {"units": {"type": "string"}, "city": {"type": "string"}}}
    assert list(prompt_parameters(reordered)["properties"]) == ["units", "city"]


def test_a_frozen_catalog_schema_has_the_view_of_the_same_schema_as_dicts() -> None:
    frozen = MappingProxyType(
        {**SCHEMA, "properties": MappingProxyType(SCHEMA["properties"]), "required": ("city",)}
    )
    assert prompt_parameters(frozen) is prompt_parameters(SCHEMA)


def test_a_value_json_cannot_write_still_gets_a_view() -> None:
    odd = {"type": "object", "title": "x", "default": {1, 2}}
    assert prompt_parameters(odd) == {"type": "object", "default": {1, 2}}


def test_a_template_writing_messages_back_to_back_gets_the_tools_and_no_placeholder() -> None:
    # With no template text between messages the system placeholder shares a text segment
    # with the user's message: it is spliced there too, never shown to the model.
    back_to_back = "{% for m in messages %}{{ m.content }}{% endfor %}"
    tools = [tool_to_openai(CURRENT_WEATHER.name, CURRENT_WEATHER.description,
                            CURRENT_WEATHER.parameters)]  # fmt: skip
    messages = [{"role": "system", "content": "Answer."}, {"role": "user", "content": "hi"}]
    segments = FORMATS["smollm2"].render_prompt(messages, tools, chat_template=back_to_back)
    text = "".join(segment.text for segment in segments)
    assert "WEAVEHOST" not in text and "\U000f0fff" not in text
    assert text.startswith("Answer.") and text.endswith("hi")
    assert CURRENT_WEATHER.description in text
