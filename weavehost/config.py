"""Host configuration: which MCP servers to run, whom to trust, how long to wait.

Stage: configuration (the first thing the host reads; every other stage takes a
:class:`HostConfig`).

Invariants:

* A Claude Desktop config (``{"mcpServers": {name: {command, args, env} | {url}}}``) is accepted
  unchanged. weavehost's own settings live beside it under the ``"weavehost"`` key, so one file
  can serve both programs.
* Every problem in a file is a :class:`~weavehost.errors.ConfigError` whose message names the
  file, the key (as a dotted path such as ``mcpServers.weather.args[1]``) and the problem.
* Records are frozen; nothing here spawns a process or touches the network.
* Trust is by server name and only by config: nothing a server says can make it trusted.

File format (every ``weavehost`` key is optional)::

    {
      "mcpServers": {
        "weather": {"command": "python", "args": ["tools/weather.py"], "env": {"UNITS": "metric"}},
        "remote":  {"url": "http://127.0.0.1:8000/mcp"}
      },
      "weavehost": {
        "model": "path/to/model.gguf", "threads": 2,
        "trustedServers": ["weather"],
        "approval": "ask",                       # ask | always | never
        "toolChoice": "auto",                    # auto | required | none | a tool's name
        "timeouts": {"startup": 15, "listTools": 10, "call": 30, "ping": 5,
                     "shutdownGrace": 2, "killGrace": 2},
        "limits": {"maxMessageBytes": 4194304, "maxResultChars": 16000,
                   "maxSchemaBytes": 65536, "maxSchemaDepth": 32},
        "promptCache": {"enabled": true, "maxBytes": 2147483648}
      }
    }
"""

from __future__ import annotations

import difflib
import json
import os
import re
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from weavehost.errors import ConfigError

__all__ = [
    "APPROVAL_MODES",
    "DEFAULT_PROMPT_CACHE_BYTES",
    "ApprovalMode",
    "HostConfig",
    "Limits",
    "PromptCacheConfig",
    "ServerConfig",
    "Timeouts",
    "build_config",
    "load_config",
    "parse_config",
    "resolve_command",
    "server_from_flag",
]

ApprovalMode = Literal["ask", "always", "never"]
"""``ask``: the approver (the CLI prompt) decides each call that needs approval; ``always``:
approve every such call without asking; ``never``: refuse every such call."""

APPROVAL_MODES: tuple[ApprovalMode, ...] = ("ask", "always", "never")

# Commands that mean "a Python interpreter": run them with the host's own interpreter, so an
# example server finds the `mcp` package the host was installed with.
_PYTHON_COMMANDS = frozenset({"python", "python3"})
_NAME_OK = re.compile(r"[^A-Za-z0-9_.-]+")


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
    max_description_chars: int = 4_000  # one tool description shown to the model


DEFAULT_PROMPT_CACHE_BYTES = 2 * 1024**3


@dataclass(frozen=True, slots=True)
class PromptCacheConfig:
    """The persistent prompt-prefix cache (:mod:`weavehost.agent.prompt_cache`): on or off, and
    the bytes its files may take before the least recently used are deleted."""

    enabled: bool = True
    max_bytes: int = DEFAULT_PROMPT_CACHE_BYTES


@dataclass(frozen=True, slots=True)
class ServerConfig:
    """One MCP server: a command to spawn (stdio) or a URL (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    url: str | None = None
    cwd: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    # "auto" (2026-07-28 discovery, falling back to the handshake), "legacy" (the handshake
    # only) or a modern protocol version string to adopt directly.
    protocol: str = "auto"
    # "http" (streamable HTTP) or "sse" (the legacy SSE transport), for a server with a URL.
    http_transport: Literal["http", "sse"] = "http"
    oauth: bool = False  # authorize with OAuth (weavehost auth SERVER) before connecting
    tools_include: tuple[str, ...] | None = None  # None: every tool the server lists
    tools_exclude: tuple[str, ...] = ()

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        if self.url is None:
            return "stdio"
        return self.http_transport

    def describe(self) -> str:
        """A one-line human description: the URL, or the command line."""
        if self.url is not None:
            return self.url
        return shlex.join([self.command or "", *self.args])


@dataclass(frozen=True, slots=True)
class HostConfig:
    """Everything the host layer needs; built by :func:`build_config`."""

    servers: tuple[ServerConfig, ...] = ()
    model: str | None = None
    threads: int | None = None
    trusted_servers: frozenset[str] = frozenset()
    approval: ApprovalMode = "ask"
    tool_choice: str | None = None  # None: the host picks (see weavehost.host.Host)
    timeouts: Timeouts = field(default_factory=Timeouts)
    limits: Limits = field(default_factory=Limits)
    prompt_cache: PromptCacheConfig = field(default_factory=PromptCacheConfig)
    roots: tuple[str, ...] = ()  # directories offered to servers; () means the current one
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


class _Checker:
    """Reads a decoded JSON document, raising ConfigError that names file, key and problem."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, problem: str) -> ConfigError:
        where = f"{self.source}: {key}" if key else self.source
        return ConfigError(f"{where}: {problem}")

    def obj(self, value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(key, f"expected an object, got {_kind(value)}")
        return value

    def known_keys(self, value: Mapping[str, Any], key: str, allowed: Iterable[str]) -> None:
        allowed = list(allowed)
        for name in value:
            if name not in allowed:
                hint = difflib.get_close_matches(name, allowed, n=1)
                extra = (
                    f" (did you mean {hint[0]!r}?)" if hint else f"; known: {', '.join(allowed)}"
                )
                raise self.fail(_join(key, name), f"unknown key{extra}")

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(key, f"expected a non-empty string, got {_kind(value)}")
        return value

    def number(self, value: Any, key: str, *, integer: bool = False, minimum: float = 0) -> Any:
        ok = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not ok:
            want = "an integer" if integer else "a number"
            raise self.fail(key, f"expected {want}, got {_kind(value)}")
        if value <= minimum:
            raise self.fail(key, f"must be greater than {minimum:g}, got {value!r}")
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {_kind(value)}")
        return value

    def strings(self, value: Any, key: str) -> tuple[str, ...]:
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list of strings, got {_kind(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise self.fail(f"{key}[{i}]", f"expected a string, got {_kind(item)}")
        return tuple(value)

    def string_map(self, value: Any, key: str) -> dict[str, str]:
        value = self.obj(value, key)
        for name, item in value.items():
            if not isinstance(item, str):
                raise self.fail(_join(key, name), f"expected a string, got {_kind(item)}")
        return dict(value)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"number {value!r}"
    if isinstance(value, str):
        return f"string {value[:40]!r}"
    return {"list": "a list", "dict": "an object"}.get(type(value).__name__, type(value).__name__)


def _join(key: str, name: str) -> str:
    return f"{key}.{name}" if key else name


_SERVER_KEYS = ("command", "args", "env", "url", "cwd", "headers", "type", "disabled")
_HOST_KEYS = (
    "model", "threads", "trustedServers", "approval", "toolChoice", "timeouts", "limits",
    "promptCache",
)  # fmt: skip
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


def _parse_server(check: _Checker, name: str, raw: Any) -> ServerConfig | None:
    key = f"mcpServers.{name}"  # any name is accepted; tool prefixes sanitise it later
    entry = check.obj(raw, key)
    check.known_keys(entry, key, _SERVER_KEYS)
    if entry.get("disabled") is True:
        return None
    command, url = entry.get("command"), entry.get("url")
    if command is None and url is None:
        raise check.fail(key, 'needs "command" (a program to spawn) or "url" (streamable HTTP)')
    if command is not None and url is not None:
        raise check.fail(key, 'has both "command" and "url"; keep one')
    if url is not None:
        url = check.string(url, f"{key}.url")
        if urlsplit(url).scheme not in ("http", "https"):
            raise check.fail(f"{key}.url", f"expected an http:// or https:// URL, got {url!r}")
        return ServerConfig(
            name=name,
            url=url,
            headers=check.string_map(entry.get("headers", {}), f"{key}.headers"),
        )
    return ServerConfig(
        name=name,
        command=check.string(command, f"{key}.command"),
        args=check.strings(entry.get("args", []), f"{key}.args"),
        env=check.string_map(entry.get("env", {}), f"{key}.env"),
        cwd=check.string(entry["cwd"], f"{key}.cwd") if "cwd" in entry else None,
    )


def _parse_numbers(check: _Checker, raw: Any, key: str, names: Mapping[str, str], base: Any) -> Any:
    raw = check.obj(raw, key)
    check.known_keys(raw, key, names)
    values = {}
    for wire, attr in names.items():
        if wire in raw:
            integer = isinstance(getattr(base, attr), int)
            values[attr] = check.number(raw[wire], f"{key}.{wire}", integer=integer)
    return replace(base, **values)


def parse_config(document: Any, source: str = "<config>") -> HostConfig:
    """Validate a decoded config document; ``source`` names it in error messages."""
    check = _Checker(source)
    doc = check.obj(document, "")
    check.known_keys(doc, "", ("mcpServers", "weavehost", "globalShortcut"))
    servers_raw = check.obj(doc.get("mcpServers", {}), "mcpServers")
    servers = tuple(
        s for name, raw in servers_raw.items() if (s := _parse_server(check, name, raw)) is not None
    )
    host = check.obj(doc.get("weavehost", {}), "weavehost")
    check.known_keys(host, "weavehost", _HOST_KEYS)
    config = HostConfig(servers=servers, source=source)
    if "model" in host:
        config = replace(config, model=check.string(host["model"], "weavehost.model"))
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
        approval = host["approval"]
        if approval not in APPROVAL_MODES:
            raise check.fail(
                "weavehost.approval",
                f"expected one of {', '.join(APPROVAL_MODES)}, got {_kind(approval)}",
            )
        config = replace(config, approval=approval)
    if "toolChoice" in host:
        # auto | required | none | a tool's name: the name is checked against the catalog
        # once the servers have listed their tools (weavehost.agent.options).
        choice = check.string(host["toolChoice"], "weavehost.toolChoice")
        config = replace(config, tool_choice=choice)
    if "timeouts" in host:
        timeouts = _parse_numbers(
            check, host["timeouts"], "weavehost.timeouts", _TIMEOUT_KEYS, Timeouts()
        )
        config = replace(config, timeouts=timeouts)
    if "limits" in host:
        limits = _parse_numbers(check, host["limits"], "weavehost.limits", _LIMIT_KEYS, Limits())
        config = replace(config, limits=limits)
    if "promptCache" in host:
        config = replace(config, prompt_cache=_parse_prompt_cache(check, host["promptCache"]))
    return config


def _parse_prompt_cache(check: _Checker, raw: Any) -> PromptCacheConfig:
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


# --------------------------------------------------------------------------- --server flags


def server_from_flag(value: str, taken: Iterable[str] = ()) -> ServerConfig:
    """Turn one ``--server`` value into a ServerConfig.

    ``http(s)://…`` is a streamable HTTP URL; a path ending in ``.py`` runs with the current
    Python; anything else is a command line split like a shell would. The server is named after
    the script, the program or the URL's host, with ``-2``, ``-3`` … on a clash.
    """
    text = value.strip()
    if not text:
        raise ConfigError("--server: empty value; pass a .py path, a command or an http(s) URL")
    if text.startswith(("http://", "https://")):
        parts = urlsplit(text)
        if not parts.hostname:
            raise ConfigError(f"--server {value!r}: URL has no host")
        return ServerConfig(name=_unique(parts.hostname, taken), url=text)
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise ConfigError(f"--server {value!r}: cannot split the command line: {exc}") from None
    if words[0].endswith(".py"):
        script = Path(words[0])
        if not script.is_file():
            raise ConfigError(f"--server {value!r}: no such Python file: {script}")
        return ServerConfig(
            name=_unique(script.stem, taken), command=sys.executable, args=(str(script), *words[1:])
        )
    if shutil.which(words[0]) is None and words[0] not in _PYTHON_COMMANDS:
        raise ConfigError(f"--server {value!r}: command {words[0]!r} not found on PATH")
    return ServerConfig(
        name=_unique(Path(words[0]).name, taken), command=words[0], args=tuple(words[1:])
    )


def _unique(base: str, taken: Iterable[str]) -> str:
    base = _NAME_OK.sub("_", base).strip("_") or "server"
    taken = set(taken)
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def resolve_command(server: ServerConfig) -> str:
    """The program to exec for a stdio server (``python``/``python3`` → this interpreter)."""
    if server.command is None:
        raise ConfigError(f"server {server.name!r} has a URL, not a command")
    if server.command in _PYTHON_COMMANDS:
        return sys.executable
    return server.command


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
