"""``weavehost bench``: the click command over :func:`weavehost.bench.runner.run_bench`.

Stage: CLI (thin). It parses options, runs the benchmark, prints the summary table on stdout
and the progress on stderr. Failures are raised as :class:`WeavehostError` subclasses
(:class:`BenchError` for unusable inputs) for the CLI group to map to exit codes.
"""

from __future__ import annotations

from pathlib import Path

import click

from weavehost.bench.report import format_table
from weavehost.bench.runner import (
    DEFAULT_MAX_TOKENS,
    DEFAULT_STRATEGIES,
    BenchConfig,
    parse_strategies,
    run_bench,
)
from weavehost.engine import DEFAULT_N_CTX

__all__ = ["bench"]


@click.command("bench")
@click.argument("cases", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--answers",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="BFCL possible_answer file for CASES; without it 'correct' is null.",
)
@click.option(
    "--model",
    default=None,
    metavar="PATH",
    help="GGUF model (default: WEAVEHOST_MODEL, then the embedded SmolLM2).",
)
@click.option(
    "--strategies",
    default=",".join(DEFAULT_STRATEGIES),
    show_default=True,
    help="Comma-separated strategies to run on every case.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), default=None, help="Run only the first N cases."
)
@click.option(
    "--threads",
    type=click.IntRange(min=1),
    default=None,
    help="llama.cpp threads (default: the CPUs this process may use).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for results.jsonl, summary.json, summary.svg and run.json.",
)
@click.option(
    "--format",
    "format_name",
    default=None,
    help="Model format, overriding detection (qwen, llama3, smollm2, functiongemma).",
)
@click.option(
    "--ctx",
    type=click.IntRange(min=256),
    default=DEFAULT_N_CTX,
    show_default=True,
    help="Context size (tokens) of the engine and of the stock peer.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_TOKENS,
    show_default=True,
    help="Most tokens one call may take.",
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
    ctx: int,
    max_tokens: int,
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
        n_ctx=ctx,
        max_tokens=max_tokens,
    )
    run = run_bench(config, progress=lambda line: click.echo(line, err=True))
    click.echo(format_table(run.summary))
    click.echo(f"results: {run.results}")
    click.echo(f"summary: {run.summary_json}")
    click.echo(f"plot:    {run.summary_svg}")
