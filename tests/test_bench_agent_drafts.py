"""``weavehost bench-agent --answer-drafts``: drafts on and off in one run, and the answer's
figures (time after the last result, tokens a pass, the same text as without drafts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.test_bench_agent import PARIS, PARIS_CALL, scripted, weather_task, write_tasks
from weavehost.agent import Event
from weavehost.bench.agent import AgentBenchConfig, plan_variants, run_agent_bench
from weavehost.bench.agent_report import summarize_agent, trace_turn
from weavehost.cli import main
from weavehost.errors import BenchError


def test_answer_drafts_both_runs_every_variant_with_drafts_off_and_on() -> None:
    labels = [v.label for v in plan_variants(["weave", "constrained"], "on", "both")]
    assert labels == [
        "weave cache=on drafts=off",
        "weave cache=on drafts=on",
        "constrained cache=on drafts=off",
        "constrained cache=on drafts=on",
    ]
    assert [v.label for v in plan_variants(["weave"], "off", "on")] == ["weave cache=off drafts=on"]
    with pytest.raises(BenchError, match="--answer-drafts"):
        plan_variants(["weave"], "on", "maybe")


def test_the_answer_is_timed_from_the_last_result_and_counted_from_the_steps_after_it() -> None:
    result = {**PARIS_CALL, "source": "final"}
    trace = trace_turn(
        [
            (0.0, Event("step", {"step": 1})),
            (0.5, Event("timings", {"step": 1, "free_tokens": 3, "free_passes": 3})),
            (1.0, Event("tool_result", result)),
            (1.2, Event("tool_result", result)),
            (1.3, Event("step", {"step": 2})),
            (2.0, Event("timings", {"step": 2, "free_tokens": 12, "free_passes": 4})),
            (2.2, Event("text", {"text": "It is -2.9 C."})),
            (2.7, Event("done", {"stop": "answer", "steps": 2})),
        ]
    )
    assert trace.last_result_s == 1.2
    assert (trace.answer_tokens, trace.answer_passes) == (12, 4)


def _record(variant: str, drafts: str, task: str, answer: str, after: float) -> dict:
    turn = {"answer": answer, "after_result_s": after, "answer_tokens": 12, "answer_passes": 4}
    return {"id": task, "variant": variant, "strategy": "weave", "prompt_cache": "on",
            "answer_drafts": drafts, "success": True, "turns": [turn]}  # fmt: skip


def test_the_summary_compares_each_drafted_answer_with_the_same_task_s_undrafted_one() -> None:
    off, on = "weave cache=on drafts=off", "weave cache=on drafts=on"
    records = [
        _record(off, "off", "a", "It is -2.9 C.", 2.0),
        _record(off, "off", "b", "Oslo: clear.", 2.0),
        _record(on, "on", "b", "Oslo: clear.", 0.5),  # the order of tasks does not matter
        _record(on, "on", "a", "It is -2.9 C!", 2.0),
    ]
    numbers = summarize_agent(records, [off, on])["variants"]
    assert numbers[on]["answer_same_text"] == 0.5
    assert numbers[off]["answer_same_text"] is None
    assert numbers[on]["geo_after_result_s"] == pytest.approx(1.0)
    assert numbers[on]["answer_tokens_per_pass"] == 3.0


def _foreseen(tokens: int, passes: int, most: int, seconds: float, one_row: float) -> dict:
    return {"tokens": tokens, "passes": passes, "fewest_passes": most, "seconds": seconds,
            "one_row_seconds": one_row}  # fmt: skip


def test_the_summary_bounds_the_answer_by_its_drafts_foreseen_summed_over_turns() -> None:
    on = "weave cache=on drafts=on"
    a, b = _record(on, "on", "a", "It is -2.9 C.", 1.0), _record(on, "on", "b", "Hi.", 1.0)
    a["turns"][0]["answer_foresight"] = {
        "proposer": _foreseen(10, 6, 4, 0.06, 0.10),
        "copy": _foreseen(10, 3, 2, 0.04, 0.10),
    }
    b["turns"][0]["answer_foresight"] = {
        "proposer": _foreseen(20, 20, 20, 0.20, 0.20),  # nothing it could draft would pay
        "copy": _foreseen(20, 8, 5, 0.12, 0.20),
    }
    numbers = summarize_agent([a, b], [on])["variants"][on]
    assert numbers["foresight_tokens_per_pass"] == pytest.approx(30 / 24)
    assert numbers["foresight_pass_time_x"] == pytest.approx(0.26 / 0.30)
    assert numbers["copy_foresight_tokens_per_pass"] == pytest.approx(30 / 7)
    assert numbers["copy_foresight_pass_time_x"] == pytest.approx(0.16 / 0.30)
    # A run whose turns were not drafted again (a remote model, no cost table) has no bound.
    plain = summarize_agent([_record(on, "on", "a", "x", 1.0)], [on])["variants"][on]
    assert (
        plain["foresight_tokens_per_pass"] is None and plain["copy_foresight_pass_time_x"] is None
    )


def test_drafts_off_turns_retimed_by_foresight_bound_the_after_result_ratio() -> None:
    off, on = "weave cache=on drafts=off", "weave cache=on drafts=on"

    def bound(foreseen: dict, after: float, saving: float) -> dict:
        return {**foreseen, "after_result_s": after, "priced_saving_s": saving}

    records = []
    for variant, drafts in ((off, "off"), (on, "on")):
        a, b = _record(variant, drafts, "a", "x", 1.0), _record(variant, drafts, "b", "y", 4.0)
        a["turns"][0]["projected_after_result_s"] = 2.0
        b["turns"][0]["projected_after_result_s"] = 8.0
        # a's answer took 0.5 s of its second after the result: foreseen, half of it is
        # saved (0.05 s of 0.10 priced), copied 80%; b's took 2 of its 4 s, 75% saved.
        a["turns"][0]["answer_foresight"] = {
            "proposer": bound(_foreseen(10, 6, 4, 0.05, 0.10), 1.0 - 0.5 * 0.5, 0.4),
            "copy": bound(_foreseen(10, 3, 2, 0.02, 0.10), 1.0 - 0.5 * 0.8, 0.8),
        }
        b["turns"][0]["answer_foresight"] = {
            "proposer": bound(_foreseen(20, 8, 5, 0.05, 0.20), 4.0 - 2.0 * 0.75, 2.0),
            "copy": bound(_foreseen(20, 8, 5, 0.05, 0.20), 4.0 - 2.0 * 0.75, 2.0),
        }
        records += [a, b]
    numbers = summarize_agent(records, [off, on])["variants"]
    # The geomean of the turns so re-timed over that of the turns measured.
    undrafted = numbers[off]
    assert undrafted["foresight_after_result_x"] == pytest.approx((0.75 * 2.5 / 4) ** 0.5)
    assert undrafted["copy_foresight_after_result_x"] == pytest.approx((0.6 * 2.5 / 4) ** 0.5)
    assert undrafted["foresight_projected_after_result_x"] == pytest.approx((1.6 * 6.0 / 16) ** 0.5)
    # A drafted variant's answers were not one row a token: its time does not scale so.
    assert numbers[on]["foresight_after_result_x"] is None
    assert numbers[on]["copy_foresight_projected_after_result_x"] is None


def test_a_run_with_answer_drafts_both_reports_both_variants_and_their_answers(
    tmp_path: Path,
) -> None:
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        weather_task("right", "What is the weather in Paris?", "Paris", ["-2.9"]),
    )
    config = AgentBenchConfig(
        tasks=tasks,
        out=tmp_path / "out",
        strategies=("weave",),
        prompt_cache="off",
        answer_drafts="both",
    )
    run = run_agent_bench(config, make_model=scripted)
    records = [json.loads(line) for line in run.results.read_text().splitlines()]
    assert sorted(r["answer_drafts"] for r in records) == ["off", "on"]
    numbers = json.loads(run.summary_json.read_text())["variants"]
    assert set(numbers) == {"weave cache=off drafts=off", "weave cache=off drafts=on"}
    assert numbers["weave cache=off drafts=on"]["geo_after_result_s"] > 0
    assert PARIS.name in json.dumps(records[0]["turns"][0]["calls"])
    # The drafted record goes out after its partner, with the turns that differ: none here.
    assert [r["answer_drafts"] for r in records] == ["off", "on"]
    assert records[1]["answer_differences"] == []
    drafted = numbers["weave cache=off drafts=on"]
    assert (drafted["answer_differences"], drafted["answer_differences_near_tie"]) == (0, 0)


def test_an_unknown_answer_drafts_setting_is_refused_on_the_command_line() -> None:
    result = CliRunner().invoke(main, ["bench-agent", "--answer-drafts", "maybe"])
    assert result.exit_code == 2 and "--answer-drafts" in result.output


def test_a_drafted_answer_is_compared_only_with_the_undrafted_one_of_the_same_guidance() -> None:
    answers = {"on": "It is -2.9 C.", "off": "Paris: -2.9 C."}  # guidance changes the answer
    records, labels = [], []
    for guidance in ("on", "off"):
        for drafts in ("off", "on"):
            label = f"weave cache=on drafts={drafts} guidance={guidance}"
            labels.append(label)
            record = _record(label, drafts, "a", answers[guidance], 1.0)
            records.append({**record, "guidance": guidance})
    numbers = summarize_agent(records, labels)["variants"]
    assert numbers["weave cache=on drafts=on guidance=on"]["answer_same_text"] == 1.0
    assert numbers["weave cache=on drafts=on guidance=off"]["answer_same_text"] == 1.0


@pytest.mark.model  # the run loads the embedded model
def test_without_a_calibration_drafts_on_is_warned_of_and_a_stale_one_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedded_model_path: Path
) -> None:
    from weavehost.decode.calibration import plan_path

    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path / "cache"))  # no calibration here
    tasks = write_tasks(
        tmp_path / "t.jsonl",
        {
            "id": "hello",
            "servers": ["weather.py"],
            "user": "Hello!",
            "calls": [],
            "facts": [],
            "tags": ["no_tool"],
        },  # fmt: skip
    )
    args = ["bench-agent", str(tasks), "--model", str(embedded_model_path), "--threads", "2",
            "--strategies", "weave", "--prompt-cache", "off"]  # fmt: skip
    args += ["--out", str(tmp_path / "out")]
    warned = CliRunner().invoke(main, [*args, "--answer-drafts", "on"])
    assert warned.exit_code == 0, warned.output
    assert "no calibration of" in warned.output and "drafts on runs as drafts off" in warned.output
    quiet = CliRunner().invoke(main, [*args, "--answer-drafts", "off"])
    assert quiet.exit_code == 0 and "no calibration" not in quiet.output, quiet.output
    # A calibration an older weavehost stored is refused before any task runs, not at each.
    stored = plan_path(embedded_model_path, 2)
    stored.parent.mkdir(parents=True)
    stored.write_text(json.dumps({"calibration": 1, "pass_ms": {"1": 7.0}}))
    again = [*args, "--answer-drafts", "on", "--out", str(tmp_path / "o2")]
    stale = CliRunner().invoke(main, again)
    assert stale.exit_code != 0 and "run `weavehost calibrate`" in stale.output, stale.output
    assert "Traceback" not in stale.output and not (tmp_path / "o2" / "results.jsonl").exists()
