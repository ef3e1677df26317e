"""Call-shaped text in an answer that may not call.

Stage: decoding (a reply's free text, :class:`weavehost.decode.reply.ReplyWriter`). When calls
are not allowed (``--tool-choice none``, or after the model repeated a call whose result it
has), the token that would begin a call trigger is banned at its place, so the model gets the
chance to answer in prose. A small model often writes the call anyway, another way: SmolLM2-135M
answers ``{{"name": "get_current_weather", …}}``, Qwen2.5-Coder-0.5B ``\\"name": "…"`` or
``>{"name": …``. That is neither an answer nor a call the host may run. :class:`CallText` finds
where a JSON object naming a tool on offer begins (the ``"name"`` key followed by the tool's
name, quotes escaped or not, any whitespace between), and how much trailing text could still
become one, so it is never streamed. Free decoding then takes it back: the token that began it
is banned there and the next token must begin a word (a letter, a digit or a non-ASCII
character after any spaces: no brace, no mark, no end of turn), as after a banned opener; an
answer's opening marks are not shown before its first word, so they can be taken back too.
After :data:`~weavehost.decode.continuation.CALL_TEXT_RETRIES` such take-backs the answer is cut
where the call text begins. Measured with ``weavehost bench-agent`` (51 shipped tasks, ``weave``,
prompt cache on): Qwen2.5-Coder-0.5B Q4_0 succeeded on 8 tasks before, 20 after (its answers
were empty: the call text was cut); SmolLM2-135M on 11 before, 13 after (docs/agent.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["CallText"]

_LOOSE = re.compile(rb"[\s\\]")  # what may sit between the parts of a naming
_OPENING = b" \t\r\n{[\\"  # what may come before the naming in a call object
_FENCES = (b"```json", b"```")


class CallText:
    """Finds call-shaped text naming one of ``names`` in growing text (scan it after each
    token). Positions are byte offsets into the text given to :meth:`scan`."""

    def __init__(self, names: Iterable[str]) -> None:
        self._namings = [f'"name":"{name}"'.encode() for name in names]
        self._window = 4 * max((len(n) for n in self._namings), default=0)
        self._cursor = 0  # quotes before this can no longer begin a naming

    def scan(self, data: bytes) -> tuple[int, int]:
        """``(found, held)``: where call text begins in ``data`` (-1 if none does), and from
        where the trailing bytes could still become call text (``len(data)`` if none could)."""
        held = len(data)
        if not self._namings:
            return -1, held
        at = data.find(b'"', self._cursor)
        while at >= 0:
            squeezed = _LOOSE.sub(b"", data[at : at + self._window])
            if any(squeezed.startswith(naming) for naming in self._namings):
                return _call_start(data, at), held
            if any(naming.startswith(squeezed) for naming in self._namings):
                held = min(held, _call_start(data, at))  # not decided yet
            elif held == len(data):
                self._cursor = at + 1  # every quote up to here is ruled out
            at = data.find(b'"', at + 1)
        return -1, held

    def begins_in(self, data: bytes) -> bool:
        """Whether call text begins in ``data`` (text that may never be written: drafted), the
        scan of the text written left as it was."""
        cursor = self._cursor
        try:
            return self.scan(data)[0] >= 0
        finally:
            self._cursor = cursor

    def cut(self, length: int) -> None:
        """The text was cut back to ``length`` bytes (a banned trigger): scan it again from
        there as it grows."""
        self._cursor = min(self._cursor, length)


def _call_start(data: bytes, naming_at: int) -> int:
    """Where the call object whose ``"name"`` is at ``naming_at`` begins: before its braces,
    escapes and whitespace, and before a code fence opened just for it."""
    start = naming_at
    while start and data[start - 1] in _OPENING:
        start -= 1
    for fence in _FENCES:
        if data[:start].endswith(fence):
            start -= len(fence)
            while start and data[start - 1] in b" \t\r\n":
                start -= 1
            break
    return start
