"""``weavehost bench``: the click command over :func:`weavehost.bench.runner.run_bench`.

Stage: CLI (thin). It parses options, runs the benchmark, prints the summary table on stdout
and the progress on stderr. Failures are raised as :class:`WeavehostError` subclasses
(:class:`BenchError` for unusable inputs) for the CLI group to map to exit codes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from weavehost.bench.costs import shipped_cost_models
from weavehost.bench.report import format_account, format_table
from weavehost.bench.runner import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_STRATEGIES,
    BenchConfig,
    parse_strategies,
    run_bench,
)
from weavehost.cli_options import (
    ctx_option,
    format_option,
    kv_cache_option,
    model_option,
    options,
    threads_option,
)
from weavehost.config import DEFAULT_KV_CACHE
from weavehost.engine import DEFAULT_N_CTX

__all__ = ["bench", "run_options"]


def run_options(*, unit: str, strategies: tuple[str, ...], threads_default: str) -> Any:
    """The options every benchmark command shares: which model, which strategies, how many of
    its ``unit`` (cases, tasks), how many threads, and the context size."""
    return options(
        model_option(
            "GGUF model (default: WEAVEHOST_MODEL, then an installed Qwen2.5-Coder-0.5B, then the "
            "embedded SmolLM2).",
            metavar="PATH",
        ),
        click.option(
            "--strategies",
            default=",".join(strategies),
            show_default=True,
            help=f"Comma-separated strategies to run every {unit[:-1]} under.",
        ),
        click.option(
            "--limit",
            type=click.IntRange(min=1),
            default=None,
            help=f"Run only the first N {unit}.",
        ),
        threads_option(f"llama.cpp threads (default: {threads_default})."),
        ctx_option(DEFAULT_N_CTX),
    )


@click.command("bench")
@click.argument("cases", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--answers",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="BFCL possible_answer file for CASES; without it 'correct' is null.",
)
@run_options(
    unit="cases", strategies=DEFAULT_STRATEGIES, threads_default="the CPUs this process may use"
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for results.jsonl, summary.json, summary.svg and run.json.",
)
@format_option("Model format, overriding detection (qwen, llama3, smollm2, functiongemma).")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_TOKENS,
    show_default=True,
    help="Most tokens one call may take.",
)
@click.option(
    "--cost-model",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE|NAME",
    help="Cost table of another machine (pass_ms by rows, as `weavehost calibrate` writes), or "
    f"a shipped one by name ({', '.join(shipped_cost_models())}): re-cost every call's passes "
    "with it (a projection, reported apart) and give weave the decode plan made from it.",
)
@kv_cache_option(
    "The KV cache type of weavehost's engine and the stock peers (default: f16); q8_0 makes "
    "every strategy's passes compute what one-row passes do, bit for bit (docs/engine.md)."
)
def bench(
    cases: Path,
    answers: Path | None,
    model: str | None,
    strategies: str,
    limit: int | None,
    threads: int | None,
    out: Path,
    format_name: str | None,
    n_ctx: int,
    max_tokens: int,
    cost_model: Path | None,
    kv_cache: str | None,
) -> None:
    """Run BFCL-format CASES under each strategy and summarise latency and correctness."""
    config = BenchConfig(
        cases=cases,
        out=out,
        answers=answers,
        model=model,
        strategies=parse_strategies(strategies),
        limit=limit,
        threads=threads,
        format=format_name,
        n_ctx=n_ctx,
        max_tokens=max_tokens,
        cost_model=cost_model,
        kv_cache=kv_cache or DEFAULT_KV_CACHE,
    )
    run = run_bench(config, progress=lambda line: click.echo(line, err=True))
    click.echo(format_table(run.summary))
    account = format_account(run.summary)
    if account:
        click.echo(account)
    click.echo(f"results: {run.results}")
    click.echo(f"summary: {run.summary_json}")
    click.echo(f"plot:    {run.summary_svg}")
