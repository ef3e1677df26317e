"""weavehost: an MCP host for on-device agents with schema-guided parallel tool-call decoding."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from weavehost.errors import WeavehostError

if TYPE_CHECKING:
    from weavehost.host import Host

__version__ = "0.1.0"

__all__ = ["Host", "WeavehostError", "__version__"]


def __getattr__(name: str) -> Any:
    # Host pulls in the MCP SDK and llama.cpp; load it on first use so `weavehost --version`
    # and the tools that only read metadata stay quick.
    if name == "Host":
        from weavehost.host import Host

        return Host
    raise AttributeError(f"module 'weavehost' has no attribute {name!r}")
