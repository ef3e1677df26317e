"""ServerPool: one ``mcp.Client`` per configured MCP server, owned by one async context manager.

Stage: servers (the host's only contact with MCP servers; the catalog lists through it, the
executor calls through it, the CLI reads resources and prompts through it). The pool joins two
units and adds nothing of its own:

- :class:`~weavehost.mcp.supervisor.Supervisor` — each connection's lifetime: started on entry,
  watched (process exit, tools/list_changed, roots changes), respawned on the next request after
  a growing delay, stopped without orphans on exit;
- :class:`~weavehost.mcp.requests.ServerRequests` — the requests (tools, resources, prompts,
  ping), each within its named bound, their errors converted once into the ``ServerError``
  family.

How a server is reached (stdio process, streamable HTTP, in-process) is
:mod:`~weavehost.mcp.connections`; how SDK types become weavehost's records is
:mod:`~weavehost.mcp.wire`. Each unit's invariants are in its module's docstring.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import mcp_types as types
from anyio import AsyncContextManagerMixin

from weavehost.config import HostConfig
from weavehost.mcp.features import (
    ClientFeatures,
    PromptInfo,
    PromptMessage,
    ResourceInfo,
    ResourceText,
)
from weavehost.mcp.requests import ProgressListener, ServerRequests
from weavehost.mcp.supervisor import RESTART_BACKOFF_BASE, ServerStatus, Supervisor, ToolsChanged

__all__ = ["ServerPool", "ServerStatus"]


class ServerPool(AsyncContextManagerMixin):
    """All configured servers, started on entry and stopped (no orphans) on exit.

    ``strict`` makes entry fail with :class:`~weavehost.errors.ServerStartError` if any server
    cannot start; otherwise failed servers are left out (see :meth:`status`) and retried on
    their next use. ``inproc`` maps server names to in-process ``MCPServer``/``Server`` objects
    (tests, embedding). ``features`` is what the pool offers servers (``None``:
    ``ClientFeatures()``, roots = none offered, no sampler, no elicitor).
    """

    def __init__(
        self,
        config: HostConfig,
        *,
        strict: bool = True,
        inproc: Mapping[str, Any] | None = None,
        restart_backoff: float = RESTART_BACKOFF_BASE,
        features: ClientFeatures | None = None,
    ) -> None:
        self.config = config
        self.features = features if features is not None else ClientFeatures()
        self.supervisor = Supervisor(
            config, self.features, strict=strict, inproc=inproc, restart_backoff=restart_backoff
        )
        self.requests = ServerRequests(self.supervisor)

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[ServerPool]:
        async with self.supervisor:
            yield self

    # ----------------------------------------------------------------------- supervision

    @property
    def names(self) -> tuple[str, ...]:
        return self.supervisor.names

    def running(self) -> tuple[str, ...]:
        return self.supervisor.running()

    def status(self) -> dict[str, ServerStatus]:
        return self.supervisor.status()

    def on_tools_changed(self, callback: ToolsChanged) -> None:
        """Call ``callback(server)`` as soon as a server sends tools/list_changed (synchronously:
        the async function it may return runs in a pool task)."""
        self.supervisor.on_tools_changed(callback)

    def capabilities(self, server: str) -> dict[str, Any]:
        """What ``server`` declared when it last connected (wire names; empty before that)."""
        return self.supervisor.capabilities(server)

    # ----------------------------------------------------------------------- requests

    async def list_tools(self, server: str) -> list[dict[str, Any]]:
        """Every tool of ``server`` as the raw dict it sent, all pages, within one bound."""
        return await self.requests.list_tools(server)

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call override of timeouts.call
        on_progress: ProgressListener | None = None,
    ) -> types.CallToolResult:
        """Send one tools/call; an ``isError`` result is returned, not raised. ``timeout``
        (default ``timeouts.call``) caps the whole call; progress does not extend it."""
        return await self.requests.call_tool(
            server, tool, arguments, timeout=timeout, on_progress=on_progress
        )

    async def ping(self, server: str) -> None:
        """Check that ``server`` answers (``ping``; ``server/discover`` in the 2026-07-28 era)."""
        await self.requests.ping(server)

    async def list_resources(self, server: str) -> list[ResourceInfo]:
        """Every resource of ``server`` (all pages), then its templates (``template=True``)."""
        return await self.requests.list_resources(server)

    async def read_resource(self, server: str, uri: str) -> list[ResourceText]:
        """The contents of one resource as text (a blob is described, never inlined)."""
        return await self.requests.read_resource(server, uri)

    async def list_prompts(self, server: str) -> list[PromptInfo]:
        """Every prompt of ``server`` (all pages); none if it does not declare ``prompts``."""
        return await self.requests.list_prompts(server)

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[PromptMessage]:
        """One prompt's messages as text (embedded resources inlined, images described)."""
        return await self.requests.get_prompt(server, name, arguments)
