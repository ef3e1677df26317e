"""Where the tests find ``@modelcontextprotocol/server-everything``, the MCP reference server.

The server is a Node package, pinned (with every dependency, by integrity hash) in
``.ci/everything/package.json`` and ``package-lock.json``; ``.ci/run`` installs it with
``npm ci --prefix .ci/everything`` and exports :data:`ENV_VAR` with the command line that starts it
over stdio. The tests look, in order:

1. at :data:`ENV_VAR` (a command line): when it is set, a command that does not start fails the
   tests, never skips them;
2. at the install location ``.ci/everything/node_modules/…/dist/index.js``, run with ``node``;
3. nowhere else: where ``npm`` is on PATH the tests fail, saying how to install the server; only a
   machine without ``npm`` (and without the variable) skips them, saying so.

This is how ``tests/conftest.py`` treats ``WEAVEHOST_QWEN_GGUF``: a named file that is missing
fails, an unnamed one is skipped only where it cannot be had.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import pytest

__all__ = ["ENV_VAR", "INSTALL_HINT", "everything_command", "named_command", "node_command"]

ROOT = Path(__file__).resolve().parents[1]
PREFIX = ROOT / ".ci" / "everything"
ENTRY = (
    PREFIX / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
)
ENV_VAR = "WEAVEHOST_EVERYTHING"
INSTALL_HINT = (
    f"install it with `npm ci --prefix {PREFIX.relative_to(ROOT)}` (as .ci/run does), "
    f"or set {ENV_VAR} to the command line that starts it over stdio"
)


def everything_command() -> str:
    """The command line that starts server-everything over stdio (its ``stdio`` mode).

    Fails the calling test when the server was named but is not runnable, or when it could be
    installed here (``npm`` on PATH) but is not; skips it only on a machine without ``npm``.
    """
    return node_command("server-everything", ENTRY, ENV_VAR, INSTALL_HINT, "stdio")


def named_command(env_var: str, hint: str) -> str | None:
    """The command line ``env_var`` names (``None``: unset); a named program that is not there
    fails the calling test, saying ``hint``."""
    named = os.environ.get(env_var, "").strip()
    if not named:
        return None
    program = shlex.split(named)[0]
    if shutil.which(program) is None and not Path(program).is_file():
        pytest.fail(f"{env_var}={named!r}: {program!r} is not on PATH; {hint}")
    return named


def node_command(what: str, entry: Path, env_var: str, hint: str, *args: str) -> str:
    """The command line of a Node server installed under :data:`PREFIX`: ``env_var``'s, else
    ``node entry args…``; missing, it fails the calling test where ``npm`` is on PATH and skips
    it (saying ``hint``) only where it is not."""
    named = named_command(env_var, hint)
    if named is not None:
        return named
    node = shutil.which("node")
    if entry.is_file() and node is not None:
        return shlex.join([node, str(entry), *args])
    if shutil.which("npm") is None:
        pytest.skip(f"{what} is not installed and npm is missing: {hint}")
    pytest.fail(f"{what} is not installed at {entry}: {hint}")
