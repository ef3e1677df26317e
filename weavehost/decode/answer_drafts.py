"""Drafts of free text: what an answer will probably write next, and how many of its tokens a
pass should carry.

Stage: decoding (a reply's free text, :class:`weavehost.decode.reply.ReplyWriter`). Most answers
restate what a tool returned ("Paris: partly cloudy, -2.9 C"), the user's words or an earlier
reply. :class:`AnswerDrafts` proposes the text that followed the answer's last characters
there; the writer reads its tokens after the token it reads anyway, in the same pass, and keeps
each one only where the writer's own choice (the greedy argmax after every mask) is that token,
so a draft changes how many passes an answer takes, never its text. :class:`DraftPricing` says
how many drafted tokens a pass carries, from the machine's cost table and the drafts' measured
acceptance: none where nothing pays.

Guarantees:

* :meth:`AnswerDrafts.propose` finds the longest suffix of the text written so far (at least
  :data:`MIN_MATCH` characters, at most :data:`MAX_MATCH`) in the conversation's texts, oldest
  first, and returns what followed its most recent occurrence, up to the end of that text and
  at most ``max_chars``; ``""`` when nothing matches. Never a special token's text: the texts
  are tokenized as plain text.
* The texts are the user's messages, the tool results and the assistant's earlier text (not
  the system prompt: its instructions and tool descriptions are rarely what an answer copies),
  and, for a tool result that is JSON, each scalar member restated as answers restate it
  (``humidity: 53``, ``humidity is 53``, with ``_`` read as a space): the answer that writes a
  key is drafted the value.
* :class:`DraftPricing` belongs to one writer (one opened model): its acceptance counts are
  that model's. Without a cost table, nothing is drafted (nothing says a row pays); with one,
  :meth:`DecodePlan.draft_length <weavehost.decode.padding.DecodePlan.draft_length>` decides,
  rows asking for logits priced as such, at the measured rate.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from weavehost.decode.drafts import content_texts, longest_suffix_in
from weavehost.decode.padding import MAX_DRAFT_ROWS, DecodePlan

__all__ = [
    "ACCEPT_PRIOR",
    "MAX_MATCH",
    "MIN_MATCH",
    "AnswerDrafts",
    "DraftPricing",
]

# The shortest suffix of the answer looked up: shorter ones ("the ", "s a") recur in any text,
# so their most recent occurrence is mostly unrelated to what the answer writes next.
MIN_MATCH = 4
# The longest suffix looked up: longer ones rarely pick another occurrence, and the bound keeps
# each look-up short.
MAX_MATCH = 128
# Characters drafted at most: more than MAX_DRAFT_ROWS tokens of text.
MAX_DRAFT_CHARS = 4 * MAX_DRAFT_ROWS
# Ends each text: a draft never runs from one text into the next. Dropped from the texts.
_END = "\x00"
# How a scalar member of a JSON result is restated (key, value): each a text of its own.
_RESTATED = ("{key}: {value}", "{key} is {value}", "{key} of {value}")
# The most members of one result restated (a large listing is looked up as text anyway).
MAX_RESTATED_MEMBERS = 64
# The acceptance assumed before any draft was checked, as a number of drafted tokens reached
# and accepted: a restated result is mostly accepted, and a prior of four tokens gives way to
# what is measured after a few passes.
ACCEPT_PRIOR = (4.0, 3.2)
# Each read token without a draft lets the evidence fade this much towards the prior, so a rate
# measured low once is tried again later (a few rows, now and then), never shut off for good.
FADE = 0.98


class AnswerDrafts:
    """The texts an answer may restate, joined for look-ups: see the module docstring."""

    __slots__ = ("_text",)

    def __init__(self, texts: Sequence[str]) -> None:
        kept = [text.replace(_END, "") for text in texts if text]
        self._text = "".join(text + _END for text in kept)

    @classmethod
    def from_messages(cls, messages: Sequence[Mapping[str, Any]]) -> AnswerDrafts:
        """The texts of OpenAI-style ``messages``, oldest first: user, tool and assistant
        content (a string, or ``{"type": "text", "text": ...}`` parts) and each JSON tool
        result's members restated; not the system prompt."""
        texts: list[str] = []
        for message in messages:
            role = message.get("role")
            if role in ("system", "developer"):
                continue
            contents = list(content_texts(message.get("content")))
            texts.extend(contents)
            if role == "tool":
                for content in contents:
                    texts.extend(restated_members(content))
        return cls(texts)

    def propose(self, written: str, *, max_chars: int = MAX_DRAFT_CHARS) -> str:
        """The text that followed the longest suffix of ``written`` in the texts (its most
        recent occurrence), up to that text's end and ``max_chars``; ``""`` if none matches."""
        text = self._text
        if len(written) < MIN_MATCH or max_chars <= 0 or written[-MIN_MATCH:] not in text:
            return ""
        length = longest_suffix_in(written, text, MIN_MATCH, min(len(written), MAX_MATCH))
        at = text.rfind(written[-length:]) + length
        end = text.find(_END, at)
        return text[at : min(end, at + max_chars)]


def restated_members(result: str) -> list[str]:
    """A JSON result's scalar members (nested ones too) as answers restate them; ``[]`` for
    a result that is not JSON."""
    try:
        value = json.loads(result)
    except ValueError:
        return []
    out: list[str] = []
    for key, member in _scalar_members(value):
        if len(out) >= MAX_RESTATED_MEMBERS * len(_RESTATED):
            break
        spoken = key.replace("_", " ")
        for pattern in _RESTATED:
            out.append(pattern.format(key=spoken, value=member))
    return out


def _scalar_members(value: Any) -> Iterator[tuple[str, str]]:
    """(key, value text) of every string or number member of ``value``, depth first."""
    if isinstance(value, Mapping):
        for key, member in value.items():
            if isinstance(member, str):
                yield str(key), member
            elif isinstance(member, int | float) and not isinstance(member, bool):
                yield str(key), json.dumps(member)
            else:
                yield from _scalar_members(member)
    elif isinstance(value, list):
        for item in value:
            yield from _scalar_members(item)


class DraftPricing:
    """How many drafted tokens a pass of free text carries, for one model: from the plan's cost
    table and the rate at which drafted tokens were accepted (each one reached, i.e. every
    drafted token before it accepted, and then kept or not).

    ``rows(room)`` is 0 without a table, and where the table says no draft pays at the measured
    rate (a pass of one chosen token and ``d`` drafted ones, each asking for logits, must cost
    less than the tokens it keeps in expectation are worth: ``DecodePlan.draft_length``)."""

    __slots__ = ("_rows", "accepted", "plan", "reached")

    def __init__(self, plan: DecodePlan) -> None:
        self.plan = plan
        self.reached, self.accepted = ACCEPT_PRIOR
        self._rows: dict[int, int] = {}  # by rate in hundredths (at most 101 entries)

    @property
    def rate(self) -> float:
        """The measured acceptance of a reached drafted token, with the prior."""
        return min(1.0, max(0.0, self.accepted / self.reached))

    def rows(self, room: int) -> int:
        """Drafted tokens for the next pass (at most ``room``)."""
        if self.plan.table is None or room <= 0:
            return 0
        key = round(self.rate * 100)
        rows = self._rows.get(key)
        if rows is None:
            rows = self._rows[key] = self.plan.draft_length(1, [key / 100] * MAX_DRAFT_ROWS)
        return min(rows, room)

    def count(self, reached: int, accepted: int) -> None:
        """Drafted tokens reached and accepted by one read."""
        self.reached += reached
        self.accepted += accepted

    def fade(self) -> None:
        """One token read without a draft: the evidence fades towards the prior."""
        prior_reached, prior_accepted = ACCEPT_PRIOR
        self.reached = prior_reached + (self.reached - prior_reached) * FADE
        self.accepted = prior_accepted + (self.accepted - prior_accepted) * FADE
