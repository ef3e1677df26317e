"""What a turn reports: one :class:`Event` per thing that happened, in order.

Stage: agent (its output). The loop emits events as they happen; the console shows them and
``--json`` prints each as one line (:meth:`Event.to_json`). An event is a frozen record: its
``type`` names what happened and ``data`` holds that type's fields, listed below.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from weavehost.agent.model import FreeText, SyncReport
    from weavehost.decode import CallResult
    from weavehost.engine import EngineStats

__all__ = ["Event", "step_timings"]


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened in a turn. ``type`` is one of:

    ``text`` (``text``: streamed assistant text), ``step`` (``step``: a model step begins),
    ``provisional_call`` (``name``, ``arguments``, ``started``: whether the tool started early),
    ``final_call`` (``name``, ``arguments``, ``replaced``: the provisional call differed),
    ``call_failed`` (``error``: the model's call did not decode; treated as no call),
    ``tool_result`` (``name``, ``arguments``, ``status``, ``text``, ``source``: ``final``,
    ``provisional`` or ``cache``), ``progress`` (``name``: the tool, ``server``, ``progress``,
    ``total``: ``None`` when the server gave none, ``message``: ``None`` or the server's text;
    one per progress notification of a running call; progress never extends the call's
    timeout), ``log`` (``server``, ``level``: the MCP level, ``debug`` … ``emergency``,
    ``data``: as the server sent it, ``logger``: ``None`` or the server's logger name; a
    server's log message, reported with the turn or call that is running when it arrives and
    shown by the console at ``-v``), ``notice`` (``text``; ``housekeeping``: true on the
    host's own bookkeeping, a repeated call not run or a call taken back, which the console
    shows at ``-v``), ``timings`` (numbers of one step),
    ``error`` (``error``: the message, ``kind``: the error class, ``exit_code``),
    ``done`` (``stop``: ``answer``, ``max_steps``, ``call_failed`` or ``error``; ``steps``).
    """

    type: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"type": self.type, **self.data}, ensure_ascii=False, default=str)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


def step_timings(
    step: int,
    synced: SyncReport,
    free: FreeText,
    spent: EngineStats,
    results: Sequence[CallResult],
    model_s: float,
) -> dict[str, Any]:
    """A ``timings`` event's numbers for one step: its prompt, the passes the step spent, its
    free text, and its first and last call's latencies."""
    timings = {
        "step": step,
        "prompt_tokens": synced.total,
        "reused_tokens": synced.reused,
        "prefilled_tokens": synced.prefilled,
        "prompt_cache": synced.prompt_cache,
        **({"prompt_digest": synced.digest} if synced.digest else {}),
        "decoded_tokens": spent.decoded_tokens,
        # The step's free text: its tokens and the passes they took (drafted: fewer).
        "free_tokens": free.tokens,
        "free_passes": free.passes,
        # Where the model records them (bench-agent): each free token and its top-two gap.
        **free.choices(),
        # Every pass of the step (the sync's prefill too) as "ROWSxOUTPUTS": count, what a
        # cost table re-prices (weavehost bench-agent --cost-model).
        "pass_shapes": {
            f"{rows}x{outputs}": n for (rows, outputs), n in sorted(spent.pass_shapes.items())
        },
        "model_s": round(model_s, 4),
    }
    if results:
        timings["tool_latency_s"] = round(results[0].tool_latency_s, 4)
        timings["final_latency_s"] = round(results[-1].final_latency_s, 4)
    return timings
