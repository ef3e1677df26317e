"""Tool results as answers restate them: a JSON result's members reworded, and what an answer's
structure says it restates next.

Stage: decoding (the texts and drafts of :class:`weavehost.decode.answer_drafts.AnswerDrafts`).
An answer rarely copies a JSON result as it is: it writes ``humidity: 53`` or ``the humidity
is 53`` for ``{"humidity": 53}``. Each scalar member (nested ones too, depth first) is restated
in each of :data:`RESTATED`'s wordings, ``_`` in a key read as a space, at most
:data:`MAX_RESTATED_MEMBERS` members a result; a result that is not JSON restates nothing. And
where no suffix of what an answer wrote says where it copies from, its structure may
(:func:`result_draft`): a line after "Here is the weather:", a word and a connective, an answer
so far that is a result's beginning.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from weavehost.decode.padding import MAX_DRAFT_CHARS

__all__ = [
    "KEY",
    "MAX_RESTATED_MEMBERS",
    "OPENING",
    "RESTATED",
    "RESULT",
    "restated_members",
    "result_draft",
]

# How a scalar member of a JSON result is restated (key, value): each a text of its own.
RESTATED = ("{key}: {value}", "{key} is {value}", "{key} of {value}")
# The most members of one result restated (a large listing is looked up as text anyway).
MAX_RESTATED_MEMBERS = 64
# Drafts read from an answer's structure (result_draft): a tool result from its start, at a
# line's start after a line that introduces it; a value after the word a result keys it by; the
# rest of a result whose beginning is all the answer has written so far.
RESULT, KEY, OPENING = "result", "key", "opening"
# A line that ends so introduces what follows ("Here is the weather:", "tool_response>").
_INTRODUCES = (":", ">")
# A word, a closing quote or emphasis, and a connective, at the end of what was written: the
# word keys the value an answer writes next ("humidity is", "**Wind**:", "`units` =").
_KEYED = re.compile(r"([^\W\d_][\w-]{2,})[`*\"']*\s*(?::|=|\bis\b|\bof\b|\bat\b)\s*$")
# The characters of a reply's end searched for a key and its connective.
_KEY_TAIL = 64
# What separates a key from its value in a result ("wind 4.7", "units: metric", "\"a\": 1").
_SEPARATOR = re.compile(r"[`*\"']*\s*[:=]?\s*")


def restated_members(result: str) -> list[str]:
    """A JSON result's scalar members (nested ones too) as answers restate them; ``[]`` for
    a result that is not JSON."""
    try:
        value = json.loads(result)
    except ValueError:
        return []
    out: list[str] = []
    for key, member in _scalar_members(value):
        if len(out) >= MAX_RESTATED_MEMBERS * len(RESTATED):
            break
        spoken = key.replace("_", " ")
        for pattern in RESTATED:
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


def result_draft(
    written: str, results: Sequence[str], *, whole: bool = False, max_chars: int = MAX_DRAFT_CHARS
) -> tuple[str, str]:
    """What the structure of ``written`` says an answer writes next from the tool
    ``results`` (oldest first), at most ``max_chars``, and its source; ``("", "")`` where it
    says nothing. Where ``written`` is the ``whole`` answer so far and, past its leading
    spaces, the beginning of a result: the rest of the most recent such result
    (:data:`OPENING`). At a line's start after a line ending ``:`` or ``>``: the most recent
    result from its start (:data:`RESULT`). After a word of three letters or more and a connective
    (``:``, ``=``, ``is``, ``of``, ``at``): the text after that word, past its separator, to
    the line's end, in the most recent result holding the word as a word, any case
    (:data:`KEY`), with a space before it where ``written`` ends without one."""
    if not results or max_chars <= 0:
        return "", ""
    opening = written.lstrip() if whole else ""
    for result in reversed(results) if opening else ():
        if result.startswith(opening) and len(result) > len(opening):
            return result[len(opening) : len(opening) + max_chars], OPENING
    if written.endswith("\n") and written.rstrip().endswith(_INTRODUCES):
        return results[-1][:max_chars], RESULT
    keyed = _KEYED.search(written[-_KEY_TAIL:])  # a search of the whole tail costs ~10x
    if keyed is None:
        return "", ""
    key = keyed.group(1).lower()
    lead = "" if written.endswith((" ", "\n")) else " "
    for result in reversed(results):
        lowered = result.lower()
        at = lowered.rfind(key)
        while at >= 0:
            end = at + len(key)
            a_word = (at == 0 or not lowered[at - 1].isalnum()) and not (
                end < len(lowered) and lowered[end].isalnum()
            )
            if a_word:
                value = result[_SEPARATOR.match(result, end).end() :]  # type: ignore[union-attr]
                value = value.split("\n", 1)[0][: max_chars - len(lead)]
                if value:
                    return lead + value, KEY
            at = lowered.rfind(key, 0, at)
    return "", ""
