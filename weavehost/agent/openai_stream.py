"""Reading an OpenAI-compatible chat-completions stream: SSE events, chunks, partial arguments.

Stage: agent (the wire side of :mod:`weavehost.agent.remote`). Nothing here does I/O: it turns
the text a server streams into records, so every piece is tested without a network.

Guarantees:

* :func:`sse_data` yields the ``data`` of each complete Server-Sent Event (``data:`` lines of
  one event joined by newlines; comments and other fields skipped). An event the stream cut
  before its closing blank line is not yielded: it may be half a JSON object.
* :func:`parse_chunk` reads one ``chat.completion.chunk`` into a :class:`Chunk` (text, tool-call
  pieces, finish reason, usage); a payload that is not JSON, not a chunk, or an ``error`` object
  a server sends mid-stream raises :class:`~weavehost.errors.RemoteStreamError` /
  :class:`~weavehost.errors.RemoteResponseError`.
* :class:`ArgumentScanner` reads a call's ``arguments`` text piece by piece and knows which
  top-level members are **complete**: a member is complete only once the scanner has read past
  its value (the ``,`` or ``}`` that follows it), so a number that could still grow (``12`` of
  ``123``) or a string still open is never reported. Each member is reported once, with the
  value ``json.loads`` gives its text; text that cannot be (the start of) a JSON object marks
  the scanner ``broken`` and it reports nothing more (the final ``json.loads`` of the whole text
  then names the fault).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from weavehost.errors import RemoteResponseError, RemoteStreamError

__all__ = [
    "DONE",
    "ArgumentScanner",
    "CallPiece",
    "Chunk",
    "parse_chunk",
    "sse_data",
]

DONE = "[DONE]"  # the data of the event that ends an OpenAI stream
_WHITESPACE = " \t\r\n"


def sse_data(lines: Iterable[str]) -> Iterator[str]:
    """The data of each complete event in ``lines`` (a stream's text split at line ends)."""
    data: list[str] = []
    for line in lines:
        if not line:
            if data:
                yield "\n".join(data)
                data = []
            continue
        if line.startswith(":"):  # a comment (keep-alive pings)
            continue
        name, _, value = line.partition(":")
        if name == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    # An event without its closing blank line was cut by the stream's end: not yielded.


@dataclass(frozen=True, slots=True)
class CallPiece:
    """One tool call's part of a chunk: its ``index`` in the reply, and the pieces of its name
    and arguments text this chunk carries (empty when it carries none). The server's call id is
    not kept: the conversation sent back numbers the calls itself
    (:func:`~weavehost.agent.remote.wire_messages`)."""

    index: int
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One ``chat.completion.chunk``: the text delta, tool-call pieces, the finish reason (None
    until the server gives one) and ``usage`` when the server reports it."""

    text: str = ""
    calls: tuple[CallPiece, ...] = ()
    finish: str | None = None
    usage: Mapping[str, Any] | None = None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def parse_chunk(data: str) -> Chunk:
    """One event's data as a :class:`Chunk` (``[DONE]`` is the caller's)."""
    try:
        document = json.loads(data)
    except json.JSONDecodeError as exc:
        raise RemoteStreamError(
            f"the model server streamed an event that is not JSON ({exc.msg}): {data[:200]!r}"
        ) from exc
    if not isinstance(document, dict):
        raise RemoteStreamError(f"the model server streamed {data[:200]!r}, not a chunk object")
    if "error" in document:
        error = document["error"]
        message = error.get("message", error) if isinstance(error, dict) else error
        raise RemoteResponseError(f"the model server reported an error mid-stream: {message}")
    choices = document.get("choices") or []
    usage = document.get("usage") if isinstance(document.get("usage"), dict) else None
    if not choices:  # a usage-only chunk (stream_options.include_usage) or a keep-alive
        return Chunk(usage=usage)
    if not isinstance(choices, list):
        raise RemoteStreamError(
            f"the model server streamed choices that are not a list: {data[:200]!r}"
        )
    choice = _object(choices[0], "choice", data)
    delta = _object(choice.get("delta"), "delta", data)
    calls = delta.get("tool_calls") or []
    if not isinstance(calls, list):
        raise RemoteStreamError(
            f"the model server streamed tool_calls that are not a list: {data[:200]!r}"
        )
    pieces = []
    for position, raw in enumerate(calls):
        if not isinstance(raw, dict):
            continue
        function = _object(raw.get("function"), "function", data)
        index = raw.get("index")
        pieces.append(
            CallPiece(
                index=index if isinstance(index, int) else position,
                name=_text(function.get("name")),
                arguments=_text(function.get("arguments")),
            )
        )
    finish = choice.get("finish_reason")
    return Chunk(
        text=_text(delta.get("content")),
        calls=tuple(pieces),
        finish=finish if isinstance(finish, str) else None,
        usage=usage,
    )


def _object(value: Any, what: str, data: str) -> dict[str, Any]:
    """``value`` when it is a JSON object, ``{}`` when absent; a :class:`RemoteStreamError`
    naming ``what`` otherwise (a server that streams nonsense is an error, not a crash)."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise RemoteStreamError(
            f"the model server streamed a {what} that is not an object: {data[:200]!r}"
        )
    return value


@dataclass(slots=True)
class ArgumentScanner:
    """A call's arguments text read as it streams; see the module docstring for what
    ``members`` guarantees. ``closed``: the top-level object ended."""

    members: dict[str, Any] = field(default_factory=dict)
    closed: bool = False
    broken: bool = False
    _phase: str = "start"  # start, key_or_end, key, colon, value, done
    _buffer: list[str] = field(default_factory=list)
    _key: str = ""
    _nest: int = 0  # brackets open inside the current value
    _in_string: bool = False
    _escape: bool = False

    def feed(self, text: str) -> list[str]:
        """Read the next piece; the names of the members it completed, in order."""
        done: list[str] = []
        for char in text:
            if self.broken:
                break
            self._step(char, done)
        return done

    def _fail(self) -> None:
        self.broken = True

    def _step(self, char: str, done: list[str]) -> None:
        phase = self._phase
        if phase == "start":
            if char == "{":
                self._phase = "key_or_end"
            elif char not in _WHITESPACE:
                self._fail()
        elif phase == "key_or_end":
            if char == '"':
                self._phase, self._buffer, self._in_string = "key", [char], True
            elif char == "}" and not self.members:
                self._phase, self.closed = "done", True
            elif char not in _WHITESPACE:
                self._fail()
        elif phase == "key":
            self._buffer.append(char)
            if self._string_char(char):
                try:
                    self._key = json.loads("".join(self._buffer))
                except json.JSONDecodeError:
                    self._fail()
                    return
                self._phase = "colon"
        elif phase == "colon":
            if char == ":":
                self._phase, self._buffer, self._nest = "value", [], 0
            elif char not in _WHITESPACE:
                self._fail()
        elif phase == "value":
            self._value_char(char, done)
        elif char not in _WHITESPACE:  # done: only whitespace may follow the object
            self._fail()

    def _string_char(self, char: str) -> bool:
        """Inside a string: whether ``char`` closes it (tracking backslash escapes)."""
        if self._escape:
            self._escape = False
        elif char == "\\":
            self._escape = True
        elif char == '"':
            self._in_string = False
            return True
        return False

    def _value_char(self, char: str, done: list[str]) -> None:
        if self._in_string:
            self._buffer.append(char)
            self._string_char(char)
            return
        if self._nest == 0 and char in ",}":
            try:
                value = json.loads("".join(self._buffer))
            except json.JSONDecodeError:
                self._fail()
                return
            if self._key not in self.members:  # a repeated key: the first value is kept
                self.members[self._key] = value
                done.append(self._key)
            if char == ",":
                self._phase = "key_or_end"
            else:
                self._phase, self.closed = "done", True
            return
        self._buffer.append(char)
        if char == '"':
            self._in_string = True
        elif char in "{[":
            self._nest += 1
        elif char in "}]":
            self._nest -= 1
            if self._nest < 0:
                self._fail()
