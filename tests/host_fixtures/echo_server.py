"""An in-process MCP server whose one tool says its text back unchanged: a tool result holding
whatever a test puts in it (chat-control markers, a format's call text)."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer


def echo_server() -> MCPServer:
    server = MCPServer("echo", log_level="WARNING")

    @server.tool()
    def echo(text: str) -> str:
        """Say the text back."""
        return text

    return server
