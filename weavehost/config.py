"""Host configuration: which MCP servers to run, whom to trust, how long to wait.

Stage: configuration (the first thing the host reads; every other stage takes a
:class:`HostConfig`).

Invariants:

* A Claude Desktop config (``{"mcpServers": {name: {command, args, env} | {url}}}``) and a VS Code
  ``mcp.json`` (``{"servers": {name: {"type": "stdio" | "http" | "sse", ...}}, "inputs": [...]}``)
  are accepted unchanged. weavehost's own settings live beside them under the ``"weavehost"`` key,
  so one file can serve both programs.
* Every problem in a file is a :class:`~weavehost.errors.ConfigError` whose message names the
  file, the key (as a dotted path such as ``mcpServers.weather.args[1]``) and the problem.
* ``${NAME}`` (or VS Code's ``${env:NAME}``) in a server's ``url``, ``args``, ``env`` and
  ``headers`` is replaced by the environment variable when the file is read, so secrets stay out
  of the file. An unset variable is a ConfigError naming the key and the variable; a value read
  from the environment never appears in an error message or in :meth:`ServerConfig.describe`
  (which masks a URL's password and query values). ``$${`` writes a literal ``${``. VS Code's
  ``${input:...}`` prompts are not supported (a ConfigError says so); its ``"inputs"`` list is
  ignored.
* Records are frozen; nothing here spawns a process or touches the network.
* Trust is by server name and only by config: nothing a server says can make it trusted.
* Three modules beside this one own a part each: :mod:`weavehost.config_servers` the
  :class:`ServerConfig` record, a server's entry of a file read into one, and the ``--server`` flag
  that makes one,
  :mod:`weavehost.config_model` the ``weavehost.model`` section (a remote server's settings, and
  which server a ``--model`` means), :mod:`weavehost.config_check` the key checks and
  ``${NAME}`` expansion they use. Their public names are re-exported here.

File format (every key but a server's ``command`` or ``url`` is optional)::

    {
      "mcpServers": {                            # or "servers" (VS Code); not both
        "weather": {"command": "python", "args": ["tools/weather.py"], "env": {"UNITS": "metric"},
                    "tools": {"exclude": ["forecast"]}},
        "remote":  {"url": "https://mcp.example.com/mcp",
                    "headers": {"Authorization": "Bearer ${REMOTE_TOKEN}"},
                    "protocol": "auto"},          # auto | legacy | 2026-07-28 (a modern version)
        "old":     {"type": "sse", "url": "http://127.0.0.1:8000/sse"},
        "github":  {"type": "http", "url": "https://api.example.com/mcp",
                    "oauth": {"scopes": ["read"], "clientName": "weavehost", "redirectPort": 8765}}
      },
      "weavehost": {
        "model": "path/to/model.gguf", "threads": 2,
        # or a remote OpenAI-compatible server (docs/remote.md):
        # "model": {"url": "http://gpu-box:8080/v1", "name": "qwen2.5-7b",
        #           "headers": {"Authorization": "Bearer ${LLM_KEY}"}, "contextSize": 32768,
        #           "timeouts": {"connect": 10, "read": 120}, "retries": 2,
        #           "stream": true, "earlyStart": true},
        "trustedServers": ["weather"],
        "approval": "ask",                       # ask | always | never
        "approved": {"remote": {"search": "3f9a0c...(>= 16 hex digits of the tool's hash)"}},
        "roots": ["~/projects/site", "."],       # directories offered to servers (default none)
        "toolChoice": "auto",                    # auto | required | none | a tool's name
        "guidance": "off",                       # on | off: the host's guidance in the prompt
        "scriptGuard": "on",                     # on | off: the answer keeps the user's scripts
        "timeouts": {"startup": 15, "listTools": 10, "call": 30, "ping": 5,
                     "shutdownGrace": 2, "killGrace": 2},
        "limits": {"maxMessageBytes": 4194304, "maxResultChars": 16000,
                   "maxSchemaBytes": 65536, "maxSchemaDepth": 32, "maxArgumentDepth": 64,
                   "maxDescriptionChars": 1024},
        "promptCache": {"enabled": true, "maxBytes": 2147483648},
        "answerDrafts": true,                    # greedy answers drafted, verified (default)
        "kvCache": "q8_0-k"                      # q8_0-k | f16 | q8_0: the KV cache's type
      }
    }

Per server:

* ``command``/``args``/``env``/``cwd``: a stdio server; ``url``: an HTTP server. ``type`` (VS
  Code, Cursor, Claude Code) says which: ``stdio``, ``http`` (also ``streamable-http``) or
  ``sse`` (the legacy HTTP+SSE transport); without it a ``url`` means streamable HTTP.
* ``headers``: sent with every HTTP request (HTTP servers only).
* ``protocol``: ``auto`` (the default: ``server/discover``, falling back to the ``initialize``
  handshake), ``legacy`` (the handshake only), or a modern version such as ``2026-07-28`` (adopted
  without a probe). A handshake-era version (``2025-06-18`` …) means ``legacy``: the handshake
  negotiates its version (weavehost offers its newest and the server answers with the one it
  speaks), so the SDK cannot pin one and the config does not pretend to.
* ``oauth``: ``true`` or ``{"scopes": [...], "clientName": "...", "redirectPort": N}`` (HTTP
  servers only): authorize once with ``weavehost auth NAME``; connections use the stored tokens.
* ``tools``: ``{"include": [...], "exclude": [...]}``, tool names or ``fnmatch`` globs
  (``"get_*"``); a tool must match ``include`` (when given) and no ``exclude`` to be offered.
* ``disabled``: ``true`` leaves the server out.

``weavehost.approved`` pins persistent approvals: server → tool → the tool's ``schema_hash`` (as
``weavehost tools --json`` prints it, or a prefix of at least 16 hex digits); a tool whose
definition changed (a rug pull) no longer matches and asks again.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from weavehost.config_check import (
    Checker,
    join_key,
    kind_of,
    parse_numbers,
)
from weavehost.config_model import RemoteModelConfig, is_model_url, parse_model, resolve_remote
from weavehost.config_servers import ServerConfig, parse_server, resolve_command, server_from_flag
from weavehost.errors import ConfigError

__all__ = [
    "APPROVAL_MODES",
    "DEFAULT_PROMPT_CACHE_BYTES",
    "ApprovalMode",
    "DEFAULT_KV_CACHE",
    "KV_CACHES",
    "HostConfig",
    "Limits",
    "PromptCacheConfig",
    "SWITCHES",
    "RemoteModelConfig",
    "ServerConfig",
    "Timeouts",
    "build_config",
    "is_model_url",
    "load_config",
    "merge_flags",
    "parse_config",
    "resolve_command",
    "resolve_remote",
    "server_from_flag",
]

ApprovalMode = Literal["ask", "always", "never"]
"""``ask``: the approver (the CLI prompt) decides each call that needs approval; ``always``:
approve every such call without asking; ``never``: refuse every such call."""

APPROVAL_MODES: tuple[ApprovalMode, ...] = ("ask", "always", "never")


# The KV cache types a local model may run with (weavehost.engine.native.KV_CACHE_TYPES, in
# its order): the first is the default.
KV_CACHES = ("q8_0-k", "f16", "q8_0")
DEFAULT_KV_CACHE = KV_CACHES[0]


@dataclass(frozen=True, slots=True)
class Timeouts:
    """Named bounds (seconds) on every wait the host does for a server."""

    startup: float = 15.0  # spawn + initialize handshake
    list_tools: float = 10.0  # one tools/list walk (all pages)
    call: float = 30.0  # one tools/call
    ping: float = 5.0
    shutdown_grace: float = 2.0  # after closing stdin, before SIGTERM
    kill_grace: float = 2.0  # after SIGTERM, before SIGKILL


@dataclass(frozen=True, slots=True)
class Limits:
    """Size caps that keep a hostile or buggy server from exhausting memory or context."""

    max_message_bytes: int = 4 * 1024 * 1024  # one JSON-RPC line from a server
    max_result_chars: int = 16_000  # tool result text shown to the model
    max_schema_bytes: int = 64 * 1024  # one tool's input schema, serialised
    max_schema_depth: int = 32  # nesting of a tool's input schema
    max_argument_depth: int = 64  # nesting of call arguments
    # One tool description shown to the model (~250 tokens: a tool's purpose fits, a manual
    # pasted into a description does not fill the prompt); the only cap on it (the catalog's).
    max_description_chars: int = 1_024


DEFAULT_PROMPT_CACHE_BYTES = 2 * 1024**3


@dataclass(frozen=True, slots=True)
class PromptCacheConfig:
    """The persistent prompt-prefix cache (:mod:`weavehost.agent.prompt_cache`): on or off, and
    the bytes its files may take before the least recently used are deleted."""

    enabled: bool = True
    max_bytes: int = DEFAULT_PROMPT_CACHE_BYTES


@dataclass(frozen=True, slots=True)
class HostConfig:
    """Everything the host layer needs; built by :func:`build_config`."""

    servers: tuple[ServerConfig, ...] = ()
    model: str | None = None
    remote: RemoteModelConfig | None = None  # a remote model server instead of ``model``
    threads: int | None = None
    trusted_servers: frozenset[str] = frozenset()
    approval: ApprovalMode = "ask"
    tool_choice: str | None = None  # None: the host picks (see weavehost.host.Host)
    # The host's guidance in the system text, per format (weavehost.formats.prompt); off until
    # bench-agent's A/B shows it helps (docs/agent.md).
    guidance: bool = False
    # The answer may not switch to a script the user and the tools did not use
    # (weavehost.engine.scripts).
    script_guard: bool = True
    timeouts: Timeouts = field(default_factory=Timeouts)
    limits: Limits = field(default_factory=Limits)
    prompt_cache: PromptCacheConfig = field(default_factory=PromptCacheConfig)
    # Greedy free text drafted from the conversation and verified many tokens a pass where the
    # machine's costs say it pays (weavehost.decode.answer_drafts); the text is the same.
    answer_drafts: bool = True
    # The KV cache's type (KV_CACHES): q8_0-k (q8_0 keys, f16 values: with flash attention on,
    # drafted text bit for bit the undrafted, docs/engine.md), f16 (llama.cpp's default) or
    # q8_0 (half the memory).
    kv_cache: str = DEFAULT_KV_CACHE
    roots: tuple[str, ...] = ()  # directories offered to servers; () offers none
    # Persistent approvals: server -> tool -> the tool's schema_hash (or a prefix of at least
    # 16 hex digits) it was approved with; a changed definition (a rug pull) asks again.
    approved: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    source: str | None = None  # the file it came from, for messages

    def is_trusted(self, server: str) -> bool:
        return server in self.trusted_servers

    def server(self, name: str) -> ServerConfig:
        for server in self.servers:
            if server.name == name:
                return server
        raise ConfigError(f"no server named {name!r}; configured: {', '.join(self.names) or '-'}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(s.name for s in self.servers)


# --------------------------------------------------------------------------- parsing


_HOST_KEYS = (
    "model", "threads", "trustedServers", "approval", "toolChoice", "timeouts", "limits",
    "promptCache", "roots", "approved", "answerDrafts", "guidance", "scriptGuard", "kvCache",
)  # fmt: skip
# A switch in the config: on or off (true and false mean the same).
SWITCHES = ("on", "off")
_HASH = re.compile(r"[0-9a-fA-F]{16,64}")
_MIN_HASH_DIGITS = 16
_TIMEOUT_KEYS = {
    "startup": "startup",
    "listTools": "list_tools",
    "call": "call",
    "ping": "ping",
    "shutdownGrace": "shutdown_grace",
    "killGrace": "kill_grace",
}
_LIMIT_KEYS = {
    "maxMessageBytes": "max_message_bytes",
    "maxResultChars": "max_result_chars",
    "maxSchemaBytes": "max_schema_bytes",
    "maxSchemaDepth": "max_schema_depth",
    "maxArgumentDepth": "max_argument_depth",
    "maxDescriptionChars": "max_description_chars",
}


def parse_config(document: Any, source: str = "<config>") -> HostConfig:
    """Validate a decoded config document; ``source`` names it in error messages."""
    check = Checker(source)
    doc = check.obj(document, "")
    # "servers" and "inputs": VS Code's mcp.json; "globalShortcut": Claude Desktop's.
    check.known_keys(doc, "", ("mcpServers", "servers", "inputs", "weavehost", "globalShortcut"))
    if "mcpServers" in doc and "servers" in doc:
        raise check.fail("servers", 'the file has both "mcpServers" and "servers"; keep one')
    section = "servers" if "servers" in doc else "mcpServers"
    servers_raw = check.obj(doc.get(section, {}), section)
    servers = tuple(
        s
        for name, raw in servers_raw.items()
        if (s := parse_server(check, section, name, raw)) is not None
    )
    host = check.obj(doc.get("weavehost", {}), "weavehost")
    check.known_keys(host, "weavehost", _HOST_KEYS)
    config = HostConfig(servers=servers, source=source)
    if "model" in host:
        model = parse_model(check, host["model"])
        if isinstance(model, RemoteModelConfig):
            config = replace(config, remote=model)
        else:
            config = replace(config, model=model)
    if "threads" in host:
        threads = check.number(host["threads"], "weavehost.threads", integer=True)
        config = replace(config, threads=threads)
    if "trustedServers" in host:
        trusted = check.strings(host["trustedServers"], "weavehost.trustedServers")
        names = {s.name for s in servers}
        for i, name in enumerate(trusted):
            if name not in names:
                raise check.fail(
                    f"weavehost.trustedServers[{i}]",
                    f"no server named {name!r} in mcpServers "
                    f"(have: {', '.join(sorted(names)) or '-'})",
                )
        config = replace(config, trusted_servers=frozenset(trusted))
    if "approval" in host:
        approval = _one_of(check, host["approval"], "weavehost.approval", APPROVAL_MODES)
        config = replace(config, approval=approval)  # type: ignore[arg-type]
    if "kvCache" in host:
        kv_cache = _one_of(check, host["kvCache"], "weavehost.kvCache", KV_CACHES)
        config = replace(config, kv_cache=kv_cache)
    if "toolChoice" in host:
        # auto | required | none | a tool's name: the name is checked against the catalog
        # once the servers have listed their tools (weavehost.agent.options).
        choice = check.string(host["toolChoice"], "weavehost.toolChoice")
        config = replace(config, tool_choice=choice)
    if "timeouts" in host:
        timeouts = parse_numbers(
            check, host["timeouts"], "weavehost.timeouts", _TIMEOUT_KEYS, Timeouts()
        )
        config = replace(config, timeouts=timeouts)
    if "limits" in host:
        limits = parse_numbers(check, host["limits"], "weavehost.limits", _LIMIT_KEYS, Limits())
        config = replace(config, limits=limits)
    if "promptCache" in host:
        config = replace(config, prompt_cache=_parse_prompt_cache(check, host["promptCache"]))
    if "guidance" in host:
        config = replace(config, guidance=_switch(check, host["guidance"], "weavehost.guidance"))
    if "scriptGuard" in host:
        guard = _switch(check, host["scriptGuard"], "weavehost.scriptGuard")
        config = replace(config, script_guard=guard)
    if "answerDrafts" in host:
        drafts = _switch(check, host["answerDrafts"], "weavehost.answerDrafts")
        config = replace(config, answer_drafts=drafts)
    if "roots" in host:
        roots = check.strings(host["roots"], "weavehost.roots")
        for i, root in enumerate(roots):
            if not root:
                raise check.fail(f"weavehost.roots[{i}]", "expected a directory, got ''")
        config = replace(config, roots=roots)
    if "approved" in host:
        approved = _parse_approved(check, host["approved"], section, {s.name for s in servers})
        config = replace(config, approved=approved)
    return config


def _parse_approved(
    check: Checker, raw: Any, section: str, names: set[str]
) -> Mapping[str, Mapping[str, str]]:
    key = "weavehost.approved"
    raw = check.obj(raw, key)
    approved: dict[str, Mapping[str, str]] = {}
    for server, tools in raw.items():
        if server not in names:
            hint = difflib.get_close_matches(server, sorted(names), n=1)
            extra = f" (did you mean {hint[0]!r}?)" if hint else ""
            raise check.fail(
                join_key(key, server),
                f"no server named {server!r} in {section}{extra} "
                f"(have: {', '.join(sorted(names)) or '-'})",
            )
        hashes = check.string_map(tools, join_key(key, server))
        for tool, digest in hashes.items():
            if not _HASH.fullmatch(digest):
                raise check.fail(
                    f"{key}.{server}.{tool}",
                    f"expected the tool's schema hash ({_MIN_HASH_DIGITS} to 64 hex digits, "
                    f"as weavehost tools --json prints it), got {kind_of(digest)}",
                )
        approved[server] = MappingProxyType({t: d.lower() for t, d in hashes.items()})
    return MappingProxyType(approved)


def _one_of(check: Checker, raw: Any, key: str, choices: Sequence[str]) -> str:
    """``raw`` where it is one of ``choices``; a clear error naming them otherwise."""
    if raw not in choices:
        raise check.fail(key, f"expected one of {', '.join(choices)}, got {kind_of(raw)}")
    return str(raw)


def _switch(check: Checker, raw: Any, key: str) -> bool:
    """``"on"``/``"off"`` (or ``true``/``false``) as a bool; a clear error otherwise."""
    if isinstance(raw, bool):
        return raw
    if raw not in SWITCHES:
        raise check.fail(key, f'expected "on" or "off", got {kind_of(raw)}')
    return bool(raw == "on")


def _parse_prompt_cache(check: Checker, raw: Any) -> PromptCacheConfig:
    key = "weavehost.promptCache"
    raw = check.obj(raw, key)
    check.known_keys(raw, key, ("enabled", "maxBytes"))
    cache = PromptCacheConfig()
    if "enabled" in raw:
        cache = replace(cache, enabled=check.boolean(raw["enabled"], f"{key}.enabled"))
    if "maxBytes" in raw:
        max_bytes = check.number(raw["maxBytes"], f"{key}.maxBytes", integer=True)
        cache = replace(cache, max_bytes=max_bytes)
    return cache


def load_config(path: str | os.PathLike[str]) -> HostConfig:
    """Read and validate a config file (JSON)."""
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{source}: config file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: cannot read config file: {exc}") from exc
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{source}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    return parse_config(document, source)


def build_config(
    config_path: str | os.PathLike[str] | None = None,
    server_flags: Sequence[str] = (),
    *,
    trust: Sequence[str] = (),
    approval: ApprovalMode | None = None,
) -> HostConfig:
    """Merge a config file (optional) with ``--server`` flags and CLI overrides."""
    config = load_config(config_path) if config_path is not None else HostConfig()
    servers = list(config.servers)
    for flag in server_flags:
        servers.append(server_from_flag(flag, taken=[s.name for s in servers]))
    names = {s.name for s in servers}
    for name in trust:
        if name not in names:
            raise ConfigError(
                f"--trust {name!r}: no such server (have: {', '.join(sorted(names)) or '-'})"
            )
    config = replace(
        config,
        servers=tuple(servers),
        trusted_servers=config.trusted_servers | frozenset(trust),
    )
    if approval is not None:
        if approval not in APPROVAL_MODES:
            raise ConfigError(
                f"--approval: expected one of {', '.join(APPROVAL_MODES)}, got {approval!r}"
            )
        config = replace(config, approval=approval)
    return config


def merge_flags(
    config: HostConfig,
    *,
    servers: Sequence[str] = (),
    trust: Sequence[str] = (),
    approval: ApprovalMode | None = None,
    inproc: Collection[str] = (),
    model: str | None = None,
    threads: int | None = None,
    tool_choice: str | None = None,
    prompt_cache: bool | None = None,
    answer_drafts: bool | None = None,
    guidance: bool | None = None,
    script_guard: bool | None = None,
    kv_cache: str | None = None,
) -> HostConfig:
    """``config`` with a :class:`~weavehost.host.Host`'s keyword flags over it; every field no
    flag sets (roots, approved, timeouts …) is kept as configured.

    ``servers`` (as ``--server`` takes them) are added after the configured ones, and one named
    like a configured server is left out (the configured one runs); ``trust`` adds to the trusted
    servers and must name one of them or of ``inproc`` (the names of servers run in this
    process); ``approval`` replaces the configured mode. A ``model`` path means that local file
    (no remote server), a URL the remote server it names with the config's other remote
    settings (:func:`resolve_remote`); ``threads`` and ``tool_choice`` replace the config's
    when given; ``prompt_cache`` turns the cache on or off, ``answer_drafts`` the drafts of
    answers, ``guidance`` the host's guidance, ``script_guard`` the answer's script guard and
    ``kv_cache`` the KV cache's type (``None``: as configured; another type than
    :data:`KV_CACHES` is a :class:`ConfigError`)."""
    if kv_cache is not None and kv_cache not in KV_CACHES:
        raise ConfigError(f"--kv-cache {kv_cache!r}: expected one of {', '.join(KV_CACHES)}")
    if servers or trust or approval:
        extra = build_config(None, servers, approval=approval)
        taken = {s.name for s in config.servers}
        merged = config.servers + tuple(s for s in extra.servers if s.name not in taken)
        names = {s.name for s in merged} | set(inproc)
        unknown = [t for t in trust if t not in names]
        if unknown:
            raise ConfigError(f"--trust {unknown[0]!r}: no such server")
        config = replace(
            config,
            servers=merged,
            trusted_servers=config.trusted_servers | frozenset(trust),
            approval=extra.approval if approval else config.approval,
        )
    if prompt_cache is not None:
        config = replace(config, prompt_cache=replace(config.prompt_cache, enabled=prompt_cache))
    if answer_drafts is not None:
        config = replace(config, answer_drafts=answer_drafts)
    return replace(
        config,
        model=model if model and not is_model_url(model) else config.model,
        remote=resolve_remote(model, config.remote),
        threads=threads or config.threads,
        tool_choice=tool_choice or config.tool_choice,
        guidance=config.guidance if guidance is None else guidance,
        script_guard=config.script_guard if script_guard is None else script_guard,
        kv_cache=kv_cache or config.kv_cache,
    )
