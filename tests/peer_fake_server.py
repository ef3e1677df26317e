"""A stand-in for a peer's server process (``bench-agent --peer``): a script, run as
``python tests/peer_fake_server.py ARGS... --port N`` (the other arguments, a real server's, are
ignored). How it behaves is set by the environment:

- ``FAKE_PEER=ready`` (default): ``GET /v1/models`` answers 200; each chat completion is
  streamed: a call of ``get_current_weather`` for Paris, or, when the last message is a tool
  result, an answer that repeats it.
- ``FAKE_PEER=never``: it listens and answers 503 to everything, forever (never ready).
- ``FAKE_PEER=exit``: it prints a line and exits with code 3 before listening.
- ``FAKE_PEER_CHILD=1``: it first starts a child in its process group that ignores SIGTERM
  (what a server's worker left behind looks like).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.remote_fake_server import DONE, chunk, streamed_call  # noqa: E402

STUBBORN_CHILD = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
)


def reply_for(body: dict[str, Any]) -> list[Any]:
    messages = body.get("messages") or []
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return [chunk(text=f"Here it is: {last.get('content')}"), chunk(finish="stop"), DONE]
    return [*streamed_call("get_current_weather", '{"city": "Paris"}'),
            chunk(finish="tool_calls"), DONE]  # fmt: skip


class Handler(BaseHTTPRequestHandler):
    mode = "ready"

    def log_message(self, *_args: Any) -> None:
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.mode == "never":
            return self._json(503, {"error": "loading model"})
        if self.path == "/v1/models":
            return self._json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        return self._json(404, {"error": "not found"})

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)))
        if self.mode == "never":
            return self._json(503, {"error": "loading model"})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()
        for event in reply_for(body):
            data = event if isinstance(event, str) else json.dumps(event)
            self.wfile.write(f"data: {data}\n\n".encode())
        self.close_connection = True

    def _json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    mode = os.environ.get("FAKE_PEER", "ready")
    print(f"fake peer: {mode}, pid {os.getpid()}, argv {sys.argv[1:]}", flush=True)
    if os.environ.get("FAKE_PEER_CHILD"):
        subprocess.Popen([sys.executable, "-c", STUBBORN_CHILD])
    if mode == "exit":
        print("fake peer: cannot load the model", flush=True)
        sys.exit(3)
    port = int(sys.argv[sys.argv.index("--port") + 1])
    Handler.mode = mode
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
