"""``weavehost chat`` as a person meets it: in a real terminal (tmux), typed at with
``send-keys`` and read back with ``capture-pane``, on the real embedded SmolLM2 and the stdio
weather server. The lines must not run into each other: the ready line starts its own line
(the loading spinner's is gone), the approval prompt's line holds only the prompt (the events
that arrive while it is open wait), and the answer follows the tool's result.

Where tmux is missing the test skips, unless ``WEAVEHOST_REQUIRE_TMUX`` is set (CI), where it
fails. Every wait polls the pane under a named bound.

The chat's exit status is written by the pane's shell, which waits for the chat, into a file
the test reads: tmux's own ``pane_dead_status`` comes from its SIGCHLD handler, and in CI a
pane has stayed dead (its terminal closed) for 30 s with no status known.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
READY_BOUND_S = 120.0  # server start and model load on a busy 2-core machine
TURN_BOUND_S = 120.0  # a question's steps, the approval prompt, the answer
EXIT_BOUND_S = 30.0  # /exit: the servers stopped, the process gone
SETTLED_S = 1.0  # the pane unchanged this long: nothing more is being printed for now
SETTLE_BOUND_S = 10.0  # ... and at most this long to get there
POLL_S = 0.1
TMUX_BOUND_S = 10.0  # one tmux command
DUMP_S = 2.0  # for a stuck process's stack dump to reach the pane
READY = " ready; tools: get_current_weather"
PROMPT = "run it? [y]es / [N]o"
SPINNER_FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def tmux_path() -> str:
    found = shutil.which("tmux")
    if found:
        return found
    if os.environ.get("WEAVEHOST_REQUIRE_TMUX"):
        pytest.fail("WEAVEHOST_REQUIRE_TMUX is set but no tmux is on PATH")
    pytest.skip("no tmux on PATH (apt-get install tmux); CI sets WEAVEHOST_REQUIRE_TMUX")


class Pane:
    """One tmux pane on a private server (its own socket and an empty config)."""

    def __init__(self, tmux: str, socket: Path, exit_file: Path) -> None:
        self.tmux, self.socket, self.exit_file = tmux, socket, exit_file

    def run(self, *args: str) -> str:
        done = subprocess.run([self.tmux, "-S", str(self.socket), *args], capture_output=True,
                              text=True, timeout=TMUX_BOUND_S, check=True)  # fmt: skip
        return done.stdout

    def lines(self) -> list[str]:
        """The pane's lines from the top of its history, wrapped lines joined, blank ones
        left out (tmux drops a line's trailing spaces)."""
        text = self.run("capture-pane", "-p", "-J", "-S", "-", "-t", "chat")
        return [line.rstrip() for line in text.splitlines() if line.strip()]

    def type(self, text: str) -> None:
        self.run("send-keys", "-t", "chat", "-l", text)
        self.run("send-keys", "-t", "chat", "Enter")

    def field(self, name: str) -> str:
        return self.run("display-message", "-p", "-t", "chat", f"#{{{name}}}").strip()

    def exit_status(self) -> str | None:
        """The chat's exit status as its shell wrote it (``$?``: 128+N for signal N); ``None``
        while the chat runs."""
        try:
            text = self.exit_file.read_text()
        except FileNotFoundError:
            return None
        return text.strip() if text.endswith("\n") else None  # the whole line, or not yet

    def chat_pid(self) -> str:
        """The chat's pid: the child of the pane's shell ("" once it has gone)."""
        shell = self.field("pane_pid")
        for stat in Path("/proc").glob("[0-9]*/stat"):
            with contextlib.suppress(OSError):
                fields = stat.read_text().rsplit(")", 1)[1].split()  # state, ppid, ...
                if fields[1] == shell:
                    return stat.parent.name
        return ""

    def wait_for(self, what: str, bound_s: float, ready: Callable[[list[str]], bool]) -> list[str]:
        deadline = time.monotonic() + bound_s
        while True:
            lines = self.lines()
            if ready(lines):
                return lines
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {bound_s:g} s; {self.state()}; the pane:\n"
                            + "\n".join(self.lines()))  # fmt: skip
            time.sleep(POLL_S)

    def state(self) -> str:
        """What tmux knows of the pane, and of the chat, where it is still there: its state
        and what each of its threads waits in; its Python stacks (SIGABRT, dumped by
        faulthandler) then reach the pane, read after :data:`DUMP_S`."""
        fields = ("pane_dead", "pane_dead_status", "pane_dead_signal", "pane_pid")
        known = {name: self.field(name) for name in fields}
        text = ", ".join(f"{name}={value!r}" for name, value in known.items())
        text += f"; exit status written: {self.exit_status()!r}"
        pid = self.chat_pid()
        if not pid.isdigit():
            return text + "; the chat has no process"
        with contextlib.suppress(OSError):
            stat = Path(f"/proc/{pid}/stat").read_text()
            text += f"; chat pid {pid}, state {stat[stat.rindex(')') + 2]}"
        waits = []
        for task in sorted(Path(f"/proc/{pid}/task").glob("*")):
            with contextlib.suppress(OSError):
                name = (task / "comm").read_text().strip()
                waits.append(f"{name}:{(task / 'wchan').read_text().strip() or '-'}")
        text += "; threads (name:kernel wait): " + " ".join(waits)
        with contextlib.suppress(OSError):
            os.kill(int(pid), signal.SIGABRT)
            time.sleep(DUMP_S)
        return text

    def settled(self) -> list[str]:
        """The pane once it has not changed for :data:`SETTLED_S` (at most SETTLE_BOUND_S)."""
        deadline = time.monotonic() + SETTLE_BOUND_S
        lines, since = self.lines(), time.monotonic()
        while time.monotonic() - since < SETTLED_S:
            if time.monotonic() > deadline:
                pytest.fail(
                    f"the pane kept changing for {SETTLE_BOUND_S:g} s:\n" + "\n".join(lines)
                )
            time.sleep(POLL_S)
            now = self.lines()
            if now != lines:
                lines, since = now, time.monotonic()
        return lines


@pytest.fixture
def pane(tmp_path: Path) -> Iterator[Pane]:
    tmux = tmux_path()
    config = tmp_path / "tmux.conf"
    # /bin/sh whatever the login shell: the command below is POSIX shell.
    config.write_text(
        "set -g remain-on-exit on\nset -g history-limit 5000\nset -g default-shell /bin/sh\n"
    )
    # The chat sees a terminal on stdin and stderr, as a person's: it asks before a call.
    # -X faulthandler: a process that outlives its bound prints every thread's stack on SIGABRT.
    chat = shlex.join([sys.executable, "-X", "faulthandler", "-m", "weavehost.cli", "chat",
                       "--server", "tools/weather.py", "--threads", "1"])  # fmt: skip
    exit_file = tmp_path / "exit-status"
    # The pane's shell runs the chat as its child, waits for it and writes its status.
    command = f"{chat}; echo $? > {shlex.quote(str(exit_file))}"
    pane = Pane(tmux, tmp_path / "tmux.sock", exit_file)
    pane.run("-f", str(config), "new-session", "-d", "-s", "chat", "-x", "240", "-y", "60",
             "-c", str(ROOT), command)  # fmt: skip
    try:
        yield pane
    finally:
        pane.run("kill-server")


def index_of(lines: list[str], test: Callable[[str], bool], start: int = 0) -> int:
    return next((i for i in range(start, len(lines)) if test(lines[i])), -1)


@pytest.mark.model  # the chat it runs loads the embedded model
def test_in_a_terminal_the_chat_prints_the_ready_line_the_approval_prompt_and_the_answer_each_on_its_own_line(
    pane: Pane,
) -> None:
    lines = pane.wait_for("ready line", READY_BOUND_S, lambda ls: any(READY in line for line in ls))
    ready = [line for line in lines if READY in line]
    assert len(ready) == 1, lines
    # The spinner's line is cleared before the ready line is printed: no frame, no label.
    assert "loading" not in ready[0] and ready[0][0] not in SPINNER_FRAMES, ready[0]
    # ... and not after it, over the chat's own prompt.
    lines = pane.wait_for("prompt 'you>'", READY_BOUND_S, lambda ls: ls[-1] == "you>")
    assert not [line for line in lines if "loading" in line], lines

    pane.type("What is the weather in Paris?")
    pane.wait_for("approval prompt", TURN_BOUND_S, lambda ls: any(PROMPT in line for line in ls))
    lines = pane.settled()  # what arrives while the prompt is open must wait for the answer
    asked = index_of(lines, lambda line: PROMPT in line)
    assert lines[asked].lstrip().startswith(PROMPT), lines[asked]  # only the prompt
    assert asked == len(lines) - 1, lines  # and nothing after it
    # Between the question and its prompt, only the call described (indented): no event line.
    question = index_of(lines, lambda line: line == "  ? approval needed:")
    assert 0 < question < asked, lines
    assert all(line.startswith("    ") for line in lines[question + 1 : asked]), lines

    pane.type("y")
    lines = pane.wait_for(
        "answer and a new prompt 'you>'", TURN_BOUND_S,
        lambda ls: ls[-1] == "you>" and index_of(ls, lambda line: PROMPT in line) < len(ls) - 1,
    )  # fmt: skip
    asked = index_of(lines, lambda line: PROMPT in line)
    assert lines[asked].endswith(" y"), lines[asked]  # the typed answer, nothing else
    result = index_of(lines, lambda line: line.startswith("  → ok: "), asked)
    assert result > asked, lines
    # The answer (the model's text on stdout, not an indented event line) follows the result.
    answer = lines[result + 1]
    assert not answer.startswith(" ") and answer != "you>", lines[result:]
    # A repeated call is the host's housekeeping: not shown at the default verbosity.
    assert not [line for line in lines if "repeat" in line], lines

    pane.type("/exit")
    pane.wait_for("exit", EXIT_BOUND_S, lambda _: pane.exit_status() is not None)
    assert pane.exit_status() == "0", pane.lines()
