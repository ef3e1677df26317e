"""The Android-intents set's templates about people and the phone: messages, calls, contacts,
apps, settings, volume, look-ups and web searches.

Stage: benchmark input (listed by :func:`weavehost.bench.android_intents.all_templates`).
"""

from __future__ import annotations

from weavehost.bench.android_phrasing import Intent, given, make, pair

__all__ = [
    "ANY_DETAIL",
    "battery",
    "location",
    "make_phone_call",
    "open_app",
    "search_contacts",
    "send_message",
    "set_volume",
    "toggle_setting",
    "web_search",
]


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
        (phrasing.format(r=r, m=m), given(recipient=_recipient(r), text=_texts(m)))
        for phrasing, (r, m) in pair(_MESSAGE_PHRASINGS, _MESSAGES)
    ]
    return make("send_message", "messages", "send_message", ("verbatim",), rows)


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
        (phrasing.format(r=r), given(phone_number=_callee(r)))
        for phrasing, r in pair(_CALL_PHRASINGS, _CALLEES)
    ]
    speaker = [(text, given(phone_number=_callee(r), speaker=[True])) for text, r in _SPEAKER_CALLS]
    return make("call", "calls", "make_phone_call", ("verbatim",), rows) + make(
        "call_speaker", "calls", "make_phone_call", ("verbatim", "optional"), speaker
    )


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
        (phrasing.format(q=q), given(query=accepted))
        for phrasing, (q, accepted) in pair(_CONTACT_PHRASINGS, _QUERIES)
    ]
    limited = [(text, given(query=[q], limit=[n])) for text, q, n in _LIMITED_QUERIES]
    return make("contacts", "contacts", "search_contacts", ("verbatim",), rows) + make(
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
        (phrasing.format(a=a), given(app_name=[name]))
        for phrasing, (a, name) in pair(_APP_PHRASINGS, _APPS)
    ]
    synonyms = [(text, given(app_name=[name])) for text, name in _APP_SYNONYMS]
    return make("open_app", "apps", "open_app", ("verbatim",), rows) + make(
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
    named = [(text, given(setting=[s], enabled=[on])) for text, s, on in _SETTINGS]
    synonyms = [(text, given(setting=[s], enabled=[on])) for text, s, on in _SETTING_SYNONYMS]
    return make("setting", "settings", "toggle_setting", ("enum", "verbatim"), named) + make(
        "setting_synonym", "settings", "toggle_setting", ("enum", "conversion"), synonyms
    )


def set_volume() -> list[Intent]:
    # The stream is accepted as left out where the media stream (the default) is meant.
    media = ["media", ""]
    said = [
        ("Set the media volume to 8.", given(level=[8], stream=media)),
        ("Turn the ring volume down to 3.", given(level=[3], stream=["ring"])),
        ("Set the alarm volume to 12.", given(level=[12], stream=["alarm"])),
        ("Set the ring volume to 10 out of 15.", given(level=[10], stream=["ring"])),
        ("Ring volume to 2, please.", given(level=[2], stream=["ring"])),
    ]
    converted = [
        ("Mute the ringer.", given(level=[0], stream=["ring"])),
        ("Max out the media volume.", given(level=[15], stream=media)),
        ("Make the alarm as loud as it goes.", given(level=[15], stream=["alarm"])),
        ("Put the music volume at 6.", given(level=[6], stream=media)),
        ("Set the media volume to half of the maximum.", given(level=[7, 8], stream=media)),
        ("Silence the alarm stream completely.", given(level=[0], stream=["alarm"])),
    ]
    plain = [("Set the volume to 5.", given(level=[5]))]
    return (
        make("volume", "volume", "set_volume", ("verbatim", "enum", "optional"), said)
        + make("volume", "volume", "set_volume", ("verbatim",), plain)
        + make("volume", "volume", "set_volume", ("conversion", "enum", "optional"), converted)
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
    rows = [(t, given(detailed=ANY_DETAIL)) for t in plain]
    return make("battery", "battery", "get_battery_status", (), rows) + make(
        "battery", "battery", "get_battery_status", ("conversion", "optional"),
        [(t, given(detailed=[True])) for t in detailed],
    )  # fmt: skip


def location() -> list[Intent]:
    plain = ("Where am I?", "What's my current location?", "Get my location.")
    precise = ("Get my exact GPS location.", "Where am I exactly? Use GPS.")
    tool = "get_current_location"
    rows = [(t, given(precise=ANY_DETAIL)) for t in plain]
    return make("location", "location", tool, (), rows) + make(
        "location", "location", tool, ("conversion", "optional"),
        [(t, given(precise=[True])) for t in precise],
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
    rows = [(p.format(q=q), given(query=[q])) for p, q in pair(_SEARCH_PHRASINGS, _SEARCHES)]
    counted = [
        ('Search the web for "cheap flights to Rome" and give me 5 results.',
         given(query=["cheap flights to Rome"], max_results=[5])),
        ('Show me the top 10 web results for "electric bikes".',
         given(query=["electric bikes"], max_results=[10])),
    ]  # fmt: skip
    in_words = [
        ('Just one result please: search the web for "time in Tokyo".',
         given(query=["time in Tokyo"], max_results=[1])),
    ]  # fmt: skip
    limit = "web_search_limit"
    return (
        make("web_search", "search", "web_search", ("verbatim",), rows)
        + make(limit, "search", "web_search", ("verbatim", "optional"), counted)
        + make(limit, "search", "web_search", ("conversion", "optional"), in_words)
    )
