"""The MCP side of the host: servers, their tools, and running calls. It knows no model.

- :mod:`~weavehost.mcp.transport` — our stdio transport (spawn, frame, stop without orphans);
- :mod:`~weavehost.mcp.connections` — how a server is reached: stdio, HTTP, in-process;
- :mod:`~weavehost.mcp.features` — what the host offers servers (sampling, elicitation, roots,
  logs, progress) and its records for resources and prompts, free of SDK types;
- :mod:`~weavehost.mcp.elicitors` — elicitors that need no person: one declines, one answers
  from a script;
- :mod:`~weavehost.mcp.wire` — those records to and from the SDK's types, in either protocol era;
- :mod:`~weavehost.mcp.servers` — :class:`ServerPool`, one client per configured server, joining
  :mod:`~weavehost.mcp.supervisor` (each connection's lifetime: start, watch, restart, stop) and
  :mod:`~weavehost.mcp.requests` (tools, resources, prompts and ping, each bounded);
- :mod:`~weavehost.mcp.schemas` — tool schemas normalised, checked and hashed;
- :mod:`~weavehost.mcp.catalog` — every tool of every server as one :class:`ToolSpec`;
- :mod:`~weavehost.mcp.executor` — trust, approvals, validation, timeouts: a call to a result.

Nothing here imports the engine, the formats, the decoder or the agent.
"""
