"""The Android-intents set's templates about time: alarms, timers and calendar events.

Stage: benchmark input (listed by :func:`weavehost.bench.android_intents.all_templates`). The
requests convert words to numbers, 12-hour to 24-hour clock, durations to seconds, weekday
names to enum values and relative dates to ISO 8601 (read against :data:`TODAY`).
"""

from __future__ import annotations

from typing import Any

from weavehost.bench.android_phrasing import (
    TODAY,
    Accepted,
    Intent,
    given,
    make,
    pair,
    start_end,
)

__all__ = [
    "alarm_clock",
    "alarm_options",
    "alarm_repeat",
    "alarm_words",
    "calendar_details",
    "calendar_iso",
    "calendar_relative",
    "calendar_words",
    "list_alarms",
    "timer_label",
    "timer_seconds",
    "timer_words",
]


# --------------------------------------------------------------------------- alarms

_ALARM_PHRASINGS = (
    "Set an alarm for {t}.",
    "Wake me up at {t}.",
    "Can you set an alarm at {t} please?",
    "I need an alarm at {t}.",
    "Alarm for {t}, please.",
    "Please set my alarm to {t}.",
    "Make an alarm that goes off at {t}.",
    "Could you wake me at {t}?",
)
_ALARM_VERBATIM = (
    ("7:30 am", 7, 30), ("6:15 am", 6, 15), ("05:45", 5, 45), ("21:30", 21, 30),
    ("8:00 am", 8, 0), ("06:00", 6, 0), ("4:50 am", 4, 50), ("13:05", 13, 5),
    ("9:10 am", 9, 10), ("23:15", 23, 15),
)  # fmt: skip
_ALARM_WORDS = (
    ("a quarter past seven in the morning", 7, 15), ("half past six in the evening", 18, 30),
    ("noon", 12, 0), ("midnight", 0, 0), ("ten to eight in the morning", 7, 50),
    ("a quarter to six in the morning", 5, 45), ("9 pm", 21, 0),
    ("twenty past five in the morning", 5, 20), ("7:45 pm", 19, 45),
    ("half past eleven at night", 23, 30), ("five past nine in the morning", 9, 5),
    ("eleven fifteen pm", 23, 15),
)  # fmt: skip
_REPEAT_PHRASINGS = (
    "Set an alarm for {t} {d}.",
    "Wake me up at {t} {d}.",
    "I want a repeating alarm at {t} {d}.",
    "Make an alarm at {t} that repeats {d}.",
)
_WEEKDAYS = ["mon", "tue", "wed", "thu", "fri"]
_REPEATS = (
    ("6:30 am", 6, 30, "every weekday", _WEEKDAYS),
    ("09:00", 9, 0, "on weekends", ["sat", "sun"]),
    ("7:00 am", 7, 0, "every Monday and Wednesday", ["mon", "wed"]),
    ("05:30", 5, 30, "on Tuesdays and Thursdays", ["tue", "thu"]),
    ("8:15 am", 8, 15, "every Friday", ["fri"]),
    ("10:00", 10, 0, "every Sunday", ["sun"]),
    ("6:45 am", 6, 45, "on Mondays, Wednesdays and Fridays", ["mon", "wed", "fri"]),
    ("07:20", 7, 20, "every day", [*_WEEKDAYS, "sat", "sun"]),
)


def alarm_clock() -> list[Intent]:
    rows = [
        (phrasing.format(t=t), given(hour=[h], minute=[m]))
        for phrasing, (t, h, m) in pair(_ALARM_PHRASINGS, _ALARM_VERBATIM)
    ]
    return make("alarm_clock", "alarms", "set_alarm", ("verbatim",), rows)


def alarm_words() -> list[Intent]:
    phrasings = [p for p in _ALARM_PHRASINGS if "{t}." in p or "{t}?" in p][::-1]
    rows = [
        (phrasing.format(t=t), given(hour=[h], minute=[m]))
        for phrasing, (t, h, m) in pair(phrasings, _ALARM_WORDS)
    ]
    return make("alarm_words", "alarms", "set_alarm", ("conversion",), rows)


def alarm_repeat() -> list[Intent]:
    rows = [
        (phrasing.format(t=t, d=d), given(hour=[h], minute=[m], days=[days]))
        for phrasing, (t, h, m, d, days) in pair(_REPEAT_PHRASINGS, _REPEATS)
    ]
    kinds = ("verbatim", "conversion", "enum", "optional")
    return make("alarm_repeat", "alarms", "set_alarm", kinds, rows)


def alarm_options() -> list[Intent]:
    rows = [
        ("Set an alarm for 6:00 am labelled gym.", given(hour=[6], minute=[0], label=["gym"])),
        ("Wake me at 5:30 am with the label 'Flight'.",
         given(hour=[5], minute=[30], label=["Flight"])),
        ("Set an alarm at 07:10 called Take pills.",
         given(hour=[7], minute=[10], label=["Take pills"])),
        ("Set an alarm for 8:15 am without vibration.",
         given(hour=[8], minute=[15], vibrate=[False])),
        ("Alarm at 22:00 named 'Bedtime', and don't vibrate.",
         given(hour=[22], minute=[0], label=["Bedtime"], vibrate=[False])),
        ("Set an alarm for 9:30 am labeled Standup with vibration on.",
         given(hour=[9], minute=[30], label=["Standup"], vibrate=[True, ""])),
        ("I need a 6:40 am alarm called 'School run'.",
         given(hour=[6], minute=[40], label=["School run"])),
    ]  # fmt: skip
    return make("alarm_options", "alarms", "set_alarm", ("verbatim", "optional"), rows)


def list_alarms() -> list[Intent]:
    plain = ("What alarms do I have set?", "Show me my alarms.", "Which alarms are on my phone?")
    disabled = (
        "Show me my alarms, including the disabled ones.",
        "List my alarms, even the ones that are switched off.",
    )
    return make("list_alarms", "alarms", "list_alarms", (), [(t, {}) for t in plain]) + make(
        "list_alarms", "alarms", "list_alarms", ("conversion", "optional"),
        [(t, given(include_disabled=[True])) for t in disabled],
    )  # fmt: skip


# --------------------------------------------------------------------------- timers

_TIMER_PHRASINGS = (
    "Set a timer for {d}.",
    "Start a timer for {d}.",
    "I need a timer for {d}.",
    "Count down {d} for me.",
    "Can you time {d} for me?",
    "Timer for {d}, please.",
)
_TIMER_SECONDS = (("90 seconds", 90), ("45 seconds", 45), ("300 seconds", 300),
                  ("120 seconds", 120), ("30 seconds", 30))  # fmt: skip
_TIMER_WORDS = (
    ("10 minutes", 600), ("half an hour", 1800), ("an hour and a half", 5400),
    ("2 minutes 30 seconds", 150), ("a minute", 60), ("25 minutes", 1500),
    ("three quarters of an hour", 2700), ("an hour", 3600), ("five minutes", 300),
    ("1 hour 15 minutes", 4500), ("a quarter of an hour", 900), ("20 minutes", 1200),
)  # fmt: skip


def timer_seconds() -> list[Intent]:
    rows = [
        (phrasing.format(d=d), given(duration_seconds=[s]))
        for phrasing, (d, s) in pair(_TIMER_PHRASINGS, _TIMER_SECONDS)
    ]
    return make("timer_seconds", "timers", "set_timer", ("verbatim",), rows)


def timer_words() -> list[Intent]:
    rows = [
        (phrasing.format(d=d), given(duration_seconds=[s]))
        for phrasing, (d, s) in pair(_TIMER_PHRASINGS[::-1], _TIMER_WORDS)
    ]
    return make("timer_words", "timers", "set_timer", ("conversion",), rows)


def timer_label() -> list[Intent]:
    rows = [
        ("Set a 12 minute timer for the pasta.",
         given(duration_seconds=[720], label=["pasta", "the pasta"])),
        ("Start a timer called eggs for 6 minutes.",
         given(duration_seconds=[360], label=["eggs"])),
        ("Set a tea timer for 4 minutes.", given(duration_seconds=[240], label=["tea"])),
        ("Timer for 45 minutes labelled laundry.",
         given(duration_seconds=[2700], label=["laundry"])),
        ("Set a 20 minute timer named 'Pizza'.", given(duration_seconds=[1200], label=["Pizza"])),
        ("Start a 90 second timer labelled plank.",
         given(duration_seconds=[90], label=["plank"])),
    ]  # fmt: skip
    return make("timer_label", "timers", "set_timer", ("conversion", "optional"), rows)


# --------------------------------------------------------------------------- calendar


def _event(
    title: str, date: str, start: str, end: str | None = None, **more: list[Any] | None
) -> Accepted:
    return given(title=[title], **start_end(date, start, end), **more)


def calendar_iso() -> list[Intent]:
    rows = [
        ('Create a calendar event "Team sync" starting 2026-05-12T10:00.',
         _event("Team sync", "2026-05-12", "10:00")),
        ('Add "Dentist" to my calendar at 2026-06-03 14:30.',
         _event("Dentist", "2026-06-03", "14:30")),
        ('Put "Car service" in my calendar for 2026-05-18 at 08:00.',
         _event("Car service", "2026-05-18", "08:00")),
        ('New calendar event: "Piano lesson", 2026-05-27 17:15.',
         _event("Piano lesson", "2026-05-27", "17:15")),
        ('Schedule "Budget review" on 2026-07-09 at 11:00.',
         _event("Budget review", "2026-07-09", "11:00")),
    ]  # fmt: skip
    return make("calendar_iso", "calendar", "create_calendar_event", ("verbatim",), rows)


def calendar_words() -> list[Intent]:
    rows = [
        ('Add "Dentist appointment" to my calendar on 12 June 2026 at 3 pm.',
         _event("Dentist appointment", "2026-06-12", "15:00")),
        ('Schedule "Haircut" for May 20th, 2026 at half past nine in the morning.',
         _event("Haircut", "2026-05-20", "09:30")),
        ('Put "Parents evening" on the calendar for the 14th of May 2026 at 7 pm.',
         _event("Parents evening", "2026-05-14", "19:00")),
        ('Create an event called "Flight to Lisbon" on July 2, 2026 at a quarter to six in the '
         "morning.", _event("Flight to Lisbon", "2026-07-02", "05:45")),
        ('Add "Book club" on 30 May 2026 at 8:30 pm.', _event("Book club", "2026-05-30", "20:30")),
        ('Make a calendar entry "Vet visit" for the 5th of June 2026 at noon.',
         _event("Vet visit", "2026-06-05", "12:00")),
    ]  # fmt: skip
    kinds = ("verbatim", "conversion")
    return make("calendar_words", "calendar", "create_calendar_event", kinds, rows)


def calendar_relative() -> list[Intent]:
    # Read against TODAY (Friday 2026-05-01); only days that one reading fits.
    rows = [
        ('Put "Lunch with Bob" on my calendar for tomorrow at noon.',
         _event("Lunch with Bob", "2026-05-02", "12:00")),
        ('Add "Gym" to my calendar tonight at 8 pm.', _event("Gym", "2026-05-01", "20:00")),
        ('Schedule "Call the bank" the day after tomorrow at 4 pm.',
         _event("Call the bank", "2026-05-03", "16:00")),
        ('Create an event "Sprint planning" this coming Monday at 9 am.',
         _event("Sprint planning", "2026-05-04", "09:00")),
        ('Add "Pick up dry cleaning" tomorrow at half past five in the afternoon.',
         _event("Pick up dry cleaning", "2026-05-02", "17:30")),
        ('Book "Coffee with Carmen" a week from today at 10 am.',
         _event("Coffee with Carmen", "2026-05-08", "10:00")),
        ('Schedule "Team lunch" this Wednesday at 12:30 pm.',
         _event("Team lunch", "2026-05-06", "12:30")),
    ]  # fmt: skip
    kinds = ("verbatim", "conversion")
    return make("calendar_relative", "calendar", "create_calendar_event", kinds, rows, TODAY)


def calendar_details() -> list[Intent]:
    alice_dmitri = [["alice@example.com", "dmitri@example.com"],
                    ["dmitri@example.com", "alice@example.com"]]  # fmt: skip
    rows = [
        ('Schedule "Project review" on 2026-05-14 from 14:00 to 15:30 in Room 4B.',
         _event("Project review", "2026-05-14", "14:00", "15:30", location=["Room 4B"])),
        ('Add a "Lunch with Bob" event on 2026-05-20 at 12:30 at Cafe Central.',
         _event("Lunch with Bob", "2026-05-20", "12:30", location=["Cafe Central"])),
        ('Create an event "Quarterly planning" on 2026-06-03 at 09:00 and invite '
         "alice@example.com and dmitri@example.com.",
         _event("Quarterly planning", "2026-06-03", "09:00", attendees=alice_dmitri)),
        ('Put "Yoga class" on my calendar for 2026-05-09 from 08:00 to 09:15 at the Community '
         "Center.", _event("Yoga class", "2026-05-09", "08:00", "09:15",
                           location=["the Community Center", "Community Center"])),
        ('Book "Design review" on 2026-05-21 at 16:00 until 17:00, with carmen@example.com.',
         _event("Design review", "2026-05-21", "16:00", "17:00",
                attendees=[["carmen@example.com"]])),
        ('Schedule "Board meeting" on 2026-07-01 from 10:00 to 12:00 in the Main Hall and '
         "invite bob@example.com.",
         _event("Board meeting", "2026-07-01", "10:00", "12:00",
                location=["the Main Hall", "Main Hall"], attendees=[["bob@example.com"]])),
    ]  # fmt: skip
    kinds = ("verbatim", "optional")
    return make("calendar_details", "calendar", "create_calendar_event", kinds, rows)
