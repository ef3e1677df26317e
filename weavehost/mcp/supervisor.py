"""Supervisor: every configured server's connection started, watched, restarted and stopped.

Stage: servers (under :class:`~weavehost.mcp.servers.ServerPool`, beside
:class:`~weavehost.mcp.requests.ServerRequests`, which sends requests over the clients this
module keeps alive). How a server is reached is :mod:`~weavehost.mcp.connections`.

Invariants:

* Every connection lives in its own task inside the supervisor's task group, so it is entered
  and left in one task (anyio cancel scopes demand that) and the supervisor cannot exit while one
  is open.
* Both protocol eras: each server is spoken to as ``ServerConfig.protocol`` says (``"auto"``: a
  2026-07-28 server in its own protocol, an older one through the ``initialize`` handshake).
  :attr:`ServerStatus.protocol` is the negotiated version. tools/list_changed arrives as a
  notification (handshake) or through a ``subscriptions/listen`` stream held open here
  (2026-07-28), and reaches the :meth:`Supervisor.on_tools_changed` listeners either way.
* Client capabilities follow :class:`~weavehost.mcp.features.ClientFeatures` at connect time:
  ``sampling`` (with tools) only with a sampler, ``elicitation`` only with an elicitor, ``roots``
  always. :meth:`Roots.set <weavehost.mcp.features.Roots.set>` sends
  ``notifications/roots/list_changed`` to every running handshake-era server (a 2026-07-28
  server asks for roots with each request).
* Server log lines are asked for at ``SERVER_LOG_LEVEL`` with ``logging/setLevel`` (handshake,
  when the server declares ``logging``) or per request (2026-07-28).
* A server that dies is marked dead at once (the stdio transport reports the exit), its process
  group is reaped when its connection task leaves, and the other servers go on. The next
  :meth:`Supervisor.ensure` respawns it after a bounded, growing delay; after
  ``MAX_CONSECUTIVE_RESTARTS`` failures in a row it stays down.
* Startup is bounded by ``timeouts.startup``; leaving an HTTP session (its DELETE) by
  ``shutdown_grace + kill_grace``. A failed start is a :class:`~weavehost.errors.ServerStartError`
  naming the server, what it was, and why (SDK, OS and pydantic errors converted here, once).
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
import mcp_types as types
from anyio import AsyncContextManagerMixin
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from weavehost import __version__
from weavehost.config import HostConfig, ServerConfig
from weavehost.errors import AuthError, ServerDiedError, ServerError, ServerStartError
from weavehost.mcp.connections import open_transport
from weavehost.mcp.features import ClientFeatures
from weavehost.mcp.transport import ProcessInfo
from weavehost.mcp.wire import Responder

__all__ = ["ServerSlot", "ServerStatus", "Supervisor"]

logger = logging.getLogger(__name__)

RESTART_BACKOFF_BASE = 0.25  # seconds before the first respawn; doubles per consecutive failure
RESTART_BACKOFF_MAX = 8.0
MAX_CONSECUTIVE_RESTARTS = 5
EXIT_REPORT_WAIT = 0.2  # time to let the exit watcher record an exit code for the message
SERVER_LOG_LEVEL: types.LoggingLevel = "info"  # the lowest server log level asked for (-v shows it)

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
class ServerSlot:
    """One server's mutable state; the supervisor changes it (a request only through
    :meth:`answered`)."""

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

    def status(self) -> ServerStatus:
        return ServerStatus(
            name=self.config.name,
            transport="inproc" if self.inproc is not None else self.config.transport,
            state=self.state,
            pid=self.process.pid if self.process else None,
            restarts=self.restarts,
            last_error=self.last_error,
            protocol=self.protocol,
        )

    def mark_dead(self, reason: str) -> None:
        """The connection is gone: count the failure and wake its runner, which leaves its
        ``Client`` (and so reaps the process)."""
        if self.state == "running":
            self.state = "dead"
            self.died_at = anyio.current_time()
            self.failures += 1
        self.last_error = reason
        self.client = None
        self.wake.set()

    def answered(self) -> None:
        """A tool call got through: the count of consecutive failures starts again."""
        self.failures = 0

    def start_failed(self, reason: str) -> None:
        self.state, self.last_error = "dead", reason
        self.failures += 1
        self.died_at = anyio.current_time()


class Supervisor(AsyncContextManagerMixin):
    """Every configured server, started on entry and stopped (no orphans) on exit.

    ``strict`` makes entry fail with :class:`ServerStartError` if any server cannot start;
    otherwise failed servers are left out (see :meth:`status`) and retried by their next
    :meth:`ensure`. ``inproc`` maps server names to in-process ``MCPServer``/``Server`` objects.
    """

    def __init__(
        self,
        config: HostConfig,
        features: ClientFeatures,
        *,
        strict: bool = True,
        inproc: Mapping[str, Any] | None = None,
        restart_backoff: float = RESTART_BACKOFF_BASE,
    ) -> None:
        self.config = config
        self.features = features
        self.strict = strict
        self.restart_backoff = restart_backoff
        inproc = dict(inproc or {})
        self._slots: dict[str, ServerSlot] = {
            s.name: ServerSlot(s, inproc.pop(s.name, None)) for s in config.servers
        }
        for name, server in inproc.items():
            self._slots[name] = ServerSlot(ServerConfig(name=name, command="<in-process>"), server)
        self._tg: anyio.abc.TaskGroup | None = None
        self._listeners: list[ToolsChanged] = []
        self._closing = False
        self.features.roots.on_change(self._roots_changed)

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Supervisor]:
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

    # ----------------------------------------------------------------------- what it tells

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._slots)

    def running(self) -> tuple[str, ...]:
        return tuple(name for name, slot in self._slots.items() if slot.state == "running")

    def status(self) -> dict[str, ServerStatus]:
        return {name: slot.status() for name, slot in self._slots.items()}

    def on_tools_changed(self, callback: ToolsChanged) -> None:
        """Call ``callback(server)`` as soon as a server sends tools/list_changed.

        The call is synchronous, so a listener revokes what it must before any other task runs;
        the async function it may return (the slow part, such as re-listing) runs in a task of
        the supervisor.
        """
        self._listeners.append(callback)

    def capabilities(self, server: str) -> dict[str, Any]:
        """What ``server`` declared when it last connected (wire names; empty before that)."""
        return dict(self.slot(server).capabilities)

    def slot(self, server: str) -> ServerSlot:
        """The slot of ``server``; a :class:`ServerError` naming the servers there are if none."""
        try:
            return self._slots[server]
        except KeyError:
            raise ServerError(
                f"no server named {server!r}; have: {', '.join(self._slots) or '-'}"
            ) from None

    # ----------------------------------------------------------------------- for requests

    async def ensure(self, slot: ServerSlot) -> Client:
        """A live client for ``slot``, respawning a dead server after its backoff."""
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

    async def died(self, slot: ServerSlot, what: str, reason: str | None = None) -> ServerDiedError:
        """Mark ``slot`` dead during ``what``; the error to raise names its exit when known."""
        if slot.process is not None:
            with anyio.move_on_after(EXIT_REPORT_WAIT):
                await slot.exited.wait()
        detail = slot.process.describe_exit() if slot.process else reason or "connection closed"
        slot.mark_dead(f"server {slot.config.name!r} died during {what}: {detail}")
        return ServerDiedError(slot.last_error or detail)

    # ----------------------------------------------------------------------- lifecycle

    async def _start_quietly(self, slot: ServerSlot) -> None:
        try:
            await self._start(slot)
        except ServerStartError as exc:
            logger.warning("%s", exc)

    async def _start(self, slot: ServerSlot) -> None:
        assert self._tg is not None
        try:
            await self._tg.start(self._run, slot)
        except ServerStartError as exc:
            slot.start_failed(str(exc))
            raise

    async def _run(self, slot: ServerSlot, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """Own one connection from spawn to reaping; runs as a task of the supervisor."""
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

    def _client(self, slot: ServerSlot) -> Client:
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

    async def _connected(self, slot: ServerSlot, client: Client) -> None:
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

    def _start_failure(self, slot: ServerSlot, exc: BaseException) -> str:
        reason = _first_error(exc)
        if isinstance(reason, MCPError) and reason.code == types.CONNECTION_CLOSED and slot.process:
            reason = slot.process.describe_exit()
        return f"server {slot.config.name!r} ({slot.config.describe()}) failed to start: {reason}"

    def _transport(self, slot: ServerSlot) -> Any:
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

    def _on_exit(self, slot: ServerSlot, info: ProcessInfo) -> None:
        slot.exited.set()
        if not self._closing and slot.state == "running":
            slot.mark_dead(f"server {slot.config.name!r} {info.describe_exit()}")

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
