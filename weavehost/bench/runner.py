"""The benchmark runner: every case under every requested strategy, one process, one engine.

Stage: benchmark. Guarantees:

- **Same conditions for all.** One :class:`Engine` (and, for each stock peer asked for,
  ``llama_cpp_python`` and ``llama_cpp_python_lookup``, one ``Llama`` of its own on the same
  file with the same threads, context and batch size) serves every case. Strategies are
  interleaved per case (case 1 under all strategies, then case 2…), and the order rotates by
  one each case, so machine noise and cache warmth hit all alike.
- **The results contract** (``docs/benchmarks.md``). ``DIR/results.jsonl`` gets one line per
  case and strategy, written and flushed as soon as it is known, with ``id``, ``strategy``,
  ``calls``, ``provisional``, ``forward_passes``, ``decoded_tokens``, ``prefilled_tokens``,
  ``tool_latency_s``, ``final_latency_s``, ``prompt_prefill_s`` and ``correct`` (null without an
  answer), plus ``error``, ``check_error``, ``phases``, ``padded_tokens``, ``prompt_tokens`` and
  ``text``, and what to compare strategies by: ``pass_rows`` (passes by row count),
  ``drafted_tokens``, ``accepted_tokens``, ``peak_rss_bytes``, ``kv_cells``,
  ``same_as_constrained`` and ``mismatch`` (:mod:`weavehost.bench.compare`),
  ``projected_latency_s``, ``projected_final_latency_s`` and ``projected_reply_s`` (with a
  cost model), and ``account`` (below). ``DIR/run.json`` records the setup (with the
  case and answer files as absolute paths, ``limit`` and the model's ``kv_bytes_per_cell``, so
  a run folder can be summarised again: :func:`weavehost.bench.breakdown.load_run`),
  ``DIR/summary.json`` and ``DIR/summary.svg`` the summary (:mod:`weavehost.bench.report`,
  with the breakdowns by case shape of :mod:`weavehost.bench.breakdown`).
- **KV cells, not bytes of RSS.** ``kv_cells`` is the most KV-cache cells in use at once during
  the strategy's run on the case (its prompt's cells included): the engine's own count
  (:attr:`Engine.kv_cells_peak`, on a cache emptied before the call), or for a stock peer its
  ``Llama``'s tokens after the call (one sequence).
- **Whole cases.** Every strategy of a case runs before the case's lines are compared with
  ``constrained``'s and written, so the order of strategies does not matter to the comparison;
  the logit gap of a mismatch is measured after the case's timed calls, outside every timing.
- **A cost model** (``--cost-model``) re-costs every call's passes with another machine's cost
  table (a projection, never a measurement) and gives ``weave`` the decode plan made from that
  table, in an instance of its own for this run. Each latency is projected from the passes it
  covers: ``projected_latency_s`` from those that ended by the tool start (what
  ``tool_latency_s`` measures), ``projected_final_latency_s`` by the last final call, and
  ``projected_reply_s`` from every pass of the reply (the closer spelled again and the
  decision that no call follows, which no latency covers, included).
- **Where the reply's time went.** ``account`` (:mod:`weavehost.bench.account`) splits the
  time of the whole reply the line scores (:func:`~weavehost.decode.several.write_calls`),
  from its start (where ``final_latency_s`` counts from; ``tool_latency_s`` counts from the
  first call's start, microseconds later) to its end: the span whose passes
  ``forward_passes`` and ``projected_reply_s`` count, so at least ``final_latency_s`` (the
  closer spelled again, the decision that no call follows and the close come after). Its
  parts add up to ``total_s``: ``passes_s`` (inside ``llama_decode``), ``mask_s``
  (constraint masks), ``selector_s`` (``weave``'s tool selector, its own Python) and
  ``other_s`` (the rest: Python between passes). ``passes_s`` is split into ``rows_s`` and
  ``logits_rows_s`` by this machine's calibration table (the engine's stored one, not the
  ``--cost-model`` table; null without one). The prompt's prefill is outside it. Null for a
  stock peer (it keeps no account) and a failed line.
- **Expected failures are data.** A call that does not parse is a line with ``calls: []`` and an
  ``error``; a :class:`WeavehostError` raised while running one case (a prompt longer than the
  context, a schema a strategy cannot constrain) is a line with ``error`` and null latencies, and
  the run goes on. Bad inputs (case file, answers, strategy names) fail before the model loads.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from weavehost.bench.account import account_record
from weavehost.bench.answers import check_calls
from weavehost.bench.cases import AnswerSet, BenchCase, load_answers, load_cases
from weavehost.bench.compare import compare_case
from weavehost.bench.costs import resolve_cost_model
from weavehost.bench.machine import busy_warning, machine_info
from weavehost.bench.peer import LOOKUP_PEER_NAME, PEER_NAME, PEER_NAMES, LlamaCppPythonPeer
from weavehost.bench.report import summarize, write_summary
from weavehost.bench.rss import PeakRss, kv_bytes_per_cell, max_rss_bytes
from weavehost.config import DEFAULT_KV_CACHE
from weavehost.decode import (
    STRATEGIES,
    CallResult,
    CaseOutcome,
    DecodeState,
    DecodeStrategy,
    get_strategy,
    run_case,
)
from weavehost.decode.calibration import calibrated_flash_attn, open_calibrated
from weavehost.decode.guided import JumpForwardStrategy
from weavehost.decode.padding import DecodePlan
from weavehost.decode.weave import WeaveStrategy
from weavehost.engine import DEFAULT_N_CTX, Engine, EngineStats, default_threads
from weavehost.engine.calibrate import CostTable, load_cost_table, table_record
from weavehost.errors import AbortedError, BenchError, WeavehostError
from weavehost.formats import detect_format
from weavehost.formats.base import ToolCall
from weavehost.gguf import read_metadata
from weavehost.models import resolve_model

__all__ = [
    "DEFAULT_STRATEGIES",
    "PROJECTED_KEYS",
    "RESULT_FIELDS",
    "BenchConfig",
    "BenchRun",
    "bench_command",
    "known_strategies",
    "parse_strategies",
    "run_bench",
    "write_line",
]

DEFAULT_STRATEGIES = (
    "serial",
    "constrained",
    "jump_forward",
    "weave",
    PEER_NAME,
    LOOKUP_PEER_NAME,
)
# The fields the benchmark contract (docs/benchmarks.md) requires on every results.jsonl line.
RESULT_FIELDS = (
    "id",
    "strategy",
    "calls",
    "provisional",
    "forward_passes",
    "decoded_tokens",
    "prefilled_tokens",
    "tool_latency_s",
    "final_latency_s",
    "prompt_prefill_s",
    "correct",
)
DEFAULT_MAX_TOKENS = 256
# A line's latencies re-costed with a cost model (null without one): to the tool start, to the
# last final call, and the whole reply (_projected).
PROJECTED_KEYS = ("projected_latency_s", "projected_final_latency_s", "projected_reply_s")


@dataclass(frozen=True, slots=True)
class BenchConfig:
    """What ``weavehost bench`` was asked to do."""

    cases: Path
    out: Path
    answers: Path | None = None
    model: str | None = None
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    limit: int | None = None
    threads: int | None = None
    format: str | None = None
    n_ctx: int = DEFAULT_N_CTX
    max_tokens: int = DEFAULT_MAX_TOKENS
    cost_model: Path | None = None
    kv_cache: str = DEFAULT_KV_CACHE  # the engine's and the stock peers' KV cache type


@dataclass(frozen=True, slots=True)
class BenchRun:
    """Where a finished run wrote its files, and its summary by strategy."""

    results: Path
    summary_json: Path
    summary_svg: Path
    run_json: Path
    summary: dict[str, dict[str, Any]] = field(default_factory=dict)


def bench_command(bench: BenchConfig) -> str:
    """The ``weavehost bench`` command line that runs ``bench`` (recorded in run.json)."""
    argv = ["weavehost", "bench", str(bench.cases)]
    if bench.answers is not None:
        argv += ["--answers", str(bench.answers)]
    if bench.model is not None:
        argv += ["--model", str(bench.model)]
    argv += ["--strategies", ",".join(bench.strategies)]
    if bench.threads is not None:
        argv += ["--threads", str(bench.threads)]
    if bench.limit is not None:
        argv += ["--limit", str(bench.limit)]
    if bench.format is not None:
        argv += ["--format", bench.format]
    if bench.n_ctx != DEFAULT_N_CTX:
        argv += ["--ctx", str(bench.n_ctx)]
    if bench.max_tokens != DEFAULT_MAX_TOKENS:
        argv += ["--max-tokens", str(bench.max_tokens)]
    if bench.cost_model is not None:
        argv += ["--cost-model", str(bench.cost_model)]
    if bench.kv_cache != DEFAULT_KV_CACHE:
        argv += ["--kv-cache", bench.kv_cache]
    return shlex.join([*argv, "--out", str(bench.out)])


def known_strategies() -> list[str]:
    """The strategies that exist now: the decoders in ``STRATEGIES`` and the stock peers."""
    return [*STRATEGIES, *PEER_NAMES]


def parse_strategies(
    text: str | Sequence[str], *, known: Sequence[str] | None = None
) -> tuple[str, ...]:
    """``"a,b,c"`` as names, each one of ``known`` (default: :func:`known_strategies`) and each
    once; a clear :class:`BenchError` otherwise."""
    known = list(known) if known is not None else known_strategies()
    names = [n.strip() for n in text.split(",")] if isinstance(text, str) else list(text)
    names = [n.strip() for n in names if n.strip()]
    if not names:
        raise BenchError("no strategy given; known strategies: " + ", ".join(known))
    unknown = [n for n in names if n not in known]
    if unknown:
        raise BenchError(
            f"unknown strateg{'y' if len(unknown) == 1 else 'ies'} "
            f"{', '.join(repr(n) for n in unknown)}; known strategies: {', '.join(known)}"
        )
    return tuple(dict.fromkeys(names))


def _call_json(call: ToolCall) -> dict[str, Any]:
    return {"name": call.name, "arguments": dict(call.arguments)}


def _record(
    case: BenchCase,
    strategy: str,
    outcome: CaseOutcome,
    answer: AnswerSet | None,
    *,
    table: CostTable | None = None,
    calibration: CostTable | None = None,
) -> dict[str, Any]:
    """The result line; ``table`` the ``--cost-model`` table latencies are projected with,
    ``calibration`` this machine's, which splits the account's passes."""
    result = outcome.result
    pass_rows = _pass_rows(result.stats)
    correct: bool | None = None
    check_error: str | None = None
    if answer is not None:
        verdict = check_calls(case.functions, result.calls, answer)
        correct, check_error = verdict.valid, (verdict.error or None)
    return {
        "id": case.id,
        "strategy": strategy,
        "calls": [_call_json(c) for c in result.calls],
        "provisional": _call_json(result.provisional) if result.provisional else None,
        "forward_passes": result.stats.passes,
        "decoded_tokens": result.stats.decoded_tokens,
        "prefilled_tokens": result.stats.prefilled_tokens,
        "tool_latency_s": result.tool_latency_s,
        "final_latency_s": result.final_latency_s,
        "prompt_prefill_s": outcome.prompt_prefill_s,
        "correct": correct,
        "error": result.error,
        "check_error": check_error,
        "padded_tokens": result.stats.padded_tokens,
        "prompt_tokens": outcome.prompt_tokens,
        "phases": dict(result.phases),
        "text": result.text,
        "pass_rows": {str(rows): n for rows, n in sorted(pass_rows.items())},
        "drafted_tokens": result.stats.drafted_tokens,
        "accepted_tokens": result.stats.accepted_tokens,
        **_projected(result, pass_rows, table),
        "peak_rss_bytes": None,
        "kv_cells": None,
        "same_as_constrained": None,
        "mismatch": None,
        "account": account_record(result, calibration, held=outcome.prompt_tokens),
    }


def _projected(
    result: CallResult, pass_rows: Mapping[int, int], table: CostTable | None
) -> dict[str, float | None]:
    """Each latency re-costed with ``table`` from the passes it covers (null without one); a
    writer that does not say which passes its latencies cover (a stock peer) is costed with
    all of them."""
    if table is None:
        return dict.fromkeys(PROJECTED_KEYS)
    tool = result.tool_pass_rows if result.tool_pass_rows is not None else pass_rows
    final = result.final_pass_rows if result.final_pass_rows is not None else pass_rows
    return {
        "projected_latency_s": table.recost(tool),
        "projected_final_latency_s": table.recost(final),
        "projected_reply_s": table.recost(pass_rows),
    }


def _pass_rows(stats: EngineStats) -> dict[int, int]:
    """The call's passes by row count. A stock peer that counts only its decode passes by width
    (``width_counts``: it runs no prefill pass inside the call) is read by those."""
    return dict(stats.pass_rows or stats.width_counts)


def _failure_record(
    case: BenchCase, strategy: str, error: WeavehostError, answer: AnswerSet | None
) -> dict[str, Any]:
    return {
        "id": case.id,
        "strategy": strategy,
        "calls": [],
        "provisional": None,
        "forward_passes": None,
        "decoded_tokens": None,
        "prefilled_tokens": None,
        "tool_latency_s": None,
        "final_latency_s": None,
        "prompt_prefill_s": None,
        "correct": False if answer is not None else None,
        "error": f"{type(error).__name__}: {error}",
        "check_error": None,
        "padded_tokens": None,
        "prompt_tokens": None,
        "phases": {},
        "text": "",
        "pass_rows": None,
        "drafted_tokens": None,
        "accepted_tokens": None,
        **dict.fromkeys(PROJECTED_KEYS),
        "peak_rss_bytes": None,
        "kv_cells": None,
        "same_as_constrained": None,
        "mismatch": None,
        "account": None,
    }


def _match_answers(
    cases: Sequence[BenchCase], answers_path: Path | None
) -> dict[str, AnswerSet] | None:
    if answers_path is None:
        return None
    answers = load_answers(answers_path)
    if not any(case.id in answers for case in cases):
        raise BenchError(
            f"the answer file {answers_path} has no answer for any of the cases "
            f"(first case id: {cases[0].id!r}); is it the possible_answer file of this case file?"
        )
    return answers


def _progress_line(
    index: int, total: int, case: BenchCase, records: Sequence[Mapping[str, Any]], started: float
) -> str:
    parts = []
    for record in records:
        latency = record["tool_latency_s"]
        mark = {True: " ok", False: " wrong", None: ""}[record["correct"]]
        if record["error"] and not record["calls"]:
            mark = " error"
        shown = f"{latency * 1000:.0f}ms" if latency is not None else "-"
        parts.append(f"{record['strategy']} {shown}{mark}")
    elapsed = time.perf_counter() - started
    return f"[{index}/{total}] {case.id}: {' | '.join(parts)}  ({elapsed:.1f}s elapsed)"


class _KvPeak:
    """``with _KvPeak(engine, peer) as kv: <one strategy on one case>`` then ``kv.cells``: the
    most KV cells in use at once meanwhile. On the engine: its cache emptied first (every
    strategy's ``run_case`` starts from an empty cache anyway), then its high-water mark. For a
    stock peer: its ``Llama``'s tokens after the call, one sequence that only grows during a
    call (the lookup peer's drafts rejected in its last pass are not counted: at most its
    draft length too few)."""

    def __init__(self, engine: Engine, peer: LlamaCppPythonPeer | None) -> None:
        self._engine, self._peer = engine, peer
        self.cells: int | None = None

    def __enter__(self) -> _KvPeak:
        if self._peer is None:
            self._engine.clear()
            self._engine.reset_kv_peak()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cells = self._peer.kv_cells if self._peer is not None else self._engine.kv_cells_peak


@contextlib.contextmanager
def _maybe_peer(
    wanted: Sequence[str], engine: Engine, *, n_ctx: int
) -> Iterator[dict[str, LlamaCppPythonPeer]]:
    """The stock peers named in ``wanted``, by name: each its own ``Llama``, loaded only when
    asked for (the lookup peer keeps logits for every row, the plain one does not), opened as
    the calibrated ``engine`` they are compared with (:meth:`LlamaCppPythonPeer.beside`)."""
    with contextlib.ExitStack() as stack:
        peers = {
            name: stack.enter_context(
                LlamaCppPythonPeer.beside(engine, n_ctx=n_ctx, lookup=name == LOOKUP_PEER_NAME)
            )
            for name in PEER_NAMES
            if name in wanted
        }
        yield peers


def run_bench(config: BenchConfig, *, progress: Callable[[str], None] | None = None) -> BenchRun:
    """Run the benchmark ``config`` describes and write its files under ``config.out``."""
    say = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    strategies = parse_strategies(config.strategies)
    cases = load_cases(config.cases, limit=config.limit)
    answers = _match_answers(cases, config.answers)
    cost_path = resolve_cost_model(config.cost_model) if config.cost_model is not None else None
    table = load_cost_table(cost_path) if cost_path is not None else None
    choice = resolve_model(config.model)
    model_metadata = read_metadata(choice.path, full_arrays=("tokenizer.ggml.tokens",))
    detection = detect_format(model_metadata, config.format)
    fmt = detection.format
    threads = config.threads or default_threads()
    flash_attn = calibrated_flash_attn(choice.path, threads, config.kv_cache)
    try:
        config.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BenchError(f"cannot create the output folder {config.out}: {exc.strerror}") from exc
    results_path = config.out / "results.jsonl"
    run_path = config.out / "run.json"
    run_info = {
        "cases": str(config.cases.resolve()),
        "answers": str(config.answers.resolve()) if config.answers else None,
        "limit": config.limit,
        "n_cases": len(cases),
        "command": bench_command(config),
        "strategies": list(strategies),
        "model": str(choice.path),
        "model_reason": choice.reason,
        "model_name": model_metadata.name,
        "format": fmt.name,
        "format_reason": detection.reason,
        "threads": threads,
        "flash_attn": flash_attn,
        "kv_cache": config.kv_cache,
        "n_ctx": config.n_ctx,
        "max_tokens": config.max_tokens,
        "kv_bytes_per_cell": kv_bytes_per_cell(model_metadata, config.kv_cache),
        "cost_model": _cost_model_info(cost_path, table),
        **machine_info(),
    }
    run_path.write_text(json.dumps(run_info, indent=2) + "\n", encoding="utf-8")
    say(
        f"bench: {len(cases)} cases x {len(strategies)} strategies on {choice.path.name} "
        f"(format {fmt.name}, {threads} threads, n_ctx {config.n_ctx}, flash attention "
        f"{'on' if flash_attn else 'off'}, {config.kv_cache} KV cache)"
    )
    say(f"bench: CPU flags {' '.join(run_info['cpu_flags']) or 'unknown'}")
    warning = busy_warning(run_info["load_average_at_start"], threads)
    if warning:
        say(f"bench: {warning}")
    if table is not None:
        say(f"bench: projecting latencies with the cost table of {table.machine or table.source}")
    records: list[dict[str, Any]] = []
    started = time.perf_counter()
    with (
        open_calibrated(
            choice.path, n_ctx=config.n_ctx, n_threads=threads, kv_cache=config.kv_cache
        ) as opened,
        _maybe_peer(strategies, opened.engine, n_ctx=config.n_ctx) as peers,
        results_path.open("w", encoding="utf-8") as results,
    ):
        engine = opened.engine
        # This machine's calibration table (None without one): what splits each account's
        # passes, priced at the case's prompt length.
        calibration = opened.state.table(engine)
        # One decoder per strategy for the whole run, on the model's one decode state: what
        # each learns over the cases (acceptance rates, the model's splits) carries on.
        decoders = _decoders(strategies, opened.state, table)
        for index, case in enumerate(cases):
            answer = answers.get(case.id) if answers is not None else None
            shift = index % len(strategies)
            order = strategies[shift:] + strategies[:shift]
            case_records: dict[str, dict[str, Any]] = {}
            case_tokens: dict[str, list[int]] = {}
            for strategy in order:
                outcome: CaseOutcome | WeavehostError
                with PeakRss() as rss, _KvPeak(engine, peers.get(strategy)) as kv:
                    try:
                        if strategy in decoders:
                            outcome = run_case(
                                engine,
                                fmt,
                                decoders[strategy],
                                case.messages,
                                case.tools,
                                chat_template=model_metadata.chat_template,
                                max_tokens=config.max_tokens,
                            )
                        else:
                            outcome = peers[strategy].run_case(
                                fmt,
                                case.messages,
                                case.tools,
                                chat_template=model_metadata.chat_template,
                                max_tokens=config.max_tokens,
                            )
                    except AbortedError:
                        raise
                    except WeavehostError as exc:
                        outcome = exc
                if isinstance(outcome, WeavehostError):
                    record = _failure_record(case, strategy, outcome, answer)
                else:
                    record = _record(
                        case, strategy, outcome, answer, table=table, calibration=calibration
                    )
                    case_tokens[strategy] = list(outcome.result.tokens)
                record["peak_rss_bytes"] = rss.peak
                record["kv_cells"] = kv.cells
                case_records[strategy] = record
            # After the timed calls: compare with constrained, then write the case's lines.
            compare_case(engine, fmt, case, case_records, case_tokens, model_metadata.chat_template)
            for strategy in order:
                write_line(results, case_records[strategy])
            in_order = [case_records[s] for s in strategies]
            records.extend(in_order)
            say(_progress_line(index + 1, len(cases), case, in_order, started))
    missing = sum(1 for c in cases if answers is not None and c.id not in answers)
    if missing:
        say(f"bench: {missing} of {len(cases)} cases have no answer; their 'correct' is null")
    run_info["max_rss_bytes"] = max_rss_bytes()
    run_info["finished"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    run_path.write_text(json.dumps(run_info, indent=2) + "\n", encoding="utf-8")
    summary = summarize(
        records,
        strategies,
        projected_on=(table.machine or table.source) if table else None,
        cases=cases,
        answers=answers,
        kv_bytes_per_cell=run_info["kv_bytes_per_cell"],
    )
    summary_json, summary_svg = write_summary(
        summary,
        config.out,
        title=run_title(run_info),
        notes=[f"CPU flags: {' '.join(run_info['cpu_flags']) or 'unknown'}"],
    )
    return BenchRun(results_path, summary_json, summary_svg, run_path, summary)


def _decoders(
    strategies: Sequence[str], state: DecodeState, table: CostTable | None
) -> dict[str, DecodeStrategy]:
    """The decoders this run uses, by name (the stock peers aside), each made once for the
    model's decode ``state``; with a cost table, ``weave``, each of its ablations and
    ``jump_forward`` with the decode plan made from that table (what shapes their passes)."""
    decoders = {name: get_strategy(name, state) for name in strategies if name in STRATEGIES}
    if table is None:
        return decoders
    plan = DecodePlan.from_table(table, source=f"bench --cost-model {table.source}")
    return {
        name: strategy.with_plan(plan)
        if isinstance(strategy, WeaveStrategy | JumpForwardStrategy)
        else strategy
        for name, strategy in decoders.items()
    }


def _cost_model_info(path: Path | None, table: CostTable | None) -> dict[str, Any] | None:
    if path is None or table is None:
        return None
    return {"file": str(path), "table": table_record(table)}


def run_title(run_info: Mapping[str, Any]) -> str:
    """One line naming what a run measured (used as the plot's title)."""
    return (
        f"{run_info['model_name']} ({run_info['format']}), {run_info['n_cases']} cases, "
        f"{run_info['threads']} threads"
    )


def write_line(stream: TextIO, record: Mapping[str, Any]) -> None:
    """One JSON line, flushed: a result is on disk as soon as it is known."""
    stream.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
    stream.flush()
