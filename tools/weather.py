"""Example MCP server: current weather and forecasts, read-only, with deterministic fake data.

Run it over stdio with ``python tools/weather.py``; import :data:`server` to use it in-process.
No network: every number is derived from a hash of the city name and the day, so the same
question always gets the same answer (good for tests and benchmarks).
"""

from __future__ import annotations

import hashlib
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

server = MCPServer(
    "weather", instructions="Fake, deterministic weather for any city.", log_level="WARNING"
)

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False, idempotent_hint=True)
CONDITIONS = (
    "sunny",
    "partly cloudy",
    "cloudy",
    "light rain",
    "rain",
    "thunderstorms",
    "snow",
    "fog",
)
Units = Literal["metric", "imperial"]


def _seed(city: str, day: int) -> int:
    digest = hashlib.sha256(f"{city.strip().lower()}|{day}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def _day(city: str, day: int, units: Units) -> dict[str, object]:
    seed = _seed(city, day)
    celsius = (seed % 400) / 10 - 5  # -5.0 .. 34.9
    temp = round(celsius * 9 / 5 + 32, 1) if units == "imperial" else round(celsius, 1)
    return {
        "condition": CONDITIONS[(seed >> 12) % len(CONDITIONS)],
        "temperature": temp,
        "unit": "F" if units == "imperial" else "C",
        "humidity_percent": 30 + (seed >> 20) % 65,
        "wind": round(((seed >> 28) % 300) / 10 * (0.621 if units == "imperial" else 1), 1),
        "wind_unit": "mph" if units == "imperial" else "km/h",
    }


@server.tool(annotations=READ_ONLY)
def get_current_weather(
    city: Annotated[str, Field(description="City name, e.g. 'Berlin' or 'San Francisco'.")],
    units: Annotated[Units, Field(description="metric (C, km/h) or imperial (F, mph).")] = "metric",
) -> str:
    """Get the current weather in a city."""
    now = _day(city, 0, units)
    return (
        f"{city}: {now['condition']}, {now['temperature']} {now['unit']}, "
        f"humidity {now['humidity_percent']}%, wind {now['wind']} {now['wind_unit']}"
    )


@server.tool(annotations=READ_ONLY)
def get_forecast(
    city: Annotated[str, Field(description="City name.")],
    days: Annotated[int, Field(ge=1, le=7, description="Number of days to forecast, 1 to 7.")],
    units: Annotated[Units, Field(description="metric or imperial.")] = "metric",
) -> str:
    """Get a daily weather forecast for a city for the next 1 to 7 days."""
    lines = [f"{days}-day forecast for {city}:"]
    for day in range(1, days + 1):
        d = _day(city, day, units)
        lines.append(
            f"day {day}: {d['condition']}, {d['temperature']} {d['unit']}, "
            f"wind {d['wind']} {d['wind_unit']}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    server.run()
