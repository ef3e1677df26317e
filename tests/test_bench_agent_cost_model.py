"""``weavehost bench-agent --cost-model``: each answer's passes (those after the turn's last tool
result) re-priced by another machine's cost table, a projection beside the measured times."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.test_bench_agent import PARIS_CALL, weather_task, write_tasks
from weavehost.agent import Event
from weavehost.bench.agent import AgentBenchConfig, run_agent_bench
from weavehost.bench.agent_report import (
    answer_projection,
    format_tables,
    summarize_agent,
    trace_turn,
)
from weavehost.bench.costs import resolve_cost_model
from weavehost.cli import main
from weavehost.config import RemoteModelConfig
from weavehost.engine import EngineStats
from weavehost.engine.calibrate import CostTable, load_cost_table
from weavehost.errors import BenchError

# 50 ms a one-row pass, 60 ms a four-row one, 10 ms each row beyond (the fill rule).
PHONE_LIKE = CostTable({1: 0.050, 4: 0.060}, prefill_token_s=0.010, machine="phone-like")


def _turn(shapes: dict[str, int], after: float | None = 1.0) -> dict:
    return {"after_result_s": after, "answer_pass_shapes": shapes}


def test_an_answer_s_passes_are_priced_by_the_table_pass_by_pass() -> None:
    # The result's prefill (36 rows), three drafted passes of 6 rows, ten one-token passes.
    turn = _turn({"36x1": 1, "6x4": 3, "1x1": 10})
    expected = (0.060 + 32 * 0.010) + 3 * (0.060 + 2 * 0.010) + 10 * 0.050
    assert answer_projection(turn, PHONE_LIKE) == pytest.approx(expected)  # 1.12 s


def test_a_table_with_output_costs_prices_rows_that_ask_for_logits_as_such() -> None:
    table = CostTable(
        {1: 0.020, 8: 0.060}, prefill_token_s=0.005, output_s={1: 0.050, 8: 0.060}, output_rows=8
    )
    one_output = answer_projection(_turn({"8x1": 1}), table)
    every_output = answer_projection(_turn({"8x8": 1}), table)
    assert one_output == pytest.approx(0.050)  # 60 ms less what 7 more outputs add (10 ms)
    assert every_output == pytest.approx(0.060)


def test_a_turn_without_a_result_or_whose_passes_are_unknown_has_no_projection() -> None:
    assert answer_projection(_turn({"1x1": 3}, after=None), PHONE_LIKE) is None
    assert answer_projection(_turn({}), PHONE_LIKE) is None  # a remote model's: not seen


def test_only_the_passes_of_the_steps_after_the_last_result_are_the_answer_s() -> None:
    result = {**PARIS_CALL, "source": "final"}
    trace = trace_turn(
        [
            (0.0, Event("step", {"step": 1})),
            (0.5, Event("timings", {"step": 1, "pass_shapes": {"504x1": 1, "6x4": 2}})),
            (1.0, Event("tool_result", result)),
            (1.1, Event("step", {"step": 2})),
            (1.5, Event("timings", {"step": 2, "pass_shapes": {"36x1": 1, "1x1": 5}})),
            (1.6, Event("step", {"step": 3})),
            (2.0, Event("timings", {"step": 3, "pass_shapes": {"1x1": 7, "6x4": 2}})),
            (2.2, Event("text", {"text": "It is -2.9 C."})),
            (2.7, Event("done", {"stop": "answer", "steps": 3})),
        ]
    )
    assert trace.answer_pass_shapes == {"36x1": 1, "1x1": 12, "6x4": 2}


def test_the_engine_counts_each_pass_by_rows_and_outputs_and_a_step_takes_the_difference() -> None:
    before = EngineStats(pass_shapes={(1, 1): 4, (6, 4): 1})
    later = EngineStats(pass_shapes={(1, 1): 9, (6, 4): 1, (36, 1): 1})
    snapshot = later.snapshot()
    later.pass_shapes[(1, 1)] += 1  # a snapshot does not move with the engine
    assert snapshot.since(before).pass_shapes == {(1, 1): 5, (36, 1): 1}


def _record(label: str, drafts: str, projected: list[float | None]) -> dict:
    turns = [{"answer": "", "projected_after_result_s": p} for p in projected]
    return {"id": "a", "variant": label, "strategy": "weave", "prompt_cache": "on",
            "answer_drafts": drafts, "guidance": None, "success": True, "turns": turns}  # fmt: skip


def test_the_summary_gives_the_projected_time_after_the_result_and_its_ratio_to_drafts_off() -> (
    None
):
    off, on = "weave cache=on drafts=off", "weave cache=on drafts=on"
    records = [_record(off, "off", [2.0, 8.0, None]), _record(on, "on", [1.0, 1.0])]
    summary = {"variants": summarize_agent(records, [off, on])["variants"], "by_tag": {}}
    numbers = summary["variants"]
    assert numbers[off]["projected_after_result_s"] == pytest.approx(4.0)  # geomean of 2 and 8
    assert numbers[on]["projected_after_result_s"] == pytest.approx(1.0)
    assert numbers[on]["projected_after_result_vs_drafts_off"] == pytest.approx(0.25)
    assert numbers[off]["projected_after_result_vs_drafts_off"] == pytest.approx(1.0)
    for n in numbers.values():
        n["answer_tokens_per_pass"] = 2.0
    summary["setup"] = {"cost_model": {"file": "phone.json", "machine": "a phone"}}
    table = format_tables(summary)
    assert "projected after result s" in table and "0.25x" in table
    assert "a projection, not a measurement" in table and "a phone" in table


def test_without_a_cost_model_there_is_no_projection_and_no_ratio() -> None:
    label = "weave cache=on drafts=on"
    numbers = summarize_agent([_record(label, "on", [])], [label])["variants"][label]
    assert numbers["projected_after_result_s"] is None
    assert numbers["projected_after_result_vs_drafts_off"] is None


def test_an_unknown_cost_table_is_one_error_line_and_exit_2(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main, ["bench-agent", "--cost-model", "phone-nokia3310", "--out", str(tmp_path)]
    )
    assert result.exit_code == 2
    (line,) = result.output.strip().splitlines()
    assert line.startswith("Error: phone-nokia3310: no such cost table")
    assert "phone-oneplus12r" in line  # the shipped names are listed
    assert not (tmp_path / "results.jsonl").exists()


def test_a_remote_model_s_passes_cannot_be_re_priced(tmp_path: Path) -> None:
    tasks = write_tasks(tmp_path / "t.jsonl", weather_task("p", "Weather in Paris?", "Paris", []))
    config = AgentBenchConfig(
        tasks=tasks,
        out=tmp_path / "out",
        remote=RemoteModelConfig(url="http://127.0.0.1:9/v1"),
        cost_model="phone-oneplus12r",
    )
    with pytest.raises(BenchError, match="--cost-model"):
        run_agent_bench(config)


@pytest.mark.model
def test_a_run_on_the_embedded_model_projects_each_answer_on_the_phone_table(
    tmp_path: Path,
) -> None:
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        weather_task("paris", "What is the weather in Paris?", "Paris", ["-2.9"]),
        weather_task("oslo", "What is the weather in Oslo?", "Oslo", []),
    )
    out = tmp_path / "out"
    result = CliRunner().invoke(
        main,
        [
            "bench-agent",
            str(tasks),
            "--strategies",
            "weave",
            "--prompt-cache",
            "off",
            "--cost-model",
            "phone-oneplus12r",
            "--limit",
            "2",
            "--threads",
            "2",
            "--ctx",
            "2048",
            "--out",
            str(out),
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    assert "a projection, not a measurement" in result.output
    assert "foreseen tokens/pass" in result.output and "bounds, not measurements" in result.output
    phone = load_cost_table(resolve_cost_model("phone-oneplus12r"))
    records = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(records) == 2
    projected = []
    for record in records:
        turn = record["turns"][0]
        assert turn["after_result_s"] is not None, record  # the model called the tool
        assert turn["answer_pass_shapes"], "the answer's passes were not recorded"
        assert turn["projected_after_result_s"] == pytest.approx(
            answer_projection(turn, phone), abs=1e-4
        )
        projected.append(turn["projected_after_result_s"])
        # After the turn, its answer drafted again with foresight, by the same phone plan.
        foresight = turn["answer_foresight"]
        answer_ids = [
            t["free_token_ids"] for t in turn["timings"] if t["step"] in turn["answer_steps"]
        ]
        (last,) = [t for t in turn["timings"] if t["step"] == turn["answer_steps"][-1]]
        assert 0 < last["free_s"] <= turn["after_result_s"]
        for bound in foresight.values():
            assert bound["tokens"] == len(answer_ids[-1]) > 0
            assert bound["fewest_passes"] <= bound["passes"] <= bound["tokens"]
            assert bound["seconds"] <= bound["one_row_seconds"] * (1 + 1e-9)
            # The time after the result with the step's free passes, priced one row each,
            # replaced by that schedule: their wall time cut by the share it saves.
            priced = last["free_passes"] * bound["one_row_seconds"] / bound["tokens"]
            saved = max(0.0, 1 - bound["seconds"] / priced)
            assert bound["priced_saving_s"] == pytest.approx(priced * saved, abs=2e-6)
            assert bound["after_result_s"] == pytest.approx(
                turn["after_result_s"] - last["free_s"] * saved, abs=2e-4
            )
        # No drafter from the conversation beats one that copies from anywhere in it.
        assert foresight["copy"]["seconds"] <= foresight["proposer"]["seconds"] * (1 + 1e-9)
    # Decoded by the phone's plan, where rows are cheap: some answer pass carried drafted
    # tokens, each asking for logits (a prefill asks on its last row only). The tests' own
    # cache has no calibration, so by this machine's plan none would.
    shapes = [shape for r in records for shape in r["turns"][0]["answer_pass_shapes"]]
    assert any(int(shape.split("x")[1]) > 1 for shape in shapes), shapes
    summary = json.loads((out / "summary.json").read_text())
    (numbers,) = summary["variants"].values()
    assert numbers["projected_after_result_s"] == pytest.approx(
        math.sqrt(projected[0] * projected[1]), rel=1e-3
    )
    assert summary["setup"]["cost_model"]["machine"].startswith("OnePlus 12R")
    assert 0 < numbers["copy_foresight_pass_time_x"] <= numbers["foresight_pass_time_x"] <= 1
