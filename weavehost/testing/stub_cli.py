"""``weavehost stub SPEC``: serve a stub MCP server spec over stdio, or streamable HTTP.

Stage: CLI (thin, over :mod:`weavehost.testing.stub`). The spec is validated before anything
is served: a bad one is a :class:`~weavehost.errors.StubSpecError` that the CLI group turns
into one ``Error: <json path>: <fault>`` line and exit code 2. Over stdio the command is the
server (a host spawns ``weavehost stub SPEC``); with ``--http`` it prints its URL on stdout and
serves until interrupted.
"""

from __future__ import annotations

import click

__all__ = ["stub"]


@click.command("stub")
@click.argument("spec", type=click.Path(dir_okay=False))
@click.option("--http", "http", is_flag=True, help="Serve streamable HTTP on 127.0.0.1.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=0, show_default=True,
    help="The HTTP port (0: a free one, printed).",
)  # fmt: skip
@click.option("--record", type=click.Path(dir_okay=False), default=None,
              help="Append every message the stub receives to FILE (JSON lines).")  # fmt: skip
@click.option("--port-file", type=click.Path(dir_okay=False), default=None,
              help="With --http: write the URL to FILE once listening.")  # fmt: skip
def stub(spec: str, http: bool, port: int, record: str | None, port_file: str | None) -> None:
    """Serve the stub MCP server described by SPEC (.json, or .yaml with PyYAML)."""
    from weavehost.testing.stub import run

    run(spec, record=record, http=http, port=port, port_file=port_file)
