"""Serve an ASGI app (an SDK ``MCPServer``'s) with uvicorn on 127.0.0.1, in a thread of the test.

The socket is bound and listening before the app is built, so the app may know its own base URL
(an OAuth issuer must), and a request sent at once waits in the backlog rather than failing. The
server runs on its own event loop in a daemon thread; leaving the context asks it to exit and
waits at most :data:`SHUTDOWN_WAIT` seconds. State the app keeps (headers it saw, tokens it
issued) is plain Python the test reads directly.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

SHUTDOWN_WAIT = 5.0  # seconds for uvicorn to close its connections and stop


@contextmanager
def serve_asgi(make_app: Callable[[str], Any]) -> Iterator[str]:
    """Run ``make_app(base_url)`` on a free port; yields the base URL (``http://127.0.0.1:N``)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    base = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(
        make_app(base), log_level="warning", lifespan="on", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield base
    finally:
        server.should_exit = True
        thread.join(SHUTDOWN_WAIT)
        sock.close()
