"""Where a reply's time goes: the ``account`` of a ``weavehost bench`` result line.

Stage: benchmark. A decoder's reply reports its time account
(:class:`~weavehost.decode.base.CallAccount`: passes, masks, the selector, the rest, over the
whole reply the line scores, from its start to its end, whose passes ``forward_passes``
counts); this module writes it as a result line's ``account`` and splits the passes' time by
what this machine's calibration table says the rows asking for logits cost.

Guarantees:

- ``total_s = passes_s + mask_s + selector_s + other_s``, every part measured, none negative;
  ``rows_s + logits_rows_s = passes_s`` where the split is given.
- **The split is a model, the rest measured.** ``logits_rows_s`` is ``passes_s`` times the
  share the table prices as the rows asking for logits beyond the first: over the call's
  passes by ``(rows, outputs)`` (``EngineStats.pass_shapes``), the sum of
  ``cost(rows, outputs) - cost(rows, 1)`` over the sum of ``cost(rows, outputs)``. Without a
  table, or with a table that does not price outputs apart from rows, both are null.
- A writer that keeps no account (a stock peer) and a failed line have ``account: null``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from weavehost.decode import CallResult
from weavehost.engine.calibrate import CostTable

__all__ = ["ACCOUNT_KEYS", "ACCOUNT_PARTS", "account_record", "logits_share"]

# The parts that add up to ``total_s``, in the order they are printed.
ACCOUNT_PARTS = ("passes_s", "mask_s", "selector_s", "other_s")
# Every number an account holds: the total, the parts, the passes' split, the counts.
ACCOUNT_KEYS = (
    "total_s",
    *ACCOUNT_PARTS,
    "rows_s",
    "logits_rows_s",
    "passes",
    "masks",
)


def logits_share(pass_shapes: Mapping[tuple[int, int], int], table: CostTable) -> float | None:
    """The share of passes shaped as ``pass_shapes`` (``{(rows, outputs): passes}``) that
    ``table`` prices as the rows asking for logits beyond the first; ``None`` when the table
    does not price outputs apart from rows, or there is no pass."""
    if not table.has_outputs or not pass_shapes:
        return None
    whole = extra = 0.0
    for (rows, outputs), count in pass_shapes.items():
        cost = table.cost(rows, outputs)
        whole += count * cost
        extra += count * max(0.0, cost - table.cost(rows, 1))
    return extra / whole if whole > 0 else None


def account_record(
    result: CallResult, table: CostTable | None, *, held: int = 0
) -> dict[str, Any] | None:
    """``result``'s account as a result line's ``account`` (null without one), its passes
    split into rows and rows asking for logits by ``table`` (this machine's calibration) as it
    prices passes after ``held`` tokens (the case's prompt) where it knows what they add."""
    account = result.account
    if account is None:
        return None
    at = table.at_held(held) if table is not None else None
    share = logits_share(result.stats.pass_shapes, at) if at is not None else None
    logits_s = None if share is None else account.passes_s * share
    return {
        "total_s": account.total_s,
        "passes_s": account.passes_s,
        "rows_s": None if logits_s is None else account.passes_s - logits_s,
        "logits_rows_s": logits_s,
        "mask_s": account.mask_s,
        "selector_s": account.selector_s,
        "other_s": account.other_s,
        "passes": account.passes,
        "masks": account.masks,
    }
