"""How a template of the Android-intents set is written: the :class:`Intent` record, and the
helpers that pair hand-written phrasings with hand-written values.

Stage: benchmark input (under :mod:`weavehost.bench.android_intents`, the set's index, and the
two modules of templates, :mod:`~weavehost.bench.android_clock` and
:mod:`~weavehost.bench.android_phone`). Value ``i`` goes with phrasing ``i % len(phrasings)``
(:func:`pair`); an intent names only the arguments its request settles (:func:`given`). Nothing
here is random.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["TODAY", "Accepted", "Intent", "at", "given", "make", "pair", "start_end"]

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


def pair(phrasings: Sequence[str], values: Sequence[Any]) -> list[tuple[str, Any]]:
    """Value ``i`` with phrasing ``i % len(phrasings)``: every value once, phrasings in turn."""
    return [(phrasings[i % len(phrasings)], value) for i, value in enumerate(values)]


def make(
    template: str,
    category: str,
    tool: str,
    kinds: tuple[str, ...],
    rows: Iterable[tuple[str, Accepted]],
    system: str = "",
) -> list[Intent]:
    """The intents of one template: ``(request, accepted)`` rows sharing tool and kinds."""
    return [Intent(template, category, tool, text, value, kinds, system) for text, value in rows]


def given(**settled: list[Any] | None) -> Accepted:
    """The accepted values a request settles; ``None`` for an argument it does not mention."""
    return {name: values for name, values in settled.items() if values is not None}


def at(date: str, hhmm: str) -> list[str]:
    """An ISO 8601 local time, with and without seconds (both read the same)."""
    return [f"{date}T{hhmm}", f"{date}T{hhmm}:00"]


def start_end(date: str, hhmm: str, end: str | None = None) -> Accepted:
    """``start_time`` and ``end_time``: the end said, or unsaid (left out, or the one-hour
    default the tool describes, written out)."""
    hour, minute = hhmm.split(":")
    ends = at(date, end) if end else ["", *at(date, f"{int(hour) + 1:02d}:{minute}")]
    return {"start_time": at(date, hhmm), "end_time": ends}
