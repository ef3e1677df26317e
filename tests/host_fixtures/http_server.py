"""A real streamable-HTTP MCP server (the SDK's ``MCPServer``) behind a fault-injecting ASGI layer.

Test fixture for RELIABILITY row 2. It binds 127.0.0.1 on a free port, prints ``PORT <n>`` on
stdout once uvicorn is listening, and serves the MCP app at ``/mcp``. Tools of the real server:
``echo`` (read-only) and ``crash`` (the process exits mid-call, so the connection drops with no
response). Three more names never reach it; the ASGI layer in front answers their tools/call:

* ``fail500``: HTTP 500 with a plain-text body;
* ``drop_sse``: 200 ``text/event-stream`` that closes without a single event;
* ``die_before_answer``: the process exits before writing any response.

With ``--hang-delete`` the DELETE that ends a session is never answered.

    python http_server.py [--hang-delete]
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from typing import Any

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

server = MCPServer("http-fixture", log_level="WARNING")
FAULTS = ("fail500", "drop_sse", "die_before_answer")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Echo the text back."""
    return f"echo: {text}"


@server.tool()
def crash() -> str:
    """Exit the whole server process mid-call."""
    os._exit(1)


for _name in FAULTS:  # listed so the catalog offers them; the layer below answers the calls
    server.add_tool(lambda: "unreachable", name=_name, description=f"Fault: {_name}.")


class Faults:
    """ASGI middleware: reads a POST body, answers the fault tools itself, replays the rest."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "DELETE" and "--hang-delete" in sys.argv:
            await asyncio.Event().wait()  # never answer the end of the session
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        fault = _fault(body)
        if fault == "die_before_answer":
            os._exit(1)
        if fault == "fail500":
            await _respond(send, 500, "text/plain", b"upstream exploded")
            return
        if fault == "drop_sse":
            await _respond(send, 200, "text/event-stream", b"")
            return
        replayed = False

        async def replay() -> dict:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


def _fault(body: bytes) -> str | None:
    try:
        message = json.loads(body)
    except ValueError:
        return None
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return None
    name = (message.get("params") or {}).get("name")
    return name if name in FAULTS else None


async def _respond(send: Any, status: int, content_type: str, body: bytes) -> None:
    headers = [(b"content-type", content_type.encode()), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # connections queue from here on, so the port can be announced at once
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app = Faults(server.streamable_http_app())
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
