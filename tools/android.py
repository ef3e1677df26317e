"""Example MCP server: Android-style intents in the manner of the DroidCall benchmark.

Run it over stdio with ``python tools/android.py``; import :func:`build_server` (or the default
:data:`server`) to use it in-process. Nothing touches a real phone: the tools act on an
in-memory device state, deterministic from a fresh start, so tests and benchmarks can check what
a call did.

Tools that change the device (alarms, timers, messages, calls, calendar, apps, settings) are
annotated ``readOnlyHint: false`` and must be approved; look-ups (contacts, battery, alarms,
location, search) are ``readOnlyHint: true``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Annotated, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
CHANGES = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
SENDS = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)
Weekday = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
CONTACTS = (
    {"name": "Alice Chen", "phone": "+1-555-0101", "email": "alice@example.com"},
    {"name": "Bob Okafor", "phone": "+1-555-0102", "email": "bob@example.com"},
    {"name": "Carmen Ruiz", "phone": "+1-555-0103", "email": "carmen@example.com"},
    {"name": "Dmitri Ivanov", "phone": "+1-555-0104", "email": "dmitri@example.com"},
    {"name": "Alicia Keyes", "phone": "+1-555-0105", "email": "alicia@example.com"},
)
APPS = ("camera", "calendar", "chrome", "clock", "contacts", "gmail", "maps", "messages",
        "phone", "photos", "settings", "spotify", "youtube")  # fmt: skip


@dataclass
class Device:
    """The fake phone's state."""

    alarms: list[dict[str, object]] = field(default_factory=list)
    timers: list[dict[str, object]] = field(default_factory=list)
    messages: list[dict[str, str]] = field(default_factory=list)
    events: list[dict[str, object]] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    foreground_app: str = "launcher"
    volume: dict[str, int] = field(default_factory=lambda: {"media": 7, "ring": 5, "alarm": 6})
    settings: dict[str, bool] = field(
        default_factory=lambda: {"wifi": True, "bluetooth": False, "airplane_mode": False,
                                 "flashlight": False, "do_not_disturb": False}
    )  # fmt: skip
    battery_percent: int = 73
    charging: bool = False


def build_server(device: Device | None = None) -> MCPServer:
    """A server over ``device`` (a fresh one by default)."""
    phone = device or Device()
    server = MCPServer(
        "android", instructions="Control a (simulated) Android phone.", log_level="WARNING"
    )

    @server.tool(annotations=CHANGES)
    def set_alarm(
        hour: Annotated[int, Field(ge=0, le=23, description="Hour, 0-23.")],
        minute: Annotated[int, Field(ge=0, le=59, description="Minute, 0-59.")],
        label: Annotated[str, Field(description="Optional label shown when it rings.")] = "",
        days: Annotated[
            list[Weekday], Field(description="Weekdays to repeat on; empty = once.")
        ] = [],  # noqa: B006
        vibrate: Annotated[bool, Field(description="Vibrate when ringing.")] = True,
    ) -> str:
        """Set an alarm on the phone's clock app."""
        alarm = {"id": len(phone.alarms) + 1, "time": f"{hour:02d}:{minute:02d}", "label": label,
                 "days": list(days), "vibrate": vibrate}  # fmt: skip
        phone.alarms.append(alarm)
        return f"alarm {alarm['id']} set for {alarm['time']}" + (f" ({label})" if label else "")

    @server.tool(annotations=READ_ONLY)
    def list_alarms(
        include_disabled: Annotated[bool, Field(description="Also list disabled alarms.")] = False,
    ) -> str:
        """List the alarms set on the phone."""
        return json.dumps(phone.alarms) if phone.alarms else "no alarms set"

    @server.tool(annotations=CHANGES)
    def set_timer(
        duration_seconds: Annotated[
            int, Field(ge=1, le=86400, description="How long to count down, in seconds.")
        ],
        label: Annotated[str, Field(description="Optional label shown when it ends.")] = "",
    ) -> str:
        """Start a countdown timer on the phone's clock app."""
        timer = {"id": len(phone.timers) + 1, "seconds": duration_seconds, "label": label}
        phone.timers.append(timer)
        minutes, seconds = divmod(duration_seconds, 60)
        return f"timer {timer['id']} set for {minutes}:{seconds:02d}" + (
            f" ({label})" if label else ""
        )

    @server.tool(annotations=SENDS)
    def send_message(
        recipient: Annotated[str, Field(description="Contact name or phone number.")],
        text: Annotated[str, Field(description="Message body.")],
    ) -> str:
        """Send an SMS text message."""
        phone.messages.append({"to": recipient, "text": text})
        return f"message sent to {recipient}"

    @server.tool(annotations=READ_ONLY)
    def search_contacts(
        query: Annotated[str, Field(description="Part of a name, number or email.")],
        limit: Annotated[int, Field(ge=1, le=50, description="Most results to return.")] = 5,
    ) -> str:
        """Search the phone's contacts."""
        q = query.strip().lower()
        hits = [c for c in CONTACTS if any(q in v.lower() for v in c.values())][:limit]
        return json.dumps(hits) if hits else f"no contact matches {query!r}"

    @server.tool(annotations=CHANGES)
    def create_calendar_event(
        title: Annotated[str, Field(description="Event title.")],
        start_time: Annotated[str, Field(description="Start, ISO 8601 (2025-05-01T09:00).")],
        end_time: Annotated[str, Field(description="End, ISO 8601; default one hour.")] = "",
        location: Annotated[str, Field(description="Where it takes place.")] = "",
        attendees: Annotated[list[str], Field(description="Emails to invite.")] = [],  # noqa: B006
    ) -> str:
        """Create an event in the phone's calendar."""
        event = {"id": len(phone.events) + 1, "title": title, "start": start_time, "end": end_time,
                 "location": location, "attendees": list(attendees)}  # fmt: skip
        phone.events.append(event)
        return f"event {event['id']} '{title}' created at {start_time}"

    @server.tool(annotations=CHANGES)
    def open_app(
        app_name: Annotated[str, Field(description=f"App to open, e.g. {', '.join(APPS[:4])}.")],
    ) -> str:
        """Open an installed app."""
        name = app_name.strip().lower()
        if name not in APPS:
            raise ToolError(f"no app named {app_name!r}; installed: {', '.join(APPS)}")
        phone.foreground_app = name
        return f"{name} opened"

    @server.tool(annotations=READ_ONLY)
    def get_battery_status(
        detailed: Annotated[bool, Field(description="Include charging details.")] = False,
    ) -> str:
        """Get the battery level (and charging state)."""
        text = f"battery at {phone.battery_percent}%"
        return (
            text + (", not charging" if not phone.charging else ", charging") if detailed else text
        )

    @server.tool(annotations=SENDS)
    def make_phone_call(
        phone_number: Annotated[str, Field(description="Number to dial, or a contact name.")],
        speaker: Annotated[bool, Field(description="Use the speakerphone.")] = False,
    ) -> str:
        """Place a phone call."""
        phone.calls.append(phone_number)
        return f"calling {phone_number}" + (" on speaker" if speaker else "")

    @server.tool(annotations=CHANGES)
    def set_volume(
        level: Annotated[int, Field(ge=0, le=15, description="Volume level, 0-15.")],
        stream: Annotated[
            Literal["media", "ring", "alarm"], Field(description="Which stream.")
        ] = "media",
    ) -> str:
        """Set the volume of a sound stream."""
        phone.volume[stream] = level
        return f"{stream} volume set to {level}"

    @server.tool(annotations=CHANGES)
    def toggle_setting(
        setting: Annotated[
            Literal["wifi", "bluetooth", "airplane_mode", "flashlight", "do_not_disturb"],
            Field(description="The quick setting to change."),
        ],
        enabled: Annotated[bool, Field(description="Turn it on (true) or off (false).")],
    ) -> str:
        """Turn a quick setting on or off."""
        phone.settings[setting] = enabled
        return f"{setting} turned {'on' if enabled else 'off'}"

    @server.tool(annotations=READ_ONLY)
    def get_current_location(
        precise: Annotated[bool, Field(description="Use GPS instead of network location.")] = False,
    ) -> str:
        """Get the phone's current location."""
        return "47.3769 N, 8.5417 E (Zurich, CH)" + (" ±5 m" if precise else " ±500 m")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=True))
    def web_search(
        query: Annotated[str, Field(description="What to search for.")],
        max_results: Annotated[int, Field(ge=1, le=10, description="How many results.")] = 3,
    ) -> str:
        """Search the web (simulated results)."""
        return "\n".join(f"{i}. result {i} for {query!r}" for i in range(1, max_results + 1))

    return server


server = build_server()

if __name__ == "__main__":
    server.run()
