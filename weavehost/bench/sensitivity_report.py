"""``sensitivity.md``: the report of a sensitivity sweep (:mod:`weavehost.bench.sensitivity`).

Stage: benchmark report. It renders the sweep's record (what ``sensitivity.json`` holds) as
Markdown: the command and the machine, an overview row per configuration, then a table per
configuration. Guarantee: every number of a projection configuration is under a heading and a
note that say ``projection on <machine>, not a measurement``; a failed configuration is an
error line, one not run yet says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["render_markdown"]


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _x(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}×"


def _pct(rate: float | None) -> str:
    return "-" if rate is None else f"{rate * 100:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], *, text: int = 1) -> list[str]:
    """A Markdown table: the first ``text`` columns left-aligned, the numbers right-aligned."""
    align = ["---"] * text + ["---:"] * (len(header) - text)
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join(align) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _overview(record: Mapping[str, Any]) -> list[str]:
    """One row per configuration: each strategy's (projected) ms and its speedup vs
    constrained."""
    strategies = record["strategies"]
    rows = []
    for entry in record["configurations"]:
        cells = [entry["name"], entry["label"], entry["quant"], str(entry["threads"])]
        if entry["status"] != "done":
            cells += [entry["status"]] * len(strategies)
        else:
            projected = entry["projection"]
            for name in strategies:
                if projected is not None:
                    numbers = projected["strategies"].get(name) or {}
                    ms, ratio = numbers.get("geo_latency_s"), numbers.get("speedup_vs_constrained")
                else:
                    numbers = entry["strategies"].get(name) or {}
                    ms = numbers.get("geo_tool_latency_s")
                    ratio = numbers.get("speedup_vs_constrained")
                cells.append(f"{_ms(ms)} ({_x(ratio)})")
        rows.append(cells)
    header = ["configuration", "what", "quant", "threads", *(f"{s} ms (× c)" for s in strategies)]
    return _table(header, rows, text=3)


def _section(entry: Mapping[str, Any]) -> list[str]:
    lines = [f"## {entry['name']}: {entry['label']}", ""]
    model = entry["model_name"] or Path(entry["model"]).name
    lines.append(
        f"Model `{entry['model']}` ({model}, {entry['quant']}), {entry['threads']} "
        f"thread{'s' if entry['threads'] != 1 else ''}; weave's plan: {entry['weave_plan']}."
    )
    flags = entry["cpu_flags"]
    if flags is not None:
        lines.append(f"CPU flags: {' '.join(flags) or 'unknown'}.")
    if entry["elapsed_s"] is not None:
        lines.append(f"Took {entry['elapsed_s']:.0f} s.")
    lines += ["", "```", entry["command"], "```", ""]
    if entry["status"] == "error":
        return [*lines, f"**Error:** {entry['error']}", ""]
    if entry["status"] != "done":
        return [*lines, "Not run yet.", ""]
    measured = entry["strategies"]
    projection = entry["projection"]
    rows = []
    if projection is None:
        header = ["strategy", "n", "tool ms", "final ms", "× constrained", "× jump_forward"]
        header += ["passes", "correct", "same"]
        for name, n in measured.items():
            rows.append(
                [name, str(n["n"]), _ms(n["geo_tool_latency_s"]), _ms(n["geo_final_latency_s"])]
                + [_x(n["speedup_vs_constrained"]), _x(n["speedup_vs_jump_forward"])]
                + [_num(n["mean_forward_passes"]), _pct(n["correct_rate"])]
                + [_pct(n["same_as_constrained_rate"])]
            )
        note = "(ms: geometric means over cases; × a baseline: its geo tool latency / this one's)"
    else:
        header = ["strategy", "n", "projected ms", "× constrained", "× jump_forward"]
        header += ["passes", "correct", "same", "measured tool ms here"]
        for name, n in measured.items():
            p = projection["strategies"].get(name) or {}
            rows.append(
                [name, str(n["n"]), _ms(p.get("geo_latency_s"))]
                + [_x(p.get("speedup_vs_constrained")), _x(p.get("speedup_vs_jump_forward"))]
                + [_num(n["mean_forward_passes"]), _pct(n["correct_rate"])]
                + [_pct(n["same_as_constrained_rate"]), _ms(n["geo_tool_latency_s"])]
            )
        note = (
            f"(projected ms: a PROJECTION on {projection['machine']}, not a measurement: each "
            "call's passes, run here, re-costed with that machine's cost table, host time left "
            "out; weave ran with the plan made from the table. Passes, correctness and the "
            "measured ms are this machine's.)"
        )
    return [*lines, *_table(header, rows), "", note, ""]


def render_markdown(record: Mapping[str, Any]) -> str:
    """``sensitivity.md``: the command, the machine, an overview row per configuration, then a
    table per configuration (a projection's labelled as such), failed ones as error lines."""
    machine = record["machine"]
    limit = f", first {record['limit']} cases" if record["limit"] else ""
    lines = [
        "# Sensitivity: threads, quantization, and projections",
        "",
        f"Cases `{record['cases']}`{limit}; answers `{record['answers']}`; strategies "
        f"{', '.join(record['strategies'])}.",
        "",
        "```",
        record["command"],
        "```",
        "",
        f"Machine: {machine.get('processor') or machine.get('machine')}, {machine.get('cpus')} "
        f"CPUs, CPU flags: {' '.join(record['cpu_flags']) or 'unknown'}; weavehost "
        f"{machine.get('weavehost')}, llama-cpp-python {machine.get('llama_cpp_python')}; "
        f"started {machine.get('started')}, finished {record['finished'] or '(running)'}.",
        "",
        "Per configuration, each strategy's geometric-mean tool latency and, in brackets, its "
        "speedup vs constrained (× c). In `proj-` rows the ms are a projection on another "
        "machine's cost table, not a measurement.",
        "",
        *_overview(record),
        "",
    ]
    for entry in record["configurations"]:
        lines += _section(entry)
    return "\n".join(lines)
