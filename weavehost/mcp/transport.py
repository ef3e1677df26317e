"""Our stdio transport: spawn an MCP server, frame its JSON-RPC lines, stop it without orphans.

Stage: server transport (under :mod:`weavehost.mcp.connections`; :class:`StdioTransport` yields
the same pair of streams as the SDK's ``mcp.client.stdio.stdio_client``, so ``mcp.Client`` drives
it unchanged). Its steps are named methods: spawn, the stdout reader (framed by
:class:`LineFramer`, oversized lines answered), the stderr reader, the stdin writer, the exit
watcher, and the shutdown in four bounded parts.

Why not the SDK's ``stdio_client``: it buffers a line without bound (a 50 MB line is 50 MB of
host memory, RELIABILITY row 7), it notices a dead server only when stdout reaches EOF (a child
that inherited the pipe keeps it open, so a crash looks like a hang), it kills the process group
only when the leader outlives stdin close (children of a leader that exited stay behind), and a
response it cannot parse is dropped, so its caller waits for the full timeout. This module keeps
the SDK's wire types and shutdown order and fixes those four things.

Invariants:

* At most ``max_message_bytes`` (+ one read chunk) of one message is held in memory. A longer
  line, or one that does not parse, whose request id can be seen becomes a JSON-RPC error
  response for that id (the call fails at once); otherwise the connection is closed.
* Non-JSON lines, bad UTF-8 and frames split across reads are logged and skipped; the session
  goes on.
* The process exiting closes the read stream at once (pending requests fail with
  ``CONNECTION_CLOSED``) and is reported through ``on_exit``.
* Shutdown (shielded, every wait bounded by a named config value): close stdin, wait
  ``shutdown_grace``, SIGTERM the process group, wait ``kill_grace``, SIGKILL the group; then
  SIGKILL whatever of the group is still alive even if the leader left on its own.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import signal
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from anyio import AsyncContextManagerMixin
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

__all__ = ["LineFramer", "Oversized", "ProcessInfo", "StdioSpec", "StdioTransport", "group_alive"]

logger = logging.getLogger(__name__)

READ_CHUNK = 64 * 1024  # bytes read from a pipe at a time
EXIT_POLL_INTERVAL = 0.01  # how often the exit watcher looks at returncode
WRITER_FLUSH_TIMEOUT = 0.5  # time for accepted messages to reach stdin at shutdown
REAP_TIMEOUT = 2.0  # time for the event loop to observe a SIGKILL
STDERR_TAIL_LINES = 20  # stderr lines kept for error messages
STDERR_LINE_CAP = 2000  # characters kept of one stderr line
_ID_WINDOW = 256  # bytes kept of an oversized line's head and tail to find its id
MESSAGE_TOO_LARGE = -32099  # our JSON-RPC error code for a message over the byte cap
MESSAGE_UNPARSEABLE = -32098  # our code for a response that cannot be parsed
_HEAD_ID = re.compile(rb'^\s*\{\s*"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(-?\d+|"[^"\\]{0,100}")')
_TAIL_ID = re.compile(
    rb'"id"\s*:\s*(-?\d+|"[^"\\]{0,100}")\s*(?:,\s*"jsonrpc"\s*:\s*"2\.0"\s*)?\}\s*$'
)


@dataclass(frozen=True, slots=True)
class StdioSpec:
    """What to spawn and the bounds to apply to it."""

    command: str
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    max_message_bytes: int = 4 * 1024 * 1024
    shutdown_grace: float = 2.0
    kill_grace: float = 2.0
    label: str = "server"


@dataclass(slots=True)
class ProcessInfo:
    """Live facts about the spawned process (mutable: filled in as they happen)."""

    pid: int
    returncode: int | None = None
    stderr_tail: collections.deque[str] = field(
        default_factory=lambda: collections.deque(maxlen=STDERR_TAIL_LINES)
    )
    protocol_error: str | None = None

    def describe_exit(self) -> str:
        parts = []
        if self.protocol_error:
            parts.append(self.protocol_error)
        if self.returncode is not None:
            code = self.returncode
            parts.append(f"exited with signal {-code}" if code < 0 else f"exited with code {code}")
        if self.stderr_tail:
            parts.append("last stderr: " + " | ".join(list(self.stderr_tail)[-3:]))
        return "; ".join(parts) or "connection closed"


def group_alive(pgid: int) -> bool:
    """Whether any non-zombie process is left in group ``pgid``.

    Reads /proc where there is one (a zombie waits for its reaper and harms nobody); elsewhere
    falls back to ``killpg(pgid, 0)``.
    """
    if os.path.isdir("/proc"):
        with os.scandir("/proc") as entries:
            for entry in entries:
                if not entry.name.isdigit():
                    continue
                try:
                    with open(f"/proc/{entry.name}/stat", "rb") as fh:
                        stat = fh.read()
                except OSError:
                    continue
                fields = stat[stat.rfind(b")") + 2 :].split()
                if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
                    return True
        return False
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _error_response(raw_id: bytes, code: int, message: str) -> SessionMessage | None:
    try:
        ident: Any = int(raw_id) if raw_id[:1] != b'"' else raw_id[1:-1].decode()
    except (ValueError, UnicodeDecodeError):
        return None
    return SessionMessage(
        types.JSONRPCError(
            jsonrpc="2.0", id=ident, error=types.ErrorData(code=code, message=message)
        )
    )


def _find_id(head: bytes, tail: bytes) -> bytes | None:
    match = _HEAD_ID.search(head) or _TAIL_ID.search(tail)
    return match.group(1) if match else None


@dataclass(frozen=True, slots=True)
class Oversized:
    """A line longer than the cap: its first and last ``_ID_WINDOW`` bytes and its length."""

    head: bytes
    tail: bytes
    size: int


class LineFramer:
    """Splits a pipe's bytes into lines, holding at most ``cap`` bytes of one line.

    :meth:`feed` yields, in the order they end, each complete line (without its ``\\n``) as
    ``bytes`` and each line longer than ``cap`` as an :class:`Oversized` (head and tail kept, the
    middle counted and dropped). A line not yet ended waits for the next chunk.
    """

    __slots__ = ("_buf", "_head", "_oversized", "_size", "_tail", "cap")

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self._buf = bytearray()
        self._oversized, self._head, self._tail, self._size = False, b"", b"", 0

    def feed(self, chunk: bytes) -> Iterator[bytes | Oversized]:
        start = 0
        while start <= len(chunk):
            nl = chunk.find(b"\n", start)
            piece = chunk[start : nl if nl >= 0 else len(chunk)]
            if self._oversized:
                self._tail = (self._tail + piece)[-_ID_WINDOW:]
                self._size += len(piece)
            elif len(self._buf) + len(piece) > self.cap:
                whole = bytes(self._buf[:_ID_WINDOW]) + piece[:_ID_WINDOW]
                self._oversized, self._head = True, whole[:_ID_WINDOW]
                self._tail, self._size = piece[-_ID_WINDOW:], len(self._buf) + len(piece)
                self._buf = bytearray()
            else:
                self._buf += piece
            if nl < 0:
                break
            if self._oversized:
                self._oversized = False
                yield Oversized(self._head, self._tail, self._size)
            else:
                line, self._buf = bytes(self._buf), bytearray()
                yield line
            start = nl + 1


class StdioTransport(AsyncContextManagerMixin):
    """One spawned server: entering yields ``(read_stream, write_stream)``; leaving stops it and
    reaps its whole process group.

    Entering raises OSError when the program cannot be spawned (the caller converts it). The
    steps: :meth:`_spawn`; four tasks while it runs (:meth:`_read_stdout`, :meth:`_read_stderr`,
    :meth:`_write_stdin`, :meth:`_watch_exit`); on leaving, shielded, :meth:`_shutdown`
    (:meth:`_flush_writer`, :meth:`_stop_leader`, :meth:`_reap_group`, :meth:`_close_pipes`).
    """

    info: ProcessInfo
    _process: anyio.abc.Process
    _read_writer: MemoryObjectSendStream[SessionMessage | Exception]
    _read_stream: MemoryObjectReceiveStream[SessionMessage | Exception]
    _write_stream: MemoryObjectSendStream[SessionMessage]
    _write_reader: MemoryObjectReceiveStream[SessionMessage]
    _writer_done: anyio.Event

    def __init__(
        self,
        spec: StdioSpec,
        *,
        on_spawn: Callable[[ProcessInfo], None] | None = None,
        on_exit: Callable[[ProcessInfo], None] | None = None,
    ) -> None:
        self.spec = spec
        self._on_spawn, self._on_exit = on_spawn, on_exit
        self._closing = False

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[tuple[Any, Any]]:
        await self._spawn()
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._read_stdout)
            tg.start_soon(self._read_stderr)
            tg.start_soon(self._write_stdin)
            tg.start_soon(self._watch_exit)
            try:
                yield self._read_stream, self._write_stream
            finally:
                self._closing = True
                with anyio.CancelScope(shield=True):
                    await self._shutdown()
                    await anyio.lowlevel.checkpoint()
                tg.cancel_scope.cancel()

    # ----------------------------------------------------------------------- spawn

    async def _spawn(self) -> None:
        """Start the process in its own group, report it, and open the two message streams."""
        spec = self.spec
        self._process = await anyio.open_process(
            [spec.command, *spec.args],
            env=get_default_environment() | dict(spec.env),
            cwd=spec.cwd,
            start_new_session=True,  # pgid == pid: the whole tree can be signalled at once
        )
        self.info = ProcessInfo(pid=self._process.pid)
        if self._on_spawn is not None:
            self._on_spawn(self.info)
        self._read_writer, self._read_stream = anyio.create_memory_object_stream[
            SessionMessage | Exception
        ](0)
        self._write_stream, self._write_reader = anyio.create_memory_object_stream[SessionMessage](
            0
        )
        self._writer_done = anyio.Event()

    # ----------------------------------------------------------------------- stdout

    async def _read_stdout(self) -> None:
        """Frame stdout into messages for the read stream; close it when stdout ends."""
        stdout = self._process.stdout
        assert stdout is not None
        framer = LineFramer(self.spec.max_message_bytes)
        try:
            while True:
                try:
                    chunk = await stdout.receive(READ_CHUNK)
                except (
                    anyio.EndOfStream,
                    anyio.ClosedResourceError,
                    anyio.BrokenResourceError,
                    OSError,
                ):
                    return
                for item in framer.feed(chunk):
                    if isinstance(item, Oversized):
                        going_on = await self._handle_oversized(item)
                    else:
                        going_on = await self._handle_line(item)
                    if not going_on:
                        return
        finally:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._read_writer.aclose()

    async def _handle_line(self, line: bytes) -> bool:
        """Deliver one line as a message, an error response for its id, or skip it (logged).
        False: the reader stops (the read stream is closed)."""
        label = self.spec.label
        line = line.rstrip(b"\r")
        if not line.strip():
            return True
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            logger.warning("%s: skipped a stdout line that is not UTF-8 (%s)", label, exc.reason)
            return True
        try:
            message = types.jsonrpc_message_adapter.validate_json(text, by_name=False)
        except ValueError as exc:
            raw_id = _find_id(line[:_ID_WINDOW], line[-_ID_WINDOW:])
            if raw_id is not None and (
                reply := _error_response(
                    raw_id, MESSAGE_UNPARSEABLE, f"unparseable message: {str(exc)[:200]}"
                )
            ):
                return await self._deliver(reply)
            logger.warning("%s: skipped a stdout line that is not JSON-RPC: %.80r", label, text)
            return True
        return await self._deliver(SessionMessage(message))

    async def _handle_oversized(self, line: Oversized) -> bool:
        """Answer an oversized line's request with an error, or close the connection when its
        id cannot be seen."""
        problem = f"message of {line.size} bytes exceeds the {self.spec.max_message_bytes}-byte cap"
        raw_id = _find_id(line.head, line.tail)
        reply = _error_response(raw_id, MESSAGE_TOO_LARGE, problem) if raw_id is not None else None
        if reply is None:
            await self._fail_connection(problem)
            return False
        logger.warning(
            "%s: %s; answered request %s with an error", self.spec.label, problem, raw_id.decode()
        )
        return await self._deliver(reply)

    async def _deliver(self, item: SessionMessage | Exception) -> bool:
        try:
            await self._read_writer.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def _fail_connection(self, reason: str) -> None:
        self.info.protocol_error = reason
        logger.warning("%s: %s; closing the connection", self.spec.label, reason)
        await self._read_writer.aclose()

    # ----------------------------------------------------------------------- stderr, stdin

    async def _read_stderr(self) -> None:
        """Keep the last stderr lines (each capped) for error messages; log them at debug."""
        stderr = self._process.stderr
        assert stderr is not None
        pending = b""
        with suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError
        ):
            while True:
                pending += await stderr.receive(READ_CHUNK)
                *lines, pending = pending.split(b"\n")
                pending = pending[-STDERR_LINE_CAP:]
                for raw in lines:
                    line = raw.decode("utf-8", "replace").rstrip()[:STDERR_LINE_CAP]
                    if line:
                        self.info.stderr_tail.append(line)
                        logger.debug("%s stderr: %s", self.spec.label, line)

    async def _write_stdin(self) -> None:
        """Write each message sent on the write stream as one line; a broken stdin closes the
        read stream (pending requests fail at once)."""
        stdin = self._process.stdin
        assert stdin is not None
        try:
            async with self._write_reader:
                async for session_message in self._write_reader:
                    data = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._read_writer.aclose()
        finally:
            self._writer_done.set()

    # ----------------------------------------------------------------------- exit

    async def _watch_exit(self) -> None:
        """Record the exit code; an exit not asked for closes the read stream at once."""
        # Poll returncode rather than process.wait(): on asyncio, wait() also waits for pipe EOF,
        # which a child holding the pipe can postpone forever.
        process = self._process
        while process.returncode is None:  # noqa: ASYNC110 - nothing to wait on but returncode
            await anyio.sleep(EXIT_POLL_INTERVAL)
        self.info.returncode = process.returncode
        if not self._closing:
            logger.warning("%s %s", self.spec.label, self.info.describe_exit())
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await self._read_writer.aclose()
        if self._on_exit is not None:
            self._on_exit(self.info)

    async def _wait_exit(self, timeout: float) -> bool:  # noqa: ASYNC109 - bounded polling helper
        with anyio.move_on_after(timeout):
            while self._process.returncode is None:  # noqa: ASYNC110
                await anyio.sleep(EXIT_POLL_INTERVAL)
            return True
        return False

    async def _wait_group_gone(self, timeout: float) -> bool:  # noqa: ASYNC109
        with anyio.move_on_after(timeout):
            while group_alive(self._process.pid):
                _ = self._process.returncode  # lets the loop reap the leader
                await anyio.sleep(EXIT_POLL_INTERVAL)
            return True
        return False

    # ----------------------------------------------------------------------- shutdown

    async def _shutdown(self) -> None:
        """Stop the server, every wait bounded (run shielded)."""
        await self._flush_writer()
        await self._stop_leader()
        await self._reap_group()
        self.info.returncode = self._process.returncode
        await self._close_pipes()

    async def _flush_writer(self) -> None:
        """Let messages already accepted reach stdin (``WRITER_FLUSH_TIMEOUT``)."""
        self._write_stream.close()
        with anyio.move_on_after(WRITER_FLUSH_TIMEOUT):
            await self._writer_done.wait()

    async def _stop_leader(self) -> None:
        """Close stdin, wait ``shutdown_grace``; SIGTERM the group, wait ``kill_grace``; SIGKILL
        the group, wait ``REAP_TIMEOUT``; then give up on it with a warning."""
        spec, process = self.spec, self._process
        assert process.stdin is not None
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
        pgid = process.pid
        if not await self._wait_exit(spec.shutdown_grace):
            _signal_group(pgid, signal.SIGTERM)
            if not await self._wait_exit(spec.kill_grace):
                _signal_group(pgid, signal.SIGKILL)
                if not await self._wait_exit(REAP_TIMEOUT):
                    logger.warning("%s (pid %d) survived SIGKILL; abandoning it", spec.label, pgid)

    async def _reap_group(self) -> None:
        """Children the leader left behind (it exited, they did not): the same escalation,
        bounded by ``kill_grace`` and ``REAP_TIMEOUT``."""
        pgid = self._process.pid
        if group_alive(pgid):
            _signal_group(pgid, signal.SIGTERM)
            if not await self._wait_group_gone(self.spec.kill_grace):
                _signal_group(pgid, signal.SIGKILL)
                await self._wait_group_gone(REAP_TIMEOUT)

    async def _close_pipes(self) -> None:
        """Close the process's pipes, its asyncio transport and both message streams."""
        process = self._process
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.aclose()
        transport = getattr(getattr(process, "_process", None), "_transport", None)
        close = getattr(transport, "close", None)
        if callable(close):
            with suppress(PermissionError):
                close()  # otherwise it warns at GC while a survivor holds a pipe end
        for stream in (
            self._read_stream,
            self._write_stream,
            self._read_writer,
            self._write_reader,
        ):
            await stream.aclose()
