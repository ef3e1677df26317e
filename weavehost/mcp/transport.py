"""Our stdio transport: spawn an MCP server, frame its JSON-RPC lines, stop it without orphans.

Stage: server transport (under :mod:`weavehost.mcp.servers`; it yields the same pair of streams as
the SDK's ``mcp.client.stdio.stdio_client``, so ``mcp.Client`` drives it unchanged).

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
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import mcp_types as types
from mcp.client.stdio import get_default_environment
from mcp.shared.message import SessionMessage

__all__ = ["ProcessInfo", "StdioSpec", "group_alive", "stdio_transport"]

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
        for entry in os.scandir("/proc"):
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


@asynccontextmanager
async def stdio_transport(
    spec: StdioSpec,
    *,
    on_spawn: Callable[[ProcessInfo], None] | None = None,
    on_exit: Callable[[ProcessInfo], None] | None = None,
) -> AsyncIterator[tuple[Any, Any]]:
    """Spawn ``spec`` in its own process group and yield ``(read_stream, write_stream)``.

    Raises OSError when the program cannot be spawned (the caller converts it).
    """
    process = await anyio.open_process(
        [spec.command, *spec.args],
        env=get_default_environment() | dict(spec.env),
        cwd=spec.cwd,
        start_new_session=True,  # pgid == pid: the whole tree can be signalled at once
    )
    info = ProcessInfo(pid=process.pid)
    if on_spawn is not None:
        on_spawn(info)
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)
    writer_done = anyio.Event()
    closing = False

    async def deliver(item: SessionMessage | Exception) -> bool:
        try:
            await read_writer.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True

    async def fail_connection(reason: str) -> None:
        info.protocol_error = reason
        logger.warning("%s: %s; closing the connection", spec.label, reason)
        await read_writer.aclose()

    async def handle_line(line: bytes) -> bool:
        line = line.rstrip(b"\r")
        if not line.strip():
            return True
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            logger.warning(
                "%s: skipped a stdout line that is not UTF-8 (%s)", spec.label, exc.reason
            )
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
                return await deliver(reply)
            logger.warning(
                "%s: skipped a stdout line that is not JSON-RPC: %.80r", spec.label, text
            )
            return True
        return await deliver(SessionMessage(message))

    async def handle_oversized(head: bytes, tail: bytes, size: int) -> bool:
        problem = f"message of {size} bytes exceeds the {spec.max_message_bytes}-byte cap"
        raw_id = _find_id(head, tail)
        reply = _error_response(raw_id, MESSAGE_TOO_LARGE, problem) if raw_id is not None else None
        if reply is None:
            await fail_connection(problem)
            return False
        logger.warning(
            "%s: %s; answered request %s with an error", spec.label, problem, raw_id.decode()
        )
        return await deliver(reply)

    async def stdout_reader() -> None:
        assert process.stdout is not None
        buf = bytearray()
        oversized, head, tail, size = False, b"", b"", 0
        try:
            while True:
                try:
                    chunk = await process.stdout.receive(READ_CHUNK)
                except (
                    anyio.EndOfStream,
                    anyio.ClosedResourceError,
                    anyio.BrokenResourceError,
                    OSError,
                ):
                    return
                start = 0
                while start <= len(chunk):
                    nl = chunk.find(b"\n", start)
                    piece = chunk[start : nl if nl >= 0 else len(chunk)]
                    if oversized:
                        tail = (tail + piece)[-_ID_WINDOW:]
                        size += len(piece)
                    elif len(buf) + len(piece) > spec.max_message_bytes:
                        whole = bytes(buf[:_ID_WINDOW]) + piece[:_ID_WINDOW]
                        oversized, head, tail = True, whole[:_ID_WINDOW], piece[-_ID_WINDOW:]
                        size = len(buf) + len(piece)
                        buf = bytearray()
                    else:
                        buf += piece
                    if nl < 0:
                        break
                    if oversized:
                        oversized = False
                        if not await handle_oversized(head, tail, size):
                            return
                    else:
                        line, buf = bytes(buf), bytearray()
                        if not await handle_line(line):
                            return
                    start = nl + 1
        finally:
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await read_writer.aclose()

    async def stderr_reader() -> None:
        assert process.stderr is not None
        pending = b""
        with suppress(
            anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError, OSError
        ):
            while True:
                pending += await process.stderr.receive(READ_CHUNK)
                *lines, pending = pending.split(b"\n")
                pending = pending[-STDERR_LINE_CAP:]
                for raw in lines:
                    line = raw.decode("utf-8", "replace").rstrip()[:STDERR_LINE_CAP]
                    if line:
                        info.stderr_tail.append(line)
                        logger.debug("%s stderr: %s", spec.label, line)

    async def stdin_writer() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for session_message in write_reader:
                    data = session_message.message.model_dump_json(
                        by_alias=True, exclude_unset=True
                    )
                    await process.stdin.send((data + "\n").encode())
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await read_writer.aclose()
        finally:
            writer_done.set()

    async def exit_watcher() -> None:
        # Poll returncode rather than process.wait(): on asyncio, wait() also waits for pipe EOF,
        # which a child holding the pipe can postpone forever.
        while process.returncode is None:  # noqa: ASYNC110 - nothing to wait on but returncode
            await anyio.sleep(EXIT_POLL_INTERVAL)
        info.returncode = process.returncode
        if not closing:
            logger.warning("%s %s", spec.label, info.describe_exit())
            with suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                await read_writer.aclose()
        if on_exit is not None:
            on_exit(info)

    async def wait_exit(timeout: float) -> bool:  # noqa: ASYNC109 - bounded polling helper
        with anyio.move_on_after(timeout):
            while process.returncode is None:  # noqa: ASYNC110
                await anyio.sleep(EXIT_POLL_INTERVAL)
            return True
        return False

    async def wait_group_gone(timeout: float) -> bool:  # noqa: ASYNC109
        with anyio.move_on_after(timeout):
            while group_alive(process.pid):
                _ = process.returncode  # lets the loop reap the leader
                await anyio.sleep(EXIT_POLL_INTERVAL)
            return True
        return False

    async def shutdown() -> None:
        write_stream.close()
        with anyio.move_on_after(WRITER_FLUSH_TIMEOUT):
            await writer_done.wait()
        assert process.stdin is not None
        with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            await process.stdin.aclose()
        pgid = process.pid
        if not await wait_exit(spec.shutdown_grace):
            _signal_group(pgid, signal.SIGTERM)
            if not await wait_exit(spec.kill_grace):
                _signal_group(pgid, signal.SIGKILL)
                if not await wait_exit(REAP_TIMEOUT):
                    logger.warning("%s (pid %d) survived SIGKILL; abandoning it", spec.label, pgid)
        # Children the leader left behind (it exited, they did not): same escalation, shorter.
        if group_alive(pgid):
            _signal_group(pgid, signal.SIGTERM)
            if not await wait_group_gone(spec.kill_grace):
                _signal_group(pgid, signal.SIGKILL)
                await wait_group_gone(REAP_TIMEOUT)
        info.returncode = process.returncode
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                with suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.aclose()
        transport = getattr(getattr(process, "_process", None), "_transport", None)
        close = getattr(transport, "close", None)
        if callable(close):
            with suppress(PermissionError):
                close()  # otherwise it warns at GC while a survivor holds a pipe end
        for stream in (read_stream, write_stream, read_writer, write_reader):
            await stream.aclose()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdout_reader)
        tg.start_soon(stderr_reader)
        tg.start_soon(stdin_writer)
        tg.start_soon(exit_watcher)
        try:
            yield read_stream, write_stream
        finally:
            closing = True
            with anyio.CancelScope(shield=True):
                await shutdown()
                await anyio.lowlevel.checkpoint()
            tg.cancel_scope.cancel()
