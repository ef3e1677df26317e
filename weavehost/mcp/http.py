"""HTTP transports: streamable HTTP and the legacy SSE transport, with headers and OAuth.

Stage: servers (one connection's transport, entered by ``mcp.Client`` under the
:class:`~weavehost.mcp.servers.ServerPool`; :func:`weavehost.mcp.connections.open_transport`
delegates every server with a URL here).

Invariants:

* The transport is chosen by the config alone: ``http_transport == "sse"`` is the legacy
  HTTP+SSE transport (``GET`` an event stream, ``POST`` to the endpoint it names), anything else
  streamable HTTP. Both send the server's ``headers`` (already expanded from the environment by
  the config) with every request, and no others of ours.
* Streamable HTTP caps one SSE event at ``limits.max_message_bytes``; the SDK's SSE client has
  no such cap, so an old SSE server is trusted with its event sizes (documented, not hidden).
* A server with ``oauth`` is reached with its stored tokens only
  (:func:`weavehost.mcp.oauth.connection_auth`): with none stored, entering the transport raises
  :class:`~weavehost.errors.AuthError` before any request; a token the server refuses (and that
  cannot be refreshed) raises the same error from the request that met the refusal. No browser is
  ever opened and no person is waited for here; ``weavehost auth SERVER`` does that.
* Every HTTP wait is bounded: :data:`HTTP_TIMEOUT` for connect, write and pool,
  :data:`SSE_READ_TIMEOUT` for a quiet event stream. Requests themselves are bounded above this
  layer by the pool's named timeouts.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx2
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from weavehost.config import Limits, ServerConfig

__all__ = ["HTTP_TIMEOUT", "SSE_READ_TIMEOUT", "open_http_transport"]

HTTP_TIMEOUT = 30.0  # seconds: connect, write and pool of one HTTP request
SSE_READ_TIMEOUT = 300.0  # seconds an event stream may stay silent before it counts as lost


def open_http_transport(
    server: ServerConfig, limits: Limits, *, auth: httpx2.Auth | None = None
) -> AbstractAsyncContextManager[Any]:
    """The (not yet entered) transport for ``server``'s URL; ``mcp.Client`` enters it.

    ``auth`` overrides how the requests authenticate (``weavehost auth`` passes its interactive
    OAuth provider); by default a server with ``oauth`` uses its stored tokens.
    """
    if server.url is None:
        raise ValueError(f"server {server.name!r} has no URL")  # a caller's bug, not user input
    url = server.url

    @asynccontextmanager
    async def transport() -> AsyncIterator[Any]:
        how = auth
        if how is None and server.oauth:
            from weavehost.mcp.oauth import connection_auth

            how = connection_auth(server)  # AuthError here, before any request, if none stored
        headers = dict(server.headers) or None
        if server.http_transport == "sse":
            async with sse_client(
                url,
                headers=headers,
                timeout=HTTP_TIMEOUT,
                sse_read_timeout=SSE_READ_TIMEOUT,
                auth=how,
            ) as streams:
                yield streams
            return
        timeout = httpx2.Timeout(HTTP_TIMEOUT, read=SSE_READ_TIMEOUT)
        async with create_mcp_http_client(headers=headers, timeout=timeout, auth=how) as http:
            async with streamable_http_client(
                url, http_client=http, max_sse_event_size=limits.max_message_bytes
            ) as streams:
                yield streams

    return transport()
