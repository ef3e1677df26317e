"""Load on the agent: many consecutive turns in one session on the real model (RELIABILITY,
load plan). The numbers are printed (``pytest -s``) and recorded in docs/reliability.md.

CI runs a reduced scale; ``pytest --load`` runs the full one (200 turns). Every assertion is
about behaviour and bounds (the view fits, the KV cache holds only what the view holds, memory
stays flat), never about speed.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from weavehost import Host
from weavehost.agent.events import Event
from weavehost.agent.model import EngineModel
from weavehost.agent.session import Session
from weavehost.decode import get_strategy
from weavehost.engine import Engine
from weavehost.formats import detect_format
from weavehost.gguf import read_metadata

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
WEATHER = str(ROOT / "tools" / "weather.py")
TURNS = {"ci": 30, "full": 200}
N_CTX = 1024
CITIES = ("Paris", "Oslo", "Lima", "Cairo", "Tokyo", "Quito", "Perth", "Dakar", "Riga", "Hanoi")
TURN_BOUND_S = 120  # one turn on a busy 2-core machine
WARM_UP_TURNS = 10  # allocator pools, caches and the first drop settle by then
RSS_GROWTH_BOUND_MIB = 40  # after warm-up; the transcript itself grows by a few KB a turn


def rss_mib() -> float:
    """This process's resident set now (not the peak), in MiB."""
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.fixture(scope="module")
def load_engine(embedded_model_path: Path) -> Iterator[Engine]:
    with Engine.open(embedded_model_path, n_ctx=N_CTX, n_threads=2) as engine:
        yield engine


async def test_consecutive_turns_in_one_session_stay_within_the_context_policy_and_flat_memory(
    load_engine: Engine, embedded_model_path: Path, load_scale: str
) -> None:
    turns = TURNS[load_scale]
    metadata = read_metadata(embedded_model_path, full_arrays=("tokenizer.ggml.tokens",))
    model = EngineModel(load_engine, detect_format(metadata).format, get_strategy("weave"),
                        chat_template=metadata.chat_template)  # fmt: skip
    rows: list[dict[str, float]] = []
    started = time.perf_counter()
    async with Host(servers=[WEATHER], trust=["weather"], agent_model=model,
                    tool_choice="required") as host:  # fmt: skip
        assert host.catalog and host.executor
        session = Session(model, host._lock, host.catalog, host.executor, host.config,
                          max_steps=2, free_tokens=24, tool_choice="required")  # fmt: skip
        room = N_CTX - session.reserve_tokens
        for n in range(turns):
            events: list[Event] = []
            with anyio.fail_after(TURN_BOUND_S):
                await session.turn(
                    f"What is the weather in {CITIES[n % len(CITIES)]}?", events.append
                )
            done = [e for e in events if e.type == "done"][0]
            assert done["stop"] in ("answer", "max_steps"), events
            timings = [e for e in events if e.type == "timings"]
            assert all(t["prompt_tokens"] <= room for t in timings)
            # The KV cache holds the view and what the model wrote after it, nothing else: no
            # sequence but 0 keeps cells after a turn (weave's value sequences are dropped).
            assert load_engine.seq_len(0) == len(model.held) <= N_CTX
            assert all(load_engine.seq_len(s) == 0 for s in range(1, load_engine.n_seq_max))
            rows.append({
                "turn": n + 1,
                "kv": load_engine.seq_len(0),
                "shown": len(session.shown),
                "transcript": len(session.messages),
                "rss": rss_mib(),
                "prefilled": sum(t["prefilled_tokens"] for t in timings),
                "dropped": sum("oldest turn" in e["text"] for e in events if e.type == "notice"),
            })  # fmt: skip
    took = time.perf_counter() - started

    assert rows[-1]["transcript"] >= 3 * turns  # the transcript keeps every turn (user data)
    assert max(r["shown"] for r in rows) < rows[-1]["transcript"]  # the view does not
    assert sum(r["dropped"] for r in rows) >= 1  # the policy was exercised
    settled = rows[min(WARM_UP_TURNS, len(rows) - 1)]["rss"]
    growth = max(r["rss"] for r in rows[WARM_UP_TURNS:]) - settled
    assert growth < RSS_GROWTH_BOUND_MIB
    print(
        f"\nload: {turns} turns in {took:.1f} s ({took / turns:.2f} s/turn), n_ctx {N_CTX}, "
        f"room {room}; KV of sequence 0 max {max(r['kv'] for r in rows)} tokens; view max "
        f"{max(r['shown'] for r in rows)} messages, transcript {rows[-1]['transcript']}; "
        f"drops {sum(r['dropped'] for r in rows)}; prefilled per turn mean "
        f"{sum(r['prefilled'] for r in rows) / turns:.0f}; RSS after warm-up {settled:.1f} MiB, "
        f"growth {growth:+.1f} MiB"
    )
