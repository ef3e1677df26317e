"""One call attempt, and ``weave``'s stages called one by one.

:class:`~weavehost.decode.base.CallAttempt` is checked on the real engine (its roll back is KV
surgery) and its bookkeeping on counters alone; :class:`~weavehost.decode.weave.WeaveCall`'s
stages are run by hand on the embedded SmolLM2 and must add up to exactly what
:class:`~weavehost.decode.weave.WeaveStrategy` does in one go. Everything is counted, not timed.
"""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import numpy as np
import pytest

from tests.schemas import FORECAST, LIGHTS
from weavehost.decode import CallRequest, ToolSchema, get_strategy
from weavehost.decode.base import CallAttempt
from weavehost.decode.padding import DecodePlan
from weavehost.decode.weave import WeaveCall, WeaveStrategy
from weavehost.engine import EngineStats
from weavehost.formats import FORMATS, ToolCall, tool_to_openai

SMOLLM2 = FORMATS["smollm2"]
QUESTION = "What's the weather in Paris for the next 3 days?"


def _prefill_prompt(engine, tools: list[ToolSchema]) -> list[int]:
    engine.clear()
    segments = SMOLLM2.render_prompt(
        [{"role": "user", "content": QUESTION}],
        [tool_to_openai(t.name, t.description, t.parameters) for t in tools],
        chat_template=None,
    )
    prompt = engine.tokenize_segments(segments)
    engine.prefill(0, prompt)
    return prompt


class _Counters:
    """Just what a CallAttempt reads of an engine when nothing is rolled back."""

    n_seq_max = 4

    def __init__(self) -> None:
        self.stats = EngineStats()
        self.logits = np.zeros(3, dtype=np.float32)
        self.ended: list[tuple[float, int]] = []

    def ran(self, rows: int) -> None:
        """As if a pass of ``rows`` rows ended now."""
        self.stats.passes += 1
        self.ended.append((time.perf_counter(), rows))

    def pass_rows_between(self, start: float, end: float) -> dict[int, int]:
        counts: dict[int, int] = {}
        for at, rows in self.ended:
            if start < at <= end:
                counts[rows] = counts.get(rows, 0) + 1
        return counts

    def seq_len(self, seq: int) -> int:
        return 7 if seq == 0 else 0

    def has_next_logits(self, seq: int) -> bool:
        return seq == 0

    def last_logits(self, seq: int) -> np.ndarray:
        return self.logits


def test_a_call_attempt_reports_only_the_work_done_since_it_started_by_keyword():
    engine = _Counters()
    engine.stats.passes = 5
    attempt = CallAttempt.start("weave", engine)  # type: ignore[arg-type]
    assert attempt.prompt_len == 7 and attempt.prompt_logits is engine.logits
    engine.ran(4)
    engine.ran(4)
    first = attempt.lap("select")
    engine.ran(1)
    attempt.lap("values")
    call = ToolCall("get_weather", {"city": "Paris"})
    result = attempt.finish(calls=[call], provisional=call, text="t", tokens=[1, 2], tool_at=first)
    assert result.strategy == "weave"
    assert result.calls == [call] and result.provisional == call and result.error is None
    assert (result.text, result.tokens) == ("t", [1, 2])
    assert result.stats.passes == 3
    # the passes each latency covers: to the tool start, and to the final call (now)
    assert (result.tool_pass_rows, result.final_pass_rows) == ({4: 2}, {4: 2, 1: 1})
    assert list(result.phases) == ["select", "values"]
    assert result.tool_latency_s == result.phases["select"]
    assert result.final_latency_s >= result.phases["select"] + result.phases["values"]


def test_a_failed_call_attempt_leaves_only_the_prompt_with_its_next_token_logits(fresh_engine):
    engine = fresh_engine
    prompt = _prefill_prompt(engine, [FORECAST])
    prompt_logits = engine.last_logits(0).copy()
    attempt = CallAttempt.start("jump_forward", engine)
    engine.fork(0, 1)
    engine.prefill(1, engine.tokenize(" forked"))
    engine.prefill(0, engine.tokenize("<tool_call>", special=True))
    engine.prefill(3, engine.tokenize(" stray"))
    result = attempt.failed("the model wrote no tool call", text="<tool_call>", tokens=[9])
    assert engine.seq_len(0) == len(prompt)
    assert all(engine.seq_len(seq) == 0 for seq in range(1, engine.n_seq_max))
    np.testing.assert_array_equal(engine.last_logits(0), prompt_logits)
    assert result.calls == [] and result.provisional is None
    assert (result.error, result.text, result.tokens) == (
        "the model wrote no tool call",
        "<tool_call>",
        [9],
    )
    assert result.stats.prefill_passes == 3
    assert result.tool_latency_s == result.final_latency_s


def test_weave_stages_called_one_by_one_write_the_same_call_as_the_strategy(fresh_engine):
    engine = fresh_engine
    tools = [FORECAST, LIGHTS]
    # Each run has a decode state of its own: neither learns token splits from the other.
    prompt = _prefill_prompt(engine, tools)
    whole = WeaveStrategy(plan=DecodePlan({})).run(CallRequest(engine, SMOLLM2, tools))
    assert whole.error is None

    prompt = _prefill_prompt(engine, tools)
    seen: list[ToolCall] = []
    request = CallRequest(engine, SMOLLM2, tools, on_provisional=seen.append)
    call = WeaveCall(request, plan=DecodePlan({}))

    assert call.select() is None
    assert call.tool == FORECAST
    # The token that settled the tool is chosen, not yet read: the skeleton's pass reads it.
    assert engine.seq_len(0) == len(prompt) + len(call.head_tokens) - 1
    assert SMOLLM2.layout.head_for("get_weather").startswith(call.head_written)

    assert call.skeleton() is None
    assert [(task.key, task.seq) for task in call.tasks] == [("city", 0), ("days", 1)]
    assert engine.seq_len(0) == len(prompt) + len(call.head_tokens) + len(call.tasks[0].forced)
    assert engine.seq_len(1) > 0

    assert call.values() is None
    assert [task.value for task in call.tasks] == ['"Paris"', "3"]

    assert call.provisional() is None
    assert seen == [ToolCall("get_weather", {"city": "Paris", "days": 3})]
    assert call.provisional_call == seen[0]

    assert call.write_back() is None
    assert engine.seq_len(0) == len(prompt) + len(call.call_tokens)
    assert all(engine.seq_len(seq) == 0 for seq in range(1, engine.n_seq_max))
    assert call.verified is not None and call.verified.mismatch is None  # same values

    result = call.final()
    assert (result.calls, result.provisional) == (whole.calls, whole.provisional)
    assert (result.text, result.tokens) == (whole.text, whole.tokens)
    assert result.stats.passes == whole.stats.passes
    assert list(result.phases) == list(whole.phases)
    assert engine.seq_len(0) == len(prompt) + len(result.tokens)


def test_more_values_than_sequences_are_drafted_serially_into_constraineds_call(fresh_engine):
    engine = fresh_engine
    many = ToolSchema(
        "f",
        "Many required values",
        {
            "type": "object",
            "properties": {f"p{i}": {"type": "integer"} for i in range(engine.n_seq_max)},
            "required": [f"p{i}" for i in range(engine.n_seq_max)],
        },
    )
    _prefill_prompt(engine, [many])
    constrained = get_strategy("constrained")
    expected = constrained.run(CallRequest(engine, SMOLLM2, [many], max_tokens=8))

    prompt = _prefill_prompt(engine, [many])
    call = WeaveCall(CallRequest(engine, SMOLLM2, [many], max_tokens=8), plan=DecodePlan({}))
    assert call.select() is None
    assert call.skeleton() is None
    assert call.tasks == []  # no sequences for them all: no parallel values
    assert call.values() is None and call.provisional() is None
    ended = call.write_back() or call.final()
    assert "fallback" not in ended.phases
    assert (ended.calls, ended.error is None) == (expected.calls, expected.error is None)
    assert ended.provisional is None
    assert engine.seq_len(0) == len(prompt) + (len(ended.tokens) if ended.calls else 0)
    assert all(engine.seq_len(seq) == 0 for seq in range(1, engine.n_seq_max))


def test_a_weave_call_with_no_tool_offered_fails_at_select_leaving_the_prompt(fresh_engine):
    engine = fresh_engine
    prompt = _prefill_prompt(engine, [])
    call = WeaveCall(CallRequest(engine, SMOLLM2, []))
    ended = call.select()
    assert ended is not None
    assert (ended.calls, ended.error) == ([], "no tools are offered")
    assert engine.seq_len(0) == len(prompt)


@pytest.mark.parametrize("padding", [None, [1, 2], "4"], ids=["null", "list", "string"])
def test_a_calibration_whose_padding_is_not_an_object_is_a_config_error(tmp_path, padding):
    from weavehost.decode.calibration import load_plan, plan_path
    from weavehost.errors import ConfigError

    model = tmp_path / f"{tmp_path.name}.gguf"  # its stored plan is this test's alone
    model.write_bytes(b"GGUF")
    stored = plan_path(model, 2)
    stored.parent.mkdir(parents=True, exist_ok=True)
    stored.write_text(json.dumps({"padding": padding}))
    with pytest.raises(ConfigError, match="unreadable"):
        load_plan(model, 2)


@pytest.mark.parametrize(
    ("verified", "kept"),
    [('{"city": "Paris"}, "label": "never end', True), ('{"city": "Oslo"}, "label', False)],
)
def test_a_failed_call_keeps_its_provisional_call_only_where_write_back_verified_it_whole(
    verified: str, kept: bool
) -> None:
    # The parallel values said Paris; where the argmax wrote Oslo instead, the model did not
    # write the provisional call, and a caller must not run it.
    paris = ToolCall("get_current_weather", {"city": "Paris"})
    state = SimpleNamespace(
        verified=SimpleNamespace(text=verified),
        provisional_text='{"city": "Paris"}',
        provisional_call=paris,
    )
    assert WeaveCall._verified_provisional(state) == (paris if kept else None)  # type: ignore[arg-type]
