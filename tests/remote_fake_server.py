"""A scripted OpenAI-compatible server on 127.0.0.1 for the remote model's tests.

Each ``POST /v1/chat/completions`` takes the next :class:`Reply` of the script: an HTTP error,
a whole JSON completion, or a stream of SSE events written one by one (flushed), where
:data:`HOLD` waits until the test calls :meth:`FakeOpenAI.release` (bounded by
:data:`HOLD_BOUND_S`) and the response ends by closing the connection (so a stream without
``[DONE]`` is a stream cut short). ``GET /v1/models`` and ``GET /props`` answer from fields, the
first ``models_failures`` models requests with 503. Every request is recorded.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

HOLD = object()  # a stream pauses here until FakeOpenAI.release()
HOLD_BOUND_S = 10.0  # a held stream goes on after this even if never released
DONE = "[DONE]"


@dataclass
class Reply:
    status: int = 200
    events: list[Any] = field(default_factory=list)  # SSE data strings, dicts, or HOLD
    body: Any = None  # a whole JSON reply (status 200, not streamed) or an error body


def chunk(*, text: str | None = None, calls: list[dict[str, Any]] | None = None,
          finish: str | None = None) -> dict[str, Any]:  # fmt: skip
    delta: dict[str, Any] = {}
    if text is not None:
        delta["content"] = text
    if calls is not None:
        delta["tool_calls"] = calls
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta,
                                                            "finish_reason": finish}]}  # fmt: skip


def call_piece(arguments: str, *, index: int = 0, name: str | None = None) -> dict[str, Any]:
    piece: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if name is not None:
        piece["id"] = f"call_{index}"
        piece["type"] = "function"
        piece["function"]["name"] = name
    return piece


def streamed_call(name: str, arguments: str, *, size: int = 3, index: int = 0) -> list[Any]:
    """A call streamed as OpenAI does: the name first, then the arguments in small pieces."""
    events: list[Any] = [chunk(calls=[call_piece("", index=index, name=name)])]
    for start in range(0, len(arguments), size):
        events.append(chunk(calls=[call_piece(arguments[start : start + size], index=index)]))
    return events


class FakeOpenAI:
    """See the module docstring. A context manager: the server runs inside ``with``."""

    def __init__(
        self,
        replies: list[Reply] | None = None,
        *,
        models: tuple[str, ...] = ("fake-model",),
        props: dict[str, Any] | None = None,
        models_failures: int = 0,
        port: int = 0,  # 0: any free port
    ) -> None:
        self.replies, self.port = list(replies or []), port
        self.models, self.props, self.models_failures = models, props, models_failures
        self.models_body: Any = None
        self.requests: list[
            tuple[str, str, Any, dict[str, str]]
        ] = []  # method, path, body, headers
        self._release = threading.Event()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def posts(self) -> list[Any]:
        return [body for method, _path, body, _headers in self.requests if method == "POST"]

    def release(self) -> None:
        self._release.set()

    def __enter__(self) -> FakeOpenAI:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                fake.requests.append(
                    ("GET", self.path, None, {k.lower(): v for k, v in self.headers.items()})
                )
                if self.path == "/v1/models":
                    if fake.models_failures > 0:
                        fake.models_failures -= 1
                        return self._json(503, {"error": "warming up"})
                    if fake.models_body is not None:  # a server that answers nonsense
                        return self._json(200, fake.models_body)
                    data = [{"id": m, "object": "model"} for m in fake.models]
                    return self._json(200, {"object": "list", "data": data})
                if self.path == "/props" and fake.props is not None:
                    return self._json(200, fake.props)
                return self._json(404, {"error": "not found"})

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                fake.requests.append(
                    ("POST", self.path, body, {k.lower(): v for k, v in self.headers.items()})
                )
                reply = (
                    fake.replies.pop(0)
                    if fake.replies
                    else Reply(500, body={"error": "no reply scripted"})
                )
                if reply.status != 200 or reply.body is not None:
                    return self._json(reply.status, reply.body)
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                for event in reply.events:
                    if event is HOLD:
                        fake._release.wait(HOLD_BOUND_S)
                        continue
                    data = event if isinstance(event, str) else json.dumps(event)
                    try:
                        self.wfile.write(f"data: {data}\n\n".encode())
                        self.wfile.flush()
                    except OSError:  # the client went away (an abort, a timeout)
                        return
                self.close_connection = True

            def _json(self, status: int, payload: Any) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop answering: the port refuses connections from now on."""
        if self._server is not None:
            self._release.set()
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def iter_events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    """``--json`` output lines as dicts."""
    for line in lines:
        if line.startswith("{"):
            yield json.loads(line)
