"""What the model's steps report to the agent loop: :class:`SyncReport` (a sync's prefill) and
:class:`FreeText` (free decoding's outcome, with the choices it recorded where asked).

Stage: agent (data only; made by :class:`~weavehost.agent.model.EngineModel`, the remote model
and the test kit's scripted one, read by the session and the benchmarks).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from weavehost.agent.prompt_cache import CacheStatus

__all__ = ["FreeText", "SyncReport"]


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What :meth:`AgentModel.sync` did: tokens the conversation has, reused (resident, or
    restored from the prompt cache on a ``hit``) and prefilled, and where the model knows its
    tokens, a short hash of them (``digest``: two steps shown the same prompt have the same
    one; bench-agent tells by it where two runs of a turn were shown other text)."""

    total: int
    reused: int
    prefilled: int
    prompt_cache: CacheStatus = "off"
    digest: str = ""


@dataclass(frozen=True, slots=True)
class FreeText:
    """Free decoding's outcome: the assistant text, and whether a call was opened after it."""

    text: str
    call: bool
    # "end" (end-of-generation token), "call" (opener seen), "max_tokens", "stop_sequence",
    # "call_text" (calls not allowed, and the text turned into a call naming a tool on offer:
    # it is cut where that began); weavehost.decode.reply.Stop
    stop: str
    tokens: int = 0
    passes: int = 0  # the passes it took (drafted text reads several tokens a pass)
    seconds: float = 0.0  # the wall time it took (a local model's)
    # The text's token ids (a local model's); where the model records them
    # (EngineModel(record_margins=True)), each one's top-two gap (its logit over the best
    # other's, under the same masks), and the gap of the choice the text stopped at (an end of
    # turn, a call's trigger; None otherwise).
    token_ids: tuple[int, ...] = ()
    margins: tuple[float, ...] | None = None
    stop_margin: float | None = None
    # Where recorded, every choice in the order made (token, gap), text taken back included.
    choice_log: tuple[tuple[int, float], ...] = ()

    def choices(self) -> dict[str, Any]:
        """The recorded choices for a step's ``timings`` (empty where none were recorded):
        ``free_token_ids``, ``free_margins`` (3 decimals; ``None``: no other token could be
        chosen), ``free_s``, where the text stopped at a choice, ``free_stop`` and its gap, and
        where it made more choices than those (text taken back, a trigger's JSON judged and
        rolled back), every choice in the order made: ``free_log_ids``, ``free_log_margins``."""
        if self.margins is None:
            return {}
        record: dict[str, Any] = {
            "free_token_ids": list(self.token_ids),
            "free_margins": [_gap(m) for m in self.margins],
            "free_s": round(self.seconds, 4),
        }
        if self.stop_margin is not None:
            record["free_stop"] = self.stop
            record["free_stop_margin"] = _gap(self.stop_margin)
        if len(self.choice_log) > len(self.margins) + (self.stop_margin is not None):
            record["free_log_ids"] = [token for token, _ in self.choice_log]
            record["free_log_margins"] = [_gap(gap) for _, gap in self.choice_log]
        return record


def _gap(margin: float) -> float | None:
    """A top-two gap as JSON keeps it: 3 decimals, ``None`` for an unopposed choice (inf)."""
    return round(margin, 3) if math.isfinite(margin) else None
