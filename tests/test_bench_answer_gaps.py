"""``weavehost bench-agent --answer-drafts both``: where a drafted answer parts from drafts off,
the first choice that differs, the text around it and both top-two gaps; near-ties counted."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

from typing import Any

from tests.test_bench_agent import PARIS_CALL
from weavehost.agent import Event
from weavehost.bench.agent_report import format_tables, summarize_agent, trace_turn
from weavehost.bench.answer_gaps import (
    NEAR_TIE_LOGITS,
    DraftPairs,
    first_difference,
    step_choices,
    turn_differences,
)


def timing(
    step: int,
    ids: list[int],
    gaps: list[float | None],
    stop: str | None = None,
    at_stop: float | None = None,
) -> dict[str, Any]:
    """A step's timings as the session writes them with the gaps recorded."""
    out: dict[str, Any] = {
        "step": step,
        "free_tokens": len(ids),
        "free_token_ids": ids,
        "free_margins": gaps,
    }
    if stop is not None:
        out |= {"free_stop": stop, "free_stop_margin": at_stop}
    return out


def turn(answer: str, *timings: dict[str, Any], steps: tuple[int, ...] = (2, 3)) -> dict[str, Any]:
    """A judged turn whose answer was written by ``steps`` (step 1 wrote the call)."""
    return {
        "answer": answer,
        "answer_steps": list(steps),
        "timings": [timing(1, [], [], "call", 3.0), *timings],
    }


# "Chicago: snow, 3.9 C" undrafted, "Chicago: 3.9 C" drafted: they part at the fourth token.
UNDRAFTED = turn(
    "Chicago: snow, 3.9 C",
    timing(2, [], [], "call", 2.0),
    timing(3, [11, 12, 13, 14, 15], [4.0, 6.0, 1.5, 0.2, 3.0], "end", 5.0),
)
DRAFTED = turn(
    "Chicago: 3.9 C",
    timing(2, [], [], "call", 2.0),
    timing(3, [11, 12, 13, 16], [4.0, 6.0, 1.5, 0.1], "end", 4.5),
)


def test_a_step_s_choices_are_its_kept_tokens_and_its_stop_or_its_log_where_it_chose_more() -> None:
    assert step_choices(UNDRAFTED["timings"][2]) == [
        (11, 4.0),
        (12, 6.0),
        (13, 1.5),
        (14, 0.2),
        (15, 3.0),
        ("<end>", 5.0),
    ]
    # Text taken back (a refused call's JSON): every choice in the order made.
    logged = {
        **UNDRAFTED["timings"][2],
        "free_log_ids": [7, 8, 11],
        "free_log_margins": [0.3, 1.0, 4.0],
    }
    assert step_choices(logged) == [(7, 0.3), (8, 1.0), (11, 4.0)]
    # A forced call has no free choice; text written and nothing recorded: not known.
    assert step_choices({"step": 1, "free_tokens": 0}) == []
    assert step_choices({"step": 2, "free_tokens": 4}) is None


def test_the_first_difference_is_the_first_differing_choice_with_both_gaps_and_the_text_around_it() -> (
    None
):
    found = first_difference(DRAFTED, UNDRAFTED)
    assert found == {
        "char": len("Chicago: "),
        "before": "Chicago: ",
        "drafted_text": "3.9 C",
        "undrafted_text": "snow, 3.9 C",
        "step": 3,
        "choice": 3,  # steps 1 and 2 chose alike, then three tokens of step 3
        "drafted_token": 16,
        "undrafted_token": 14,
        "drafted_gap": 0.1,
        "undrafted_gap": 0.2,
        "near_tie": True,
        "unrecorded": False,
    }
    assert first_difference(UNDRAFTED, UNDRAFTED) is None  # the same text: no difference


def test_a_difference_is_a_near_tie_only_where_the_undrafted_gap_there_is_below_the_threshold() -> (
    None
):
    assert NEAR_TIE_LOGITS == 0.5
    assert first_difference(DRAFTED, UNDRAFTED, threshold=0.2)["near_tie"] is False
    # One answer ends where the other goes on: the end of turn's own gap is the one compared.
    ended = turn(
        "Chicago",
        timing(2, [], [], "call", 2.0),
        timing(3, [11, 12, 13], [4.0, 6.0, 1.5], "end", 0.3),
    )
    longer = first_difference(UNDRAFTED, ended)
    assert (longer["drafted_token"], longer["undrafted_token"], longer["undrafted_gap"]) == (
        14,
        "<end>",
        0.3,
    )
    assert longer["near_tie"] is True
    # An unopposed choice (no other token could be chosen: None) is never a near-tie.
    unopposed = turn(
        "Chicago",
        timing(2, [], [], "call", 2.0),
        timing(3, [11, 12, 13], [4.0, 6.0, 1.5], "end", None),
    )
    assert first_difference(UNDRAFTED, unopposed)["near_tie"] is False
    # Without recorded gaps the text is still shown, the choice and the tie unknown.
    blind = first_difference({"answer": "Chicago: 3.9 C"}, {"answer": "Chicago: snow"})
    assert (blind["char"], blind["choice"], blind["near_tie"]) == (9, None, None)


def test_runs_that_part_in_text_taken_back_before_the_answer_are_compared_there_not_at_the_answer() -> (
    None
):
    # Step 2: undrafted, the JSON of a refused call (get_current…, token 21 by 0.3) taken back
    # and the answer written; drafted, get_forecast (token 22) chosen there, a call, then the
    # answer in step 3. The answers' first choices (1.2 apart) follow other conversations.
    undrafted = turn(
        "Zurich: rain",
        {**timing(2, [31, 32], [1.2, 3.0], "end", 2.0), "free_log_ids": [9, 20, 21, 31, 32, 2],
         "free_log_margins": [4.0, 2.0, 0.3, 1.2, 3.0, 2.0]},
        steps=(2,),
    )  # fmt: skip
    drafted = turn(
        "1-day forecast",
        {**timing(2, [], [], "call", 4.0), "free_log_ids": [9, 20, 22], "free_log_margins": [4.0, 2.0, 0.2]},
        timing(3, [40], [0.1], "end", 1.0),
        steps=(3,),
    )  # fmt: skip
    found = first_difference(drafted, undrafted)
    assert (found["step"], found["choice"], found["drafted_token"], found["undrafted_token"]) == (
        2,
        2,
        22,
        21,
    )
    assert (found["undrafted_gap"], found["near_tie"], found["unrecorded"]) == (0.3, True, False)


def test_runs_whose_calls_differ_before_any_choice_does_part_where_nothing_was_recorded() -> None:
    # Step 1 wrote five calls undrafted and four drafted (the strategy's choices: no gap), so
    # step 2's prompt differs in size; its first choice's gap says nothing of why.
    undrafted = turn("Mexico is", timing(2, [51], [0.8], "end", 3.0), steps=(2,))
    drafted = turn("New York is", timing(2, [52], [0.4], "end", 3.0), steps=(2,))
    undrafted["timings"][1]["prompt_tokens"], drafted["timings"][1]["prompt_tokens"] = 900, 870
    found = first_difference(drafted, undrafted)
    assert (found["step"], found["choice"], found["near_tie"], found["unrecorded"]) == (
        2,
        None,
        None,
        True,
    )
    # A result of the same size shown with other seconds: the prompts' digests differ.
    undrafted["timings"][1]["prompt_tokens"] = 870
    undrafted["timings"][1]["prompt_digest"], drafted["timings"][1]["prompt_digest"] = "a1", "b2"
    assert first_difference(drafted, undrafted)["unrecorded"] is True
    drafted["timings"][1]["prompt_digest"] = "a1"  # the same prompt: they part at the choice
    assert first_difference(drafted, undrafted)["unrecorded"] is False


def record(drafts: str, task: str, turn_: dict[str, Any]) -> dict[str, Any]:
    return {"id": task, "variant": f"weave cache=on drafts={drafts}", "strategy": "weave",
            "prompt_cache": "on", "answer_drafts": drafts, "success": True, "turns": [turn_]}  # fmt: skip


def test_the_summary_counts_each_drafted_variant_s_differences_and_near_ties_and_prints_them() -> (
    None
):
    far = turn(
        "Chicago: sun",
        timing(2, [], [], "call", 2.0),
        timing(3, [11, 12, 13, 17], [4.0, 6.0, 1.5, 2.0], "end", 1.0),
    )
    apart = {**UNDRAFTED, "timings": [{**t, "prompt_tokens": 9} for t in UNDRAFTED["timings"]]}
    records = [
        record("off", "a", UNDRAFTED), record("on", "a", DRAFTED),  # a near-tie
        record("off", "b", UNDRAFTED), record("on", "b", UNDRAFTED),  # the same
        record("off", "c", far), record("on", "c", UNDRAFTED),  # drafts off preferred "sun" by 2.0
        record("off", "d", far), record("on", "d", apart),  # another prompt: unrecorded
    ]  # fmt: skip
    summary = summarize_agent(records, ["weave cache=on drafts=off", "weave cache=on drafts=on"])
    on, off = (
        summary["variants"]["weave cache=on drafts=on"],
        summary["variants"]["weave cache=on drafts=off"],
    )
    assert (on["answer_differences"], on["answer_differences_near_tie"]) == (3, 1)
    assert on["answer_differences_unrecorded"] == 1
    assert (off["answer_differences"], off["answer_differences_near_tie"]) == (None, None)
    summary["variants"] = {
        label: {**n, "answer_tokens_per_pass": 1.0} for label, n in summary["variants"].items()
    }
    assert "differ (near-tie)" in format_tables(summary)
    assert " 3 (1, 1 unrecorded)" in format_tables(summary)


def test_a_turn_after_one_that_differed_counts_as_its_cause_since_it_was_told_another_conversation() -> (
    None
):
    far = turn(
        "Chicago: sun",
        timing(2, [], [], "call", 2.0),
        timing(3, [11, 12, 13, 17], [4.0, 6.0, 1.5, 2.0], "end", 1.0),
    )
    # Turn 0 parts at a near-tie; turn 1 then parts where drafts off preferred "sun" by 2.0.
    drafted = {**record("on", "a", DRAFTED), "turns": [DRAFTED, UNDRAFTED]}
    undrafted = {**record("off", "a", UNDRAFTED), "turns": [UNDRAFTED, far]}
    differences = turn_differences(drafted, undrafted)
    assert [(d["turn"], d.get("after_turn"), d["near_tie"]) for d in differences] == [
        (0, None, True),
        (1, 0, True),
    ]
    assert differences[1]["undrafted_gap"] == 2.0  # its own gap is still shown
    # Where turn 0 is the same, turn 1's difference is its own: not a near-tie.
    same_first = {**drafted, "turns": [UNDRAFTED, UNDRAFTED]}
    only = turn_differences(same_first, undrafted)
    assert [(d["turn"], d.get("after_turn"), d["near_tie"]) for d in only] == [(1, None, False)]


def test_a_drafted_record_is_written_once_its_undrafted_partner_ran_with_its_differences() -> None:
    pairs = DraftPairs([("weave", "on", None)])
    drafted, undrafted = record("on", "a", DRAFTED), record("off", "a", UNDRAFTED)
    assert pairs.ready(drafted) == []  # drafts on ran first: it waits
    out = pairs.ready(undrafted)
    assert [r["answer_drafts"] for r in out] == ["off", "on"]
    assert out[1]["answer_differences"][0]["turn"] == 0
    assert out[1]["answer_differences"][0]["near_tie"] is True
    # The other order goes out at once; a variant without a drafts-off partner never waits.
    assert [r["answer_drafts"] for r in pairs.ready(record("off", "b", UNDRAFTED))] == ["off"]
    assert pairs.ready(record("on", "b", UNDRAFTED))[0]["answer_differences"] == []
    alone = DraftPairs([])
    assert alone.ready(drafted) == [drafted] and alone.rest() == []


def test_the_trace_names_the_steps_that_wrote_the_answer() -> None:
    result = {**PARIS_CALL, "source": "final"}
    trace = trace_turn(
        [
            (0.0, Event("step", {"step": 1})),
            (0.5, Event("timings", {"step": 1, "free_tokens": 0})),
            (1.0, Event("tool_result", result)),
            (1.1, Event("timings", {"step": 2, "free_tokens": 0})),
            (1.2, Event("timings", {"step": 3, "free_tokens": 5})),
            (1.3, Event("done", {"stop": "answer", "steps": 3})),
        ]
    )
    assert trace.answer_steps == (2, 3)
