"""The terminal side of ``weavehost chat`` and ``weavehost run``: printing, asking, Ctrl-C.

Stage: command line (over :class:`~weavehost.host.Host`). ``cli.py`` parses options and calls
:func:`run_agent`; this module owns what a person sees:

* assistant text streamed to stdout; calls, results and notes on stderr (``provisional`` →
  ``final``, a replaced call marked ``↻``), or with ``--json`` one JSON event per line on stdout;
* a prompt on the terminal before any call that needs approval (:class:`TerminalApprover`):
  yes, no, always for this tool, always for this server (both for this session; "always" for a
  tool holds for its current definition only), and before a server's first sampling request;
  refusing when there is no terminal to ask;
* a server's elicitation (:class:`TerminalElicitor`): a form asked field by field (strings,
  numbers, integers, booleans, enums and multi-select enums, defaults shown and used on empty
  input, required fields insisted on), each answer checked against its schema, then accept,
  decline or cancel; a URL shown with the message and opened in the browser only after the
  person says yes (and only an ``http``/``https`` one). With no terminal it declines;
* progress of a running call as a bar (one updating line on a terminal, plain lines otherwise)
  and servers' log messages at ``-v``; the host's housekeeping notices (a repeated call not
  run, a call taken back) at ``-v`` too, save that a provisional line already shown is closed
  (``✗ not run: … again``) where its final call is a repeat;
* Ctrl-C: decoding stops between or inside passes, in-flight calls are cancelled, servers shut
  down, and the command exits with 130 (:data:`EXIT_INTERRUPTED`).

Lines never interleave: the loading spinner's line is cleared before anything else is printed
(:class:`Spinner`), and while a person is asked something (an approval, a form) one question is
open at a time and the events that arrive meanwhile wait, then are printed in order once it is
answered (:meth:`EventPrinter.dialogue`). Lines are read from the terminal in daemon threads, so
an unanswered prompt never keeps the process alive after Ctrl-C.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
import webbrowser
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, TextIO
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import anyio.lowlevel
from jsonschema import Draft202012Validator

from weavehost.agent import Event
from weavehost.console_spinner import Spinner
from weavehost.errors import AbortedError
from weavehost.host import Host
from weavehost.mcp.executor import ApprovalRequest, Decision
from weavehost.mcp.features import ElicitationReply, ElicitationRequest, SamplingRequest
from weavehost.mcp.wire import form_choices

__all__ = [
    "EXIT_INTERRUPTED",
    "MAX_FIELD_ATTEMPTS",
    "EventPrinter",
    "Spinner",
    "TerminalApprover",
    "TerminalElicitor",
    "ask_line",
    "progress_text",
    "run_agent",
]

EXIT_INTERRUPTED = AbortedError.exit_code  # Ctrl-C ends a command as an aborted decode does
_RESULT_PREVIEW = 200
MAX_FIELD_ATTEMPTS = 5  # invalid answers to one form field before the elicitation is cancelled
PROGRESS_BAR_WIDTH = 24
LineReader = Callable[[str], Awaitable[str | None]]  # prints a prompt, reads a line (None: EOF)


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


_DECISIONS: Mapping[str, Decision] = {
    "y": "yes", "yes": "yes", "t": "always_tool", "tool": "always_tool",
    "s": "always_server", "server": "always_server",
}  # fmt: skip


@dataclass
class TerminalApprover:
    """Asks on the terminal before a call that needs approval, and before a server's first
    sampling request; no terminal means refused. ``ask`` reads a line (tests script it);
    ``printer``, when given, holds its events while the person is asked."""

    interactive: bool
    ask: LineReader = ask_line
    err: TextIO | None = None
    printer: EventPrinter | None = None

    def _say(self, text: str) -> None:
        print(text, file=self.err or sys.stderr, flush=True)

    async def approve(self, request: ApprovalRequest) -> Decision:
        spec = request.spec
        # What would have run it: a read-only tool of a trusted server runs unasked.
        trusting = f", or --trust {spec.server}" if spec.read_only and not spec.trusted else ""
        answer = await self._question(
            refusal=f"{spec.qualified_name} needs approval and there is no terminal to ask: "
            f'refused (to allow it: --approval always{trusting}, or "approval": "always" '
            "in the config)",
            header=f"approval needed:\n{_indent(request.describe())}",
            prompt="run it? [y]es / [N]o / always for this [t]ool / always for this [s]erver "
            f"(server {request.spec.server!r}, for this session) ",
        )
        return _DECISIONS.get((answer or "").strip().lower(), "no")

    async def approve_sampling(self, request: SamplingRequest) -> Decision:
        answer = await self._question(
            refusal=f"server {request.server!r} asks the local model to write a message and "
            "there is no terminal to ask: refused (to allow it: --approval always, or "
            '"approval": "always" in the config)',
            header=f"sampling request:\n{_indent(request.describe())}",
            prompt=f"let the local model answer {request.server!r}? (once approved, it is not "
            "asked again this session) [y/N] ",
        )
        return "yes" if (answer or "").strip().lower() in ("y", "yes") else "no"

    async def _question(self, *, refusal: str, header: str, prompt: str) -> str | None:
        """The person's answer to ``header`` and ``prompt``; with no terminal, ``refusal`` is
        said and the answer is None (refused)."""
        async with _dialogue(self.printer):
            if not self.interactive:
                self._say(f"  ✗ {refusal}")
                return None
            self._say(f"\n  ? {header}")
            return await self.ask(f"  {prompt}")


def _dialogue(printer: EventPrinter | None) -> AbstractAsyncContextManager[None]:
    """The printer's dialogue (one question at a time, its events held meanwhile), if any."""
    return printer.dialogue() if printer is not None else nullcontext()


@dataclass
class TerminalElicitor:
    """Answers a server's elicitation at the terminal; declines when there is none.

    ``interactive`` (None: stdin and stderr are terminals), ``ask`` (reads a line after a
    prompt; ``None`` is end of input, which cancels), ``err`` (where the form is shown) and
    ``open_url`` (the browser) are injectable, so the whole dialogue is scriptable;
    ``printer``, when given, holds its events until the form is answered.
    """

    interactive: bool | None = None
    ask: LineReader = ask_line
    err: TextIO | None = None
    open_url: Callable[[str], object] = webbrowser.open
    printer: EventPrinter | None = None

    def _say(self, text: str) -> None:
        print(text, file=self.err or sys.stderr, flush=True)

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply:
        async with _dialogue(self.printer):
            return await self._elicit(request)

    async def _elicit(self, request: ElicitationRequest) -> ElicitationReply:
        interactive = self.interactive
        if interactive is None:
            interactive = sys.stdin.isatty() and sys.stderr.isatty()
        if not interactive:
            self._say(f"  ✗ server {request.server!r} asks for input and there is no terminal "
                      "to ask: declined")  # fmt: skip
            return ElicitationReply("decline")
        self._say(f"\n  ? server {request.server!r} asks:\n{_indent(request.message)}")
        if request.mode == "url":
            return await self._url(request)
        return await self._form(request)

    async def _url(self, request: ElicitationRequest) -> ElicitationReply:
        url = request.url or ""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            self._say(f"  ✗ it asks to open {url!r}, which is not an http(s) URL: declined")
            return ElicitationReply("decline")
        self._say(f"  URL:  {url}\n  site: {parts.netloc}")
        answer = await self.ask("  open it in your browser? [y/N] ")
        if answer is None:
            return ElicitationReply("cancel")
        if answer.strip().lower() not in ("y", "yes"):
            return ElicitationReply("decline")
        self.open_url(url)
        return ElicitationReply("accept")

    async def _form(self, request: ElicitationRequest) -> ElicitationReply:
        schema = dict(request.schema or {})
        properties = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        content: dict[str, Any] = {}
        for name, prop in properties.items():
            if not isinstance(prop, Mapping):
                continue
            outcome = await self._field(name, prop, name in required)
            if outcome is _CANCEL:
                return ElicitationReply("cancel")
            if outcome is not _SKIP:
                content[name] = outcome
        problems = _problems(schema, content)
        if problems:
            self._say(f"  ✗ the answers do not fit the form ({problems}): cancelled")
            return ElicitationReply("cancel")
        summary = json.dumps(content, ensure_ascii=False)
        answer = await self.ask(f"  send {summary}? [A]ccept / [d]ecline / [c]ancel ")
        choice = None if answer is None else answer.strip().lower()
        if choice in ("", "a", "accept", "y", "yes"):
            return ElicitationReply("accept", content)
        if choice in ("d", "decline", "n", "no"):
            return ElicitationReply("decline")
        return ElicitationReply("cancel")

    async def _field(self, name: str, prop: Mapping[str, Any], required: bool) -> Any:
        """One field's value, ``_SKIP`` (optional, left empty) or ``_CANCEL`` (end of input, or
        too many invalid answers)."""
        choices = form_choices(prop)
        title = prop.get("title") or name
        line = f"  {title}{' (required)' if required else ''}"
        if prop.get("description"):
            line += f": {prop['description']}"
        self._say(line)
        if choices:
            for i, (value, label) in enumerate(choices, start=1):
                self._say(f"    {i}. {label}" + (f" ({value})" if label != str(value) else ""))
        has_default = "default" in prop
        hint = _hint(prop, bool(choices))
        if has_default:
            hint += f", default {json.dumps(prop['default'], ensure_ascii=False)}"
        for _ in range(MAX_FIELD_ATTEMPTS):
            text = await self.ask(f"    {name} [{hint}]: ")
            if text is None:
                return _CANCEL
            text = text.strip()
            if not text:
                if has_default:
                    return prop["default"]
                if not required:
                    return _SKIP
                self._say("    a value is required")
                continue
            try:
                value = _parse(text, prop, choices)
            except ValueError as exc:
                self._say(f"    {exc}")
                continue
            problems = _problems(prop, value)
            if problems:
                self._say(f"    {problems}")
                continue
            return value
        self._say(f"  ✗ no valid answer for {name!r} after {MAX_FIELD_ATTEMPTS} tries: cancelled")
        return _CANCEL


_SKIP = object()
_CANCEL = object()


def _hint(prop: Mapping[str, Any], has_choices: bool) -> str:
    kind = prop.get("type")
    if kind == "array":
        return "numbers or values, comma-separated"
    if has_choices:
        return "a number or a value"
    if kind == "boolean":
        return "y/n"
    return str(kind or "text")


def _pick(text: str, choices: list[tuple[Any, str]]) -> Any:
    if text.isdigit() and 1 <= int(text) <= len(choices):
        return choices[int(text) - 1][0]
    for value, label in choices:
        if text == str(value) or text.lower() == label.lower():
            return value
    raise ValueError(f"{text!r} is not one of the choices (answer with its number)")


def _parse(text: str, prop: Mapping[str, Any], choices: list[tuple[Any, str]]) -> Any:
    """The typed value of an answer; ValueError with a reason a person can act on."""
    kind = prop.get("type")
    if kind == "array":
        return [_pick(part.strip(), choices) for part in text.split(",") if part.strip()]
    if choices:
        return _pick(text, choices)
    if kind == "boolean":
        lowered = text.lower()
        if lowered in ("y", "yes", "true", "1"):
            return True
        if lowered in ("n", "no", "false", "0"):
            return False
        raise ValueError("answer y or n")
    if kind == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a whole number") from None
    if kind == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"{text!r} is not a number") from None
        return int(number) if number.is_integer() and "." not in text else number
    return text


def _problems(schema: Mapping[str, Any], value: Any) -> str:
    """What is wrong with ``value`` under ``schema`` (formats checked), or ''."""
    validator = Draft202012Validator(
        dict(schema), format_checker=Draft202012Validator.FORMAT_CHECKER
    )
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    return "; ".join(e.message for e in errors[:3])


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def _call_text(data: Any) -> str:
    return f"{data['name']}({json.dumps(data['arguments'], ensure_ascii=False)})"


class EventPrinter:
    """Events as a person reads them, or as JSON lines.

    While a :meth:`dialogue` is open (a person is being asked), events are held and printed
    after it, in the order they came, so nothing is printed inside a question."""

    def __init__(self, *, as_json: bool, verbose: int, out: TextIO | None = None,
                 err: TextIO | None = None) -> None:  # fmt: skip
        self.as_json, self.verbose = as_json, verbose
        self.out, self.err = out or sys.stdout, err or sys.stderr
        self._mid_line = False
        self._bar = False  # a progress bar is the err terminal's current line
        self._held: list[Event] | None = None  # events that came while a dialogue was open
        self._turn_calls: set[str] = set()  # the final calls shown in this turn
        self._open = 0  # provisional lines shown whose final call has not come yet
        self._asking = anyio.Lock()  # one dialogue at a time
        self.failure: Event | None = None  # the last turn-ending ``error`` event

    @asynccontextmanager
    async def dialogue(self) -> AsyncIterator[None]:
        """Ask the person something: one question at a time; the text and progress lines are
        ended first, and events that arrive until it is answered are printed after it."""
        async with self._asking:
            self._end_lines()
            self._held = []
            try:
                yield
            finally:
                held, self._held = self._held, None
                for event in held:
                    self(event)

    def __call__(self, event: Event) -> None:
        if self._held is not None:
            self._held.append(event)
            return
        if event.type == "error":
            self.failure = event
        if self.as_json:
            self.out.write(event.to_json() + "\n")
            self.out.flush()
            return
        kind, data = event.type, event.data
        if kind == "progress" and _is_tty(self.err):
            self._end_text_line()
            self.err.write("\r\033[K" + progress_text(data))
            self.err.flush()
            self._bar = True
            return
        if kind == "text":
            self._end_bar()
            self.out.write(data["text"])
            self.out.flush()
            self._mid_line = not data["text"].endswith("\n")
            return
        line = self._line(kind, data)
        if line is None:
            return
        self._end_lines()
        print(line, file=self.err, flush=True)

    def _end_lines(self) -> None:
        """End the progress bar's line and the assistant's unfinished line of text."""
        self._end_bar()
        self._end_text_line()

    def _end_bar(self) -> None:
        if self._bar:
            self.err.write("\n")
            self.err.flush()
            self._bar = False

    def _end_text_line(self) -> None:
        if self._mid_line:
            self.out.write("\n")
            self.out.flush()
            self._mid_line = False

    def _line(self, kind: str, data: Any) -> str | None:
        if kind == "done":
            self._turn_calls.clear()
            self._open = 0
        if kind in ("provisional_call", "final_call") and not self.verbose:
            # The same call again in one turn is never run again (the agent drops a repeat):
            # its lines are housekeeping, shown at -v with the note that says so; but where
            # its provisional line (other arguments) was shown, that line is closed.
            key = json.dumps([data["name"], data["arguments"]], sort_keys=True, default=str)
            opened = kind == "final_call" and self._open > 0
            if kind == "final_call":
                self._open = max(0, self._open - 1)
            if key in self._turn_calls:
                return f"  ✗ not run: {_call_text(data)} again" if opened else None
            if kind == "final_call":
                self._turn_calls.add(key)
            else:
                self._open += 1
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
        if kind == "notice" and (self.verbose or not data.get("housekeeping")):
            return f"  note: {data['text']}"
        if kind == "progress":
            return progress_text(data)
        if kind == "log" and self.verbose:
            text = (
                data["data"]
                if isinstance(data["data"], str)
                else json.dumps(data["data"], ensure_ascii=False, default=str)
            )
            return f"  [log {data['server']} {data['level']}] {text}"
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


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def progress_text(data: Mapping[str, Any]) -> str:
    """One progress event as a line: a bar when the total is known, the count otherwise."""
    progress, total = data["progress"], data.get("total")
    if total:
        share = max(0.0, min(1.0, progress / total))
        filled = round(share * PROGRESS_BAR_WIDTH)
        bar = "█" * filled + "·" * (PROGRESS_BAR_WIDTH - filled)
        count = f"[{bar}] {share:4.0%} ({progress:g}/{total:g})"
    else:
        count = f"{progress:g}"
    message = f"  {data['message']}" if data.get("message") else ""
    return f"  ⋯ {data['name']} {count}{message}"


async def run_agent(
    make_host: Callable[[Callable[[str], None]], Host],
    body: Callable[[Host, EventPrinter], Awaitable[None]],
    printer: EventPrinter,
    *,
    announce: bool = True,
) -> int:
    """Start the host, print its ``ready`` event (unless ``announce`` is false: ``weavehost
    call`` prints its result alone), run ``body``, and handle Ctrl-C; returns the exit code (0
    or 130).

    Ctrl-C while the host starts cancels the start. Once it is up, Ctrl-C aborts the host alone:
    decoding stops, and its running turns and calls and ``body`` (which runs inside the host's
    task group) are cancelled while the servers still run, so a call in flight is cancelled on
    its server (``notifications/cancelled``) before the host stops them. Cancelling everything
    at once would stop the servers' connections in the same instant, and the cancel would be
    dropped.
    """
    interrupted = False
    holder: list[Host] = []  # the host, once it is up

    async def on_sigint(scope: anyio.CancelScope) -> None:
        nonlocal interrupted
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            async for _ in signals:
                interrupted = True
                if holder:
                    holder[0].abort()
                else:
                    scope.cancel()
                return

    try:
        await _supervise(make_host, body, printer, on_sigint, holder, announce)
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
    announce: bool,
) -> None:
    async with anyio.create_task_group() as tg:
        tg.start_soon(on_sigint, tg.cancel_scope)
        spinner = Spinner(sys.stderr, animate=_is_tty(sys.stderr) and not printer.verbose)

        def on_loading(text: str) -> None:
            if not printer.as_json:
                tg.start_soon(spinner.run, text)

        host = make_host(on_loading)
        try:
            async with host:
                holder.append(host)
                spinner.stop()  # its line is cleared before the ready line, or anything else
                if announce:
                    status = host.pool.status() if host.pool else {}
                    printer(Event("ready", {
                        **host.description,
                        "tools": list(host.catalog.names) if host.catalog else [],
                        "servers": {n: {"pid": s.pid, "state": s.state}
                                    for n, s in status.items()},
                    }))  # fmt: skip
                await body(host, printer)
        finally:
            spinner.stop()
        tg.cancel_scope.cancel()
