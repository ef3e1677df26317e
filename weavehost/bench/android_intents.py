"""The hand-written requests of the Android-intents set: phrasings and values, per intent.

Stage: benchmark input (data for :mod:`weavehost.bench.android_set`, which turns these intents
into BFCL cases, offers the tools and validates every answer). This module is the set's index
(:func:`all_templates`); the templates live by subject in :mod:`~weavehost.bench.android_clock`
(alarms, timers, calendar) and :mod:`~weavehost.bench.android_phone` (messages, calls,
contacts, apps, settings, volume, look-ups, search), written with the helpers of
:mod:`~weavehost.bench.android_phrasing`. Each template is a small function that pairs a
hand-written list of phrasings with a hand-written list of values (value ``i`` goes with
phrasing ``i % len(phrasings)``), so the set grows by adding a line to either list. Nothing
here is random.

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

from weavehost.bench.android_clock import (
    alarm_clock,
    alarm_options,
    alarm_repeat,
    alarm_words,
    calendar_details,
    calendar_iso,
    calendar_relative,
    calendar_words,
    list_alarms,
    timer_label,
    timer_seconds,
    timer_words,
)
from weavehost.bench.android_phone import (
    ANY_DETAIL,
    battery,
    location,
    make_phone_call,
    open_app,
    search_contacts,
    send_message,
    set_volume,
    toggle_setting,
    web_search,
)
from weavehost.bench.android_phrasing import TODAY, Intent

__all__ = ["ANY_DETAIL", "TODAY", "Intent", "all_templates"]


def all_templates() -> dict[str, list[Intent]]:
    """Every template's intents, by template function, in a fixed order."""
    makers = (alarm_clock, alarm_words, alarm_repeat, alarm_options, list_alarms,
              timer_seconds, timer_words, timer_label, send_message, make_phone_call,
              calendar_iso, calendar_words, calendar_relative, calendar_details,
              search_contacts, open_app, toggle_setting, set_volume, battery, location,
              web_search)  # fmt: skip
    return {maker.__name__: maker() for maker in makers}
