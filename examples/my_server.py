"""A small MCP server to test: a shopping list you can search and clear.

It stands for *your* server in ``examples/test_my_server.py``. Run it over stdio with
``python examples/my_server.py``.
"""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

server = MCPServer("shopping", log_level="WARNING")

ITEMS = ["milk", "oat milk", "bread", "coffee"]


@server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
def search_list(
    query: Annotated[str, Field(min_length=1, description="Words to look for, e.g. 'milk'.")],
) -> str:
    """Find the items on the shopping list that contain the query."""
    found = [item for item in ITEMS if query.lower() in item]
    return ", ".join(found) if found else f"nothing on the list matches {query!r}"


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True))
def clear_list() -> str:
    """Remove every item from the shopping list."""
    ITEMS.clear()
    return "the list is empty"


if __name__ == "__main__":
    server.run()
