"""ServerPool: one ``mcp.Client`` per configured MCP server, owned by one async context manager.

Stage: servers (the host's only contact with MCP servers; the catalog lists through it, the
executor calls through it, the CLI reads resources and prompts through it). How a server is
reached (stdio process, streamable HTTP, in-process) is :mod:`~weavehost.mcp.connections`; how
SDK types become weavehost's records is :mod:`~weavehost.mcp.wire`; this module owns each
connection's lifetime and requests.

Invariants:

* Every connection lives in its own task inside the pool's task group, so it is entered and left
  in one task (anyio cancel scopes demand that) and the pool cannot exit while one is open.
* Both protocol eras: each server is spoken to as ``ServerConfig.protocol`` says (``"auto"``: a
  2026-07-28 server in its own protocol, an older one through the ``initialize`` handshake).
  :attr:`ServerStatus.protocol` is the negotiated version. Where the eras differ the pool hides
  it: liveness is ``ping`` (handshake) or ``server/discover`` (2026-07-28); tools/list_changed
  arrives as a notification (handshake) or through a ``subscriptions/listen`` stream the pool
  holds open (2026-07-28), and reaches :meth:`ServerPool.on_tools_changed` listeners either way;
  a server's sampling, elicitation and roots requests arrive mid-call (handshake) or as an
  ``input_required`` result the pool answers and retries (2026-07-28), through the same
  :class:`~weavehost.mcp.wire.Responder`.
* Client capabilities follow :class:`~weavehost.mcp.features.ClientFeatures` at connect time:
  ``sampling`` (with tools) only with a sampler, ``elicitation`` only with an elicitor, ``roots``
  always. A refused or failing sampling/elicitation is an error reply to the server (handshake)
  or a :class:`~weavehost.errors.ClientFeatureError` for the call (2026-07-28), never a crash.
  :meth:`Roots.set <weavehost.mcp.features.Roots.set>` sends ``notifications/roots/list_changed``
  to every running handshake-era server (a 2026-07-28 server asks for roots with each request).
* Server log lines reach ``features.on_log``: at ``info`` and above, asked for with
  ``logging/setLevel`` (handshake, when the server declares ``logging``) or per request
  (2026-07-28, where logs arrive only when asked for).
* Every request has a named bound from :class:`~weavehost.config.Timeouts` (``startup``,
  ``list_tools`` for every list walk, ``call`` for tools/call, resources/read and prompts/get,
  ``ping``); a timed-out request is cancelled on the server (``notifications/cancelled``) and
  the session stays usable. So is a call whose caller is cancelled (Ctrl-C, ``host.abort()``):
  the cancel reaches the server before the call is abandoned.
* A stdio server that dies fails its in-flight requests at once with
  :class:`~weavehost.errors.ServerDiedError` (the transport watches the process, not just the
  pipe), its process group is reaped, and the other servers go on. The next request to it
  respawns it after a bounded, growing delay; after ``MAX_CONSECUTIVE_RESTARTS`` failures in a
  row it stays down.
* Over streamable HTTP, a 5xx fails only its request (``ServerError``); a response stream that
  ends unanswered fails only its request when the server is still alive
  (``LIVENESS_PING_TIMEOUT``), and counts as the server dying otherwise. Leaving an HTTP
  session (its DELETE) is bounded by ``shutdown_grace + kill_grace``.
* ``timeouts.call`` is a hard cap on the whole call (every ``input_required`` round and the
  answers given for it included): progress notifications do not extend it, and
  ``TIMEOUT_BACKSTOP`` bounds the request even if the SDK's own clock were to.
* Errors from the SDK (``MCPError``, pydantic, OS) are converted here, once, into the
  ``ServerError`` family, naming the server and the request.
* ``list_tools`` returns the raw wire dicts (after the SDK's schema check), so the catalog sees
  ``"readOnlyHint": "true"`` as the string it is, not as a coerced ``True``; tool results are
  not checked against output schemas here (the executor checks them against the catalog).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import anyio
import anyio.abc
import mcp_types as types
from anyio import AsyncContextManagerMixin
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, TypeAdapter, ValidationError

from weavehost import __version__
from weavehost.config import HostConfig, ServerConfig
from weavehost.errors import (
    AuthError,
    MessageTooLargeError,
    ServerDiedError,
    ServerError,
    ServerStartError,
    ServerTimeoutError,
)
from weavehost.mcp.connections import list_tools_page, open_transport
from weavehost.mcp.features import (
    ClientFeatures,
    Progress,
    PromptInfo,
    PromptMessage,
    ResourceInfo,
    ResourceText,
)
from weavehost.mcp.transport import MESSAGE_TOO_LARGE, ProcessInfo
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

__all__ = ["ServerPool", "ServerStatus"]

logger = logging.getLogger(__name__)

RESTART_BACKOFF_BASE = 0.25  # seconds before the first respawn; doubles per consecutive failure
RESTART_BACKOFF_MAX = 8.0
MAX_CONSECUTIVE_RESTARTS = 5
TIMEOUT_BACKSTOP = 0.5  # a hard bound past the SDK's own request timeout, whatever the server sends
EXIT_REPORT_WAIT = 0.2  # time to let the exit watcher record an exit code for the message
LIVENESS_PING_TIMEOUT = 2.0  # an HTTP response stream ended unanswered: is the server still there?
MAX_INPUT_ROUNDS = 10  # input_required rounds one request may take (the SDK's own default)
SERVER_LOG_LEVEL: types.LoggingLevel = "info"  # the lowest server log level asked for (-v shows it)

ProgressListener = Callable[[Progress], None]
_T = TypeVar("_T", bound=BaseModel)
_CALL_RESULT = TypeAdapter(types.CallToolResult | types.InputRequiredResult)
_READ_RESULT = TypeAdapter(types.ReadResourceResult | types.InputRequiredResult)
_PROMPT_RESULT = TypeAdapter(types.GetPromptResult | types.InputRequiredResult)

ToolsChanged = Callable[[str], Callable[[], Awaitable[None]] | None]
State = Literal["starting", "running", "dead", "stopped"]


@dataclass(frozen=True, slots=True)
class ServerStatus:
    """A snapshot of one server's connection."""

    name: str
    transport: Literal["stdio", "http", "sse", "inproc"]
    state: State
    pid: int | None
    restarts: int
    last_error: str | None
    protocol: str | None = None  # the negotiated protocol version, once connected


@dataclass(slots=True)
class _Slot:
    """Mutable per-server state; only the pool touches it."""

    config: ServerConfig
    inproc: Any = None
    client: Client | None = None
    process: ProcessInfo | None = None
    state: State = "stopped"
    wake: anyio.Event = field(default_factory=anyio.Event)
    exited: anyio.Event = field(default_factory=anyio.Event)
    lock: anyio.Lock = field(default_factory=anyio.Lock)
    failures: int = 0
    restarts: int = 0
    died_at: float = -math.inf
    last_error: str | None = None
    protocol: str | None = None
    capabilities: dict[str, Any] = field(default_factory=dict)

    @property
    def modern(self) -> bool:
        return self.protocol in MODERN_PROTOCOL_VERSIONS


class ServerPool(AsyncContextManagerMixin):
    """All configured servers, started on entry and stopped (no orphans) on exit.

    ``strict`` makes entry fail with :class:`ServerStartError` if any server cannot start;
    otherwise failed servers are left out (see :meth:`status`) and retried on their next use.
    ``inproc`` maps server names to in-process ``MCPServer``/``Server`` objects (tests, embedding).
    ``features`` is what the pool offers servers (``None``: ``ClientFeatures()``, roots = the
    current directory, no sampler, no elicitor).
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
        self.strict = strict
        self.restart_backoff = restart_backoff
        inproc = dict(inproc or {})
        self._slots: dict[str, _Slot] = {
            s.name: _Slot(s, inproc.pop(s.name, None)) for s in config.servers
        }
        for name, server in inproc.items():
            self._slots[name] = _Slot(ServerConfig(name=name, command="<in-process>"), server)
        self._tg: anyio.abc.TaskGroup | None = None
        self._listeners: list[ToolsChanged] = []
        self._closing = False
        self.features.roots.on_change(self._roots_changed)

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[ServerPool]:
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                try:
                    async with anyio.create_task_group() as starters:
                        for slot in self._slots.values():
                            starters.start_soon(self._start_quietly, slot)
                    failed = [s for s in self._slots.values() if s.state != "running"]
                    if self.strict and failed:
                        raise ServerStartError(
                            "; ".join(s.last_error or s.config.name for s in failed)
                        )
                    yield self
                finally:
                    self._closing = True
                    for slot in self._slots.values():
                        slot.wake.set()
        except BaseExceptionGroup as group:
            # The task group wraps whatever the body raised; hand callers the error itself.
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from group.exceptions[0].__cause__
            raise
        finally:
            self._tg = None

    # ----------------------------------------------------------------------- public API

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._slots)

    def running(self) -> tuple[str, ...]:
        return tuple(name for name, slot in self._slots.items() if slot.state == "running")

    def status(self) -> dict[str, ServerStatus]:
        return {
            name: ServerStatus(
                name=name,
                transport="inproc" if slot.inproc is not None else slot.config.transport,
                state=slot.state,
                pid=slot.process.pid if slot.process else None,
                restarts=slot.restarts,
                last_error=slot.last_error,
                protocol=slot.protocol,
            )
            for name, slot in self._slots.items()
        }

    def on_tools_changed(self, callback: ToolsChanged) -> None:
        """Call ``callback(server)`` as soon as a server sends tools/list_changed.

        The call is synchronous, so a listener revokes what it must before any other task runs;
        the async function it may return (the slow part, such as re-listing) runs in a pool task.
        """
        self._listeners.append(callback)

    async def list_tools(self, server: str) -> list[dict[str, Any]]:
        """Every tool of ``server`` as the raw dict it sent, all pages, within one bound."""
        slot = self._slot(server)
        bound = self.config.timeouts.list_tools
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
        back); the executor checks it against the catalog.
        """
        slot = self._slot(server)
        bound = timeout if timeout is not None else self.config.timeouts.call
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
        slot.failures = 0
        return result

    async def ping(self, server: str) -> None:
        """Check that ``server`` answers (``ping``; ``server/discover`` in the 2026-07-28 era)."""
        slot = self._slot(server)
        bound = self.config.timeouts.ping
        async with self._request(slot, "ping", bound) as client:
            await liveness(client.session, bound)

    def capabilities(self, server: str) -> dict[str, Any]:
        """What ``server`` declared when it last connected (wire names; empty before that)."""
        return dict(self._slot(server).capabilities)

    async def list_resources(self, server: str) -> list[ResourceInfo]:
        """Every resource of ``server`` (all pages), then its templates (``template=True``).

        A server that does not declare ``resources`` has none; the walk is bounded by
        ``timeouts.list_tools``.
        """
        slot = self._slot(server)
        async with self._request(slot, "resources/list", self.config.timeouts.list_tools) as client:
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

        slot, bound = self._slot(server), self.config.timeouts.call
        result = await self._exchange(slot, f"resources/read {uri!r}", bound, request, _READ_RESULT)
        return resource_texts(result.contents)

    async def list_prompts(self, server: str) -> list[PromptInfo]:
        """Every prompt of ``server`` (all pages); none if it does not declare ``prompts``."""
        slot = self._slot(server)
        async with self._request(slot, "prompts/list", self.config.timeouts.list_tools) as client:
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

        slot, bound = self._slot(server), self.config.timeouts.call
        result = await self._exchange(slot, f"prompts/get {name!r}", bound, request, _PROMPT_RESULT)
        return prompt_messages(result.messages)

    # ----------------------------------------------------------------------- requests

    def _slot(self, server: str) -> _Slot:
        try:
            return self._slots[server]
        except KeyError:
            raise ServerError(
                f"no server named {server!r}; have: {', '.join(self._slots) or '-'}"
            ) from None

    async def _exchange(
        self,
        slot: _Slot,
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

            responder = Responder(name, self.features, log_level=SERVER_LOG_LEVEL)
            return await responder.complete(what, send, max_rounds=MAX_INPUT_ROUNDS)

    @asynccontextmanager
    async def _request(self, slot: _Slot, what: str, bound: float) -> AsyncIterator[Client]:
        """Yield a live client; convert whatever the request raises into a ServerError."""
        name = slot.config.name
        client = await self._ensure(slot)
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
            raise await self._died(slot, what) from None
        except ValidationError as exc:
            raise ServerError(
                f"server {name!r} sent an invalid reply to {what}: {exc.errors()[0]['msg']}"
            ) from None
        except RuntimeError as exc:  # the SDK raises RuntimeError for results it cannot use
            raise ServerError(f"server {name!r}: {what}: {exc}") from None

    async def _closed(self, slot: _Slot, client: Client, what: str, reason: str) -> ServerError:
        """A request ended with CONNECTION_CLOSED. Over HTTP that may be one response stream
        ending unanswered while the server lives on: then only this request failed."""
        if slot.process is None and slot.inproc is None and slot.client is client:
            bound = min(self.config.timeouts.ping, LIVENESS_PING_TIMEOUT)
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
            return await self._died(slot, what, reason)
        return await self._died(slot, what)

    async def _died(self, slot: _Slot, what: str, reason: str | None = None) -> ServerDiedError:
        if slot.process is not None:
            with anyio.move_on_after(EXIT_REPORT_WAIT):
                await slot.exited.wait()
        detail = slot.process.describe_exit() if slot.process else reason or "connection closed"
        self._mark_dead(slot, f"server {slot.config.name!r} died during {what}: {detail}")
        return ServerDiedError(slot.last_error or detail)

    def _mark_dead(self, slot: _Slot, reason: str) -> None:
        if slot.state == "running":
            slot.state = "dead"
            slot.died_at = anyio.current_time()
            slot.failures += 1
        slot.last_error = reason
        slot.client = None
        slot.wake.set()  # the runner leaves its Client, which reaps the process

    async def _ensure(self, slot: _Slot) -> Client:
        async with slot.lock:
            if slot.state == "running" and slot.client is not None:
                return slot.client
            name = slot.config.name
            if self._closing or self._tg is None:
                raise ServerDiedError(f"server {name!r} is not running (the pool is closed)")
            if slot.failures >= MAX_CONSECUTIVE_RESTARTS:
                raise ServerDiedError(
                    f"server {name!r} failed {slot.failures} times in a row; not restarting. "
                    f"Last: {slot.last_error}"
                )
            delay = min(self.restart_backoff * 2 ** max(slot.failures - 1, 0), RESTART_BACKOFF_MAX)
            wait = slot.died_at + delay - anyio.current_time()
            if wait > 0:
                await anyio.sleep(wait)
            if slot.died_at > -math.inf:
                slot.restarts += 1
                logger.info("restarting server %r (restart %d)", name, slot.restarts)
            await self._start(slot)
            assert slot.client is not None  # _start raises otherwise
            return slot.client

    # ----------------------------------------------------------------------- lifecycle

    async def _start_quietly(self, slot: _Slot) -> None:
        try:
            await self._start(slot)
        except ServerStartError as exc:
            logger.warning("%s", exc)

    async def _start(self, slot: _Slot) -> None:
        assert self._tg is not None
        try:
            await self._tg.start(self._run, slot)
        except ServerStartError as exc:
            slot.state, slot.last_error = "dead", str(exc)
            slot.failures += 1
            slot.died_at = anyio.current_time()
            raise

    async def _run(self, slot: _Slot, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Own one connection from spawn to reaping; runs as a task of the pool."""
        name, timeouts = slot.config.name, self.config.timeouts
        slot.wake, slot.exited, slot.process, slot.state = (
            anyio.Event(),
            anyio.Event(),
            None,
            "starting",
        )
        started = False
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + timeouts.startup) as startup:
                async with AsyncExitStack() as stack:
                    client = self._client(slot)
                    await stack.enter_async_context(client)
                    await self._connected(slot, client)
                    startup.deadline = math.inf
                    slot.client, slot.state, started = client, "running", True
                    task_status.started()
                    async with anyio.create_task_group() as watchers:
                        if slot.modern and client.server_capabilities.tools is not None:
                            watchers.start_soon(self._watch_tools, name, client)
                        await slot.wake.wait()
                        watchers.cancel_scope.cancel()
                    if slot.config.url is not None and slot.inproc is None:
                        # Closing an HTTP session sends DELETE; a server that never answers it
                        # must not hold the pool's exit (stdio shutdown bounds itself).
                        grace = timeouts.shutdown_grace + timeouts.kill_grace
                        startup.deadline = anyio.current_time() + grace
            if not started:
                detail = f"; {slot.process.describe_exit()}" if slot.process else ""
                raise ServerStartError(
                    f"server {name!r} ({slot.config.describe()}) did not finish initialising "
                    f"within {timeouts.startup:g} s{detail}"
                )
        except ServerStartError:
            raise
        except Exception as exc:  # boundary: SDK, OS and pydantic errors from one connection
            if not started:
                leaf = _first_error(exc)
                if isinstance(leaf, ServerStartError):
                    raise leaf from None
                if isinstance(leaf, AuthError):  # it names the server and says what to run
                    raise ServerStartError(str(leaf)) from leaf
                raise ServerStartError(self._start_failure(slot, exc)) from exc
            logger.warning("server %r connection ended with an error: %s", name, _first_error(exc))
        finally:
            slot.client = None
            if slot.state in ("running", "starting"):
                slot.state = "stopped" if self._closing else "dead"

    def _client(self, slot: _Slot) -> Client:
        """The SDK client for one connection, declaring what ``self.features`` offers."""
        responder = Responder(slot.config.name, self.features, log_level=SERVER_LOG_LEVEL)
        sampling = self.features.sampler is not None
        return Client(
            self._transport(slot),
            mode=slot.config.protocol,
            read_timeout_seconds=self.config.timeouts.call,
            message_handler=self._message_handler(slot.config.name),
            client_info=types.Implementation(name="weavehost", version=__version__),
            cache=None,
            sampling_callback=responder.sampling_callback if sampling else None,
            # A request that offers the model tools is answered with the same strategies.
            sampling_capabilities=(
                types.SamplingCapability(tools=types.SamplingToolsCapability())
                if sampling
                else None
            ),
            elicitation_callback=(
                responder.elicitation_callback if self.features.elicitor is not None else None
            ),
            list_roots_callback=responder.list_roots_callback,
            logging_callback=responder.logging_callback,
            log_level=SERVER_LOG_LEVEL,  # 2026-07-28: logs arrive only when each request asks
        )

    async def _connected(self, slot: _Slot, client: Client) -> None:
        """Record what was negotiated; ask a handshake-era server that logs for its log lines."""
        slot.protocol = client.protocol_version
        capabilities = client.server_capabilities
        slot.capabilities = capabilities.model_dump(by_alias=True, mode="json", exclude_none=True)
        if slot.modern or capabilities.logging is None:
            return
        request = types.SetLevelRequest(params=types.SetLevelRequestParams(level=SERVER_LOG_LEVEL))
        try:
            await client.session.send_request(request, types.EmptyResult)
        except MCPError as exc:  # a server that refuses its own declared feature still runs
            logger.debug("server %r refused logging/setLevel: %s", slot.config.name, exc.message)

    async def _watch_tools(self, name: str, client: Client) -> None:
        """Hold a 2026-07-28 ``subscriptions/listen`` stream open for tools/list_changed.

        Each event also reaches the message handler as a notification, which tells the
        listeners, so both eras share one path; this task only keeps the stream open. A server
        that cannot listen still serves its tools: the failure is logged, not raised.
        """
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _event in subscription:
                    pass
        except Exception as exc:  # boundary: SDK and transport errors from an optional stream
            logger.debug("server %r: no tools/list_changed subscription: %s", name, exc)

    def _roots_changed(self) -> None:
        """The roots changed: tell every running handshake-era server (a 2026-07-28 server
        asks for roots with each request that needs them, so it has nothing to be told)."""
        if self._tg is None or self._closing:
            return
        for slot in self._slots.values():
            if slot.state == "running" and slot.client is not None and not slot.modern:
                self._tg.start_soon(self._send_roots_changed, slot.config.name, slot.client)

    async def _send_roots_changed(self, name: str, client: Client) -> None:
        with anyio.move_on_after(self.config.timeouts.ping):
            try:
                await client.session.send_notification(types.RootsListChangedNotification())
            except Exception as exc:  # boundary: a notification to a dying server is lost
                logger.debug("server %r: roots/list_changed not sent: %s", name, exc)

    def _start_failure(self, slot: _Slot, exc: BaseException) -> str:
        reason = _first_error(exc)
        if isinstance(reason, MCPError) and reason.code == types.CONNECTION_CLOSED and slot.process:
            reason = slot.process.describe_exit()
        return f"server {slot.config.name!r} ({slot.config.describe()}) failed to start: {reason}"

    def _transport(self, slot: _Slot) -> Any:
        def on_spawn(info: ProcessInfo) -> None:
            slot.process = info

        return open_transport(
            slot.config,
            self.config.limits,
            self.config.timeouts,
            inproc=slot.inproc,
            on_spawn=on_spawn,
            on_exit=lambda info: self._on_exit(slot, info),
        )

    def _on_exit(self, slot: _Slot, info: ProcessInfo) -> None:
        slot.exited.set()
        if not self._closing and slot.state == "running":
            self._mark_dead(slot, f"server {slot.config.name!r} {info.describe_exit()}")

    def _message_handler(self, name: str) -> Callable[[Any], Awaitable[None]]:
        async def handle(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification) and self._tg is not None:
                for listener in self._listeners:
                    # Synchronous first: a listener revokes stale state before any task runs.
                    follow_up = listener(name)
                    if follow_up is not None:
                        self._tg.start_soon(follow_up)
            elif isinstance(message, Exception):
                logger.debug("server %r transport fault: %s", name, message)

        return handle


def _first_error(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (anyio wraps task failures in groups)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc
