"""What every ``weavehost`` command shares: the one error path, and the options written once.

Stage: CLI (the bottom of it). :mod:`weavehost.cli`, the ``*_cli`` modules and the commands of
:mod:`weavehost.bench` that run by themselves (``python -m weavehost.bench.assets``) all import
from here, and this module imports nothing of weavehost but its errors and the config's names,
so a command that fetches files does not load the host, the MCP SDK or llama.cpp.

Invariants:

* A :class:`~weavehost.errors.WeavehostError` raised by a command of the group, or by a command
  run by itself, takes one path (:class:`ErrorPath`): one ``Error: <message>`` line on stderr
  and the error's exit code (the table is in :mod:`weavehost.errors`); never a traceback.
* An option two commands share is defined here once, with its name, destination, type and
  metavar; a command may word its help for what the option means there (``--trust`` runs a
  tool provisionally in ``chat``, without approval in ``call``).
* Defaults are the library's names, passed in where the name lives in a module this one must
  not import (the engine's ``DEFAULT_N_CTX``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

from weavehost.config import APPROVAL_MODES, KV_CACHES, SWITCHES
from weavehost.errors import WeavehostError

__all__ = [
    "CONFIG_HELP",
    "MODEL_HELP",
    "SERVER_HELP",
    "CommandFailed",
    "ErrorPath",
    "WeavehostCommand",
    "WeavehostGroup",
    "approval_option",
    "config_option",
    "ctx_option",
    "format_option",
    "guidance_option",
    "KV_CACHE_HELP",
    "json_option",
    "kv_cache_option",
    "model_option",
    "options",
    "root_option",
    "script_guard_option",
    "server_option",
    "threads_option",
    "trust_option",
]

F = TypeVar("F", bound=Callable[..., Any])
Decorator = Callable[[F], F]

CONFIG_HELP = "A host config (JSON)."
MODEL_HELP = (
    "Path to a local GGUF file, a model of `weavehost models --list` by name, or an "
    "OpenAI-compatible server: http(s)://HOST:PORT/v1."
)
SERVER_HELP = (
    "An MCP server: a .py file (run with this Python), a command line, or an http(s) URL. "
    "Repeatable."
)


class CommandFailed(click.ClickException):
    """A :class:`WeavehostError` as click reports it: ``Error: <message>`` and its exit code."""

    def __init__(self, error: WeavehostError) -> None:
        super().__init__(str(error))
        self.exit_code = error.exit_code


class ErrorPath:
    """The one place a command's :class:`WeavehostError` becomes :class:`CommandFailed`.

    Mixed into the group (which runs every subcommand inside its own ``invoke``) and into a
    command that runs by itself; click's standalone mode then prints the line and exits.
    """

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except WeavehostError as exc:
            raise CommandFailed(exc) from exc


class WeavehostGroup(ErrorPath, click.Group):
    """``weavehost``: every subcommand's errors take the :class:`ErrorPath`."""


class WeavehostCommand(ErrorPath, click.Command):
    """A command run outside the group (``python -m weavehost.bench.assets``), same errors."""

    def run(self, argv: Sequence[str] | None = None) -> int:
        """Run as a module's ``main``: the exit code, never ``SystemExit`` (click's standalone
        mode always ends in one)."""
        try:
            self.main(args=list(argv) if argv is not None else None, prog_name=self.name)
        except SystemExit as exit_:
            if exit_.code is None:  # sys.exit() with no argument: success
                return 0
            return exit_.code if isinstance(exit_.code, int) else 1
        return 0


def options(*decorators: Decorator[Any]) -> Decorator[Any]:
    """Several options as one decorator, listed in the order ``--help`` shows them."""

    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


def server_option(text: str = SERVER_HELP) -> Decorator[Any]:
    """``--server`` (repeatable) into ``servers``: what :func:`~weavehost.config.build_config`
    takes as server flags."""
    return click.option(
        "--server", "servers", multiple=True, metavar="PATH_OR_COMMAND_OR_URL", help=text
    )


def config_option(text: str = CONFIG_HELP) -> Decorator[Any]:
    """``--config FILE`` into ``config_path``."""
    return click.option("--config", "config_path", type=str, default=None, help=text)


def trust_option(text: str) -> Decorator[Any]:
    """``--trust SERVER`` (repeatable) into ``trust``."""
    return click.option("--trust", multiple=True, metavar="SERVER", help=text)


def approval_option(text: str) -> Decorator[Any]:
    """``--approval`` (one of the config's approval modes; ``None``: as configured)."""
    return click.option("--approval", type=click.Choice(APPROVAL_MODES), default=None, help=text)


def model_option(text: str = MODEL_HELP, *, metavar: str | None = None) -> Decorator[Any]:
    """``--model`` into ``model`` (``None``: the config's, else the default model)."""
    return click.option("--model", "model", type=str, default=None, metavar=metavar, help=text)


def format_option(text: str = "Override the model format.") -> Decorator[Any]:
    """``--format NAME`` into ``format_name`` (``None``: detected from the model)."""
    return click.option("--format", "format_name", type=str, default=None, help=text)


def threads_option(text: str) -> Decorator[Any]:
    """``--threads N`` (at least 1) into ``threads`` (``None``: the library's choice)."""
    return click.option("--threads", type=click.IntRange(min=1), default=None, help=text)


def ctx_option(default: int, *, maximum: int | None = None) -> Decorator[Any]:
    """``--ctx N`` (at least 256 tokens) into ``n_ctx``."""
    return click.option(
        "--ctx",
        "n_ctx",
        type=click.IntRange(256, maximum),
        default=default,
        show_default=True,
        help="Context size in tokens.",
    )


def json_option(text: str) -> Decorator[Any]:
    """``--json`` into ``as_json``."""
    return click.option("--json", "as_json", is_flag=True, help=text)


def root_option(func: F) -> F:
    """``--root DIR`` (repeatable) into ``roots``, for ``chat``, ``run``, ``call`` and
    ``tools``."""
    return click.option(
        "--root",
        "roots",
        multiple=True,
        metavar="DIR",
        type=click.Path(exists=True, file_okay=False, resolve_path=True),
        help="Offer the servers this directory (MCP roots; a server may then work only there). "
        "Repeatable; replaces the config's roots (default: none, so each server keeps the "
        "directories it was started with).",
    )(func)


def _switch_option(flag: str, dest: str, text: str) -> Decorator[Any]:
    """``FLAG on|off`` into ``dest`` as a bool (``None``: as configured)."""
    return click.option(
        flag,
        dest,
        type=click.Choice(SWITCHES),
        default=None,
        callback=lambda _ctx, _param, value: None if value is None else value == "on",
        help=text,
    )


guidance_option = _switch_option(
    "--guidance",
    "guidance",
    "The host's guidance in the system prompt: answer from the tool results, in the user's "
    "language, call only when needed, arguments as the schema describes (default: off, or the "
    'config\'s "guidance").',
)
"""``--guidance on|off`` into ``guidance``."""

script_guard_option = _switch_option(
    "--script-guard",
    "script_guard",
    "Keep the answer to the scripts of the user's messages and the tool results (no switch to "
    'Chinese after an English question; default: on, or the config\'s "scriptGuard").',
)
"""``--script-guard on|off`` into ``script_guard``."""


def kv_cache_option(text: str) -> Decorator[Any]:
    """``--kv-cache q8_0-k|f16|q8_0`` into ``kv_cache`` (``None``: as configured, or the
    default, :data:`~weavehost.config.DEFAULT_KV_CACHE`)."""
    return click.option("--kv-cache", "kv_cache", type=click.Choice(KV_CACHES), default=None,
                        help=text)  # fmt: skip


KV_CACHE_HELP = (
    "The KV cache's type: q8_0-k (q8_0 keys, f16 values: a drafted answer bit for bit the "
    "undrafted one where flash attention is on, docs/engine.md), f16 (llama.cpp's default) or "
    'q8_0 (half the memory; default: q8_0-k, or the config\'s "kvCache").'
)
