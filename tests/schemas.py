"""Tool schemas more than one test module offers the model (one definition each)."""

from __future__ import annotations

from weavehost.decode import ToolSchema

# A forecast with two required values and an optional enum: the decoder tests' main tool.
FORECAST = ToolSchema(
    "get_weather",
    "Get the weather forecast for a city",
    {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {"type": "integer"},
            "units": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city", "days"],
    },
)
LIGHTS = ToolSchema(
    "switch_lights",
    "Turn lights on or off in a room",
    {
        "type": "object",
        "properties": {"room": {"type": "string"}, "on": {"type": "boolean"}},
        "required": ["room", "on"],
    },
)
# The agent tests' one-argument weather tool, as tools/weather.py names it.
CURRENT_WEATHER = ToolSchema(
    "get_current_weather",
    "Get the current weather in a city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name."}},
        "required": ["city"],
    },
)
