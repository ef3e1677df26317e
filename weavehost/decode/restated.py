"""A JSON tool result's members as answers restate them: texts an answer's drafts are looked up in.

Stage: decoding (the texts of :class:`weavehost.decode.answer_drafts.AnswerDrafts`). An answer
rarely copies a JSON result as it is: it writes ``humidity: 53`` or ``the humidity is 53`` for
``{"humidity": 53}``. Each scalar member (nested ones too, depth first) is restated in each of
:data:`RESTATED`'s wordings, ``_`` in a key read as a space, at most
:data:`MAX_RESTATED_MEMBERS` members a result; a result that is not JSON restates nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["MAX_RESTATED_MEMBERS", "RESTATED", "restated_members"]

# How a scalar member of a JSON result is restated (key, value): each a text of its own.
RESTATED = ("{key}: {value}", "{key} is {value}", "{key} of {value}")
# The most members of one result restated (a large listing is looked up as text anyway).
MAX_RESTATED_MEMBERS = 64


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
