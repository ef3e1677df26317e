"""``weavehost bench-agent``: the click command over :func:`weavehost.bench.agent.run_agent_bench`.

Stage: CLI (thin). It parses options, runs the tasks, prints the summary tables on stdout and
the progress on stderr. Bad input is a :class:`BenchError` or :class:`ConfigError` (exit 2) that
the CLI group turns into one ``Error:`` line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from weavehost.agent import DEFAULT_MAX_STEPS
from weavehost.bench.agent import (
    ANSWER_DRAFT_MODES,
    DEFAULT_AGENT_STRATEGIES,
    GUIDANCE_MODES,
    PROMPT_CACHE_MODES,
    AgentBenchConfig,
    run_agent_bench,
)
from weavehost.bench.agent_peer import LLAMA_SERVER_ENV, LLAMA_SERVER_INSTALL
from weavehost.bench.agent_tasks import TASK_SETS
from weavehost.bench.cli import run_options
from weavehost.bench.costs import shipped_cost_models
from weavehost.cli_options import config_option, kv_cache_option
from weavehost.config import DEFAULT_KV_CACHE, load_config, resolve_remote

__all__ = ["bench_agent"]


def _ab_option(flag: str, modes: tuple[str, ...], default: str, text: str) -> Any:
    """A setting run on, off, or both in one run (an A/B): ``--flag on|off|both``."""
    return click.option(
        flag,
        flag.lstrip("-").replace("-", "_"),
        type=click.Choice(modes),
        default=default,
        show_default=True,
        help=text,
    )


@click.command("bench-agent")
@click.argument("tasks", type=click.Path(dir_okay=False, path_type=Path), required=False)
@click.option(
    "--set",
    "task_set",
    type=click.Choice(list(TASK_SETS)),
    default=None,
    help="A shipped task set instead of a TASKS file: examples (the 51 over the example servers "
    "in tools/, the default) or third-party (over mcp-server-time, mcp-server-git and "
    "server-filesystem). Each is reported apart.",
)
@run_options(
    unit="tasks", strategies=DEFAULT_AGENT_STRATEGIES, threads_default="the host's own choice"
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("bench-agent-results"),
    show_default=True,
    help="Folder for results.jsonl and summary.json.",
)
@_ab_option(
    "--prompt-cache",
    PROMPT_CACHE_MODES,
    "both",
    "Run with the prompt-prefix cache on, off, or both (where the host has one).",
)
@_ab_option(
    "--answer-drafts",
    ANSWER_DRAFT_MODES,
    "on",
    "Greedy answers drafted from the conversation and verified many tokens a pass (the "
    "same text), off, or both, in one run (a local model only).",
)
@_ab_option(
    "--guidance",
    GUIDANCE_MODES,
    "off",
    "The host's guidance in the prompt on, off, or both: an A/B in one run (a local model only).",
)
@config_option(
    'A host config whose remote "model" settings (stream, headers, timeouts) apply to an '
    "http(s) --model."
)
@click.option(
    "--max-steps",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_STEPS,
    show_default=True,
    help="Most model steps one turn may take.",
)
@click.option(
    "--peer",
    "peers",
    multiple=True,
    metavar="NAME",
    help="Also run every task through a stock stack over the same GGUF, with the same threads and "
    "context: a local OpenAI-compatible server the bench starts and stops, driven by "
    "weavehost's remote model (variant peer=NAME). llama_cpp_server: llama-cpp-python's "
    "llama_cpp.server, chatml-function-calling (the server extra). llama_server: llama.cpp's "
    f"llama-server --jinja, a bench-only install ({LLAMA_SERVER_INSTALL}, it compiles llama.cpp; "
    f"or {LLAMA_SERVER_ENV}=PATH). Repeat it, or give a comma list.",
)
@click.option(
    "--cost-model",
    default=None,
    metavar="FILE|NAME",
    help="Cost table of another machine (pass_ms by rows, as `weavehost calibrate` writes), or a "
    f"shipped one by name ({', '.join(shipped_cost_models())}): re-price each answer's passes "
    "(those after the last tool result) with it, reported as a projection beside the measured "
    "times; the local model decodes by the plan made from that table (its calls and how many "
    "drafted tokens an answer's pass carries), as `weavehost bench --cost-model` does, so this "
    "run's own times are not this machine's best (a local model only).",
)
@kv_cache_option(
    "The local model's KV cache type (default: q8_0-k, q8_0 keys over f16 values: drafted "
    "passes compute what one-row passes do, bit for bit, where flash attention is on; "
    "docs/engine.md). --peer servers run the same K and V types."
)
@click.option(
    "--fixtures-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Make the tasks' fixture folders (the shared files, the git repository) here, new or "
    "empty, instead of in a new temporary folder: two runs then show the model the same "
    "paths, so two versions of the code compare task by task.",
)
def bench_agent(
    tasks: Path | None,
    task_set: str | None,
    model: str | None,
    strategies: str,
    limit: int | None,
    threads: int | None,
    out: Path,
    prompt_cache: str,
    answer_drafts: str,
    guidance: str,
    n_ctx: int,
    max_steps: int,
    config_path: str | None,
    peers: tuple[str, ...],
    cost_model: str | None,
    kv_cache: str | None,
    fixtures_dir: Path | None,
) -> None:
    """Run agent TASKS (default: --set examples, the 51 shipped tasks) end to end through the
    host and report success, time to first tool start and time to the answer, per strategy
    (and per stock stack, with --peer)."""
    if tasks is not None and task_set is not None:
        raise click.UsageError("give a TASKS file or --set, not both")
    remote = resolve_remote(model, load_config(config_path).remote if config_path else None)
    config = AgentBenchConfig(
        tasks=tasks or TASK_SETS[task_set or "examples"],
        out=out,
        model=None if remote else model,
        remote=remote,
        strategies=tuple(strategies.split(",")),  # checked once, by run_agent_bench
        limit=limit,
        threads=threads,
        prompt_cache=prompt_cache,
        answer_drafts=answer_drafts,
        guidance=guidance,
        n_ctx=n_ctx,
        max_steps=max_steps,
        peers=peers,  # checked once, by run_agent_bench
        cost_model=cost_model,  # resolved once, by run_agent_bench
        kv_cache=kv_cache or DEFAULT_KV_CACHE,
        fixtures_dir=fixtures_dir,
    )
    run = run_agent_bench(config, progress=lambda line: click.echo(line, err=True))
    click.echo(run.table)
    click.echo(f"results: {run.results}")
    click.echo(f"summary: {run.summary_json}")
