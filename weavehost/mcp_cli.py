"""The ``weavehost`` commands that talk to MCP servers without a conversation: ``call``,
``resources`` and ``prompts``.

Stage: CLI (the top), beside :mod:`weavehost.cli`, which registers these commands. Like every
command they parse, call the library, and leave errors to
:class:`~weavehost.cli_options.ErrorPath`: a
:class:`~weavehost.errors.WeavehostError` is one ``Error: …`` line and its exit code.

``weavehost call SERVER TOOL '{json}'`` is what a server author reaches for first: one tool,
called directly, through exactly the path a model's call takes (the catalog's argument
validation, the approval policy and prompt, the executor's result checks, cap and neutralising),
with the client features a conversation has: progress (a bar on a terminal, ``progress`` lines
with ``--json``), elicitation (the terminal asks; declined with no terminal), sampling (the local
model, loaded only if a server asks for it) and roots (``--root``; none by default, so a server
keeps the directories it was started with). Exit codes: 0 for a result, 1 for a tool error
(``isError``) and for a call that was refused or did not validate, 2 for usage (an unknown
server, arguments that are not a JSON object), 130 for Ctrl-C (the call is cancelled on the
server first).
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import anyio
import click

from weavehost.agent import Event
from weavehost.cli_options import (
    approval_option,
    config_option,
    json_option,
    model_option,
    options,
    root_option,
    server_option,
    threads_option,
    trust_option,
)
from weavehost.config import HostConfig, build_config, server_from_flag
from weavehost.console import EventPrinter, TerminalApprover, TerminalElicitor, run_agent
from weavehost.errors import AbortedError, ConfigError, ExecutionError, UnknownToolError
from weavehost.host import Host
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import raise_for_status
from weavehost.mcp.features import Roots

__all__ = [
    "CallRequest",
    "call",
    "parse_arguments",
    "prompts",
    "qualified_name",
    "resources",
    "roots_offered",
    "run_call",
    "select_server",
    "with_roots",
]


def with_roots(config: HostConfig, roots: Sequence[str]) -> HostConfig:
    """``--root`` flags replace the config's roots; none keeps them (or offers none)."""
    return replace(config, roots=tuple(roots)) if roots else config


def roots_offered(config: HostConfig) -> list[str]:
    """A line per server naming the roots it is offered (``-v`` prints them): the config's
    roots, as the host resolves them, or ``none``."""
    offered = ", ".join(str(path) for path in Roots(config.roots).paths) or "none"
    return [f"server {s.name!r}: roots offered: {offered}" for s in config.servers]


# ``--server``, ``--config`` and ``--json``, as ``weavehost tools`` has them.
server_options = options(server_option(), config_option(), json_option("Print JSON."))


def _servers_config(config_path: str | None, servers: Sequence[str]) -> HostConfig:
    config = build_config(config_path, servers)
    if not config.servers:
        raise ConfigError("no servers: pass --server PATH_OR_COMMAND_OR_URL or --config FILE")
    return config


# --------------------------------------------------------------------------- resources, prompts


@click.command()
@server_options
def resources(servers: tuple[str, ...], config_path: str | None, as_json: bool) -> None:
    """List the resources and resource templates of the given MCP servers.

    In chat, ``@SERVER:URI`` in a message attaches a resource's text.
    """
    from weavehost.chat_commands import format_resources, list_resources, resources_json

    config = _servers_config(config_path, servers)
    _show(config, list_resources, "resources", resources_json, format_resources, as_json)


@click.command()
@server_options
def prompts(servers: tuple[str, ...], config_path: str | None, as_json: bool) -> None:
    """List the prompts of the given MCP servers and their arguments (* required).

    In chat, ``/prompt NAME key=value …`` sends a prompt as your message.
    """
    from weavehost.chat_commands import format_prompts, list_prompts, prompts_json

    config = _servers_config(config_path, servers)
    _show(config, list_prompts, "prompts", prompts_json, format_prompts, as_json)


def _show(
    config: Any,
    lister: Callable[[Any], Awaitable[list[Any]]],
    key: str,
    to_json: Callable[[list[Any]], Any],
    to_lines: Callable[[list[Any]], Iterable[str]],
    as_json: bool,
) -> None:
    """What ``lister`` finds on the configured servers: ``{key: [...]}`` with ``--json``, else
    one line each."""
    from weavehost.mcp.servers import ServerPool

    async def load() -> list[Any]:
        async with ServerPool(config) as pool:
            return await lister(pool)

    found = anyio.run(load)
    if as_json:
        click.echo(json.dumps({key: to_json(found)}, indent=2, ensure_ascii=False))
        return
    for line in to_lines(found):
        click.echo(line)


# --------------------------------------------------------------------------- call


def parse_arguments(text: str) -> dict[str, Any]:
    """The ARGUMENTS of ``call``: a JSON object (``{}`` when omitted)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"ARGUMENTS is not JSON ({exc.msg} at character {exc.pos}): "
                          f"{text[:80]!r}; pass an object such as '{{\"city\": \"Paris\"}}'"
                          ) from None  # fmt: skip
    if not isinstance(value, dict):
        raise ConfigError(
            f"ARGUMENTS must be a JSON object, got {type(value).__name__}: {text[:80]!r}"
        )
    return value


def select_server(config: HostConfig, server: str) -> HostConfig:
    """``config`` narrowed to the one server ``call`` talks to.

    ``server`` is a server's name (from ``--server`` or the config); failing that, anything
    ``--server`` accepts that is clearly not a bare name (a path, a command line, a URL) is
    started as if it had been passed with ``--server``.
    """
    if server in config.names:
        return replace(config, servers=(config.server(server),))
    looks_like_flag = any(c in server for c in "/ \t") or server.endswith(".py")
    if looks_like_flag:
        return replace(config, servers=(server_from_flag(server, taken=config.names),))
    known = ", ".join(config.names) or "none (pass a path, a command line or a URL, or --config)"
    # A bare word is never run: it may name any program (`shutdown`). Where it names one on
    # PATH, its path starts it.
    program = shutil.which(server)
    hint = f"; {server!r} is a program on PATH: pass {program} to start it" if program else ""
    raise ConfigError(f"no server named {server!r}; servers: {known}{hint}")


def result_payload(result: Event) -> dict[str, Any]:
    """The ``--json`` result, from ``Host.call``'s ``tool_result`` event: the server's content
    blocks and structured content as it sent them, the text a model would read, and whether it
    is an error (``isError``, or a refusal, or structured content the tool's output schema
    rejects)."""
    return {
        "type": "result",
        "server": result["server"],
        "tool": result["name"],
        "status": result["status"],
        "isError": result["status"] != "ok",
        "content": result["content"],
        "structuredContent": result["structuredContent"],
        "text": result["text"],
    }


def qualified_name(catalog: Catalog, server: str, tool: str) -> str:
    """The catalog's name for ``tool`` of ``server`` (as the server or the model names it)."""
    for spec in catalog.by_server(server):
        if tool in (spec.name, spec.qualified_name):
            return spec.qualified_name
    omitted = [o for o in catalog.omitted if o.server == server and o.name == tool]
    if omitted:
        raise UnknownToolError(f"tool {tool!r} of server {server!r} was left out: "
                               f"{omitted[0].reason}")  # fmt: skip
    known = ", ".join(spec.name for spec in catalog.by_server(server)) or "none"
    raise UnknownToolError(f"server {server!r} has no tool {tool!r}; its tools: {known}")


@dataclass(frozen=True, slots=True)
class CallRequest:
    """One ``weavehost call``, parsed: the config narrowed to its server, and the call."""

    config: HostConfig
    server: str
    tool: str
    arguments: dict[str, Any]
    model: str | None = None
    threads: int | None = None


async def run_call(request: CallRequest, printer: EventPrinter) -> Event | None:
    """Start the one server (no model: a lazy one loads only if the server asks for sampling),
    find the tool, and run the call with :meth:`~weavehost.host.Host.call`, its ``progress``
    events printed; returns its ``tool_result`` event, or ``None`` if Ctrl-C interrupted it (the
    console's interrupt path aborts the host: the call is cancelled, the server told, the server
    stopped). The terminal answers approval and elicitation; with none, both refuse."""
    interactive = sys.stdin.isatty() and sys.stderr.isatty()
    approver = TerminalApprover(interactive=interactive)
    elicitor = TerminalElicitor(interactive=interactive)
    outcome: list[Event] = []

    def make_host(on_loading: Callable[[str], None]) -> Host:
        # No loading line: the model loads only for a server's sampling request, mid-call.
        return Host(request.config, approver=approver, elicitor=elicitor, model=request.model,
                    threads=request.threads, load_model="lazy")  # fmt: skip

    async def body(host: Host, printer: EventPrinter) -> None:
        assert host.catalog is not None
        name = qualified_name(host.catalog, request.server, request.tool)
        async for event in host.call(name, request.arguments):
            if event.type == "tool_result":
                outcome.append(event)
            elif event.type == "progress":  # a server's log lines go to logging (-v) only
                printer(event)

    await run_agent(make_host, body, printer, announce=False)
    return outcome[0] if outcome else None


@click.command()
@click.argument("server")
@click.argument("tool")
@click.argument("arguments", required=False, default="{}")
@server_option()
@config_option()
@trust_option("Trust this server: its read-only tools run without approval.")
@approval_option("The call, and a server's sampling request: ask (default), always, never.")
@root_option
@click.option(
    "--timeout",
    "timeout_s",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Seconds the call may take (default: the config's timeouts.call).",
)
@model_option("Path to a local GGUF file (loaded only if the server asks for sampling).")
@threads_option("Threads for the model, if it loads.")
@json_option(
    "Print the result as one JSON line (content, structuredContent, isError), after a line per "
    "progress notification."
)
@click.pass_context
def call(ctx: click.Context, server: str, tool: str, arguments: str, servers: tuple[str, ...],
         config_path: str | None, trust: tuple[str, ...], approval: str | None,
         roots: tuple[str, ...], timeout_s: float | None, model: str | None,
         threads: int | None, as_json: bool) -> None:  # fmt: skip
    """Call TOOL of SERVER with ARGUMENTS (a JSON object), without a model.

    SERVER is a server's name from --server or --config (or a path, command line or URL to start
    for this call). The call is validated and approved as a model's call is; the server may send
    progress, ask for input (on the terminal; declined without one) and ask the local model to
    write a message (sampling: the model loads then). Exit 0 with the result, 1 for a tool error
    or a refused or invalid call, 2 for usage, 130 for Ctrl-C.
    """

    args = parse_arguments(arguments)
    config = with_roots(build_config(config_path, servers, approval=approval), roots)  # type: ignore[arg-type]
    config = select_server(config, server)
    name = config.servers[0].name
    unknown = [t for t in trust if t != name]
    if unknown:
        raise ConfigError(f"--trust {unknown[0]!r}: call talks only to server {name!r}")
    config = replace(config, trusted_servers=config.trusted_servers | frozenset(trust))
    if timeout_s is not None:
        config = replace(config, timeouts=replace(config.timeouts, call=timeout_s))
    request = CallRequest(config, name, tool, args, model=model, threads=threads)
    printer = EventPrinter(as_json=as_json, verbose=(ctx.obj or {}).get("verbose", 0))
    if printer.verbose:
        click.echo("\n".join(roots_offered(config)), err=True)
    try:
        result = anyio.run(run_call, request, printer)
    except KeyboardInterrupt:  # Ctrl-C before run_agent's handler was installed, as chat and run
        result = None
    finally:
        if not as_json:
            printer(Event("done", {}))  # ends a progress bar's line
    if result is None:
        click.echo("interrupted", err=True)
        sys.exit(AbortedError.exit_code)
    if as_json:
        click.echo(json.dumps(result_payload(result), ensure_ascii=False))
    # refused, unknown, invalid, timed out, server error: an Error: line
    raise_for_status(result["status"], result["text"])
    if result["status"] != "ok":
        raise ExecutionError(f"{result['name']} returned an error: {result['text']}")
    if not as_json:
        click.echo(result["text"])
