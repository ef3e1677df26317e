"""The session's result cache: runs of trusted read-only calls, keyed by the canonical call.

Stage: agent (between the loop and the executor). Only calls that
:func:`~weavehost.mcp.executor.may_run_provisionally` allows are cached: they change nothing, so
an identical call may read an earlier result instead of calling again (seed 002's client-side
speculation).

Invariants:

* An entry is opened when its run starts, so an identical call awaits the running one instead
  of starting a second; :attr:`CacheEntry.done` is set exactly once, when the run ends.
* Only ``ok`` results stay: a failed, timed-out or cancelled run is removed once it is known,
  so the next identical call tries again.
* Bounded: at most ``max_entries`` (least recently used evicted first), none older than
  ``max_age_s``.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import anyio

from weavehost.formats import ToolCall
from weavehost.mcp.executor import ToolResult

__all__ = ["CACHE_MAX_AGE_S", "CACHE_MAX_ENTRIES", "CacheEntry", "ResultCache"]

CACHE_MAX_ENTRIES = 64
CACHE_MAX_AGE_S = 120.0


@dataclass(slots=True)
class CacheEntry:
    """One run of a call, possibly still going. Mutable: the run fills in ``result`` and sets
    ``done``; ``scope`` is the run's cancel scope, so a discarded provisional run can be stopped."""

    call: ToolCall
    created: float
    done: anyio.Event = field(default_factory=anyio.Event)
    result: ToolResult | None = None  # None once done: the run was cancelled
    scope: anyio.CancelScope | None = None


class ResultCache:
    """Results of read-only, trusted calls by canonical call text; bounded in size and age.

    An entry is created when a call starts, so an identical call awaits it while it runs.
    Failed results are removed once known, so they are tried again.
    """

    def __init__(
        self,
        max_entries: int = CACHE_MAX_ENTRIES,
        max_age_s: float = CACHE_MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries, self.max_age_s, self.clock = max_entries, max_age_s, clock
        self._entries: OrderedDict[str, CacheEntry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, call: ToolCall) -> CacheEntry | None:
        key = call.canonical()
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self.clock() - entry.created > self.max_age_s:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry

    def open(self, call: ToolCall) -> CacheEntry:
        entry = CacheEntry(call, self.clock())
        self._entries[call.canonical()] = entry
        self._entries.move_to_end(call.canonical())
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return entry

    def finish(self, entry: CacheEntry, result: ToolResult | None) -> None:
        entry.result = result
        entry.done.set()
        if result is None or result.status != "ok":
            self.discard(entry)

    def discard(self, entry: CacheEntry) -> None:
        key = entry.call.canonical()
        if self._entries.get(key) is entry:
            del self._entries[key]
