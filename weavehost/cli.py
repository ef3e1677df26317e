"""The ``weavehost`` command line: thin click commands over the library.

Each command parses its options, calls the library (``anyio.run`` for async work) and turns a
:class:`~weavehost.errors.WeavehostError` into a one-line message on stderr and the error's exit
code. No traceback reaches the user for bad input.
"""

from __future__ import annotations

import functools
import json
import logging
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import click

from weavehost import __version__
from weavehost.errors import WeavehostError

F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """Turn a WeavehostError into ``Error: <message>`` and its exit code."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except WeavehostError as exc:
            click.echo(f"Error: {exc}", err=True)
            sys.exit(exc.exit_code)

    return wrapper  # type: ignore[return-value]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="weavehost")
@click.option("-v", "--verbose", count=True, help="Log more (-v info, -vv debug, incl. llama.cpp).")
def main(verbose: int) -> None:
    """weavehost: an MCP host for on-device agents, with SchemaWeaver tool-call decoding."""
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


@main.command()
@click.option("--model", "model", type=str, default=None, help="Path to a local GGUF file.")
@click.option("--format", "format_name", type=str, default=None, help="Override the model format.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@handle_errors
def models(model: str | None, format_name: str | None, as_json: bool) -> None:
    """Show which model would be used, why, and the tool-call format detected for it."""
    from weavehost.formats import describe_model_choice

    info = describe_model_choice(model, format_name)
    if as_json:
        click.echo(json.dumps(info, indent=2))
        return
    click.echo(f"model:        {info['path']}")
    click.echo(f"why:          {info['reason']}")
    click.echo(f"size:         {info['size_mb']:.1f} MB")
    click.echo(f"architecture: {info['architecture']}")
    click.echo(f"name:         {info['name']}")
    click.echo(f"format:       {info['format']} ({info['format_reason']})")
    click.echo(f"context:      {info['context_length']} tokens (trained)")
