"""``weavehost check SERVER…``: the command over :func:`weavehost.testing.check.run_check`.

Stage: CLI (registered by :mod:`weavehost.cli`). It parses, runs the check, prints the report (a
table, or one JSON object with ``--json``) and exits: 0 when the report passes, 1 on a failure
(or on a warning with ``--strict``), 2 for usage (no server, an unknown name, an ``--allow`` that
matches no tool: one ``Error: …`` line through :class:`~weavehost.cli_options.ErrorPath`), 130 for
Ctrl-C.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import replace

import anyio
import click

from weavehost.cli_options import config_option, json_option
from weavehost.config import HostConfig, ServerConfig, build_config
from weavehost.errors import ConfigError
from weavehost.mcp_cli import select_server
from weavehost.testing.check import (
    DEFAULT_BUDGET_S,
    DEFAULT_CALL_TIMEOUT_S,
    DEFAULT_EXAMPLES,
    CheckOptions,
    run_check,
)

__all__ = ["EXIT_CHECK_FAILED", "EXIT_INTERRUPTED", "check", "choose_servers"]

EXIT_CHECK_FAILED = 1
EXIT_INTERRUPTED = 130


def choose_servers(config: HostConfig, targets: Sequence[str]) -> HostConfig:
    """``config`` narrowed to the servers ``targets`` name, each read as ``weavehost call`` reads
    its one (:func:`~weavehost.mcp_cli.select_server`): a server's name from the config, or a .py
    path, a command line or a URL to start, named apart from every server before it. A server
    named twice is a :class:`ConfigError`. No targets: every server of the config."""
    if not targets:
        if not config.servers:
            raise ConfigError("no servers: pass SERVER (a .py file, a command line or a URL) "
                              "or --config FILE")  # fmt: skip
        return config
    chosen: list[ServerConfig] = []
    for target in targets:
        started = tuple(s for s in chosen if s.name not in config.names)
        one = select_server(replace(config, servers=(*config.servers, *started)), target).servers[0]
        if one.name in {s.name for s in chosen}:
            raise ConfigError(f"server {target!r} is named twice; check it once")
        chosen.append(one)
    return replace(config, servers=tuple(chosen))


@click.command()
@click.argument("targets", nargs=-1, metavar="SERVER...")
@config_option("A host config (JSON); SERVER may then be a server's name in it.")
@click.option(
    "--call-read-only",
    is_flag=True,
    help="Call the tools whose readOnlyHint is true with generated arguments.",
)
@click.option(
    "--allow",
    multiple=True,
    metavar="TOOL",
    help="Also call this tool (a name or a glob such as 'get_*'). Repeatable.",
)
@click.option(
    "--examples",
    type=click.IntRange(0, 100),
    default=DEFAULT_EXAMPLES,
    show_default=True,
    help="Valid and invalid argument sets per called tool (each).",
)
@click.option(
    "--budget",
    "budget_s",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_BUDGET_S,
    show_default=True,
    help="Seconds of calls; no new call starts after that.",
)
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=DEFAULT_CALL_TIMEOUT_S,
    show_default=True,
    help="Seconds one call may take; longer is a hang (a failure).",
)
@click.option(
    "--seed",
    type=int,
    default=0,
    show_default=True,
    help="Seed of the argument generator (the same seed, the same calls).",
)
@click.option("--strict", is_flag=True, help="Fail on warnings too.")
@json_option("Print the report as one JSON object.")
def check(targets: tuple[str, ...], config_path: str | None, call_read_only: bool,
          allow: tuple[str, ...], examples: int, budget_s: float, timeout_s: float, seed: int,
          strict: bool, as_json: bool) -> None:  # fmt: skip
    """Check MCP servers the way a host will meet them, for their authors.

    SERVER is a .py file, a command line, an http(s) URL, or a server's name from --config (no
    SERVER: every server of the config). Every tool's name, input and output schema (Draft
    2020-12, no remote $ref), annotations and read-only hint are checked. With --call-read-only
    or --allow, those tools are called with arguments generated from their schemas: valid ones
    must get a result, invalid ones an error; a crash or a hang fails. Exit 0 when it passes, 1
    on a failure (or a warning with --strict), 2 for usage.
    """
    config = choose_servers(build_config(config_path), targets)
    options = CheckOptions(call_read_only=call_read_only, allow=allow, examples=examples,
                           budget_s=budget_s, call_timeout_s=timeout_s, seed=seed,
                           strict=strict)  # fmt: skip
    try:
        report = anyio.run(run_check, config, options)
    except KeyboardInterrupt:
        click.echo("interrupted", err=True)
        sys.exit(EXIT_INTERRUPTED)
    if as_json:
        click.echo(json.dumps(report.to_json(), indent=2, ensure_ascii=False))
    else:
        for line in report.table():
            click.echo(line)
    if not report.ok:
        sys.exit(EXIT_CHECK_FAILED)
