"""weavehost beside the stock stacks, task by task: what ``bench-agent --peer`` is run for.

Stage: benchmark report (read by :func:`weavehost.bench.agent_report.summarize_agent` and
printed by its tables). A peer variant (``peer=NAME``) runs the same tasks as weavehost's own
variants in the same run; this pairs each weavehost variant with each peer, over the tasks
both ran.

Guarantees, for each pair (``summary.json``'s ``beside_peers``, one entry per pair):

* ``success_margin``: weavehost's successes minus the peer's, over the tasks both ran;
* ``both_complete``: the tasks both ended right, each with a time to the answer;
* ``geo_answer_ratio``: over those tasks, the geometric mean of weavehost's time to the answer
  over the peer's (below 1: weavehost is faster); ``None`` when no task is complete on both;
* ``answer_tokens``: each side's answer tokens over those tasks (weavehost's first). Where the
  times differ, this shows whether the answers were as long: a turn that writes the same text
  costs about the same on the same engine, one pass a token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from weavehost.bench.report import geomean

__all__ = ["beside_peers", "format_beside"]


def beside_peers(
    by_variant: Mapping[str, Sequence[Mapping[str, Any]]],
) -> list[dict[str, Any]]:
    """Each weavehost variant beside each peer variant (module docstring); ``[]`` without a
    peer."""
    peers = [label for label, rows in by_variant.items() if rows and rows[0].get("peer")]
    own = [label for label, rows in by_variant.items() if rows and not rows[0].get("peer")]
    return [
        _pair(label, by_variant[label], peer, by_variant[peer]) for label in own for peer in peers
    ]


def _pair(
    label: str,
    mine: Sequence[Mapping[str, Any]],
    peer: str,
    theirs: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    other = {record["id"]: record for record in theirs}
    shared = [(record, other[record["id"]]) for record in mine if record["id"] in other]
    both = [
        (a, b)
        for a, b in shared
        if a.get("success") and b.get("success") and a.get("answer_s") and b.get("answer_s")
    ]
    return {
        "weavehost": label,
        "peer": peer,
        "tasks": len(shared),
        "success_margin": sum(bool(a.get("success")) - bool(b.get("success")) for a, b in shared),
        "both_complete": [a["id"] for a, _ in both],
        "geo_answer_ratio": geomean(a["answer_s"] / b["answer_s"] for a, b in both),
        "answer_tokens": [sum(_tokens(a) for a, _ in both), sum(_tokens(b) for _, b in both)],
    }


def _tokens(record: Mapping[str, Any]) -> int:
    return sum(turn.get("answer_tokens") or 0 for turn in record.get("turns") or [])


def format_beside(pairs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The pairs as lines for the printed tables; none without a peer."""
    if not pairs:
        return []
    lines = ["", "beside the stock stacks (tasks both ran):"]
    for pair in pairs:
        ratio = pair["geo_answer_ratio"]
        mine, theirs = pair["answer_tokens"]
        timed = (
            f"time to the answer {ratio:.2f}x the peer's, answer tokens {mine} against {theirs}"
            if ratio is not None
            else "no task complete on both"
        )
        lines.append(
            f"  {pair['weavehost']} vs {pair['peer']}: success {pair['success_margin']:+d} "
            f"of {pair['tasks']}; both complete {len(pair['both_complete'])}: {timed}"
        )
    return lines
