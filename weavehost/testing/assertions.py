"""A turn's events, and assertions over them that read as sentences.

Stage: the test kit (on top of the host's output). :class:`Events` is the list of
:class:`~weavehost.agent.events.Event` s one turn (or one direct call) reported, with the views a
test asks for: the calls it ran, the answer, how it stopped. The assertions fail with an
``AssertionError`` whose message says what the turn did instead, so a red test explains itself::

    assert_called(events, "get_forecast", city="Oslo")
    assert_not_called(events, "delete_file")
    assert_answer_contains(events, "Oslo")
    assert_no_orphan_processes()

Invariants:

* **A call** is a ``tool_result`` event: a call the model made and the host ran or refused, with
  the ``status`` it ended with (``ok``, ``tool_error``, ``denied``, ``unknown_tool`` …). A
  provisional run the final call replaced, and a repeat the loop dropped, are not calls (what a
  server itself received is its own record: ``StubServer.calls()``).
* **Arguments match as a subset**: ``assert_called(events, "f", city="Oslo")`` passes for a call
  of ``f`` with ``city="Oslo"`` and any other arguments; values compare with ``==``.
* **The answer** is the text of the turn's last model step (earlier steps' text led to calls).
* **Orphans** are processes descended from this one (children, and their children while those
  live), zombies included: an unreaped child is a leak too. Reaping may trail a close by a
  moment, so the check waits at most :data:`ORPHAN_WAIT_S` for them to go. Linux reads
  ``/proc``; elsewhere ``ps`` is asked.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from collections.abc import AsyncIterable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from weavehost.agent.events import Event

__all__ = [
    "ORPHAN_WAIT_S",
    "TURN_TIMEOUT_S",
    "Call",
    "ChildProcess",
    "Events",
    "assert_answer_contains",
    "assert_called",
    "assert_no_orphan_processes",
    "assert_not_called",
    "child_processes",
    "process_running",
    "wait_ended",
]

TURN_TIMEOUT_S = 60.0  # how long collecting one turn's events may take before the test fails
ORPHAN_WAIT_S = 2.0  # how long a closed server's processes get to be reaped
_ORPHAN_POLL_S = 0.02
_SHOWN_CHARS = 200  # of a result's or an answer's text, in a failure message


@dataclass(frozen=True, slots=True)
class Call:
    """One call of a turn, from its ``tool_result`` event."""

    name: str
    arguments: Mapping[str, Any]
    status: str
    text: str
    source: str

    def matches(self, name: str, arguments: Mapping[str, Any]) -> bool:
        """Whether this is a call of ``name`` whose arguments include ``arguments``."""
        return self.name == name and all(
            key in self.arguments and self.arguments[key] == value
            for key, value in arguments.items()
        )

    def __str__(self) -> str:
        return f"{self.name}({_arguments(self.arguments)}) -> {self.status}: {_short(self.text)}"


class Events(Sequence[Event]):
    """The events of one turn (or one direct call), in the order they happened."""

    def __init__(self, events: Iterable[Event] = ()) -> None:
        self._events = tuple(events)

    @classmethod
    async def collect(
        cls,
        stream: AsyncIterable[Event],
        *,
        timeout: float = TURN_TIMEOUT_S,  # noqa: ASYNC109 - a test's bound, named
    ) -> Events:
        """Every event of ``stream`` (``host.run(prompt)``, ``session.run(prompt)``,
        ``host.call(...)``), within ``timeout`` seconds; past it, a ``TimeoutError`` that shows
        the events so far."""
        import anyio

        got: list[Event] = []
        try:
            with anyio.fail_after(timeout):
                closing = hasattr(stream, "aclose")  # a stopped stream cancels its turn now
                async with contextlib.aclosing(stream) if closing else contextlib.nullcontext():
                    async for event in stream:
                        got.append(event)
        except TimeoutError:
            raise TimeoutError(
                f"the turn did not end within {timeout:g} s; so far it did this:\n"
                f"{cls(got).describe()}"
            ) from None
        return cls(got)

    @overload
    def __getitem__(self, index: int) -> Event: ...
    @overload
    def __getitem__(self, index: slice) -> Events: ...
    def __getitem__(self, index: int | slice) -> Event | Events:
        if isinstance(index, slice):
            return Events(self._events[index])
        return self._events[index]

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[Event]:
        return iter(self._events)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Events):
            return self._events == other._events
        return isinstance(other, Sequence) and list(self._events) == list(other)

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Iterable[Event]) -> Events:
        return Events((*self._events, *other))

    def __repr__(self) -> str:
        return f"Events({[e.type for e in self._events]})"

    def of(self, *types: str) -> list[Event]:
        """The events of these types, in order."""
        return [e for e in self._events if e.type in types]

    @property
    def calls(self) -> list[Call]:
        """The calls the turn ran or refused (its ``tool_result`` events), in order."""
        return [
            Call(
                name=e["name"],
                arguments=dict(e.get("arguments") or {}),
                status=e["status"],
                text=e.get("text") or "",
                source=e.get("source") or "",
            )
            for e in self.of("tool_result")
        ]

    def calls_of(self, name: str, /, **arguments: Any) -> list[Call]:
        """The calls of ``name`` whose arguments include ``arguments``."""
        return [c for c in self.calls if c.matches(name, arguments)]

    @property
    def text(self) -> str:
        """All the text the model streamed in the turn."""
        return "".join(e["text"] for e in self.of("text"))

    @property
    def answer(self) -> str:
        """The text of the turn's last model step: its answer, when it stopped with one."""
        last = max((i for i, e in enumerate(self._events) if e.type == "step"), default=-1)
        return "".join(e["text"] for e in self._events[last + 1 :] if e.type == "text")

    @property
    def stop(self) -> str | None:
        """How the turn ended (``answer``, ``max_steps``, ``call_failed``, ``error``), or
        ``None`` for a direct call or a turn that did not end."""
        done = self.of("done")
        return done[-1]["stop"] if done else None

    @property
    def errors(self) -> list[str]:
        """The messages of the turn's ``error`` events."""
        return [e["error"] for e in self.of("error")]

    @property
    def notices(self) -> list[str]:
        return [e["text"] for e in self.of("notice")]

    def describe(self) -> str:
        """What the turn did, in a few lines: its calls, how it stopped, its answer."""
        lines = [f"call {c}" for c in self.calls] or ["no call"]
        if self.stop is not None:
            lines.append(f"stopped: {self.stop}")
        lines.extend(f"error: {message}" for message in self.errors)
        lines.append(f"answer: {_short(self.answer)}")
        return "\n".join(f"  {line}" for line in lines)


def _short(text: str) -> str:
    shown = json.dumps(text[:_SHOWN_CHARS], ensure_ascii=False)
    return shown if len(text) <= _SHOWN_CHARS else f"{shown}… ({len(text)} characters)"


def _arguments(arguments: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())


def _described(name: str, arguments: Mapping[str, Any]) -> str:
    return f"{name} with {_arguments(arguments)}" if arguments else name


def _events(events: Iterable[Event]) -> Events:
    return events if isinstance(events, Events) else Events(events)


def assert_called(events: Iterable[Event], name: str, /, **arguments: Any) -> Call:
    """The turn called ``name`` with (at least) ``arguments``; returns the first such call."""
    turn = _events(events)
    found = turn.calls_of(name, **arguments)
    if not found:
        raise AssertionError(
            f"expected a call of {_described(name, arguments)}; the turn did this:\n"
            f"{turn.describe()}"
        )
    return found[0]


def assert_not_called(events: Iterable[Event], name: str, /, **arguments: Any) -> None:
    """The turn made no call of ``name`` with (at least) ``arguments``."""
    turn = _events(events)
    found = turn.calls_of(name, **arguments)
    if found:
        raise AssertionError(
            f"expected no call of {_described(name, arguments)}, but the turn made "
            f"{len(found)}:\n" + "\n".join(f"  call {c}" for c in found)
        )


def assert_answer_contains(events: Iterable[Event], text: str, /) -> str:
    """The turn's answer contains ``text`` (case-sensitive); returns the answer."""
    turn = _events(events)
    if text not in turn.answer:
        raise AssertionError(
            f"expected the answer to contain {json.dumps(text, ensure_ascii=False)}; "
            f"the turn did this:\n{turn.describe()}"
        )
    return turn.answer


# --------------------------------------------------------------------------- processes


@dataclass(frozen=True, slots=True)
class ChildProcess:
    """A process descended from this one."""

    pid: int
    ppid: int
    state: str  # one letter, as ps shows it: R, S, Z (a zombie: exited, not reaped) …
    command: str

    def __str__(self) -> str:
        zombie = " (exited, not reaped)" if self.state.startswith("Z") else ""
        return f"pid {self.pid}{zombie}: {self.command or '?'}"


def _proc_table() -> list[ChildProcess]:
    table = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                head, tail = fh.read().rsplit(b")", 1)
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except OSError:  # it ended while we looked
            continue
        fields = tail.split()
        command = " ".join(a.decode(errors="replace") for a in argv if a)
        if not command:  # a zombie has no command line left; its name is in stat
            command = head.split(b"(", 1)[-1].decode(errors="replace")
        table.append(ChildProcess(int(entry.name), int(fields[1]), fields[0].decode(), command))
    return table


def _ps_table() -> list[ChildProcess]:
    ps = subprocess.Popen(
        ["ps", "-A", "-o", "pid=,ppid=,stat=,command="], stdout=subprocess.PIPE, text=True
    )
    out, _ = ps.communicate()
    table = []
    for line in out.splitlines():
        parts = line.split(None, 3)
        if len(parts) >= 3 and int(parts[0]) != ps.pid:
            command = parts[3] if len(parts) == 4 else ""
            table.append(ChildProcess(int(parts[0]), int(parts[1]), parts[2], command))
    return table


def child_processes() -> list[ChildProcess]:
    """Every process descended from this one, zombies included; a parent comes before its
    children."""
    table = _proc_table() if os.path.isdir("/proc/self") else _ps_table()
    by_parent: dict[int, list[ChildProcess]] = {}
    for process in table:
        by_parent.setdefault(process.ppid, []).append(process)
    found, parents = [], [os.getpid()]
    while parents:
        children = by_parent.get(parents.pop(), [])
        found.extend(children)
        parents.extend(c.pid for c in children)
    return found


def assert_no_orphan_processes(
    *, allowed: Iterable[int] = (), wait_s: float = ORPHAN_WAIT_S
) -> None:
    """No process descended from this test process is left (``allowed``: pids that may be,
    such as a server a session-wide fixture keeps). Waits at most ``wait_s`` for processes
    that are being reaped."""
    keep = set(allowed)
    deadline = time.monotonic() + wait_s
    while True:
        left = [p for p in child_processes() if p.pid not in keep]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(_ORPHAN_POLL_S)  # a bounded poll: reaping is not something one can await
    if left:
        raise AssertionError(
            f"{len(left)} process(es) started by this test process are still there "
            f"{wait_s:g} s later:\n" + "\n".join(f"  {p}" for p in left)
        )


def process_running(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has ended; reaping it is its parent's business)."""
    if os.path.isdir("/proc"):
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                return fh.read().rsplit(b")", 1)[1].split()[0] != b"Z"
        except FileNotFoundError:
            return False
    # No /proc (macOS): ask the kernel.
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_ended(
    processes: Sequence[ChildProcess],
    *,
    groups: Iterable[int] = (),
    wait_s: float = ORPHAN_WAIT_S,
    what: str = "processes",
) -> None:
    """Each of ``processes`` has ended, and no process is left in the process ``groups`` (a
    server's group holds what it started, wherever that was reparented to), within ``wait_s``."""
    from weavehost.mcp.transport import group_alive

    groups = list(groups)
    deadline = time.monotonic() + wait_s
    while True:
        left = [str(p) for p in processes if process_running(p.pid)]
        left += [f"a process in group {g}" for g in groups if group_alive(g)]
        if not left or time.monotonic() >= deadline:
            break
        time.sleep(_ORPHAN_POLL_S)
    if left:
        raise AssertionError(
            f"{what} left {len(left)} process(es) running {wait_s:g} s after closing:\n"
            + "\n".join(f"  {p}" for p in left)
        )
