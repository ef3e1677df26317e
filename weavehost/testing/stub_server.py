"""``StubServer``: a spec, validated, and the stub process that serves it, as a test holds them.

Stage: testing. Over stdio a ``StubServer`` starts nothing: :attr:`StubServer.command` and
:meth:`StubServer.server_config` are what a host spawns (each spawn, a respawn included, is a
fresh stub process that appends to the same record). Over HTTP (``http=True``) entering it
starts ``python -m weavehost.testing.stub --http`` on 127.0.0.1 and :attr:`StubServer.url` is
its streamable-HTTP endpoint.

Invariants:

* A bad spec fails in the constructor with :class:`~weavehost.errors.StubSpecError` naming the
  JSON path; nothing is started or written before the spec is valid.
* The stub's files (the spec as JSON, the record, the HTTP process's stderr) live in one
  temporary directory that leaving the context removes.
* An HTTP stub's process runs in its own process group; leaving the context ends the group
  (SIGTERM, then SIGKILL after :data:`STOP_GRACE`), so no process outlives the ``with``. Every
  wait is bounded by a named constant; a process that does not come up within
  :data:`HTTP_STARTUP_TIMEOUT` is killed and reported as
  :class:`~weavehost.errors.ServerStartError` with its stderr.
* :meth:`StubServer.requests` reads what the process recorded, flushed per message, so it holds
  even the call a crash ended; after the context it answers from the record as it was then.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import anyio

from weavehost.config import ServerConfig
from weavehost.errors import ServerStartError
from weavehost.testing.spec import load_spec

__all__ = ["HTTP_STARTUP_TIMEOUT", "KILL_GRACE", "STOP_GRACE", "StubServer"]

HTTP_STARTUP_TIMEOUT = 20.0  # seconds for an HTTP stub to import, bind and announce its URL
STOP_GRACE = 2.0  # after SIGTERM, before SIGKILL
KILL_GRACE = 2.0  # after SIGKILL, before giving up on reaping
PORT_POLL_INTERVAL = 0.02  # how often startup looks for the announced URL
STDERR_TAIL = 2000  # characters of a failed HTTP stub's stderr kept in the error


class StubServer:
    """A stub MCP server from a spec (a dict, or a .json/.yaml path); see the module docstring.

    Use it as a context manager (``with`` or ``async with``). ``name`` is the spec's ``name``
    (default: the file's stem, or ``stub``).
    """

    def __init__(self, spec: Mapping[str, Any] | str | os.PathLike[str], *, http: bool = False):
        self.spec = load_spec(spec)
        self.name: str = self.spec["name"]
        self.http = http
        self.url: str | None = None
        self._dir = Path(tempfile.mkdtemp(prefix="weavehost-stub-"))
        self.spec_path = self._dir / "spec.json"
        self.record_path = self._dir / "requests.jsonl"
        self._url_path = self._dir / "url"
        self._stderr_path = self._dir / "stderr.log"
        self.spec_path.write_text(json.dumps(self.spec, indent=2), encoding="utf-8")
        self._process: subprocess.Popen[bytes] | None = None
        self._kept: list[dict[str, Any]] | None = None  # the record, read once at close

    # ----------------------------------------------------------------------- what a host spawns

    @property
    def command(self) -> list[str]:
        """The stub process's argv (with ``--http --port 0`` for an HTTP stub)."""
        argv = [sys.executable, "-m", "weavehost.testing.stub", str(self.spec_path)]
        argv += ["--record", str(self.record_path)]
        if self.http:
            argv += ["--http", "--port", "0", "--port-file", str(self._url_path)]
        return argv

    def server_config(self, name: str | None = None) -> ServerConfig:
        """The :class:`ServerConfig` a host connects with, named ``name`` (or ``self.name``)."""
        protocol = "legacy" if self.spec.get("protocol") == "legacy" else "auto"
        if self.http:
            if self.url is None:
                raise ServerStartError(
                    f"stub {self.name!r}: an HTTP stub has a URL only inside its `with` block"
                )
            return ServerConfig(name=name or self.name, url=self.url, protocol=protocol)
        argv = self.command
        return ServerConfig(
            name=name or self.name, command=argv[0], args=tuple(argv[1:]), protocol=protocol
        )

    # ----------------------------------------------------------------------- what it received

    def messages(self) -> list[dict[str, Any]]:
        """Every message the stub received, requests and notifications, in order (still there
        after the ``with`` block: the record is read once when the stub closes)."""
        if self._kept is not None:
            return list(self._kept)
        try:
            text = self.record_path.read_text("utf-8")
        except FileNotFoundError:
            return []
        # A line cut short by a kill mid-write is not a message the stub handled.
        return [json.loads(line) for line in text.splitlines() if line.endswith("}")]

    def requests(self) -> list[dict[str, Any]]:
        """Every request received: dicts with ``method``, ``params``, ``id`` and ``time``."""
        return [m for m in self.messages() if m.get("id") is not None]

    def notifications(self) -> list[dict[str, Any]]:
        """Every notification received (``notifications/cancelled``, ``…/initialized``, …)."""
        return [m for m in self.messages() if m.get("id") is None]

    def calls(self, tool: str | None = None) -> list[dict[str, Any]]:
        """The params (``name``, ``arguments``) of each tools/call, of ``tool`` when given.

        A call the client retried with the answers to an ``input_required`` result counts once.
        """
        calls = [
            r["params"] or {}
            for r in self.requests()
            if r["method"] == "tools/call"
            and not (r["params"] or {}).get("inputResponses")
            and not (r["params"] or {}).get("requestState")
        ]
        return [c for c in calls if tool is None or c.get("name") == tool]

    # ----------------------------------------------------------------------- lifetime

    def __enter__(self) -> StubServer:
        if self.http:
            try:
                self._start_http()
            except BaseException:
                self.close()
                raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> StubServer:
        return await anyio.to_thread.run_sync(self.__enter__)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(self.close)

    def close(self) -> None:
        """Stop the HTTP process (if any) and remove the stub's files. Idempotent."""
        self._stop()
        self.url = None
        if self._kept is None:
            self._kept = self.messages()
        shutil.rmtree(self._dir, ignore_errors=True)

    @property
    def pid(self) -> int | None:
        """The HTTP stub's process id while it runs (a stdio stub's belong to its host)."""
        return self._process.pid if self._process is not None else None

    def _start_http(self) -> None:
        with open(self._stderr_path, "wb") as stderr:
            self._process = subprocess.Popen(
                self.command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,  # its own group: stopping it reaps everything it started
            )
        deadline = time.monotonic() + HTTP_STARTUP_TIMEOUT
        while not self._url_path.exists():
            code = self._process.poll()
            if code is not None:
                raise ServerStartError(
                    f"stub {self.name!r} exited with code {code} before listening: "
                    f"{self._stderr_tail()}"
                )
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"stub {self.name!r} did not listen within {HTTP_STARTUP_TIMEOUT:g}s: "
                    f"{self._stderr_tail()}"
                )
            time.sleep(PORT_POLL_INTERVAL)
        self.url = self._url_path.read_text("utf-8").strip()

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        for sig, grace in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, KILL_GRACE)):
            if process.poll() is not None:
                break
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(grace)
                break
            except subprocess.TimeoutExpired:
                continue
        # The group may hold children of a stub that exited on its own (crash_after).
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def _stderr_tail(self) -> str:
        try:
            text = self._stderr_path.read_text("utf-8", errors="replace").strip()
        except FileNotFoundError:
            return "(no stderr)"
        return text[-STDERR_TAIL:] or "(no stderr)"

    def __repr__(self) -> str:
        where = self.url or "stdio"
        return f"StubServer({self.name!r}, {where})"
