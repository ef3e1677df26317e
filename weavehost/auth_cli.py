"""``weavehost auth SERVER``: authorize weavehost for an HTTP server that uses OAuth.

Stage: CLI (thin, over :mod:`weavehost.mcp.oauth`). ``weavehost auth --config FILE SERVER`` runs
the authorization-code flow once: it listens on 127.0.0.1 for the redirect, prints the
authorization URL on stderr, opens it in a browser only with ``--browser`` or, by default, when a
display is there, waits for the answer (``--wait`` seconds) and stores the tokens (0600, in the
cache directory). ``chat``, ``run`` and the other commands then use the stored tokens and never
open a browser themselves. ``weavehost auth --logout SERVER`` deletes them. Errors are
:class:`~weavehost.errors.WeavehostError`\\ s the CLI group turns into one ``Error:`` line.
"""

from __future__ import annotations

import os
import sys

import click

from weavehost.cli_options import config_option
from weavehost.mcp.oauth import AUTH_CALLBACK_TIMEOUT

__all__ = ["auth"]


@click.command("auth")
@click.argument("server")
@config_option()
@click.option("--logout", is_flag=True, help="Delete the stored tokens of SERVER instead.")
@click.option(
    "--browser/--no-browser",
    default=None,
    help="Open the authorization URL in a web browser (default: when a display is available).",
)
@click.option(
    "--wait",
    type=click.FloatRange(min=1),
    default=AUTH_CALLBACK_TIMEOUT,
    show_default=True,
    help="Seconds to wait for the browser's answer.",
)
def auth(
    server: str, config_path: str | None, logout: bool, browser: bool | None, wait: float
) -> None:
    """Authorize weavehost for the OAuth-protected HTTP server SERVER (or --logout)."""
    import anyio

    from weavehost.config import build_config
    from weavehost.errors import ConfigError
    from weavehost.mcp.oauth import authorize
    from weavehost.mcp.oauth import logout as forget

    if logout:  # by name alone: the server may already be gone from the config
        removed = forget(server)
        if removed is None:
            click.echo(f"no stored authorization for server {server!r}")
        else:
            click.echo(f"removed the stored authorization of server {server!r} ({removed})")
        return
    if config_path is None:
        raise ConfigError(f"auth {server}: pass --config FILE, the config that defines it")
    config = build_config(config_path)
    target = config.server(server)
    if browser is None:
        browser = _display_available()
    open_url = None
    if browser:
        import webbrowser

        open_url = webbrowser.open

    def show(url: str) -> None:
        click.echo(
            f"Open this URL to authorize weavehost for server {server!r}:\n\n  {url}\n", err=True
        )
        click.echo(f"Waiting up to {wait:g} s for the answer …", err=True)

    async def run() -> object:
        return await authorize(target, config.limits, show_url=show, open_url=open_url,
                               answer_within=wait)  # fmt: skip

    path = anyio.run(run)
    click.echo(f"authorized server {server!r}; tokens stored in {path}")


def _display_available() -> bool:
    """A browser can be shown: macOS and Windows always, elsewhere with X11 or Wayland."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
