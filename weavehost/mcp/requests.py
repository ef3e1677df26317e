"""Server requests: tools, resources, prompts and ping, each within its named bound.

Stage: servers (under :class:`~weavehost.mcp.servers.ServerPool`, beside
:class:`~weavehost.mcp.supervisor.Supervisor`, which keeps each server's client alive and
respawns a dead one when a request asks for it). How SDK types become weavehost's records is
:mod:`~weavehost.mcp.wire`.

Invariants:

* Every request has a named bound from :class:`~weavehost.config.Timeouts` (``list_tools`` for
  every list walk, ``call`` for tools/call, resources/read and prompts/get, ``ping``); a
  timed-out request is cancelled on the server (``notifications/cancelled``) and the session
  stays usable. So is a call whose caller is cancelled (Ctrl-C, ``host.abort()``): the cancel
  reaches the server before the call is abandoned.
* ``timeouts.call`` is a hard cap on the whole call (every ``input_required`` round and the
  answers given for it included): progress notifications do not extend it, and
  ``TIMEOUT_BACKSTOP`` bounds the request even if the SDK's own clock were to.
* A server's sampling, elicitation and roots requests arrive mid-call (handshake era, through
  the client's callbacks) or as an ``input_required`` result (2026-07-28), answered here through
  the same :class:`~weavehost.mcp.wire.Responder` and sent again, at most ``MAX_INPUT_ROUNDS``
  times. A refused or failing sampling/elicitation is then a
  :class:`~weavehost.errors.ClientFeatureError` for the call, never a crash.
* A stdio server that dies fails its in-flight requests at once with
  :class:`~weavehost.errors.ServerDiedError`. Over streamable HTTP, a 5xx fails only its request
  (``ServerError``); a response stream that ends unanswered fails only its request when the
  server is still alive (``LIVENESS_PING_TIMEOUT``), and counts as the server dying otherwise.
* Errors from the SDK (``MCPError``, pydantic, OS) are converted here, once, into the
  ``ServerError`` family, naming the server and the request.
* ``list_tools`` returns the raw wire dicts (after the SDK's schema check), so the catalog sees
  ``"readOnlyHint": "true"`` as the string it is, not as a coerced ``True``; tool results are
  not checked against output schemas here (the executor checks them against the catalog).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, TypeAdapter, ValidationError

from weavehost.config import Timeouts
from weavehost.errors import MessageTooLargeError, ServerError, ServerTimeoutError
from weavehost.mcp.connections import list_tools_page
from weavehost.mcp.features import (
    Progress,
    PromptInfo,
    PromptMessage,
    ResourceInfo,
    ResourceText,
)
from weavehost.mcp.supervisor import SERVER_LOG_LEVEL, ServerSlot, Supervisor
from weavehost.mcp.transport import MESSAGE_TOO_LARGE
from weavehost.mcp.wire import (
    MAX_LIST_PAGES,
    Responder,
    all_pages,
    liveness,
    progress_callback,
    prompt_infos,
    prompt_messages,
    resource_infos,
    resource_texts,
)

__all__ = ["ProgressListener", "ServerRequests"]

logger = logging.getLogger(__name__)

TIMEOUT_BACKSTOP = 0.5  # a hard bound past the SDK's own request timeout, whatever the server sends
LIVENESS_PING_TIMEOUT = 2.0  # an HTTP response stream ended unanswered: is the server still there?
MAX_INPUT_ROUNDS = 10  # input_required rounds one request may take (the SDK's own default)

ProgressListener = Callable[[Progress], None]
_T = TypeVar("_T", bound=BaseModel)
_CALL_RESULT = TypeAdapter(types.CallToolResult | types.InputRequiredResult)
_READ_RESULT = TypeAdapter(types.ReadResourceResult | types.InputRequiredResult)
_PROMPT_RESULT = TypeAdapter(types.GetPromptResult | types.InputRequiredResult)


class ServerRequests:
    """The requests weavehost sends a server, over the clients ``supervisor`` keeps alive."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor

    @property
    def timeouts(self) -> Timeouts:
        return self.supervisor.config.timeouts

    async def list_tools(self, server: str) -> list[dict[str, Any]]:
        """Every tool of ``server`` as the raw dict it sent, all pages, within one bound."""
        slot = self.supervisor.slot(server)
        bound = self.timeouts.list_tools
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        async with self._request(slot, "tools/list", bound) as client:
            for _ in range(MAX_LIST_PAGES):
                raw = await list_tools_page(client.session, cursor, bound)
                page = raw.get("tools")
                if not isinstance(page, list):
                    raise ServerError(f"server {server!r}: tools/list result has no 'tools' list")
                tools.extend(t for t in page if isinstance(t, dict))
                cursor = raw.get("nextCursor")
                if not isinstance(cursor, str) or not cursor:
                    break
            else:
                logger.warning(
                    "server %r: tools/list still paginating after %d pages", server, MAX_LIST_PAGES
                )
        return tools

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - a per-call override of timeouts.call
        on_progress: ProgressListener | None = None,
    ) -> types.CallToolResult:
        """Send one tools/call; an ``isError`` result is returned, not raised.

        ``timeout`` (default ``timeouts.call``) is a hard cap on the whole call: progress
        notifications (each handed to ``on_progress``) do not extend it. Cancelling the caller
        sends ``notifications/cancelled`` before the call is abandoned. The result is not checked
        against the tool's output schema here (the SDK's check would re-list tools behind our
        back); the executor checks it against the catalog. An answered call starts the server's
        count of consecutive failures again.
        """
        slot = self.supervisor.slot(server)
        bound = timeout if timeout is not None else self.timeouts.call
        args = dict(arguments or {})

        def request(responses: types.InputResponses | None, state: str | None) -> Any:
            return types.CallToolRequest(
                params=types.CallToolRequestParams(
                    name=tool, arguments=args, input_responses=responses, request_state=state
                )
            )

        result = await self._exchange(
            slot, f"tools/call {tool!r}", bound, request, _CALL_RESULT, on_progress
        )
        slot.answered()
        return result

    async def ping(self, server: str) -> None:
        """Check that ``server`` answers (``ping``; ``server/discover`` in the 2026-07-28 era)."""
        slot = self.supervisor.slot(server)
        bound = self.timeouts.ping
        async with self._request(slot, "ping", bound) as client:
            await liveness(client.session, bound)

    async def list_resources(self, server: str) -> list[ResourceInfo]:
        """Every resource of ``server`` (all pages), then its templates (``template=True``).

        A server that does not declare ``resources`` has none; the walk is bounded by
        ``timeouts.list_tools``.
        """
        slot = self.supervisor.slot(server)
        async with self._request(slot, "resources/list", self.timeouts.list_tools) as client:
            if client.server_capabilities.resources is None:
                return []
            resources = await all_pages(client.session.list_resources, "resources")
            try:
                templates = await all_pages(
                    client.session.list_resource_templates, "resource_templates"
                )
            except MCPError as exc:
                if exc.code != types.METHOD_NOT_FOUND:
                    raise
                templates = []
        return resource_infos(server, resources, templates)

    async def read_resource(self, server: str, uri: str) -> list[ResourceText]:
        """The contents of one resource as text (a blob is described, never inlined)."""

        def request(responses: types.InputResponses | None, state: str | None) -> Any:
            return types.ReadResourceRequest(
                params=types.ReadResourceRequestParams(
                    uri=uri, input_responses=responses, request_state=state
                )
            )

        slot, bound = self.supervisor.slot(server), self.timeouts.call
        result = await self._exchange(slot, f"resources/read {uri!r}", bound, request, _READ_RESULT)
        return resource_texts(result.contents)

    async def list_prompts(self, server: str) -> list[PromptInfo]:
        """Every prompt of ``server`` (all pages); none if it does not declare ``prompts``."""
        slot = self.supervisor.slot(server)
        async with self._request(slot, "prompts/list", self.timeouts.list_tools) as client:
            if client.server_capabilities.prompts is None:
                return []
            prompts = await all_pages(client.session.list_prompts, "prompts")
        return prompt_infos(server, prompts)

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str] | None = None
    ) -> list[PromptMessage]:
        """One prompt's messages as text (embedded resources inlined, images described)."""
        args = {str(k): str(v) for k, v in (arguments or {}).items()}

        def request(responses: types.InputResponses | None, state: str | None) -> Any:
            return types.GetPromptRequest(
                params=types.GetPromptRequestParams(
                    name=name, arguments=args, input_responses=responses, request_state=state
                )
            )

        slot, bound = self.supervisor.slot(server), self.timeouts.call
        result = await self._exchange(slot, f"prompts/get {name!r}", bound, request, _PROMPT_RESULT)
        return prompt_messages(result.messages)

    # ----------------------------------------------------------------------- plumbing

    async def _exchange(
        self,
        slot: ServerSlot,
        what: str,
        bound: float,
        request: Callable[[types.InputResponses | None, str | None], Any],
        result_type: TypeAdapter[_T | types.InputRequiredResult],
        on_progress: ProgressListener | None = None,
    ) -> _T:
        """Send ``request`` within ``bound``; answer each ``input_required`` result (2026-07-28)
        through the server's responder and send it again, within the same bound."""
        name = slot.config.name
        progress = progress_callback(name, on_progress) if on_progress is not None else None
        async with self._request(slot, what, bound) as client:

            async def send(responses: types.InputResponses | None, state: str | None) -> Any:
                return await client.session.send_request(
                    request(responses, state),
                    result_type,
                    request_read_timeout_seconds=bound,
                    progress_callback=progress,
                )

            features = self.supervisor.features
            responder = Responder(name, features, log_level=SERVER_LOG_LEVEL)
            return await responder.complete(what, send, max_rounds=MAX_INPUT_ROUNDS)

    @asynccontextmanager
    async def _request(self, slot: ServerSlot, what: str, bound: float) -> AsyncIterator[Client]:
        """Yield a live client; convert whatever the request raises into a ServerError."""
        name = slot.config.name
        client = await self.supervisor.ensure(slot)
        try:
            with anyio.fail_after(bound + TIMEOUT_BACKSTOP):
                yield client
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:
                raise await self._closed(slot, client, what, exc.message) from None
            if exc.code == types.REQUEST_TIMEOUT:
                raise ServerTimeoutError(
                    f"server {name!r} did not answer {what} within {bound:g} s"
                ) from None
            if exc.code == MESSAGE_TOO_LARGE:
                raise MessageTooLargeError(f"server {name!r}: {what}: {exc.message}") from None
            raise ServerError(f"server {name!r} rejected {what}: {exc.message}") from exc
        except TimeoutError:
            raise ServerTimeoutError(
                f"server {name!r} did not answer {what} within {bound:g} s"
            ) from None
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            raise await self.supervisor.died(slot, what) from None
        except ValidationError as exc:
            raise ServerError(
                f"server {name!r} sent an invalid reply to {what}: {exc.errors()[0]['msg']}"
            ) from None
        except RuntimeError as exc:  # the SDK raises RuntimeError for results it cannot use
            raise ServerError(f"server {name!r}: {what}: {exc}") from None

    async def _closed(
        self, slot: ServerSlot, client: Client, what: str, reason: str
    ) -> ServerError:
        """A request ended with CONNECTION_CLOSED. Over HTTP that may be one response stream
        ending unanswered while the server lives on: then only this request failed."""
        if slot.process is None and slot.inproc is None and slot.client is client:
            bound = min(self.timeouts.ping, LIVENESS_PING_TIMEOUT)
            with anyio.move_on_after(bound):
                try:
                    await liveness(client.session, bound)
                except Exception:  # boundary: any failure of the ping means the server is gone
                    pass
                else:
                    return ServerError(
                        f"server {slot.config.name!r} ended its response to {what} without "
                        f"answering ({reason}); the server itself still answers"
                    )
            return await self.supervisor.died(slot, what, reason)
        return await self.supervisor.died(slot, what)
