"""Elicitors that need no person: one that declines, one that answers from a script.

Stage: client features (behind the :class:`~weavehost.mcp.features.Elicitor` seam; the console's
:class:`~weavehost.console.TerminalElicitor` is the one that asks a person).

Invariants: neither ever opens a URL or invents an answer; :class:`DecliningElicitor` is what a
:class:`~weavehost.host.Host` without an ``elicitor`` answers with (the capability is declared,
and every request is declined); :class:`ScriptedElicitor` answers in order from its list and
declines once the list runs dry, recording every request it was asked.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from weavehost.mcp.features import ElicitationReply, ElicitationRequest

__all__ = ["DecliningElicitor", "ScriptedElicitor"]

logger = logging.getLogger(__name__)


class DecliningElicitor:
    """Declines every request (an embedder that brought no elicitor, a console with no
    terminal); the server hears ``decline`` and goes on."""

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply:
        logger.info("server %s asked for input (%s); declined: no one can be asked",
                    request.server, request.mode)  # fmt: skip
        return ElicitationReply("decline")


@dataclass
class ScriptedElicitor:
    """Answers from ``replies`` in order: an :class:`ElicitationReply`, a mapping (accepted as
    the form's content), ``"decline"``/``"cancel"``, or an exception (raised: an elicitor that
    fails). Past the end of the list, it declines. Every request is kept in ``seen``."""

    replies: Iterable[ElicitationReply | Mapping[str, Any] | str | Exception] = ()
    seen: list[ElicitationRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._queue: deque[ElicitationReply | Mapping[str, Any] | str | Exception] = deque(
            self.replies
        )

    async def elicit(self, request: ElicitationRequest) -> ElicitationReply:
        self.seen.append(request)
        if not self._queue:
            return ElicitationReply("decline")
        reply = self._queue.popleft()
        if isinstance(reply, Exception):
            raise reply
        if isinstance(reply, ElicitationReply):
            return reply
        if isinstance(reply, str):
            if reply not in ("accept", "decline", "cancel"):
                raise ValueError(f"a scripted elicitation reply must be an action, not {reply!r}")
            return ElicitationReply(reply)  # type: ignore[arg-type]
        return ElicitationReply("accept", dict(reply))
