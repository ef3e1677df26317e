"""weavehost beside the stock stacks in ``bench-agent``'s summary: the success margin over the
tasks both ran, and the time to the answer over the tasks both complete, with each side's answer
tokens (records as ``bench-agent`` writes them)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from weavehost.bench.agent_beside import beside_peers, format_beside
from weavehost.bench.agent_report import format_tables, summarize_agent

WEAVE = "weave cache=on drafts=on"
PEER = "peer=llama_server"


def record(
    task: str, variant: str, success: bool, answer_s: float | None, tokens: tuple[int, ...] = ()
) -> dict[str, Any]:
    return {
        "id": task,
        "variant": variant,
        "peer": "llama_server" if variant == PEER else None,
        "success": success,
        "answer_s": answer_s,
        "turns": [{"answer_tokens": n} for n in tokens],
    }


RECORDS = [
    record("none-capital", WEAVE, True, 0.2, (7,)),
    record("none-capital", PEER, True, 0.4, (7,)),
    record("none-thanks", WEAVE, True, 0.9, (20, 7)),
    record("none-thanks", PEER, True, 0.3, (9,)),
    record("weather-paris", WEAVE, True, 1.1, (30,)),
    record("weather-paris", PEER, False, 2.0, (12,)),
    record("files-list", WEAVE, False, 1.0, (5,)),
    record("files-list", PEER, False, 1.0, (5,)),
]


def test_weavehost_beside_a_peer_counts_the_success_margin_and_times_only_the_tasks_both_complete():
    (pair,) = beside_peers({WEAVE: RECORDS[0::2], PEER: RECORDS[1::2]})
    assert pair["weavehost"] == WEAVE and pair["peer"] == PEER
    assert pair["tasks"] == 4 and pair["success_margin"] == 1
    assert pair["both_complete"] == ["none-capital", "none-thanks"]
    assert pair["geo_answer_ratio"] == pytest.approx(math.sqrt(0.5 * 3.0))
    assert pair["answer_tokens"] == [34, 16]


def test_a_peer_that_completes_nothing_weavehost_does_has_no_time_ratio_and_says_so():
    pairs = beside_peers({WEAVE: RECORDS[4:5], PEER: RECORDS[5:6]})
    assert pairs[0]["both_complete"] == [] and pairs[0]["geo_answer_ratio"] is None
    assert "no task complete on both" in "\n".join(format_beside(pairs))


def test_a_run_without_a_peer_has_no_beside_section_and_one_with_a_peer_prints_it():
    alone = summarize_agent(RECORDS[0::2], [WEAVE])
    assert "beside_peers" not in alone
    assert "beside the stock stacks" not in format_tables(alone)
    both = summarize_agent(RECORDS, [WEAVE, PEER])
    assert [p["peer"] for p in both["beside_peers"]] == [PEER]
    table = format_tables(both)
    assert f"{WEAVE} vs {PEER}: success +1 of 4; both complete 2" in table
    assert "1.22x the peer's, answer tokens 34 against 16" in table
