"""The HTTP side of the remote model: the client, errors converted once, retries, what the
server says about itself, and one chat completion being read.

Stage: agent (under :mod:`weavehost.agent.remote`). httpx2 (the httpx fork the MCP SDK ships) is
met only here: :class:`Boundary` turns its errors and HTTP statuses into
:class:`~weavehost.errors.RemoteModelError` and its subclasses, naming the URL (masked) and what
was being asked. Only idempotent ``GET`` requests are retried (:func:`get_json`).
:class:`Reply` reads a streamed reply (SSE) or a whole one as the same
:class:`~weavehost.agent.openai_stream.Chunk` records, gathering the calls' pieces.
:class:`Line` holds one request's own connection (the client keeps none idle), so an abort
from another thread can shut it down before or after the server begins to answer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx2

from weavehost.agent.openai_stream import DONE, ArgumentScanner, CallPiece, Chunk, parse_chunk
from weavehost.agent.openai_stream import sse_data as _sse_data
from weavehost.config_model import RemoteModelConfig
from weavehost.errors import (
    AbortedError,
    RemoteConnectionError,
    RemoteModelError,
    RemoteResponseError,
    RemoteStreamError,
)

__all__ = [
    "ERROR_BODY_CHARS",
    "REMOTE_ENGINE",
    "RETRY_BACKOFF_MAX_S",
    "RETRY_BACKOFF_S",
    "Boundary",
    "Draft",
    "Line",
    "Reply",
    "ServerInfo",
    "describe_remote_model",
    "get_json",
    "make_client",
    "probe_server",
]

logger = logging.getLogger(__name__)

REMOTE_ENGINE = "remote (OpenAI-compatible)"
RETRY_BACKOFF_S = 0.25  # first wait before retrying an idempotent GET; doubles each time
RETRY_BACKOFF_MAX_S = 2.0
ERROR_BODY_CHARS = 300  # of an HTTP error's body, quoted in the message


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What the server says about itself: the model asked for, its context size and where that
    number came from (``/props``, ``/models``, ``config`` or ``default``), the models listed."""

    url: str
    name: str
    n_ctx: int
    context_source: str
    models: tuple[str, ...] = ()

    def describe(self) -> dict[str, Any]:
        return {"engine": REMOTE_ENGINE, "url": self.url, "name": self.name,
                "n_ctx": self.n_ctx, "context_source": self.context_source,
                "models": list(self.models)}  # fmt: skip


class Boundary:
    """Converts httpx2's errors (the httpx fork the MCP SDK ships) into the tree of
    :mod:`weavehost.errors`, once, here."""

    def __init__(self, config: RemoteModelConfig, aborted: threading.Event) -> None:
        self.shown = config.describe()
        self.config, self.aborted = config, aborted

    @contextmanager
    def mapped(self, what: str) -> Iterator[None]:
        try:
            yield
        except httpx2.TimeoutException as exc:
            if self.aborted.is_set():
                raise AbortedError("the model server's reply was stopped") from exc
            connect = isinstance(exc, httpx2.ConnectTimeout | httpx2.PoolTimeout)
            bound = self.config.connect_timeout if connect else self.config.read_timeout
            key = "connect" if connect else "read"
            raise RemoteConnectionError(
                f"the model server at {self.shown} did not answer {what} within {bound:g} s "
                f"(weavehost.model.timeouts.{key})"
            ) from exc
        except httpx2.ConnectError as exc:
            raise RemoteConnectionError(
                f"cannot connect to the model server at {self.shown} ({what}): {_reason(exc)}"
            ) from exc
        except (httpx2.TransportError, httpx2.StreamError) as exc:
            if self.aborted.is_set():
                raise AbortedError("the model server's reply was stopped") from exc
            raise RemoteStreamError(
                f"the connection to the model server at {self.shown} broke during {what}: "
                f"{_reason(exc)}"
            ) from exc
        except httpx2.HTTPError as exc:  # anything else httpx2 raises (an invalid URL …)
            raise RemoteModelError(f"model server {self.shown}, {what}: {_reason(exc)}") from exc

    def check_status(self, response: httpx2.Response, what: str) -> None:
        if response.status_code < 400:
            return
        try:
            body = response.read().decode("utf-8", errors="replace")
        except httpx2.HTTPError:
            body = ""
        hint = ""
        if response.status_code in (401, 403):
            hint = " (check weavehost.model.headers, e.g. an Authorization header)"
        raise RemoteResponseError(
            f"the model server at {self.shown} answered HTTP {response.status_code} to "
            f"{what}{hint}: {body[:ERROR_BODY_CHARS].strip() or response.reason_phrase}"
        )


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return "connection refused" if "refused" in text.lower() else text


def _root(url: str) -> str:
    """The server's root: the API base without a trailing ``/v1`` (where ``/props`` lives)."""
    base = url.rstrip("/")
    return base[: -len("/v1")] if base.endswith("/v1") else base


def get_json(
    client: httpx2.Client, url: str, boundary: Boundary, retries: int, what: str
) -> Any | None:
    """``GET url`` as JSON (None on 404), retried on a connection fault, a timeout or a 5xx."""
    for attempt in range(retries + 1):
        last = attempt == retries
        try:
            with boundary.mapped(what):
                response = client.get(url)
        except RemoteConnectionError:
            if last:
                raise
        else:
            if response.status_code == 404:
                return None
            if response.status_code < 500 or last:
                boundary.check_status(response, what)
                try:
                    return response.json()
                except ValueError as exc:
                    raise RemoteResponseError(
                        f"the model server at {boundary.shown} answered {what} with a body "
                        "that is not JSON"
                    ) from exc
        wait = min(RETRY_BACKOFF_S * 2**attempt, RETRY_BACKOFF_MAX_S)
        logger.info("%s failed; trying again in %.2f s", what, wait)
        time.sleep(wait)
    return None  # not reached: the last attempt returns or raises


def _context_from_props(props: Any) -> int | None:
    """llama.cpp's ``/props``: ``default_generation_settings.n_ctx`` (or a top-level n_ctx)."""
    if not isinstance(props, dict):
        return None
    settings = props.get("default_generation_settings")
    for source in (settings if isinstance(settings, dict) else {}, props):
        value = source.get("n_ctx")
        if isinstance(value, int) and value > 0:
            return value
    return None


def probe_server(
    client: httpx2.Client, config: RemoteModelConfig, n_ctx: int, aborted: threading.Event
) -> ServerInfo:
    """Ask the server for its models (``GET /models``) and context size (``GET /props``,
    llama.cpp's; vLLM's ``max_model_len`` in ``/models``); fall back to the configured
    ``contextSize``, then ``n_ctx``. An unreachable server raises after the retries."""
    boundary = Boundary(config, aborted)
    base = config.url.rstrip("/")
    listing = get_json(client, f"{base}/models", boundary, config.retries, "GET /models")
    data = listing.get("data") if isinstance(listing, dict) else None
    entries = [e for e in (data if isinstance(data, list) else ()) if isinstance(e, dict)]
    ids = tuple(str(e.get("id")) for e in entries if e.get("id") is not None)
    name = config.name or (ids[0] if ids else "default")
    props = get_json(client, f"{_root(config.url)}/props", boundary, config.retries, "GET /props")
    size, source = _context_from_props(props), "/props"
    if size is None:
        entry = next((e for e in entries if str(e.get("id")) == name), None)
        value = entry.get("max_model_len") if entry else None
        size, source = (value, "/models") if isinstance(value, int) and value > 0 else (None, "")
    if size is None and config.context_size:
        size, source = config.context_size, "config"
    if size is None:
        size, source = n_ctx, "default"
    return ServerInfo(url=config.describe(), name=name, n_ctx=size, context_source=source,
                      models=ids)  # fmt: skip


def make_client(config: RemoteModelConfig, transport: httpx2.BaseTransport | None) -> httpx2.Client:
    """The model's own client. No connection is kept idle for reuse: each request opens its
    own, which :class:`Line` catches so that an abort can shut it down (a TCP handshake per
    chat completion, small beside the completion itself)."""
    timeout = httpx2.Timeout(
        connect=config.connect_timeout,
        read=config.read_timeout,
        write=config.read_timeout,
        pool=config.connect_timeout,
    )
    limits = httpx2.Limits(max_keepalive_connections=0)
    return httpx2.Client(headers=dict(config.headers), timeout=timeout, limits=limits,
                         transport=transport)  # fmt: skip


def describe_remote_model(
    config: RemoteModelConfig, *, n_ctx: int, transport: httpx2.BaseTransport | None = None
) -> dict[str, Any]:
    """What ``weavehost models`` prints for a remote model (the server is asked)."""
    with make_client(config, transport) as client:
        return probe_server(client, config, n_ctx, threading.Event()).describe()


@dataclass(slots=True)
class Draft:
    """One call of a reply as it streams in."""

    place: int
    name: str = ""
    arguments: str = ""
    scanner: ArgumentScanner = field(default_factory=ArgumentScanner)

    def add(self, piece: CallPiece) -> None:
        # Some servers repeat the whole name in every delta, others send it once or in pieces.
        if piece.name and piece.name != self.name:
            self.name += piece.name
        if piece.arguments:
            self.arguments += piece.arguments
            self.scanner.feed(piece.arguments)


class Line:
    """The connection of one request, caught as it opens (httpcore's ``trace`` extension: pass
    :meth:`trace` as the request's), so :meth:`interrupt` can stop the request from another
    thread at any point: while the server has not answered yet, and while its reply is read.
    An interrupt asked for before the connection opened takes effect as it opens."""

    def __init__(self, aborted: threading.Event) -> None:
        self._aborted = aborted
        self._socket: socket.socket | None = None

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if event == "connection.connect_tcp.complete":
            stream = info.get("return_value")
            self._socket = stream.get_extra_info("socket") if stream is not None else None
            if self._aborted.is_set():  # abort() came before the socket: it is stopped here
                self.interrupt()

    def interrupt(self) -> None:
        """Wake a reader blocked on the socket: the connection is shut down (closing it alone
        does not wake a blocked ``recv``); the reader then sees the stream end."""
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)


class Reply:
    """One chat completion being read: streamed events or a whole response as chunks. Nothing
    of the body is read before :meth:`next` (a whole reply too)."""

    def __init__(self, response: httpx2.Response, streamed: bool, boundary: Boundary) -> None:
        self.response, self.boundary = response, boundary
        self.calls: dict[int, Draft] = {}  # by the server's index, in order of appearance
        self.finish: str | None = None
        self.done = False  # [DONE] read
        self.received = 0  # chunks read
        self.usage: Mapping[str, Any] | None = None
        self._chunks = self._stream() if streamed else self._whole()

    def _stream(self) -> Iterator[Chunk]:
        with self.boundary.mapped("the streamed reply"):
            for data in _sse_data(self.response.iter_lines()):
                if data.strip() == DONE:
                    self.done = True
                    return
                yield parse_chunk(data)

    def _whole(self) -> Iterator[Chunk]:
        """The whole response as one chunk, read when first asked for."""
        with self.boundary.mapped("the reply"):
            self.response.read()
        try:
            document = self.response.json()
            choice = document["choices"][0]
            message = choice["message"]
            pieces = []
            for index, call in enumerate(message.get("tool_calls") or ()):
                function = call.get("function") or {}
                arguments = function.get("arguments")
                if not isinstance(arguments, str):  # some servers send an object
                    arguments = json.dumps(arguments if arguments is not None else {})
                pieces.append(CallPiece(index=index, name=str(function.get("name") or ""),
                                        arguments=arguments))  # fmt: skip
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            # AttributeError: a message, call or function that is not an object.
            raise RemoteResponseError(
                f"the model server at {self.boundary.shown} answered with a body that is not a "
                "chat completion"
            ) from exc
        self.done = True
        usage = document.get("usage") if isinstance(document.get("usage"), dict) else None
        text = message.get("content")
        yield Chunk(text=text if isinstance(text, str) else "", calls=tuple(pieces),
                    finish=choice.get("finish_reason"), usage=usage)  # fmt: skip

    def next(self) -> Chunk | None:
        """The next chunk (None at the end); pieces of calls are added to :attr:`calls`."""
        chunk = next(self._chunks, None)
        if chunk is None:
            return None
        self.received += 1
        self.finish = chunk.finish or self.finish
        self.usage = chunk.usage or self.usage
        for piece in chunk.calls:
            draft = self.calls.get(piece.index)
            if draft is None:
                draft = self.calls[piece.index] = Draft(place=len(self.calls))
            draft.add(piece)
        return chunk

    @property
    def complete(self) -> bool:
        """Whether the server finished the reply (a finish reason or ``[DONE]``)."""
        return self.done or self.finish is not None

    def close(self) -> None:
        self.response.close()
