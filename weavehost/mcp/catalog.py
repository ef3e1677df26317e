"""The tool catalog: every tool of every server as one frozen :class:`ToolSpec` record.

Stage: catalog (between the ServerPool, which lists tools, and the model formats and executor,
which render and call them).

Invariants:

* A schema in a ToolSpec is normalised by :func:`weavehost.mcp.schemas.normalize_schema` (local
  ``$ref`` inlined, BFCL spellings mapped, checked against Draft 2020-12, a remote ``$ref`` never
  fetched). Nothing here opens a socket or a file (the jsonschema validators get an empty
  ``referencing.Registry``, which cannot retrieve).
* A tool whose schema is invalid, recursive, remote, too deep or too large is left out with a
  warning naming server and tool (:attr:`Catalog.omitted`); no ``RecursionError`` escapes,
  because depth is measured iteratively before anything recursive runs.
* ``read_only`` is true only when the raw ``readOnlyHint`` is exactly JSON ``true``; ``"true"``,
  ``1`` or a missing hint count as false. ``trusted`` comes from config only.
* Qualified names are unique and match ``[A-Za-z0-9_.-]{1,128}``. A bare name offered by one
  server stays bare; a name offered by several servers becomes ``<server>_<name>`` for each of
  them (suffix ``_2``, ``_3`` … if that still clashes). Nothing is ever silently overridden.
* A server's ``tools`` filter in the config (include/exclude by name or ``fnmatch`` glob, see
  :meth:`~weavehost.config.ServerConfig.allows_tool`) is applied before anything else: a filtered
  tool is neither shown to the model nor callable (:meth:`Catalog.get` does not know it), takes
  no part in name qualification, and is not reported as omitted. An ``include`` entry that
  matches no listed tool is a warning (once per server and entry), never an error.
* Arguments are validated (Draft 2020-12, no remote retrieval) before a call may be sent.
* ``description`` (what the model reads) is capped at ``limits.max_description_chars``;
  ``full_description`` keeps every character for the approver, and ``schema_hash`` covers the full
  text, so a change past the cap is still a change.
* Rug pulls: the first hash seen for each ``(server, tool)`` is pinned for the catalog's
  lifetime. A tool whose hash later differs carries ``changed_from`` (the pinned hash) from then
  on, even if it changes back; the executor never runs it provisionally again. From the moment a
  server sends ``tools/list_changed`` until its re-listing is in, :meth:`Catalog.current` waits
  rather than hand out a spec that may be stale.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from types import MappingProxyType
from typing import Any

import anyio
from jsonschema import Draft202012Validator
from referencing import Registry

from weavehost.config import HostConfig, Limits
from weavehost.errors import ArgumentValidationError, SchemaError, UnknownToolError
from weavehost.mcp.schemas import json_depth, normalize_schema, schema_hash

__all__ = [
    "Catalog",
    "OmittedTool",
    "ToolSpec",
    "json_depth",
    "normalize_schema",
    "qualify_names",
    "schema_hash",
]

logger = logging.getLogger(__name__)

DESCRIPTION_TRUNCATION_MARKER = " …[description truncated by weavehost]"
_NAME_BAD = re.compile(r"[^A-Za-z0-9_.-]")
_MAX_NAME = 128


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool of one server, as the model and the executor see it.

    ``input_schema`` and ``annotations`` are read-only mappings; ``name`` is what the server
    calls the tool, ``qualified_name`` what the model calls it.
    """

    qualified_name: str
    server: str
    name: str
    description: str
    input_schema: Mapping[str, Any] = field(hash=False)
    required: tuple[str, ...]
    optional: tuple[str, ...]
    annotations: Mapping[str, Any] = field(hash=False)
    read_only: bool
    trusted: bool
    schema_hash: str
    title: str | None = None
    full_description: str = ""
    output_schema: Mapping[str, Any] | None = field(default=None, hash=False)
    changed_from: str | None = None

    @property
    def changed(self) -> bool:
        """The tool's hash differs from the first one seen this session (a rug pull)."""
        return self.changed_from is not None

    def schema_dict(self) -> dict[str, Any]:
        """A mutable deep copy of the input schema (for grammar builders and JSON output)."""
        return _thaw(self.input_schema)

    def output_schema_dict(self) -> dict[str, Any] | None:
        return None if self.output_schema is None else _thaw(self.output_schema)


@dataclass(frozen=True, slots=True)
class OmittedTool:
    """A tool left out of the catalog, and why."""

    server: str
    name: str
    reason: str


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _sanitize(name: str) -> str:
    return (_NAME_BAD.sub("_", name) or "_")[:_MAX_NAME]


def qualify_names(pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Map each ``(server, tool)`` to a unique model-facing name, deterministically.

    A tool name offered by one server stays as it is (sanitised); one offered by several gets
    ``<server>_<tool>`` for every server offering it; any remaining clash gets ``_2``, ``_3`` …
    in sorted ``(server, tool)`` order.
    """
    ordered = sorted(set(pairs))
    counts: dict[str, int] = {}
    for _, tool in ordered:
        counts[_sanitize(tool)] = counts.get(_sanitize(tool), 0) + 1
    names: dict[tuple[str, str], str] = {}
    used: set[str] = set()
    for server, tool in ordered:
        base = _sanitize(tool)
        if counts[base] > 1:
            base = _sanitize(f"{server}_{tool}")
        candidate, n = base, 1
        while candidate in used:
            n += 1
            suffix = f"_{n}"
            candidate = base[: _MAX_NAME - len(suffix)] + suffix
        used.add(candidate)
        names[(server, tool)] = candidate
    return names


# --------------------------------------------------------------------------- catalog


class Catalog:
    """All usable tools of all servers, plus the ones left out and why.

    Build it with :meth:`from_listings` from raw ``tools/list`` entries (dicts as they came over
    the wire, so a hint of ``"true"`` is not mistaken for ``true``), or :meth:`load` from a live
    :class:`~weavehost.mcp.servers.ServerPool`. :meth:`refresh` re-lists one server (on
    ``notifications/tools/list_changed``) and bumps :attr:`version`.
    """

    def __init__(self, config: HostConfig | None = None) -> None:
        self._config = config or HostConfig()
        self._listings: dict[str, list[dict[str, Any]]] = {}
        self._specs: dict[str, ToolSpec] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        self._output_validators: dict[str, Draft202012Validator] = {}
        self.omitted: list[OmittedTool] = []
        self.version = 0
        self._changed: anyio.Event | None = None
        self._pinned: dict[tuple[str, str], str] = {}  # first hash seen per (server, tool)
        self._pulled: set[tuple[str, str]] = set()  # tools whose hash ever left the pinned one
        self._stale: dict[str, tuple[int, anyio.Event]] = {}  # server -> (re-lists due, done)
        self._unmatched: set[tuple[str, str]] = set()  # (server, include pattern) warned about

    @classmethod
    def from_listings(
        cls, listings: Mapping[str, Sequence[Mapping[str, Any]]], config: HostConfig | None = None
    ) -> Catalog:
        catalog = cls(config)
        for server, tools in listings.items():
            catalog._listings[server] = [dict(t) for t in tools]
        catalog._rebuild()
        return catalog

    @classmethod
    async def load(cls, pool: Any, config: HostConfig | None = None) -> Catalog:
        """List every running server of ``pool`` and build the catalog; subscribe to changes."""
        catalog = cls(config or pool.config)
        for server in pool.running():
            catalog._listings[server] = await pool.list_tools(server)
        catalog._rebuild()
        pool.on_tools_changed(catalog.refresh_from(pool))
        return catalog

    def refresh_from(self, pool: Any) -> Callable[[str], Callable[[], Awaitable[None]]]:
        """The tools/list_changed listener for ``pool``: marks the server stale at once (so no
        stale spec is handed out) and returns the re-listing for the pool to run."""

        def on_changed(server: str) -> Callable[[], Awaitable[None]]:
            self._mark_stale(server)

            async def relist() -> None:
                try:
                    await self._relist(pool, server)
                finally:
                    self._unmark_stale(server)

            return relist

        return on_changed

    async def refresh(self, pool: Any, server: str) -> None:
        """Re-list one server's tools and rebuild; a failed listing drops that server's tools."""
        self._mark_stale(server)
        try:
            await self._relist(pool, server)
        finally:
            self._unmark_stale(server)

    async def _relist(self, pool: Any, server: str) -> None:
        try:
            self._listings[server] = await pool.list_tools(server)
        except Exception as exc:  # boundary: any server failure means "no tools from it"
            logger.warning("re-listing tools of server %r failed: %s", server, exc)
            self._listings[server] = []
        self._rebuild()

    def _mark_stale(self, server: str) -> None:
        due, done = self._stale.get(server, (0, anyio.Event()))
        self._stale[server] = (due + 1, done)

    def _unmark_stale(self, server: str) -> None:
        due, done = self._stale.pop(server, (1, anyio.Event()))
        if due > 1:
            self._stale[server] = (due - 1, done)
        else:
            done.set()

    def is_stale(self, server: str) -> bool:
        """True between a server's tools/list_changed and the end of its re-listing."""
        return server in self._stale

    async def current(self, qualified_name: str) -> ToolSpec:
        """The tool's spec once its server's tool list is not being re-listed.

        Waits while a re-listing is due (bound it with ``anyio.fail_after``); raises
        :class:`UnknownToolError` if the tool is gone afterwards.
        """
        spec = self.get(qualified_name)
        while spec.server in self._stale:
            await self._stale[spec.server][1].wait()
            spec = self.get(qualified_name)
        return spec

    def replace_listing(self, server: str, tools: Sequence[Mapping[str, Any]]) -> None:
        self._listings[server] = [dict(t) for t in tools]
        self._rebuild()

    def _rebuild(self) -> None:
        limits = self._config.limits
        candidates: list[tuple[str, str, dict[str, Any]]] = []
        omitted: list[OmittedTool] = []
        for server in sorted(self._listings):
            seen: set[str] = set()
            allows = self._tool_filter(server)
            for raw in self._listings[server]:
                name = raw.get("name")
                if not isinstance(name, str) or not name:
                    omitted.append(OmittedTool(server, repr(name), "tool has no name"))
                    continue
                if name in seen:
                    omitted.append(OmittedTool(server, name, "listed twice by the same server"))
                    continue
                seen.add(name)
                if allows is not None and not allows(name):
                    continue  # filtered out by the user's config: not offered, not callable
                candidates.append((server, name, raw))
            self._warn_unmatched_includes(server, seen)
        names = qualify_names([(s, n) for s, n, _ in candidates])
        specs: dict[str, ToolSpec] = {}
        validators: dict[str, Draft202012Validator] = {}
        output_validators: dict[str, Draft202012Validator] = {}
        for server, name, raw in candidates:
            qualified = names[(server, name)]
            try:
                spec = self._make_spec(qualified, server, name, raw, limits)
            except SchemaError as exc:
                omitted.append(OmittedTool(server, name, str(exc)))
                continue
            specs[qualified] = spec
            # An empty Registry: a $ref that survived normalisation could never be retrieved.
            validators[qualified] = Draft202012Validator(spec.schema_dict(), registry=Registry())
            output = spec.output_schema_dict()
            if output is not None:
                output_validators[qualified] = Draft202012Validator(output, registry=Registry())
        for item in omitted:
            logger.warning("tool %r of server %r left out: %s", item.name, item.server, item.reason)
        self._specs, self._validators, self.omitted = specs, validators, omitted
        self._output_validators = output_validators
        self.version += 1
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def _tool_filter(self, server: str) -> Callable[[str], bool] | None:
        """The config's ``tools`` include/exclude for ``server``; None when it has none."""
        config = next((s for s in self._config.servers if s.name == server), None)
        if config is None or (config.tools_include is None and not config.tools_exclude):
            return None
        return config.allows_tool

    def _warn_unmatched_includes(self, server: str, listed: set[str]) -> None:
        """Warn (once per server and name) about an ``include`` that names no listed tool."""
        config = next((s for s in self._config.servers if s.name == server), None)
        if config is None or not listed:  # nothing listed (or a failed listing) proves nothing
            return
        for pattern in config.tools_include or ():
            if any(fnmatchcase(name, pattern) for name in listed):
                continue
            if (server, pattern) not in self._unmatched:
                self._unmatched.add((server, pattern))
                logger.warning(
                    "server %r: tools.include names %r, but the server lists no such tool",
                    server,
                    pattern,
                )

    async def wait_for_version(self, version: int) -> None:
        """Return once :attr:`version` reaches ``version`` (bound it with ``anyio.fail_after``)."""
        while self.version < version:
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    def _make_spec(
        self, qualified: str, server: str, name: str, raw: Mapping[str, Any], limits: Limits
    ) -> ToolSpec:
        where = f"tool {name!r} of server {server!r}"
        schema = normalize_schema(raw.get("inputSchema"), limits=limits, where=where)
        if schema.get("type") != "object":
            raise SchemaError(
                f"{where}: input schema must have type 'object', got {schema.get('type')!r}"
            )
        properties = schema.get("properties", {})
        required_raw = schema.get("required", [])
        missing = [r for r in required_raw if r not in properties]
        if missing and schema.get("additionalProperties") is False:
            raise SchemaError(f"{where}: required {missing} not among the properties")
        annotations = raw.get("annotations")
        annotations = dict(annotations) if isinstance(annotations, dict) else {}
        output_raw = raw.get("outputSchema")
        output = (
            None
            if output_raw is None
            else normalize_schema(output_raw, limits=limits, where=f"{where} (outputSchema)")
        )
        full = raw.get("description")
        full = full if isinstance(full, str) else ""
        description = full
        if len(full) > limits.max_description_chars:
            description = full[: limits.max_description_chars] + DESCRIPTION_TRUNCATION_MARKER
        title = raw.get("title") if isinstance(raw.get("title"), str) else annotations.get("title")
        digest = schema_hash(name, full, schema, annotations, output)
        key = (server, name)
        pinned = self._pinned.setdefault(key, digest)
        if digest != pinned and key not in self._pulled:
            self._pulled.add(key)
            logger.warning(
                "tool %r of server %r changed after it was first listed (hash %s -> %s); "
                "it will not run provisionally again",
                name,
                server,
                pinned[:16],
                digest[:16],
            )
        return ToolSpec(
            qualified_name=qualified,
            server=server,
            name=name,
            description=description,
            input_schema=_freeze(schema),
            required=tuple(r for r in required_raw if isinstance(r, str)),
            optional=tuple(p for p in properties if p not in required_raw),
            annotations=_freeze(annotations),
            read_only=annotations.get("readOnlyHint") is True,
            trusted=self._config.is_trusted(server),
            schema_hash=digest,
            title=title if isinstance(title, str) else None,
            full_description=full,
            output_schema=None if output is None else _freeze(output),
            changed_from=pinned if key in self._pulled else None,
        )

    # ----------------------------------------------------------------------- lookups

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, qualified_name: object) -> bool:
        return qualified_name in self._specs

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._specs)

    def get(self, qualified_name: str) -> ToolSpec:
        try:
            return self._specs[qualified_name]
        except KeyError:
            known = ", ".join(sorted(self._specs)) or "-"
            raise UnknownToolError(f"no tool named {qualified_name!r}; known: {known}") from None

    def by_server(self, server: str) -> tuple[ToolSpec, ...]:
        return tuple(s for s in self._specs.values() if s.server == server)

    def validate_arguments(self, qualified_name: str, arguments: Any) -> None:
        """Raise ArgumentValidationError unless ``arguments`` fit the tool's schema."""
        spec = self.get(qualified_name)
        if not isinstance(arguments, dict):
            raise ArgumentValidationError(
                f"{qualified_name}: arguments must be a JSON object, got {type(arguments).__name__}"
            )
        limit = self._config.limits.max_argument_depth
        if json_depth(arguments, limit) > limit:
            raise ArgumentValidationError(
                f"{qualified_name}: arguments nested deeper than {limit} levels"
            )
        errors = sorted(
            self._validators[spec.qualified_name].iter_errors(arguments), key=lambda e: e.path
        )
        if errors:
            problems = "; ".join(
                f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
                for e in errors[:5]
            )
            raise ArgumentValidationError(f"{qualified_name}: invalid arguments: {problems}")

    def output_problems(self, qualified_name: str, structured: Any) -> str | None:
        """Why ``structured`` (a result's structuredContent) breaks the tool's outputSchema, or
        None when it fits or the tool declares none."""
        validator = self._output_validators.get(qualified_name)
        if validator is None:
            return None
        if structured is None:
            return "the tool declares an output schema but returned no structured content"
        errors = sorted(validator.iter_errors(structured), key=lambda e: e.path)
        if not errors:
            return None
        return "structured content does not match the tool's output schema: " + "; ".join(
            f"{'/'.join(str(p) for p in e.absolute_path) or '(root)'}: {e.message}"
            for e in errors[:5]
        )

    def to_json(self) -> list[dict[str, Any]]:
        """A plain-JSON view (for ``weavehost tools --json``)."""
        return [
            {
                "name": s.qualified_name,
                "server": s.server,
                "tool": s.name,
                "description": s.description,
                "required": list(s.required),
                "optional": list(s.optional),
                "read_only": s.read_only,
                "trusted": s.trusted,
                "annotations": _thaw(s.annotations),
                "input_schema": s.schema_dict(),
                "schema_hash": s.schema_hash,
                "changed": s.changed,
            }
            for s in self._specs.values()
        ]
