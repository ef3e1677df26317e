"""One MCP server's record, and the ``--server`` flag that makes one without a config file.

Stage: configuration (under :mod:`weavehost.config`, which reads a file's servers into
:class:`ServerConfig` records and re-exports these names). Invariants:

* A ``--server`` value is a ``.py`` path (run with the host's own interpreter), a command line
  (split as a shell would, its program found on ``PATH``) or an ``http(s)://`` URL; the server
  is named after the script, the program or the URL's host, made unique with ``-2``, ``-3`` ….
  A bad value is a :class:`~weavehost.errors.ConfigError` naming the flag and the problem.
* ``python``/``python3`` as a command means the host's own interpreter (:func:`resolve_command`),
  so an example server finds the ``mcp`` package the host was installed with.
* Records are frozen; nothing here spawns a process or touches the network.
"""

from __future__ import annotations

import re
import shlex
import shutil
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from weavehost.config_check import Checker, expand, expand_map, kind_of, mask_url
from weavehost.errors import ConfigError

__all__ = ["ServerConfig", "parse_server", "resolve_command", "server_from_flag"]

# Commands that mean "a Python interpreter": run them with the host's own interpreter, so an
# example server finds the `mcp` package the host was installed with.
_PYTHON_COMMANDS = frozenset({"python", "python3"})
_NAME_OK = re.compile(r"[^A-Za-z0-9_.-]+")
# Programs that start the program a server is: a server started through one is named after
# what it starts, as its user names it (`--trust server-filesystem` for `npx -y
# @modelcontextprotocol/server-filesystem DIR`, not `npx`). Package runners: the first
# argument that is not an option (or the value of one of _VALUED), after a subcommand where
# the runner takes one; interpreters: the script, or a module after `-m`.
_RUNNERS: dict[str, str | None] = {
    "npx": None,
    "bunx": None,
    "uvx": None,
    "pipx": "run",
    "pnpm": "dlx",
    "yarn": "dlx",
}
_VALUED = frozenset({"-p", "--package", "--from", "--with", "--python", "--spec"})
_INTERPRETERS = frozenset({"node", "bun", "deno", *_PYTHON_COMMANDS})
# A script with one of these names says nothing of its server: the folder above it does, past
# the build folders (`…/server-filesystem/dist/index.js`).
_GENERIC_STEMS = frozenset({"index", "main", "cli", "server", "app", "__main__"})
_BUILD_FOLDERS = frozenset({"dist", "build", "lib", "src", "bin", "out", "."})


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
    # OAuth client options (only read when ``oauth``): the scopes to ask for (None: what the
    # server challenges with), the client name registered, and a fixed loopback port for the
    # redirect (None: any free port; some authorization servers want a pre-registered one).
    oauth_scopes: tuple[str, ...] | None = None
    oauth_client_name: str = "weavehost"
    oauth_redirect_port: int | None = None

    @property
    def transport(self) -> Literal["stdio", "http", "sse"]:
        if self.url is None:
            return "stdio"
        return self.http_transport

    def describe(self) -> str:
        """A one-line human description: the URL (its password and query values masked, as they
        may hold a secret from the environment), or the command line."""
        if self.url is not None:
            return mask_url(self.url)
        return shlex.join([self.command or "", *self.args])

    def allows_tool(self, tool: str) -> bool:
        """The ``tools`` filter: ``tool`` matches ``include`` (when given) and no ``exclude``.
        Patterns are exact names or ``fnmatch`` globs, matched case-sensitively."""
        if self.tools_include is not None and not any(
            fnmatchcase(tool, p) for p in self.tools_include
        ):
            return False
        return not any(fnmatchcase(tool, p) for p in self.tools_exclude)


# --------------------------------------------------------------------------- --server flags


def server_from_flag(value: str, taken: Iterable[str] = ()) -> ServerConfig:
    """Turn one ``--server`` value into a ServerConfig.

    ``http(s)://…`` is a streamable HTTP URL; a path ending in ``.py`` runs with the current
    Python; anything else is a command line split like a shell would. The server is named after
    the script, the program or the URL's host, with ``-2``, ``-3`` … on a clash; a program that
    starts another (``npx``, ``uvx``, ``pipx run``, ``node``, ``python -m`` …) names it after
    what it starts (:func:`_launched`).
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
            name=_unique(_script_name(script), taken),
            command=sys.executable,
            args=(str(script), *words[1:]),
        )
    if shutil.which(words[0]) is None and words[0] not in _PYTHON_COMMANDS:
        raise ConfigError(f"--server {value!r}: command {words[0]!r} not found on PATH")
    name = _launched(words) or Path(words[0]).name
    return ServerConfig(name=_unique(name, taken), command=words[0], args=tuple(words[1:]))


def _launched(words: list[str]) -> str | None:
    """What a command line starts, where its program is a package runner or an interpreter
    (``None``: the program is the server, or what it starts is not named)."""
    program, rest = Path(words[0]).name, words[1:]
    if program in _RUNNERS:
        subcommand = _RUNNERS[program]
        if subcommand is not None:
            if rest[:1] != [subcommand]:
                return None
            rest = rest[1:]
        named = _first_argument(rest)
        if named is None:
            return None
        # An npm package's scope and version, a Python one's version or extras.
        return re.split(r"[@=<>~!\[ ]", named.rsplit("/", 1)[-1])[0] or None
    if program in _INTERPRETERS:
        if program in _PYTHON_COMMANDS and rest[:1] == ["-m"] and len(rest) > 1:
            return rest[1]
        script = _first_argument([w for w in rest if w != "run"])  # deno run …
        return _script_name(Path(script)) if script else None
    return None


def _first_argument(words: list[str]) -> str | None:
    """The first of ``words`` that is neither an option nor an option's value."""
    valued = False
    for word in words:
        if valued:
            valued = False
        elif word in _VALUED:
            valued = True
        elif not word.startswith("-"):
            return word
    return None


def _script_name(script: Path) -> str:
    """A server script's name: its own, or where that is generic (``index.js``), the nearest
    folder above it that is not a build folder."""
    if script.stem.lower() not in _GENERIC_STEMS:
        return script.stem
    folders = script.absolute().parents  # `node ./index.js`: the folder it runs in
    named = (p.name for p in folders if p.name and p.name not in _BUILD_FOLDERS)
    return next(named, script.stem)


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


# --------------------------------------------------------------------------- parsing

_SERVER_KEYS = (
    "command", "args", "env", "url", "cwd", "headers", "type", "disabled", "protocol", "oauth",
    "tools",
)  # fmt: skip
_SERVER_TYPES: dict[str, Literal["stdio", "http", "sse"]] = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "sse": "sse",
}
_OAUTH_KEYS = ("scopes", "clientName", "redirectPort")


def parse_server(check: Checker, section: str, name: str, raw: Any) -> ServerConfig | None:
    """One server's entry of a config file (``section.name``) as its record; ``None`` for a
    disabled one. Every problem is a ConfigError naming the key."""
    key = f"{section}.{name}"  # any name is accepted; tool prefixes sanitise it later
    entry = check.obj(raw, key)
    check.known_keys(entry, key, _SERVER_KEYS)
    if "disabled" in entry and check.boolean(entry["disabled"], f"{key}.disabled"):
        return None
    command, url = entry.get("command"), entry.get("url")
    kind = None
    if "type" in entry:
        kind = _SERVER_TYPES.get(entry["type"]) if isinstance(entry["type"], str) else None
        if kind is None:
            raise check.fail(
                f"{key}.type",
                f"expected one of {', '.join(_SERVER_TYPES)}, got {kind_of(entry['type'])}",
            )
    if command is None and url is None:
        raise check.fail(key, 'needs "command" (a program to spawn) or "url" (an HTTP server)')
    if command is not None and url is not None:
        raise check.fail(key, 'has both "command" and "url"; keep one')
    if kind == "stdio" and url is not None:
        raise check.fail(f"{key}.type", '"stdio" needs "command", not "url"')
    if kind in ("http", "sse") and command is not None:
        raise check.fail(f"{key}.type", f'"{entry["type"]}" needs "url", not "command"')
    protocol = _parse_protocol(check, entry["protocol"], key) if "protocol" in entry else "auto"
    include: tuple[str, ...] | None = None
    exclude: tuple[str, ...] = ()
    if "tools" in entry:
        include, exclude = _parse_tool_filter(check, entry["tools"], key)
    if url is not None:
        url = expand(check, check.string(url, f"{key}.url"), f"{key}.url")
        if urlsplit(url).scheme not in ("http", "https"):
            shown = entry["url"]  # as written: the expanded text may hold a secret
            raise check.fail(f"{key}.url", f"expected an http:// or https:// URL, got {shown!r}")
        server = ServerConfig(
            name=name,
            url=url,
            headers=expand_map(check, entry.get("headers", {}), f"{key}.headers"),
            protocol=protocol,
            http_transport="sse" if kind == "sse" else "http",
            tools_include=include,
            tools_exclude=exclude,
        )
        if "oauth" in entry:
            server = _parse_oauth(check, entry["oauth"], f"{key}.oauth", server)
        return server
    for http_only in ("headers", "oauth"):
        if http_only in entry:
            raise check.fail(f"{key}.{http_only}", 'only an HTTP server (one with "url") has it')
    return ServerConfig(
        name=name,
        command=check.string(command, f"{key}.command"),
        args=tuple(
            expand(check, arg, f"{key}.args[{i}]")
            for i, arg in enumerate(check.strings(entry.get("args", []), f"{key}.args"))
        ),
        env=expand_map(check, entry.get("env", {}), f"{key}.env"),
        cwd=check.string(entry["cwd"], f"{key}.cwd") if "cwd" in entry else None,
        protocol=protocol,
        tools_include=include,
        tools_exclude=exclude,
    )


def _parse_protocol(check: Checker, raw: Any, key: str) -> str:
    """``auto``, ``legacy`` or a modern version as is; a handshake-era version means legacy."""
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

    if raw in ("auto", "legacy") or raw in MODERN_PROTOCOL_VERSIONS:
        return str(raw)
    if raw in HANDSHAKE_PROTOCOL_VERSIONS:
        return "legacy"
    known = ", ".join(["auto", "legacy", *MODERN_PROTOCOL_VERSIONS, *HANDSHAKE_PROTOCOL_VERSIONS])
    raise check.fail(f"{key}.protocol", f"expected one of {known}, got {kind_of(raw)}")


def _parse_tool_filter(
    check: Checker, raw: Any, key: str
) -> tuple[tuple[str, ...] | None, tuple[str, ...]]:
    key = f"{key}.tools"
    raw = check.obj(raw, key)
    check.known_keys(raw, key, ("include", "exclude"))
    lists = {}
    for which in ("include", "exclude"):
        if which in raw:
            names = check.strings(raw[which], f"{key}.{which}")
            for i, item in enumerate(names):
                if not item:
                    raise check.fail(f"{key}.{which}[{i}]", "expected a tool name, got ''")
            lists[which] = names
    return lists.get("include"), lists.get("exclude", ())


def _parse_oauth(check: Checker, raw: Any, key: str, server: ServerConfig) -> ServerConfig:
    if isinstance(raw, bool):
        return replace(server, oauth=raw)
    if not isinstance(raw, dict):
        raise check.fail(key, f"expected true, false or an object, got {kind_of(raw)}")
    check.known_keys(raw, key, _OAUTH_KEYS)
    server = replace(server, oauth=True)
    if "scopes" in raw:
        server = replace(server, oauth_scopes=check.strings(raw["scopes"], f"{key}.scopes"))
    if "clientName" in raw:
        server = replace(
            server, oauth_client_name=check.string(raw["clientName"], f"{key}.clientName")
        )
    if "redirectPort" in raw:
        port = check.number(raw["redirectPort"], f"{key}.redirectPort", integer=True)
        if port > 65535:
            raise check.fail(f"{key}.redirectPort", f"expected a TCP port (1-65535), got {port}")
        server = replace(server, oauth_redirect_port=port)
    return server
