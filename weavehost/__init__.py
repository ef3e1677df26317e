"""weavehost: an MCP host for on-device agents with schema-guided parallel tool-call decoding."""

from weavehost.errors import WeavehostError

__version__ = "0.1.0"

__all__ = ["WeavehostError", "__version__"]
