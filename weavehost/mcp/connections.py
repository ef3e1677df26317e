"""Connections: the transport that reaches one MCP server, and the one raw request the SDK lacks.

Stage: servers (under :class:`~weavehost.mcp.supervisor.Supervisor`, which owns each
connection's lifetime; this module only says *how* a server is reached).

Invariants:

* :func:`open_transport` picks the transport from the server's config alone: an in-process
  server object as given, a server with a URL through :mod:`weavehost.mcp.http` (streamable
  HTTP or the legacy SSE transport, with its headers, and its stored OAuth tokens when it has
  ``oauth``), anything else a stdio process through our
  :class:`~weavehost.mcp.transport.StdioTransport`. The stdio and streamable HTTP transports cap
  one message at ``limits.max_message_bytes``.
* A stdio command that cannot be run (``OSError`` on spawn) is a
  :class:`~weavehost.errors.ServerStartError` naming the server and the command; the process is
  reported through ``on_spawn`` and its exit through ``on_exit``, so the supervisor sees a
  death at once, not at the next request.
* :func:`list_tools_page` returns one tools/list page as the raw wire dict, so one tool with an
  odd annotation cannot fail a server's whole catalog.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import mcp_types as types
from pydantic import TypeAdapter

from weavehost.config import Limits, ServerConfig, Timeouts, resolve_command
from weavehost.errors import ServerStartError
from weavehost.mcp.http import open_http_transport
from weavehost.mcp.transport import ProcessInfo, StdioSpec, StdioTransport

__all__ = ["SpawnedTransport", "list_tools_page", "open_transport"]

_RAW = TypeAdapter(dict[str, Any])
ProcessHook = Callable[[ProcessInfo], None]


def open_transport(
    server: ServerConfig,
    limits: Limits,
    timeouts: Timeouts,
    *,
    inproc: Any = None,
    on_spawn: ProcessHook,
    on_exit: ProcessHook,
) -> Any:
    """The transport ``mcp.Client`` enters to reach ``server`` (not yet entered)."""
    if inproc is not None:
        return inproc
    if server.url is not None:
        return open_http_transport(server, limits)
    spec = StdioSpec(
        command=resolve_command(server),
        args=server.args,
        env=server.env,
        cwd=server.cwd,
        max_message_bytes=limits.max_message_bytes,
        shutdown_grace=timeouts.shutdown_grace,
        kill_grace=timeouts.kill_grace,
        label=f"server {server.name!r}",
    )
    return SpawnedTransport(spec, server.name, on_spawn=on_spawn, on_exit=on_exit)


class SpawnedTransport:
    """Adapts :class:`StdioTransport` to the SDK's ``Transport`` protocol, reporting the process."""

    def __init__(
        self, spec: StdioSpec, name: str, *, on_spawn: ProcessHook, on_exit: ProcessHook
    ) -> None:
        self._spec, self._name = spec, name
        self._on_spawn, self._on_exit = on_spawn, on_exit
        self._cm: StdioTransport | None = None

    async def __aenter__(self) -> Any:
        self._cm = StdioTransport(self._spec, on_spawn=self._on_spawn, on_exit=self._on_exit)
        try:
            streams = await self._cm.__aenter__()
        except OSError as exc:
            raise ServerStartError(
                f"server {self._name!r}: cannot run {self._spec.command!r}: {exc.strerror or exc}"
            ) from exc
        return streams

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._cm is not None
        return await self._cm.__aexit__(*exc)


async def list_tools_page(session: Any, cursor: str | None, bound: float) -> dict[str, Any]:
    """One tools/list page as the raw result dict, not validated as a whole.

    The SDK's ``send_request`` validates the whole page against its ``ListToolsResult`` model,
    so one tool with an odd annotation (``"readOnlyHint": 5``) would fail the server's entire
    catalog. The catalog checks every tool by itself instead (a bad one is left out, a
    non-boolean hint is not read-only), so the page is sent through the session's dispatcher,
    stamped the way ``send_request`` stamps it. If a later SDK lacks that seam, the validated
    path is used.
    """
    params = {"cursor": cursor} if cursor else None
    dispatcher = getattr(session, "_dispatcher", None)
    stamp = getattr(session, "_stamp", None)
    if dispatcher is None or stamp is None or not hasattr(dispatcher, "send_raw_request"):
        request = types.ListToolsRequest(
            params=types.PaginatedRequestParams(cursor=cursor) if cursor else None
        )
        return await session.send_request(request, _RAW, request_read_timeout_seconds=bound)
    data: dict[str, Any] = {"method": "tools/list", **({"params": params} if params else {})}
    opts: dict[str, Any] = {}
    stamp(data, opts)
    opts["timeout"] = bound
    raw = await dispatcher.send_raw_request("tools/list", data.get("params"), opts)
    return raw if isinstance(raw, dict) else {}
