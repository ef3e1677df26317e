"""Example MCP server: a read-only file reader confined to one directory.

Run it over stdio with ``python tools/files.py [ROOT]`` (default: the ``WEAVEHOST_FILES_ROOT``
environment variable, else the current directory); import :func:`build_server` to use it
in-process. Every path is resolved (symlinks followed) and must stay inside ROOT; anything else
is refused, so ``../`` and a symlink pointing out cannot escape.
"""

from __future__ import annotations

import fnmatch
import os
import sys
from pathlib import Path
from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False, idempotent_hint=True)
MAX_READ_BYTES = 256 * 1024
MAX_LIST = 500


def build_server(root: str | os.PathLike[str]) -> MCPServer:
    base = Path(root).resolve()
    if not base.is_dir():
        raise SystemExit(f"files server: root {str(root)!r} is not a directory")
    server = MCPServer(
        "files", instructions=f"Read-only access to files under {base}.", log_level="WARNING"
    )

    def inside(path: str) -> Path:
        target = (base / path).resolve()
        if target != base and base not in target.parents:
            raise ToolError(f"{path!r} is outside the shared directory")
        return target

    @server.tool(annotations=READ_ONLY)
    def list_files(
        path: Annotated[str, Field(description="Directory relative to the root.")] = ".",
        pattern: Annotated[str, Field(description="Glob on file names, e.g. '*.md'.")] = "*",
    ) -> str:
        """List files and directories under a directory of the shared root."""
        directory = inside(path)
        if not directory.is_dir():
            raise ToolError(f"{path!r} is not a directory")
        names = sorted(
            p.name + ("/" if p.is_dir() else "")
            for p in directory.iterdir()
            if fnmatch.fnmatch(p.name, pattern)
        )
        return "\n".join(names[:MAX_LIST]) or "(empty)"

    @server.tool(annotations=READ_ONLY)
    def read_file(
        path: Annotated[str, Field(description="File path relative to the root.")],
        max_bytes: Annotated[
            int, Field(ge=1, le=MAX_READ_BYTES, description="Read at most this much.")
        ] = 64 * 1024,
    ) -> str:
        """Read a text file from the shared root."""
        target = inside(path)
        if not target.is_file():
            raise ToolError(f"{path!r} is not a file")
        with target.open("rb") as fh:
            data = fh.read(max_bytes + 1)
        text = data[:max_bytes].decode("utf-8", errors="replace")
        return text + (f"\n[…cut at {max_bytes} bytes]" if len(data) > max_bytes else "")

    return server


if __name__ == "__main__":
    build_server(
        sys.argv[1] if len(sys.argv) > 1 else os.environ.get("WEAVEHOST_FILES_ROOT", ".")
    ).run()
