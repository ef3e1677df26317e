"""The model lock: who may enter the model, and on which thread.

Stage: agent (between the loop's tasks and the model's blocking calls).

The rule: **a task enters the model only while it holds the model's** :class:`ModelLock`
**(``async with lock:``), and only through** :meth:`ModelLock.run`, which runs the blocking
call in a worker thread so the event loop stays free for servers and tools. A step holds the
lock across all its worker calls (sync, free decode, the call), so two sessions on one model
never interleave their steps. ``abort``/``clear_abort`` are the exception: they only set a
flag the engine reads between passes, so Ctrl-C can reach a pass that holds the lock.

Two locks guard a model, each for its own reason: this one orders tasks on the event loop, and
the engine's ``threading.RLock`` makes each native call safe from whatever thread calls it. A
``CapacityLimiter(1)`` on the worker threads would add nothing: a worker call runs only under
this lock, so at most one runs at a time. :meth:`ModelLock.run` refuses a call from a task that
does not hold the lock, so a call outside it is a bug found at once, not a race.

A server's sampling request (:mod:`weavehost.agent.sampling`) takes the same lock, but waits
for it only so long: :meth:`ModelLock.acquire` with ``within`` gives up after that many seconds,
so a request can never wait forever on a step that is itself waiting for the request's tool.
"""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

import anyio
import anyio.to_thread

__all__ = ["ModelLock"]


class ModelLock:
    """One per model: held by a task across its model calls; :meth:`run` makes each call."""

    def __init__(self) -> None:
        self._lock = anyio.Lock()
        self._holder: int | None = None  # the id of the task holding the lock

    async def __aenter__(self) -> ModelLock:
        await self.acquire()
        return self

    async def acquire(self, *, within: float | None = None) -> bool:
        """Take the lock for the calling task; with ``within``, wait at most that many seconds
        and return False (not holding it) when it stayed taken."""
        if within is None:
            await self._lock.acquire()
        else:
            with anyio.move_on_after(within) as waited:
                await self._lock.acquire()
            if waited.cancelled_caught:  # anyio's Lock is not taken by a cancelled acquire
                return False
        self._holder = anyio.get_current_task().id
        return True

    def release(self) -> None:
        """Give the lock back (only the task that took it may)."""
        self._holder = None
        self._lock.release()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()

    def held(self) -> bool:
        """Whether the calling task holds the lock."""
        return self._holder is not None and self._holder == anyio.get_current_task().id

    async def run(self, func: Callable[..., Any], *args: Any) -> Any:
        """Run one blocking model call in a worker thread; the caller must hold the lock."""
        if not self.held():
            raise RuntimeError("a model call from a task that does not hold the model lock")
        return await anyio.to_thread.run_sync(func, *args)
