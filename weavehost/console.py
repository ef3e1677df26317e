"""The terminal side of ``weavehost chat`` and ``weavehost run``: printing, asking, Ctrl-C.

Stage: command line (over :class:`~weavehost.host.Host`). ``cli.py`` parses options and calls
:func:`run_agent`; this module owns what a person sees:

* assistant text streamed to stdout; calls, results and notes on stderr (``provisional`` →
  ``final``, a replaced call marked ``↻``), or with ``--json`` one JSON event per line on stdout;
* a prompt on the terminal before any call that needs approval (:class:`TerminalApprover`),
  refusing when there is no terminal to ask;
* Ctrl-C: decoding stops between or inside passes, in-flight calls are cancelled, servers shut
  down, and the command exits with 130 (:data:`EXIT_INTERRUPTED`).

Lines are read from the terminal in daemon threads, so an unanswered prompt never keeps the
process alive after Ctrl-C.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import anyio.from_thread
import anyio.lowlevel

from weavehost.agent import Event
from weavehost.errors import AbortedError
from weavehost.host import Host
from weavehost.mcp.executor import ApprovalRequest

__all__ = ["EXIT_INTERRUPTED", "EventPrinter", "TerminalApprover", "ask_line", "run_agent"]

EXIT_INTERRUPTED = AbortedError.exit_code  # Ctrl-C ends a command as an aborted decode does
SPINNER_PERIOD_S = 0.1
_RESULT_PREVIEW = 200


async def ask_line(prompt: str, stream: TextIO | None = None) -> str | None:
    """Print ``prompt`` on stderr and read one line from stdin; ``None`` at end of input."""
    out = stream or sys.stderr
    done = anyio.Event()
    box: list[str | None] = []
    token = anyio.lowlevel.current_token()

    def work() -> None:
        try:
            out.write(prompt)
            out.flush()
            line = sys.stdin.readline()
            box.append(line.rstrip("\n") if line else None)
        except (OSError, ValueError):
            box.append(None)
        try:
            anyio.from_thread.run_sync(done.set, token=token)
        except RuntimeError:  # the event loop is gone (Ctrl-C): nobody is waiting
            pass

    threading.Thread(target=work, name="weavehost-stdin", daemon=True).start()
    await done.wait()
    return box[0]


@dataclass
class TerminalApprover:
    """Asks on the terminal before a call that needs approval; no terminal means refused."""

    interactive: bool

    async def approve(self, request: ApprovalRequest) -> bool:
        if not self.interactive:
            print(f"  ✗ {request.spec.qualified_name} needs approval and there is no terminal "
                  "to ask: refused (use approval 'always' in the config to allow it)",
                  file=sys.stderr)  # fmt: skip
            return False
        print(f"\n  ? approval needed:\n{_indent(request.describe())}", file=sys.stderr)
        answer = await ask_line("  run it? [y/N] ")
        return (answer or "").strip().lower() in ("y", "yes")


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _call_text(data: Any) -> str:
    return f"{data['name']}({json.dumps(data['arguments'], ensure_ascii=False)})"


class EventPrinter:
    """Events as a person reads them, or as JSON lines."""

    def __init__(self, *, as_json: bool, verbose: int, out: TextIO | None = None,
                 err: TextIO | None = None) -> None:  # fmt: skip
        self.as_json, self.verbose = as_json, verbose
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self._mid_line = False
        self.failure: Event | None = None  # the last turn-ending ``error`` event

    def __call__(self, event: Event) -> None:
        if event.type == "error":
            self.failure = event
        if self.as_json:
            self.out.write(event.to_json() + "\n")
            self.out.flush()
            return
        kind, data = event.type, event.data
        if kind == "text":
            self.out.write(data["text"])
            self.out.flush()
            self._mid_line = not data["text"].endswith("\n")
            return
        line = self._line(kind, data)
        if line is None:
            return
        if self._mid_line:
            self.out.write("\n")
            self.out.flush()
            self._mid_line = False
        print(line, file=self.err, flush=True)

    def _line(self, kind: str, data: Any) -> str | None:
        if kind == "provisional_call":
            how = ("started early" if data["started"] else "result cached"
                   if data.get("cached") else "waits for the final call")  # fmt: skip
            return f"  ⋯ provisional {_call_text(data)}  ({how})"
        if kind == "final_call":
            mark = "↻ replaced by" if data["replaced"] else "✓ final"
            return f"  {mark} {_call_text(data)}"
        if kind == "tool_result":
            text = data["text"].replace("\n", " ⏎ ")
            if len(text) > _RESULT_PREVIEW:
                text = text[:_RESULT_PREVIEW] + "…"
            via = {"provisional": " (provisional result used)", "cache": " (from cache)"}
            return f"  → {data['status']}{via.get(data['source'], '')}: {text}"
        if kind == "call_failed":
            return f"  ✗ the model's call did not decode: {data['error']}"
        if kind == "notice":
            return f"  note: {data['text']}"
        if kind == "error":
            return f"  ✗ the turn failed: {data['error']}"
        if kind == "timings" and self.verbose:
            parts = [f"{k}={v}" for k, v in data.items() if k != "step"]
            return f"  [step {data['step']}: {', '.join(parts)}]"
        if kind == "step" and self.verbose:
            return f"  [step {data['step']}: decoding]"
        if kind == "done" and self._mid_line:
            return ""
        return None


async def _spinner(label: str, stream: TextIO, stop: anyio.Event) -> None:
    """A progress line while the model loads (a spinner on a terminal, one line otherwise)."""
    if not stream.isatty():
        print(f"{label} …", file=stream, flush=True)
        await stop.wait()
        return
    frames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
    started = time.monotonic()
    i = 0
    while not stop.is_set():
        stream.write(f"\r{frames[i % len(frames)]} {label} {time.monotonic() - started:.1f}s")
        stream.flush()
        i += 1
        with anyio.move_on_after(SPINNER_PERIOD_S):
            await stop.wait()
    stream.write("\r\033[K")
    stream.flush()


async def run_agent(
    make_host: Callable[[Callable[[str], None]], Host],
    body: Callable[[Host, EventPrinter], Awaitable[None]],
    printer: EventPrinter,
) -> int:
    """Start the host, run ``body``, and handle Ctrl-C; returns the exit code (0 or 130)."""
    interrupted = False
    holder: list[Host] = []

    async def on_sigint(scope: anyio.CancelScope) -> None:
        nonlocal interrupted
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                interrupted = True
                if holder:
                    holder[0].abort()  # stop decoding between or inside passes
                scope.cancel()
                return

    try:
        await _supervise(make_host, body, printer, on_sigint, holder)
    except BaseExceptionGroup as group:
        if not interrupted:
            raise _first(group) from None
    return EXIT_INTERRUPTED if interrupted else 0


def _first(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


async def _supervise(
    make_host: Callable[[Callable[[str], None]], Host],
    body: Callable[[Host, EventPrinter], Awaitable[None]],
    printer: EventPrinter,
    on_sigint: Callable[[anyio.CancelScope], Awaitable[None]],
    holder: list[Host],
) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(on_sigint, tg.cancel_scope)
        loaded = anyio.Event()

        def on_loading(text: str) -> None:
            if not printer.as_json:
                tg.start_soon(_spinner, text, sys.stderr, loaded)

        host = make_host(on_loading)
        holder.append(host)
        try:
            async with host:
                loaded.set()
                status = host.pool.status() if host.pool else {}
                printer(Event("ready", {
                    **host.description,
                    "tools": list(host.catalog.names) if host.catalog else [],
                    "servers": {n: {"pid": s.pid, "state": s.state} for n, s in status.items()},
                }))  # fmt: skip
                await body(host, printer)
        finally:
            loaded.set()
        tg.cancel_scope.cancel()
