"""Where a call's trigger begins in free text, and how much of the text could still become one.

Stage: decoding (pure functions over bytes, used by :mod:`weavehost.decode.reply` at every token
of free text). No model, no state: a trigger's bytes and the text so far in, positions out.
"""

from __future__ import annotations

from collections.abc import Sequence

from weavehost.formats.base import Trigger

__all__ = ["first_trigger", "held_back", "opener_position"]


def opener_position(text: bytes, opener: bytes, *, at_start_only: bool) -> int:
    """Where the opener begins in ``text`` (-1 if absent). ``at_start_only``: only after
    leading whitespace (Llama 3's JSON call is the whole reply)."""
    if at_start_only:
        stripped = text.lstrip()
        return len(text) - len(stripped) if stripped.startswith(opener) else -1
    return text.find(opener)


def first_trigger(
    text: bytes, triggers: Sequence[tuple[Trigger, bytes]], skip: int = 0
) -> tuple[int, Trigger]:
    """The trigger that begins earliest in ``text`` at or after ``skip`` and where (``(-1, …)``
    if none does); at one position the longer text wins, as the more specific way of writing a
    call."""
    found = []
    for index, (trigger, text_bytes) in enumerate(triggers):
        if trigger.at_start:
            at = opener_position(text, text_bytes, at_start_only=True)
        else:
            at = text.find(text_bytes, skip)
        if at >= skip:
            found.append((at, -len(text_bytes), index))
    if not found:
        return -1, triggers[0][0]
    at, _, index = min(found)
    return at, triggers[index][0]


def held_back(text: bytes, opener: bytes, *, at_start_only: bool) -> int:
    """How many trailing bytes of ``text`` could still grow into the opener (not streamed)."""
    if at_start_only:
        stripped = text.lstrip()
        return len(text) if opener.startswith(stripped) else 0
    for size in range(min(len(opener) - 1, len(text)), 0, -1):
        if opener.startswith(text[-size:]):
            return size
    return 0
