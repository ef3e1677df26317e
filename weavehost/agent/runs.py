"""Running a step's calls: provisional starts, the result cache, bounded runs, final runs.

Stage: agent (between the loop and the executor). :class:`CallRuns` is what a
:class:`~weavehost.agent.session.Session` asks to run its calls; it owns no conversation.

Invariants:

* **Provisional calls.** A provisional call of a tool that
  :meth:`~weavehost.mcp.executor.Executor.starts_early` allows (read-only hint *and* trusted
  server) starts at once in the turn's task group, one run per call of the step
  (:class:`EarlyRuns`, by the call's place in the reply), so the calls of one reply run
  concurrently. A final call equal to its provisional one uses that run's result; a different
  one cancels and discards it (the model never sees it) as soon as the call is final, and, if
  it may run early too, starts its own run then, while the reply's later calls are written.
* **Result cache.** Runs of provisional-eligible calls are kept per session
  (:mod:`weavehost.agent.cache`); an identical call awaits the cached (possibly still running)
  result instead of calling again.
* **Bounded runs.** A run of a trusted read-only call (provisional, cached or final) is stopped
  after :func:`run_bound` and its result is a ``timeout`` the model reads; it never escapes as an
  exception. Other calls go through the executor (and approval) with its own bounds.
* **Progress.** A server's progress notifications for a run become ``progress`` events
  (``name``, ``server``, ``progress``, ``total``, ``message``) of the turn that runs it; they
  never extend a bound.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc

from weavehost.agent.cache import CacheEntry, ResultCache
from weavehost.agent.events import Event
from weavehost.config import HostConfig, Timeouts
from weavehost.formats import ToolCall
from weavehost.mcp.catalog import Catalog, ToolSpec
from weavehost.mcp.executor import REFRESH_WAIT_MARGIN, Executor, ToolResult, may_run_provisionally
from weavehost.mcp.features import Progress
from weavehost.mcp.requests import TIMEOUT_BACKSTOP
from weavehost.mcp.supervisor import RESTART_BACKOFF_MAX

__all__ = ["RUN_BOUND_SLACK_S", "CallRuns", "EarlyRuns", "progress_event", "run_bound"]

logger = logging.getLogger(__name__)

RUN_BOUND_SLACK_S = 1.0  # past the sum of a run's own bounds: scheduling, cancelling on a server


def run_bound(timeouts: Timeouts) -> float:
    """How long a trusted read-only run may take before the loop stops it and the model reads a
    ``timeout`` result. A healthy run ends sooner: it may wait for its server's re-listing, the
    pool's restart back-off and the server's startup before the call itself, and each of those
    has its own bound; this is their sum and :data:`RUN_BOUND_SLACK_S`."""
    relisting = timeouts.list_tools + REFRESH_WAIT_MARGIN
    call = timeouts.call + TIMEOUT_BACKSTOP
    return relisting + RESTART_BACKOFF_MAX + timeouts.startup + call + RUN_BOUND_SLACK_S


def progress_event(name: str, progress: Progress) -> Event:
    """A server's progress notification for a call of ``name``, as the turn reports it."""
    return Event("progress", {"name": name, "server": progress.server,
                              "progress": progress.progress, "total": progress.total,
                              "message": progress.message})  # fmt: skip


def _progress_sink(name: str, emit: Callable[[Event], None] | None) -> Any:
    if emit is None:
        return None
    return lambda progress: emit(progress_event(name, progress))


@dataclass(slots=True)
class EarlyRuns:
    """The runs a step's calls started before its reply ended, by the call's place in the
    reply, in the step's task group ``tg``, telling ``emit``. Written on the event loop (the
    worker thread hands a call over through ``anyio.from_thread``) and read there after the
    step's worker calls return, so it needs no lock of its own."""

    tg: anyio.abc.TaskGroup
    emit: Callable[[Event], None]
    entries: dict[int, CacheEntry] = field(default_factory=dict)
    # Each call's provisional call, by the call's place in the reply.
    provisionals: dict[int, ToolCall] = field(default_factory=dict)
    # Calls whose final call was told (``final_call``) while the reply went on: their runs
    # started then, or were under way.
    told: set[int] = field(default_factory=set)

    def take(self, index: int) -> CacheEntry | None:
        """The run of call ``index``, forgotten here (so it is discarded at most once)."""
        return self.entries.pop(index, None)


class CallRuns:
    """Runs one session's calls: provisional starts, cached and bounded runs, final runs."""

    def __init__(
        self,
        executor: Executor,
        catalog: Catalog,
        config: HostConfig,
        cache: ResultCache,
        run_bound_s: float,
    ) -> None:
        self.executor, self.catalog, self.config = executor, catalog, config
        self.cache, self.run_bound_s = cache, run_bound_s

    def _spec(self, name: str) -> ToolSpec | None:
        return self.catalog.get(name) if name in self.catalog else None

    def provisional(self, index: int, call: ToolCall, early: EarlyRuns) -> None:
        """On the event loop: start the provisional call of the reply's call ``index`` if the
        tool may run early."""
        early.provisionals[index] = call
        allowed = self.executor.starts_early(call.name, dict(call.arguments))
        started = allowed and self._start(index, call, True, early)
        event = {"name": call.name, "arguments": dict(call.arguments), "started": started,
                 "cached": allowed and not started}  # fmt: skip
        early.emit(Event("provisional_call", event))

    def final(self, index: int, call: ToolCall, early: EarlyRuns) -> None:
        """On the event loop, as soon as the reply's call ``index`` is final (the reply may go
        on). A provisional run of another call is cancelled and discarded. If the call's run is
        under way (its provisional run), or it may run early and starts now (or the result
        cache holds it), its ``final_call`` is told now; otherwise it is told and run after the
        reply."""
        entry = early.entries.get(index)
        if entry is not None and entry.call != call:
            self._drop(early.take(index))
            entry = None
        if entry is None:
            if not self.executor.starts_early(call.name, dict(call.arguments)):
                return
            self._start(index, call, False, early)
        provisional = early.provisionals.get(index)
        replaced = provisional is not None and provisional != call
        event = {"name": call.name, "arguments": dict(call.arguments), "replaced": replaced}
        early.emit(Event("final_call", event))
        early.told.add(index)

    def _start(self, index: int, call: ToolCall, provisional: bool, early: EarlyRuns) -> bool:
        """Start a run of the reply's call ``index`` in the step's task group unless the result
        cache already holds one (known, or running: the final call awaits it); whether it
        started."""
        if self.cache.get(call) is not None:
            return False
        entry = early.entries[index] = self.cache.open(call)
        early.tg.start_soon(self.run_entry, entry, provisional, early.emit)
        return True

    async def run_entry(
        self, entry: CacheEntry, provisional: bool, emit: Callable[[Event], None] | None = None
    ) -> None:
        """Run a cacheable call into its entry; past :attr:`run_bound_s` the run is stopped and
        its result is a ``timeout`` the model reads. A discarded run ends with no result."""
        result: ToolResult | None = None
        name = entry.call.name
        try:
            with anyio.CancelScope() as scope:
                entry.scope = scope
                with anyio.move_on_after(self.run_bound_s) as bounded:
                    result = await self.executor.run(
                        name,
                        dict(entry.call.arguments),
                        provisional=provisional,
                        on_progress=_progress_sink(name, emit),
                    )
                if bounded.cancelled_caught:
                    result = self._timed_out(entry.call, provisional)
        finally:
            self.cache.finish(entry, result)

    def _timed_out(self, call: ToolCall, provisional: bool) -> ToolResult:
        """The result of a run stopped at its bound: a ``timeout``, as the executor reports a
        server that did not answer in time."""
        logger.warning("call %s outlived its %g s bound; stopped", call.name, self.run_bound_s)
        spec = self._spec(call.name)
        text = (
            f"{call.name} did not finish within {self.run_bound_s:g} s and was stopped; "
            "its result is unknown"
        )
        return ToolResult(
            name=call.name,
            server=spec.server if spec is not None else None,
            arguments=dict(call.arguments),
            status="timeout",
            text=text,
            total_chars=len(text),
            duration_s=self.run_bound_s,
            provisional=provisional,
        )

    async def discard(self, entry: CacheEntry | None) -> None:
        """Cancel and forget a provisional run (never shown to the model)."""
        self._drop(entry)

    def _drop(self, entry: CacheEntry | None) -> None:
        if entry is None:
            return
        if entry.scope is not None:
            entry.scope.cancel()
        self.cache.discard(entry)

    async def discard_all(self, early: EarlyRuns) -> None:
        """Every provisional run of the step discarded (its calls never finished)."""
        for index in list(early.entries):
            await self.discard(early.take(index))

    async def execute(
        self,
        final: ToolCall,
        early: CacheEntry | None,
        emit: Callable[[Event], None] | None = None,
    ) -> tuple[ToolResult, str]:
        """Run a final call (``early``: the run the step started for it, from its provisional
        call or once it was final): the result and where it came from (``provisional``,
        ``cache`` or ``final``). ``emit`` hears its progress."""
        spec = self._spec(final.name)
        cacheable = spec is not None and may_run_provisionally(spec, self.config)
        if cacheable:
            entry = self.cache.get(final)
            source = "cache"
            if entry is None:
                entry = self.cache.open(final)
                source = "final"
                await self.run_entry(entry, False, emit)
            # Bounded: the task running the entry stops it at run_bound_s (a timeout result).
            await entry.done.wait()
            if entry.result is not None:
                if early is entry:
                    source = "provisional" if entry.result.provisional else "final"
                return entry.result, source
        progress = _progress_sink(final.name, emit)
        result = await self.executor.run(final.name, dict(final.arguments), on_progress=progress)
        return result, "final"
