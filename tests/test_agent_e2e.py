"""The agent on the real embedded model (SmolLM2-135M, greedy) with the real stdio servers.

SmolLM2 is weak: these tests assert behaviour (a call was made, it validated and ran, the
provisional call started iff its server is trusted, the history was not prefilled again), never
its prose.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from weavehost import Host
from weavehost.agent.model import EngineModel
from weavehost.decode import get_strategy
from weavehost.engine import Engine
from weavehost.formats import detect_format
from weavehost.gguf import read_metadata
from weavehost.mcp.executor import StaticApprover
from weavehost.testing import Events

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[1]
WEATHER = str(ROOT / "tools" / "weather.py")
QUESTION = "What is the weather in Paris?"
BOUND_S = 60  # one turn of a few steps on a busy 2-core machine


@pytest.fixture(scope="module")
def one_thread_engine(embedded_model_path: Path) -> Iterator[Engine]:
    """One thread: the agent's many short passes stay fast when other work shares the CPUs
    (two threads on a busy 2-core machine spin-wait on each other, 100x slower)."""
    with Engine.open(embedded_model_path, n_ctx=4096, n_threads=1) as engine:
        yield engine


@pytest.fixture
def model(one_thread_engine: Engine, embedded_model_path: Path) -> EngineModel:
    one_thread_engine.clear()
    one_thread_engine.clear_abort()
    metadata = read_metadata(embedded_model_path, full_arrays=("tokenizer.ggml.tokens",))
    fmt = detect_format(metadata).format
    return EngineModel(
        one_thread_engine, fmt, get_strategy("weave"), chat_template=metadata.chat_template
    )


async def test_a_one_shot_weather_question_makes_a_validated_call_and_ends_with_an_answer(
    model: EngineModel,
) -> None:
    async with Host(servers=[WEATHER], trust=["weather"], agent_model=model, max_steps=4,
                    tool_choice="required") as host:  # fmt: skip
        with anyio.fail_after(BOUND_S):
            events = await Events.collect(host.run(QUESTION))
    final = events.of("final_call")[0]
    assert final["name"] == "get_current_weather" and final["arguments"]["city"] == "Paris"
    result = events.of("tool_result")[0]
    assert result["status"] == "ok" and result["text"].startswith("Paris:")
    assert events.of("done")[0]["stop"] == "answer"
    after = events[events.index(result) :]
    assert "".join(e["text"] for e in after.of("text")).strip()  # an answer after the result


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
async def test_the_weather_call_runs_provisionally_on_the_real_model_only_when_its_server_is_trusted(
    model: EngineModel, trusted: bool
) -> None:
    approver = StaticApprover(True)
    async with Host(servers=[WEATHER], trust=["weather"] if trusted else [], approver=approver,
                    agent_model=model, max_steps=1, tool_choice="required") as host:  # fmt: skip
        with anyio.fail_after(BOUND_S):
            events = await Events.collect(host.run(QUESTION))
    provisional = events.of("provisional_call")[0]
    final = events.of("final_call")[0]
    assert provisional["started"] is trusted
    assert events.index(provisional) < events.index(final)  # provisional, then final
    result = events.of("tool_result")[0]
    assert result["status"] == "ok"
    assert result["source"] == ("provisional" if trusted else "final")
    assert len(approver.seen) == (0 if trusted else 1)


async def test_a_second_turn_prefills_only_its_new_tokens(model: EngineModel) -> None:
    engine = model.engine
    async with Host(servers=[WEATHER], trust=["weather"], agent_model=model, max_steps=4,
                    tool_choice="required") as host:  # fmt: skip
        session = host.session()
        with anyio.fail_after(BOUND_S):
            await Events.collect(session.run(QUESTION))
            held_after_first = len(model.held)
            before = engine.stats.snapshot()
            second = await Events.collect(session.run("And in Oslo?"))
    step = second.of("timings")[0]
    assert step["prompt_tokens"] > held_after_first
    assert step["reused_tokens"] == held_after_first  # nothing resident was read again
    assert step["prefilled_tokens"] == step["prompt_tokens"] - held_after_first
    # The engine's own counter agrees: the turn's prefill is the new tokens plus what its
    # calls wrote back (weave prefills skeletons and write-backs; serial free text decodes).
    first_sync = engine.stats.since(before).prefilled_tokens
    assert first_sync >= step["prefilled_tokens"]
    assert first_sync < step["prompt_tokens"]
