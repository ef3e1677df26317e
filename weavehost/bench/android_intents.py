"""The hand-written requests of the Android-intents set: phrasings and values, per intent.

Stage: benchmark input (data for :mod:`weavehost.bench.android_set`, which turns these intents
into BFCL cases, offers the tools and validates every answer). Each template below is a small
function that pairs a hand-written list of phrasings with a hand-written list of values
(value ``i`` goes with phrasing ``i % len(phrasings)``), so the set grows by adding a line to
either list. Nothing here is random.

An :class:`Intent` names only the arguments its request settles (every required one, and the
optional ones it mentions); the builder adds each optional argument it leaves out as
``["", default]``. Accepted values are BFCL's: the first is the canonical one (the call the
tests run against the real server), the others equally right readings of the request. Where a
request is ambiguous the list says so (``"stream": ["media", ""]`` when "the volume" is the
default stream anyway; a plain battery or location look-up accepts its detail flag either way,
:data:`ANY_DETAIL`).

Kinds (what a case exercises): ``verbatim`` (values copied from the request), ``conversion``
(words to numbers, 12-hour to 24-hour clock, durations to seconds, weekday names and synonyms
to enum values, relative dates to ISO 8601), ``optional`` (the request sets an optional
argument), ``enum`` (an enum-typed argument is set). ``multi_tool`` is added by the builder when
it offers distractor tools. A look-up with nothing to fill ("Where am I?") may have no kind.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ANY_DETAIL", "TODAY", "Intent", "all_templates"]

# The date the relative-date requests are read against, given to the model as a system message.
TODAY = "Today is Friday, 1 May 2026."

Accepted = dict[str, list[Any]]


@dataclass(frozen=True, slots=True)
class Intent:
    """One request and its answer: the tool it calls and the accepted values it settles."""

    template: str
    category: str
    tool: str
    text: str
    accepted: Mapping[str, list[Any]]
    kinds: tuple[str, ...]
    system: str = ""


def _pair(phrasings: Sequence[str], values: Sequence[Any]) -> list[tuple[str, Any]]:
    """Value ``i`` with phrasing ``i % len(phrasings)``: every value once, phrasings in turn."""
    return [(phrasings[i % len(phrasings)], value) for i, value in enumerate(values)]


def _make(
    template: str,
    category: str,
    tool: str,
    kinds: tuple[str, ...],
    rows: Iterable[tuple[str, Accepted]],
    system: str = "",
) -> list[Intent]:
    """The intents of one template: ``(request, accepted)`` rows sharing tool and kinds."""
    return [Intent(template, category, tool, text, given, kinds, system) for text, given in rows]


def _given(**settled: list[Any] | None) -> Accepted:
    """The accepted values a request settles; ``None`` for an argument it does not mention."""
    return {name: values for name, values in settled.items() if values is not None}


def _at(date: str, hhmm: str) -> list[str]:
    """An ISO 8601 local time, with and without seconds (both read the same)."""
    return [f"{date}T{hhmm}", f"{date}T{hhmm}:00"]


def _start_end(date: str, hhmm: str, end: str | None = None) -> Accepted:
    """``start_time`` and ``end_time``: the end said, or unsaid (left out, or the one-hour
    default the tool describes, written out)."""
    hour, minute = hhmm.split(":")
    ends = _at(date, end) if end else ["", *_at(date, f"{int(hour) + 1:02d}:{minute}")]
    return {"start_time": _at(date, hhmm), "end_time": ends}


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
        (phrasing.format(t=t), _given(hour=[h], minute=[m]))
        for phrasing, (t, h, m) in _pair(_ALARM_PHRASINGS, _ALARM_VERBATIM)
    ]
    return _make("alarm_clock", "alarms", "set_alarm", ("verbatim",), rows)


def alarm_words() -> list[Intent]:
    phrasings = [p for p in _ALARM_PHRASINGS if "{t}." in p or "{t}?" in p][::-1]
    rows = [
        (phrasing.format(t=t), _given(hour=[h], minute=[m]))
        for phrasing, (t, h, m) in _pair(phrasings, _ALARM_WORDS)
    ]
    return _make("alarm_words", "alarms", "set_alarm", ("conversion",), rows)


def alarm_repeat() -> list[Intent]:
    rows = [
        (phrasing.format(t=t, d=d), _given(hour=[h], minute=[m], days=[days]))
        for phrasing, (t, h, m, d, days) in _pair(_REPEAT_PHRASINGS, _REPEATS)
    ]
    kinds = ("verbatim", "conversion", "enum", "optional")
    return _make("alarm_repeat", "alarms", "set_alarm", kinds, rows)


def alarm_options() -> list[Intent]:
    rows = [
        ("Set an alarm for 6:00 am labelled gym.", _given(hour=[6], minute=[0], label=["gym"])),
        ("Wake me at 5:30 am with the label 'Flight'.",
         _given(hour=[5], minute=[30], label=["Flight"])),
        ("Set an alarm at 07:10 called Take pills.",
         _given(hour=[7], minute=[10], label=["Take pills"])),
        ("Set an alarm for 8:15 am without vibration.",
         _given(hour=[8], minute=[15], vibrate=[False])),
        ("Alarm at 22:00 named 'Bedtime', and don't vibrate.",
         _given(hour=[22], minute=[0], label=["Bedtime"], vibrate=[False])),
        ("Set an alarm for 9:30 am labeled Standup with vibration on.",
         _given(hour=[9], minute=[30], label=["Standup"], vibrate=[True, ""])),
        ("I need a 6:40 am alarm called 'School run'.",
         _given(hour=[6], minute=[40], label=["School run"])),
    ]  # fmt: skip
    return _make("alarm_options", "alarms", "set_alarm", ("verbatim", "optional"), rows)


def list_alarms() -> list[Intent]:
    plain = ("What alarms do I have set?", "Show me my alarms.", "Which alarms are on my phone?")
    disabled = (
        "Show me my alarms, including the disabled ones.",
        "List my alarms, even the ones that are switched off.",
    )
    return _make("list_alarms", "alarms", "list_alarms", (), [(t, {}) for t in plain]) + _make(
        "list_alarms", "alarms", "list_alarms", ("conversion", "optional"),
        [(t, _given(include_disabled=[True])) for t in disabled],
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
        (phrasing.format(d=d), _given(duration_seconds=[s]))
        for phrasing, (d, s) in _pair(_TIMER_PHRASINGS, _TIMER_SECONDS)
    ]
    return _make("timer_seconds", "timers", "set_timer", ("verbatim",), rows)


def timer_words() -> list[Intent]:
    rows = [
        (phrasing.format(d=d), _given(duration_seconds=[s]))
        for phrasing, (d, s) in _pair(_TIMER_PHRASINGS[::-1], _TIMER_WORDS)
    ]
    return _make("timer_words", "timers", "set_timer", ("conversion",), rows)


def timer_label() -> list[Intent]:
    rows = [
        ("Set a 12 minute timer for the pasta.",
         _given(duration_seconds=[720], label=["pasta", "the pasta"])),
        ("Start a timer called eggs for 6 minutes.",
         _given(duration_seconds=[360], label=["eggs"])),
        ("Set a tea timer for 4 minutes.", _given(duration_seconds=[240], label=["tea"])),
        ("Timer for 45 minutes labelled laundry.",
         _given(duration_seconds=[2700], label=["laundry"])),
        ("Set a 20 minute timer named 'Pizza'.", _given(duration_seconds=[1200], label=["Pizza"])),
        ("Start a 90 second timer labelled plank.",
         _given(duration_seconds=[90], label=["plank"])),
    ]  # fmt: skip
    return _make("timer_label", "timers", "set_timer", ("conversion", "optional"), rows)


# --------------------------------------------------------------------------- messages and calls

_CONTACT_FORMS = {
    "Alice": ["Alice", "Alice Chen"],
    "Bob": ["Bob", "Bob Okafor"],
    "Carmen": ["Carmen", "Carmen Ruiz"],
    "Dmitri": ["Dmitri", "Dmitri Ivanov"],
    "Alicia": ["Alicia", "Alicia Keyes"],
}
_NUMBERS = {"Alice Chen": "+1-555-0101", "Bob Okafor": "+1-555-0102",
            "Carmen Ruiz": "+1-555-0103", "Dmitri Ivanov": "+1-555-0104",
            "Alicia Keyes": "+1-555-0105"}  # fmt: skip


def _recipient(said: str) -> list[str]:
    """A recipient as said; a first name may also be written out in full."""
    return _CONTACT_FORMS.get(said, [said])


def _callee(said: str) -> list[str]:
    """Whom to call as said, in full, or as the contact's number."""
    forms = _recipient(said)
    return [*forms, *(_NUMBERS[f] for f in forms if f in _NUMBERS)]


def _texts(said: str) -> list[str]:
    """A message body as said, and without a closing ``!`` or ``?`` (BFCL keeps those)."""
    bare = said.rstrip("!?")
    return [said] if bare == said else [said, bare]


_MESSAGE_PHRASINGS = (
    'Text {r} "{m}".',
    'Send a message to {r} saying "{m}".',
    "Send {r} an SMS: {m}",
    'Message {r}: "{m}"',
    'Can you text {r} the words "{m}"?',
    'Shoot {r} a text that says "{m}".',
    "Send this to {r} by SMS: {m}",
)
_MESSAGES = (
    ("Alice Chen", "Running 10 minutes late"),
    ("Bob", "Can you pick up milk on the way home?"),
    ("+1-555-0142", "The package is at the front desk"),
    ("Carmen Ruiz", "Happy birthday!"),
    ("Dmitri", "Meeting moved to 3 pm"),
    ("Alicia Keyes", "Thanks for dinner last night"),
    ("Bob Okafor", "I'm outside"),
    ("+44 20 7946 0958", "Call me when you land"),
    ("Carmen", "See you at the station at 6"),
    ("Alice", "Don't forget the tickets"),
    ("Dmitri Ivanov", "The report is ready for review"),
    ("+1-555-0177", "Your table for two is confirmed"),
    ("Alicia", "Are we still on for tennis tomorrow?"),
    ("Bob Okafor", "Good luck with the interview"),
    ("Mom", "Landed safely, love you"),
    ("Carmen Ruiz", "Leaving the office now"),
)


def send_message() -> list[Intent]:
    rows = [
        (phrasing.format(r=r, m=m), _given(recipient=_recipient(r), text=_texts(m)))
        for phrasing, (r, m) in _pair(_MESSAGE_PHRASINGS, _MESSAGES)
    ]
    return _make("send_message", "messages", "send_message", ("verbatim",), rows)


_CALL_PHRASINGS = (
    "Call {r}.",
    "Phone {r}, please.",
    "Dial {r}.",
    "Give {r} a ring.",
    "Can you call {r} for me?",
    "Ring {r}.",
)
_CALLEES = ("Alice Chen", "+1-555-0103", "Bob", "Dmitri Ivanov", "555-0199", "Carmen",
            "+41 44 668 18 00")  # fmt: skip
_SPEAKER_CALLS = (
    ("Call Bob Okafor on speaker.", "Bob Okafor"),
    ("Call Alicia Keyes on speakerphone.", "Alicia Keyes"),
    ("Dial +1-555-0150 with the speaker on.", "+1-555-0150"),
    ("Ring Dmitri and put it on speaker.", "Dmitri"),
)


def make_phone_call() -> list[Intent]:
    rows = [
        (phrasing.format(r=r), _given(phone_number=_callee(r)))
        for phrasing, r in _pair(_CALL_PHRASINGS, _CALLEES)
    ]
    speaker = [
        (text, _given(phone_number=_callee(r), speaker=[True])) for text, r in _SPEAKER_CALLS
    ]
    return _make("call", "calls", "make_phone_call", ("verbatim",), rows) + _make(
        "call_speaker", "calls", "make_phone_call", ("verbatim", "optional"), speaker
    )


# --------------------------------------------------------------------------- calendar


def _event(
    title: str, date: str, start: str, end: str | None = None, **more: list[Any] | None
) -> Accepted:
    return _given(title=[title], **_start_end(date, start, end), **more)


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
    return _make("calendar_iso", "calendar", "create_calendar_event", ("verbatim",), rows)


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
    return _make("calendar_words", "calendar", "create_calendar_event", kinds, rows)


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
    return _make("calendar_relative", "calendar", "create_calendar_event", kinds, rows, TODAY)


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
    return _make("calendar_details", "calendar", "create_calendar_event", kinds, rows)


# --------------------------------------------------------------------------- contacts and apps

_CONTACT_PHRASINGS = (
    "Find {q} in my contacts.",
    "Look up {q} in my address book.",
    "Search my contacts for {q}.",
    "Is {q} in my contacts?",
)
_QUERIES = (("Carmen", ["Carmen"]), ("Okafor", ["Okafor"]),
            ("alice@example.com", ["alice@example.com"]), ("555-0104", ["555-0104"]),
            ("Dmitri", ["Dmitri"]), ("Alicia Keyes", ["Alicia Keyes", "Alicia", "Keyes"]),
            ("Bob", ["Bob"]), ("Chen", ["Chen"]))  # fmt: skip
_LIMITED_QUERIES = (
    ('Search my contacts for "ali" and show at most 2 results.', "ali", 2),
    ('Find up to 10 contacts matching "example.com".', "example.com", 10),
    ('Show me the first three contacts that match "555".', "555", 3),
)


def search_contacts() -> list[Intent]:
    rows = [
        (phrasing.format(q=q), _given(query=accepted))
        for phrasing, (q, accepted) in _pair(_CONTACT_PHRASINGS, _QUERIES)
    ]
    limited = [(text, _given(query=[q], limit=[n])) for text, q, n in _LIMITED_QUERIES]
    return _make("contacts", "contacts", "search_contacts", ("verbatim",), rows) + _make(
        "contacts_limit", "contacts", "search_contacts", ("verbatim", "optional"), limited
    )


_APP_PHRASINGS = (
    "Open {a}.",
    "Launch {a}.",
    "Bring up {a}.",
    "Can you open {a} for me?",
    "Go to {a}.",
    "Start {a}, please.",
)
_APPS = (("the camera", "camera"), ("Chrome", "chrome"), ("Gmail", "gmail"),
         ("Spotify", "spotify"), ("YouTube", "youtube"), ("Maps", "maps"), ("Photos", "photos"),
         ("the Settings app", "settings"), ("the clock app", "clock"), ("my calendar", "calendar"),
         ("the Messages app", "messages"), ("my contacts app", "contacts"),
         ("the phone app", "phone"))  # fmt: skip
_APP_SYNONYMS = (
    ("Open the web browser.", "chrome"),
    ("I want to take a picture, open the app for that.", "camera"),
)


def open_app() -> list[Intent]:
    rows = [
        (phrasing.format(a=a), _given(app_name=[name]))
        for phrasing, (a, name) in _pair(_APP_PHRASINGS, _APPS)
    ]
    synonyms = [(text, _given(app_name=[name])) for text, name in _APP_SYNONYMS]
    return _make("open_app", "apps", "open_app", ("verbatim",), rows) + _make(
        "open_app_synonym", "apps", "open_app", ("conversion",), synonyms
    )


# --------------------------------------------------------------------------- settings and volume

_SETTINGS = (
    ("Turn on wifi.", "wifi", True), ("Switch off Bluetooth.", "bluetooth", False),
    ("Enable airplane mode.", "airplane_mode", True),
    ("Turn the flashlight on.", "flashlight", True),
    ("Turn on do not disturb.", "do_not_disturb", True), ("Disable Wi-Fi.", "wifi", False),
    ("Can you enable bluetooth?", "bluetooth", True),
    ("Switch the flashlight off.", "flashlight", False),
    ("Turn off airplane mode.", "airplane_mode", False),
    ("Please disable do not disturb.", "do_not_disturb", False),
)  # fmt: skip
_SETTING_SYNONYMS = (
    ("Turn off the torch.", "flashlight", False),
    ("Take the phone out of flight mode.", "airplane_mode", False),
    ("Put the phone in plane mode.", "airplane_mode", True),
    ("Silence all my notifications for a while.", "do_not_disturb", True),
    ("I need some light, switch on the torch.", "flashlight", True),
    ("Stop using wireless internet, cut the wifi.", "wifi", False),
)


def toggle_setting() -> list[Intent]:
    named = [(text, _given(setting=[s], enabled=[on])) for text, s, on in _SETTINGS]
    synonyms = [(text, _given(setting=[s], enabled=[on])) for text, s, on in _SETTING_SYNONYMS]
    return _make("setting", "settings", "toggle_setting", ("enum", "verbatim"), named) + _make(
        "setting_synonym", "settings", "toggle_setting", ("enum", "conversion"), synonyms
    )


def set_volume() -> list[Intent]:
    # The stream is accepted as left out where the media stream (the default) is meant.
    media = ["media", ""]
    said = [
        ("Set the media volume to 8.", _given(level=[8], stream=media)),
        ("Turn the ring volume down to 3.", _given(level=[3], stream=["ring"])),
        ("Set the alarm volume to 12.", _given(level=[12], stream=["alarm"])),
        ("Set the ring volume to 10 out of 15.", _given(level=[10], stream=["ring"])),
        ("Ring volume to 2, please.", _given(level=[2], stream=["ring"])),
    ]
    converted = [
        ("Mute the ringer.", _given(level=[0], stream=["ring"])),
        ("Max out the media volume.", _given(level=[15], stream=media)),
        ("Make the alarm as loud as it goes.", _given(level=[15], stream=["alarm"])),
        ("Put the music volume at 6.", _given(level=[6], stream=media)),
        ("Set the media volume to half of the maximum.", _given(level=[7, 8], stream=media)),
        ("Silence the alarm stream completely.", _given(level=[0], stream=["alarm"])),
    ]
    plain = [("Set the volume to 5.", _given(level=[5]))]
    return (
        _make("volume", "volume", "set_volume", ("verbatim", "enum", "optional"), said)
        + _make("volume", "volume", "set_volume", ("verbatim",), plain)
        + _make("volume", "volume", "set_volume", ("conversion", "enum", "optional"), converted)
    )


# --------------------------------------------------------------------------- look-ups


# A look-up asked for plainly may still be made in detail: the answer only gains (the level with
# its charging state, the place to 5 m). So a plain request accepts the flag either way.
ANY_DETAIL = ["", False, True]


def battery() -> list[Intent]:
    plain = ("How much battery do I have left?", "What's my battery level?",
             "Check the battery.", "What percentage is my phone at?")  # fmt: skip
    detailed = ("Is my phone charging? Give me the detailed battery status.",
                "Show the battery level with charging details.")  # fmt: skip
    rows = [(t, _given(detailed=ANY_DETAIL)) for t in plain]
    return _make("battery", "battery", "get_battery_status", (), rows) + _make(
        "battery", "battery", "get_battery_status", ("conversion", "optional"),
        [(t, _given(detailed=[True])) for t in detailed],
    )  # fmt: skip


def location() -> list[Intent]:
    plain = ("Where am I?", "What's my current location?", "Get my location.")
    precise = ("Get my exact GPS location.", "Where am I exactly? Use GPS.")
    tool = "get_current_location"
    rows = [(t, _given(precise=ANY_DETAIL)) for t in plain]
    return _make("location", "location", tool, (), rows) + _make(
        "location", "location", tool, ("conversion", "optional"),
        [(t, _given(precise=[True])) for t in precise],
    )  # fmt: skip


_SEARCH_PHRASINGS = (
    'Search the web for "{q}".',
    "Look up {q} online.",
    "Google {q}.",
    "Can you search the internet for {q}?",
    "Do a web search: {q}",
    "Find {q} on the web.",
)
_SEARCHES = ("best pizza in Zurich", "weather radar Europe", "how to reset a router",
             "train times Zurich to Bern", "Python 3.13 release notes",
             "opening hours Kunsthaus Zurich", "symptoms of dehydration",
             "euro to swiss franc exchange rate")  # fmt: skip


def web_search() -> list[Intent]:
    rows = [(p.format(q=q), _given(query=[q])) for p, q in _pair(_SEARCH_PHRASINGS, _SEARCHES)]
    counted = [
        ('Search the web for "cheap flights to Rome" and give me 5 results.',
         _given(query=["cheap flights to Rome"], max_results=[5])),
        ('Show me the top 10 web results for "electric bikes".',
         _given(query=["electric bikes"], max_results=[10])),
    ]  # fmt: skip
    in_words = [
        ('Just one result please: search the web for "time in Tokyo".',
         _given(query=["time in Tokyo"], max_results=[1])),
    ]  # fmt: skip
    limit = "web_search_limit"
    return (
        _make("web_search", "search", "web_search", ("verbatim",), rows)
        + _make(limit, "search", "web_search", ("verbatim", "optional"), counted)
        + _make(limit, "search", "web_search", ("conversion", "optional"), in_words)
    )


def all_templates() -> dict[str, list[Intent]]:
    """Every template's intents, by template function, in a fixed order."""
    makers = (alarm_clock, alarm_words, alarm_repeat, alarm_options, list_alarms,
              timer_seconds, timer_words, timer_label, send_message, make_phone_call,
              calendar_iso, calendar_words, calendar_relative, calendar_details,
              search_contacts, open_app, toggle_setting, set_volume, battery, location,
              web_search)  # fmt: skip
    return {maker.__name__: maker() for maker in makers}
