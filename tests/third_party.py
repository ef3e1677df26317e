"""Where the tests find the third-party MCP servers users run first: ``mcp-server-time``,
``mcp-server-git`` (PyPI) and ``@modelcontextprotocol/server-filesystem`` (npm).

They are pinned under ``.ci/``: the two Python servers in ``.ci/servers-requirements.txt``
(``pip install -r``), server-filesystem beside server-everything in ``.ci/everything/package.json``
and ``package-lock.json`` (``npm ci --prefix .ci/everything``). ``.ci/run`` installs them and
exports each one's command line in its variable (:data:`TIME`, :data:`GIT`, :data:`FILESYSTEM`;
server-filesystem's without its directories, which each test appends). The tests look, in order:

1. at the variable: when it is set, a command that does not start fails the tests, never skips
   them;
2. at the install location: the console script beside this Python (the venv's ``bin``), or
   ``.ci/everything/node_modules/…/dist/index.js`` run with ``node``;
3. nowhere else: a Python server that is missing fails its tests (pip is always at hand), saying
   how to install it; server-filesystem is skipped, saying so, only on a machine without
   ``npm``, as server-everything is (``tests/everything.py``).
"""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest

from tests.everything import PREFIX, ROOT, named_command, node_command

__all__ = ["FILESYSTEM", "GIT", "TIME", "filesystem_command", "git_command", "time_command"]

REQUIREMENTS = ROOT / ".ci" / "servers-requirements.txt"
FILESYSTEM_ENTRY = (
    PREFIX / "node_modules" / "@modelcontextprotocol" / "server-filesystem" / "dist" / "index.js"
)
TIME = "WEAVEHOST_MCP_SERVER_TIME"
GIT = "WEAVEHOST_MCP_SERVER_GIT"
FILESYSTEM = "WEAVEHOST_SERVER_FILESYSTEM"


def _python_server(script: str, env_var: str) -> str:
    hint = (
        f"install it with `pip install -r {REQUIREMENTS.relative_to(ROOT)}` (as .ci/run does), "
        f"or set {env_var} to the command line that starts it"
    )
    named = named_command(env_var, hint)
    if named is not None:
        return named
    beside = Path(sys.executable).parent / script
    found = str(beside) if beside.is_file() else shutil.which(script)
    if found is None:
        pytest.fail(f"{script} is not installed: {hint}")
    return shlex.quote(found)


def time_command() -> str:
    """The command line that starts ``mcp-server-time`` over stdio."""
    return _python_server("mcp-server-time", TIME)


def git_command() -> str:
    """The command line that starts ``mcp-server-git`` over stdio (add ``--repository DIR``)."""
    return _python_server("mcp-server-git", GIT)


def filesystem_command() -> str:
    """The command line that starts server-filesystem over stdio, without its directories."""
    hint = (
        f"install it with `npm ci --prefix {PREFIX.relative_to(ROOT)}` (as .ci/run does), "
        f"or set {FILESYSTEM} to the command line that starts it (without its directories)"
    )
    return node_command("server-filesystem", FILESYSTEM_ENTRY, FILESYSTEM, hint)
