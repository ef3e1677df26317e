"""What a turn reports: one :class:`Event` per thing that happened, in order.

Stage: agent (its output). The loop emits events as they happen; the console shows them and
``--json`` prints each as one line (:meth:`Event.to_json`). An event is a frozen record: its
``type`` names what happened and ``data`` holds that type's fields, listed below.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Event"]


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
