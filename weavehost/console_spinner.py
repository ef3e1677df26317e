"""The line shown while a model loads (:class:`Spinner`), for ``weavehost chat`` and ``run``.

Stage: command line, under :mod:`weavehost.console`. Its one guarantee: once :meth:`Spinner.stop`
returns, the spinner's line is cleared and no frame is drawn after it, so whatever is printed
next starts a line of its own.
"""

from __future__ import annotations

import time
from typing import TextIO

import anyio

__all__ = ["SPINNER_PERIOD_S", "Spinner"]

SPINNER_PERIOD_S = 0.1  # how often a frame is drawn


class Spinner:
    """The line shown while the model loads: an animated spinner on a terminal, one plain line
    otherwise (or when ``animate`` is false: at ``-v`` log lines would break into it).

    Drawn and stopped on the event loop, so :meth:`stop` clears the spinner's line before it
    returns and no frame is drawn after it: the next line printed starts a line of its own."""

    FRAMES = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

    def __init__(self, stream: TextIO, *, animate: bool) -> None:
        self.stream, self.animate = stream, animate
        self._stopped = anyio.Event()
        self._drawn = False  # a frame is the stream's current line

    async def run(self, label: str) -> None:
        """Show ``label`` until :meth:`stop` (a task of its own); a load after :meth:`stop` (a
        lazy model, loaded when a server first asks for it) is one plain line."""
        if self._stopped.is_set() or not self.animate:
            print(f"{label} …", file=self.stream, flush=True)
            return
        started = time.monotonic()
        i = 0
        while not self._stopped.is_set():
            frame = self.FRAMES[i % len(self.FRAMES)]
            self.stream.write(f"\r{frame} {label} {time.monotonic() - started:.1f}s")
            self.stream.flush()
            self._drawn = True
            i += 1
            with anyio.move_on_after(SPINNER_PERIOD_S):
                await self._stopped.wait()

    def stop(self) -> None:
        """End the spinner now: its line is cleared before this returns."""
        self._stopped.set()
        if self._drawn:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self._drawn = False
