"""The agent benchmark's measures and scores: a turn's timed events in, numbers and a table out.

Stage: benchmark scoring (``weavehost bench-agent``). Pure functions over records, so tests can
feed them events by hand:

- :func:`trace_turn` reads one turn's events, each stamped with the seconds since the turn was
  started, and finds the calls that ran, the answer, the time to first tool start and the time
  to the final answer (defined in :mod:`weavehost.bench.agent`'s docstring and
  ``docs/agent.md``).
- :func:`judge_turn` scores a turn: its calls by BFCL's checker
  (:func:`weavehost.bench.answers.check_calls`), an argument the expectation does not name left
  unjudged, and, in a turn built to fail first (``fails``), a call whose result was an error the
  model can correct left out; its facts by case-insensitive containment.
- :func:`summarize_agent` gives per variant the success rate, geometric means of the two times
  over the tasks that have them (as ``weavehost bench`` does), the provisional results and the
  prompt cache's hits; and the success per tag. Skipped tasks count in no rate. For the answer:
  ``geo_after_result_s`` (each turn's last tool result to its ``done``, geomean over the turns
  that had a result), ``answer_tokens_per_pass`` (the answer's free-text tokens over the passes
  they took, from the ``timings`` after the turn's last result) and ``answer_same_text`` (the
  share of turns whose answer equals the same task's turn under the drafts-off variant of the
  same strategy and cache; ``None`` without one), and of the turns that differ
  ``answer_differences``, those that part at a near-tie, ``answer_differences_near_tie``, and
  those that part where no choice was recorded, ``answer_differences_unrecorded``
  (:mod:`weavehost.bench.answer_gaps`). ``foreign_script_answers`` counts the turns
  whose answer writes a script (:data:`weavehost.engine.scripts.SCRIPTS`: Han, Cyrillic, …;
  Latin and digits are none) that neither the turn's user message nor its tool results hold:
  each judged turn lists them as ``foreign_scripts``.
- With a cost table (``--cost-model``), :func:`project_turns` re-prices each turn's answer
  passes and :func:`summarize_agent` adds ``projected_after_result_s`` and its ratio to the
  drafts-off variant (:func:`answer_projection` says what is and is not in it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from weavehost.bench.agent_beside import beside_peers, format_beside
from weavehost.bench.agent_foresight import summarize_foresight
from weavehost.bench.agent_tasks import RECOVERABLE, AgentTurn
from weavehost.bench.answer_gaps import (
    NEAR_TIE_LOGITS,
    difference_counts,
    setting_of,
    undrafted_records,
)
from weavehost.bench.answers import check_calls
from weavehost.bench.cases import AnswerSet
from weavehost.bench.machine import machine_info
from weavehost.bench.report import geomean, ratio
from weavehost.engine.calibrate import CostTable
from weavehost.engine.scripts import SCRIPTS, scripts_in
from weavehost.formats import ToolCall

if TYPE_CHECKING:
    from weavehost.agent import Event

__all__ = [
    "TurnTrace",
    "answer_projection",
    "format_tables",
    "judge_turn",
    "project_turns",
    "setup_info",
    "summarize_agent",
    "trace_turn",
]


@dataclass(frozen=True, slots=True)
class TurnTrace:
    """What one turn did, read from its events (times in seconds since the turn started)."""

    calls: tuple[ToolCall, ...] = ()
    sources: tuple[str, ...] = ()
    statuses: tuple[str, ...] = ()  # each result's status (``ok``, ``tool_error`` …)
    answer: str = ""
    first_tool_s: float | None = None
    answer_s: float | None = None
    last_result_s: float | None = None  # the turn's last tool result
    answer_tokens: int = 0  # the answer's free-text tokens (the steps after the last result)
    answer_passes: int = 0  # and the passes they took
    # Every pass of those steps by shape, ``{"ROWSxOUTPUTS": passes}`` (their prefill too).
    answer_pass_shapes: Mapping[str, int] = field(default_factory=dict)
    stop: str | None = None
    error: str | None = None
    prompt_cache: str | None = None
    timings: tuple[Mapping[str, Any], ...] = field(default=())
    answer_steps: tuple[int, ...] = ()  # the steps after the last result (the answer's)
    result_scripts: int = 0  # the scripts the turn's tool results are written in (bits)

    def failed(self, error: str) -> TurnTrace:
        return replace(self, error=error, answer_s=None)


def _call_key(event: Event) -> str:
    """Which call an event is about: its tool and arguments, as the result repeats them."""
    return ToolCall(event["name"], dict(event.get("arguments") or {})).canonical()


def trace_turn(events: Sequence[tuple[float, Event]]) -> TurnTrace:
    """One turn's calls, answer and times from its ``(seconds, event)`` pairs, in order.

    The first tool start is the ``provisional_call`` with ``started: true`` of the step whose
    result came back with ``source: "provisional"``, else that step's ``final_call``. The answer
    is the text streamed after the turn's last ``tool_result`` (all of it when none came).
    """
    calls: list[ToolCall] = []
    sources: list[str] = []
    statuses: list[str] = []
    answer: list[str] = []
    timings: list[Mapping[str, Any]] = []
    # This step's started provisional runs and final calls, by call, first one each: the
    # first result is matched to its own call (a step may hold several).
    started_at: dict[str, float] = {}
    final_at: dict[str, float] = {}
    first_tool: float | None = None
    last_result: float | None = None
    after: list[Mapping[str, Any]] = []  # timings of the steps after the last result
    result_scripts = 0
    done_at: float | None = None
    stop = error = None
    for at, event in events:
        kind = event.type
        if kind == "step":
            started_at, final_at = {}, {}
        elif kind == "text":
            answer.append(event.get("text", ""))
        elif kind == "provisional_call" and event.get("started"):
            started_at.setdefault(_call_key(event), at)
        elif kind == "final_call":
            final_at.setdefault(_call_key(event), at)
        elif kind == "tool_result":
            source = event.get("source", "final")
            if first_tool is None:
                key = _call_key(event)
                early = started_at.get(key) if source == "provisional" else None
                first_tool = early if early is not None else final_at.get(key, at)
            calls.append(ToolCall(event["name"], dict(event.get("arguments") or {})))
            sources.append(source)
            statuses.append(event.get("status", "ok"))
            result_scripts |= scripts_in(str(event.get("text") or ""))
            answer.clear()
            last_result, after = at, []
        elif kind == "timings":
            timings.append(dict(event.data))
            after.append(timings[-1])
        elif kind == "error":
            error = event.get("error")
        elif kind == "done":
            done_at, stop = at, event.get("stop")
    cache = timings[0].get("prompt_cache") if timings else None
    if done_at is None and error is None:
        error = "the turn ended without a 'done' event"
    return TurnTrace(
        calls=tuple(calls),
        sources=tuple(sources),
        statuses=tuple(statuses),
        answer="".join(answer).strip(),
        first_tool_s=first_tool,
        answer_s=done_at,
        last_result_s=last_result,
        answer_tokens=sum(t.get("free_tokens") or 0 for t in after),
        answer_passes=sum(t.get("free_passes") or 0 for t in after),
        answer_pass_shapes=_added(t.get("pass_shapes") or {} for t in after),
        stop=stop,
        error=error,
        prompt_cache=cache,
        timings=tuple(timings),
        answer_steps=tuple(t.get("step") for t in after if t.get("step") is not None),
        result_scripts=result_scripts,
    )


def _added(counters: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for counter in counters:
        for key, n in counter.items():
            total[key] = total.get(key, 0) + n
    return total


def _judged_parts(
    expected: Sequence[Mapping[str, Mapping[str, list[Any]]]],
    calls: Sequence[ToolCall],
    functions: Sequence[Mapping[str, Any]],
) -> tuple[list[dict[str, Any]], list[ToolCall]]:
    """The functions and calls with every argument the expectation does not name taken out
    (and out of ``required``), so only the named arguments are judged."""
    named: dict[str, set[str]] = {}
    for call in expected:
        for tool, arguments in call.items():
            named.setdefault(tool, set()).update(arguments)
    judged_functions = []
    for function in functions:
        keep = named.get(function["name"])
        if keep is None:
            judged_functions.append(dict(function))
            continue
        parameters = dict(function.get("parameters") or {})
        parameters["required"] = [p for p in parameters.get("required") or [] if p in keep]
        judged_functions.append({**function, "parameters": parameters})
    properties = {
        f["name"]: set((f.get("parameters") or {}).get("properties") or {}) for f in functions
    }
    judged_calls = []
    for call in calls:
        keep = named.get(call.name)
        if keep is None:
            judged_calls.append(call)
            continue
        known = properties.get(call.name, set())
        arguments = {k: v for k, v in call.arguments.items() if k in keep or k not in known}
        judged_calls.append(ToolCall(call.name, arguments))
    return judged_functions, judged_calls


def judge_turn(
    turn: AgentTurn, trace: TurnTrace, functions: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """The turn's record: what ran, what was said, whether it succeeded and why not."""
    calls = trace.calls
    if turn.fails:  # built to fail first: the failed calls the model corrected are not judged
        calls = tuple(
            c for c, status in zip(trace.calls, trace.statuses, strict=True)
            if status not in RECOVERABLE
        )  # fmt: skip
    if not turn.calls:
        calls_ok = not calls
        why = "" if calls_ok else f"no tool should run; {calls[0].name} ran"
    else:
        judged_functions, judged_calls = _judged_parts(turn.calls, calls, functions)
        answers = AnswerSet(id="turn", ground_truth=tuple(turn.calls))
        verdict = check_calls(judged_functions, judged_calls, answers)
        calls_ok, why = verdict.valid, verdict.error
    lowered = trace.answer.lower()
    missing = [fact for fact in turn.facts if fact.lower() not in lowered]
    # Scripts the answer writes that neither the user's message nor the turn's results hold.
    foreign = scripts_in(trace.answer) & ~(scripts_in(turn.user) | trace.result_scripts)
    return {
        "user": turn.user,
        "calls": [{"name": c.name, "arguments": dict(c.arguments)} for c in trace.calls],
        "sources": list(trace.sources),
        "statuses": list(trace.statuses),
        "answer": trace.answer,
        "calls_ok": calls_ok,
        "calls_error": why or None,
        "missing_facts": missing,
        "foreign_scripts": [name for bit, name in enumerate(SCRIPTS) if foreign >> bit & 1],
        "success": calls_ok and not missing and trace.error is None,
        "first_tool_s": _round(trace.first_tool_s),
        "answer_s": _round(trace.answer_s),
        "after_result_s": _round(
            trace.answer_s - trace.last_result_s
            if trace.answer_s is not None and trace.last_result_s is not None
            else None
        ),
        "answer_tokens": trace.answer_tokens,
        "answer_passes": trace.answer_passes,
        "answer_pass_shapes": dict(sorted(trace.answer_pass_shapes.items(), key=_shape_order)),
        "tool_results": len(trace.sources),
        "provisional_results": trace.sources.count("provisional"),
        "stop": trace.stop,
        "error": trace.error,
        "prompt_cache": trace.prompt_cache,
        "timings": [dict(t) for t in trace.timings],
        "answer_steps": list(trace.answer_steps),
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _shape(key: str) -> tuple[int, int]:
    rows, outputs = key.split("x")
    return int(rows), int(outputs)


def _shape_order(item: tuple[str, int]) -> tuple[int, int]:
    return _shape(item[0])


def answer_projection(turn: Mapping[str, Any], table: CostTable) -> float | None:
    """What ``table``'s machine would take, in seconds, for the passes a judged turn took after
    its last tool result: a projection, never a measurement. ``None`` for a turn without a
    result, one that did not end (no ``after_result_s``), or one whose passes are not known (a
    remote model or a stock stack: the server's own).

    What it is: the sum, over every pass of the steps after the last result (their
    ``timings``' ``pass_shapes``), of ``table.cost(rows, outputs)``. That covers the prefill
    of the result (the tool message and the template around it, one pass of that many rows per
    ``n_batch`` chunk, priced by the table's fill rule: beyond its widest measured pass each
    row adds its prefill cost per token), the answer's decode passes at the widths they had
    (a drafted pass with its draft rows) and the passes of any call written and dropped in
    those steps. A table without output costs (the shipped phone tables) prices every row as
    asking for logits, as ``weavehost bench --cost-model`` re-costs a call's passes
    (``CostTable.recost``); one with them prices the rows that asked as such.

    The passes are the ones the plan made from the same table chose (the bench decodes by it:
    ``Host(decode_plan=…)``). What it is not: nothing but passes is in it (no Python between
    passes, no masks or sampling, no restore from the prompt cache, no event delivery).
    """
    if turn.get("after_result_s") is None:
        return None
    shapes = turn.get("answer_pass_shapes") or {}
    if not shapes:
        return None
    return sum(n * table.cost(*_shape(key)) for key, n in shapes.items() if n)


def project_turns(record: Mapping[str, Any], table: CostTable) -> dict[str, Any]:
    """``record`` with each turn's ``projected_after_result_s`` (:func:`answer_projection`)."""
    turns = [
        {**turn, "projected_after_result_s": _round(answer_projection(turn, table))}
        for turn in record.get("turns") or []
    ]
    return {**record, "turns": turns}


def summarize_agent(
    records: Sequence[Mapping[str, Any]], variants: Sequence[str]
) -> dict[str, Any]:
    """``{"variants": {label: numbers}, "by_tag": {tag: {label: {"n", "success"}}}}``, and
    ``"beside_peers"`` where a peer ran (:func:`~weavehost.bench.agent_beside.beside_peers`)."""
    by_variant: dict[str, list[Mapping[str, Any]]] = {label: [] for label in variants}
    for record in records:
        by_variant.setdefault(record["variant"], []).append(record)
    numbers: dict[str, dict[str, Any]] = {}
    by_tag: dict[str, dict[str, dict[str, int]]] = {}
    # Each drafts-off record by strategy, cache, guidance and task: what drafts must equal
    # (guidance changes the prompt, so only the same setting compares).
    undrafted = undrafted_records(records)
    for label, rows in by_variant.items():
        ran = list(rows)
        succeeded = sum(1 for r in ran if r.get("success"))
        turns = [t for r in ran for t in r.get("turns") or []]
        answer_passes = sum(t.get("answer_passes") or 0 for t in turns)
        differ, near_tie, unrecorded = difference_counts(ran, undrafted)
        numbers[label] = {
            "tasks": len(ran),
            "succeeded": succeeded,
            "success_rate": succeeded / len(ran) if ran else None,
            "geo_first_tool_s": geomean(r.get("first_tool_s") for r in ran),
            "geo_answer_s": geomean(r.get("answer_s") for r in ran),
            "tool_results": sum(r.get("tool_results") or 0 for r in ran),
            "provisional_results": sum(r.get("provisional_results") or 0 for r in ran),
            "cache_hits": sum(1 for t in turns if t.get("prompt_cache") == "hit"),
            "turns": len(turns),
            "errors": sum(1 for r in ran if r.get("error")),
            # Answers in a script the user did not write and no tool result holds.
            "foreign_script_answers": sum(1 for t in turns if t.get("foreign_scripts")),
            "geo_after_result_s": geomean(t.get("after_result_s") for t in turns),
            "answer_tokens_per_pass": (
                sum(t.get("answer_tokens") or 0 for t in turns) / answer_passes
                if answer_passes
                else None
            ),
            "answer_same_text": _same_text(ran, undrafted),
            # Of the turns that differ, how many part at a near-tie, and how many where no
            # choice was recorded (a call the strategy wrote, a result; bench.answer_gaps).
            "answer_differences": differ,
            "answer_differences_near_tie": near_tie,
            "answer_differences_unrecorded": unrecorded,
            "projected_after_result_s": geomean(t.get("projected_after_result_s") for t in turns),
            **summarize_foresight(
                turns, undrafted=all(r.get("answer_drafts") == "off" for r in ran)
            ),
        }
        for record in ran:
            for tag in record.get("tags") or []:
                cell = by_tag.setdefault(tag, {}).setdefault(label, {"n": 0, "success": 0})
                cell["n"] += 1
                cell["success"] += 1 if record.get("success") else 0
    _projection_ratios(numbers, by_variant)
    summary = {"variants": numbers, "by_tag": dict(sorted(by_tag.items()))}
    pairs = beside_peers(by_variant)
    if pairs:
        summary["beside_peers"] = pairs
    return summary


def _setting(rows: Sequence[Mapping[str, Any]]) -> tuple[Any, Any, Any] | None:
    """A variant's strategy, cache and guidance (what a drafts-off variant is matched by)."""
    if not rows:
        return None
    first = rows[0]
    return first.get("strategy"), first.get("prompt_cache"), first.get("guidance")


def _projection_ratios(
    numbers: dict[str, dict[str, Any]], by_variant: Mapping[str, Sequence[Mapping[str, Any]]]
) -> None:
    """Each variant's ``projected_after_result_vs_drafts_off``: its projected time after the
    result over the drafts-off variant's of the same strategy, cache and guidance (a ratio of
    the two geometric means); ``None`` without a projection on both sides."""
    undrafted = {
        _setting(rows): numbers[label]["projected_after_result_s"]
        for label, rows in by_variant.items()
        if rows and rows[0].get("answer_drafts") == "off"
    }
    for label, rows in by_variant.items():
        mine = numbers[label]["projected_after_result_s"]
        base = undrafted.get(_setting(rows))
        numbers[label]["projected_after_result_vs_drafts_off"] = ratio(mine, base)


def _answers(record: Mapping[str, Any]) -> list[str]:
    return [t.get("answer", "") for t in record.get("turns") or []]


def _same_text(
    records: Sequence[Mapping[str, Any]], undrafted: Mapping[Any, Mapping[str, Any]]
) -> float | None:
    """The share of ``records``' turns (drafts on) whose answer equals the same task's turn
    without drafts; ``None`` for a drafts-off variant or one with nothing to compare."""
    same = compared = 0
    for record in records:
        if record.get("answer_drafts") != "on":
            return None
        base = undrafted.get(setting_of(record))
        if base is None:
            continue
        for answer, other in zip(_answers(record), _answers(base), strict=False):
            compared += 1
            same += answer == other
    return same / compared if compared else None


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _grid(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        )
        for row in rows
    ]


def format_tables(summary: Mapping[str, Any]) -> str:
    """The summary as two fixed-width tables: per variant, then success per tag; the task set
    first, where the summary names it."""
    variants: Mapping[str, Mapping[str, Any]] = summary["variants"]
    rows: list[Sequence[str]] = [
        ("variant", "tasks", "success", "first tool s", "answer s", "provisional", "cache hits",
         "errors")
    ]  # fmt: skip
    for label, n in variants.items():
        rows.append(
            (
                label,
                str(n["tasks"]),
                f"{n['succeeded']}/{n['tasks']}",
                _s(n["geo_first_tool_s"]),
                _s(n["geo_answer_s"]),
                f"{n['provisional_results']}/{n['tool_results']}",
                f"{n['cache_hits']}/{n['turns']}",
                str(n["errors"]),
            )
        )
    lines = _grid(rows)
    if summary.get("set"):
        lines.insert(0, f"task set: {summary['set']}")
    lines.append("(times: geometric means over tasks, seconds; provisional: results served by")
    lines.append(" provisional calls / all tool results; cache hits: turns whose prompt came")
    lines.append(" from the prompt cache / all turns)")
    lines += _answer_table(variants, (summary.get("setup") or {}).get("cost_model"))
    lines += format_beside(summary.get("beside_peers") or ())
    tags: Mapping[str, Mapping[str, Mapping[str, int]]] = summary["by_tag"]
    if tags:
        labels = list(variants)
        tag_rows: list[Sequence[str]] = [("tag", *labels)]
        for tag, cells in tags.items():
            tag_rows.append(
                (
                    tag,
                    *(
                        f"{cells[label]['success']}/{cells[label]['n']}" if label in cells else "-"
                        for label in labels
                    ),
                )
            )
        lines += ["", *_grid(tag_rows)]
    return "\n".join(lines)


def _answer_table(
    variants: Mapping[str, Mapping[str, Any]], cost_model: Mapping[str, Any] | None
) -> list[str]:
    """The answer's figures per variant (time after the last result, tokens a pass, the same
    text as without drafts; with a cost model, the projected time after the result and its
    ratio to drafts off), where any variant has them."""
    if all(n.get("answer_tokens_per_pass") is None for n in variants.values()):
        return []
    header = ["variant", "after result s", "answer tokens/pass", "same text", "differ (near-tie)"]
    if cost_model:
        header += ["projected after result s", "vs drafts off"]
    foresight = any(n.get("foresight_tokens_per_pass") is not None for n in variants.values())
    if foresight:
        header += ["foreseen tokens/pass", "foreseen time", "copied tokens/pass", "copied time"]
        header += ["foreseen after result", "copied after result"]
    rows: list[Sequence[str]] = [header]
    for label, n in variants.items():
        per_pass, same = n.get("answer_tokens_per_pass"), n.get("answer_same_text")
        row = [
            label,
            _s(n.get("geo_after_result_s")),
            "-" if per_pass is None else f"{per_pass:.2f}",
            "-" if same is None else f"{same:.0%}",
            _differences(n),
        ]
        if cost_model:
            ratio = n.get("projected_after_result_vs_drafts_off")
            row += [
                _s(n.get("projected_after_result_s")),
                "-" if ratio is None else f"{ratio:.2f}x",
            ]
        if foresight:
            row += [
                _times(n.get(f"{prefix}_{field}"), suffix)
                for prefix in ("foresight", "copy_foresight")
                for field, suffix in (("tokens_per_pass", ""), ("pass_time_x", "x"))
            ]
            after = "projected_after_result_x" if cost_model else "after_result_x"
            row += [_times(n.get(f"{p}_{after}"), "x") for p in ("foresight", "copy_foresight")]
        rows.append(row)
    notes = [
        "(after result: from the last tool result to the answer's end, a geometric mean over",
        " turns; same text: the share of answers equal to the drafts-off variant's; differ: the",
        " answers that are not, and of those the near-ties: drafts off's top-two gap where they",
        f" part below {NEAR_TIE_LOGITS:g} logits)",
    ]
    if foresight:
        notes += [
            "(foreseen: bounds, not measurements: each answer drafted again after its turn by a",
            " drafter that knew which drafts would be kept, from the writer's drafts or copied",
            " from anywhere in the conversation; the fewest passes' tokens a pass, and the",
            " cheapest schedule's pass time over one row a token, priced by the plan's table;",
            " after result: drafts off's time after the result (projected, with a cost model)",
            " with its answer step so drafted, over drafts off's: near the least such drafts",
            " reach, no strict bound; docs/agent.md)",
        ]
    if cost_model:
        notes += [
            f"(projected: a projection, not a measurement: the passes after the last result "
            f"re-priced by {cost_model.get('file')}",
            f" ({cost_model.get('machine')}), decoded by the plan made from that table)",
        ]
    return ["", *_grid(rows), *notes]


def _times(value: float | None, suffix: str) -> str:
    return "-" if value is None else f"{value:.2f}{suffix}"


def _differences(numbers: Mapping[str, Any]) -> str:
    differ, near = numbers.get("answer_differences"), numbers.get("answer_differences_near_tie")
    unrecorded = numbers.get("answer_differences_unrecorded")
    if differ is None:
        return "-"
    return f"{differ} ({near}, {unrecorded} unrecorded)" if unrecorded else f"{differ} ({near})"


def setup_info(
    *,
    tasks_file: Path,
    model: str | None,
    host: Mapping[str, Any],
    variants: Sequence[str],
    limit: int | None,
) -> dict[str, Any]:
    """What the run was, for ``summary.json``: enough to tell two runs apart."""
    return {
        "tasks_file": str(tasks_file),
        "model": model or host.get("model"),
        "format": host.get("format"),
        "tool_choice": host.get("tool_choice"),
        "threads": host.get("threads"),
        "n_ctx": host.get("n_ctx"),
        "variants": list(variants),
        "limit": limit,
        **machine_info(),
    }
