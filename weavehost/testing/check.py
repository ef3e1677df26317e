"""``weavehost check``: a conformance and robustness check of MCP servers, for their authors.

Stage: testing. A client of the servers stage: it reaches servers only through
:class:`~weavehost.mcp.servers.ServerPool`, so it sees a server as the host does (the same
transports, caps, timeouts and restarts), and reads each tool as the raw dict the server sent,
before the catalog's normalising hides anything.

What a run guarantees:

* **Every listed tool is checked as sent** (:mod:`weavehost.testing.check_tools`). ``name``:
  MCP's rule (SEP-986, the SDK's ``TOOL_NAME_REGEX``): 1–128 characters of ``A-Z a-z 0-9 _ -
  .``, unique within the server.
  ``input-schema``: an object with ``"type": "object"`` at its root, valid Draft 2020-12
  (``check_schema``; another dialect if ``$schema`` names one), and accepted by the catalog within
  ``limits`` (size, depth, ``$ref`` cycles). ``remote-ref``: no ``$ref`` outside the schema in the
  input or output schema (it is reported, never fetched). ``output-schema``: valid Draft 2020-12.
  ``annotations``: an object whose hints are booleans and whose ``title`` is a string.
  ``read-only-hint``: a tool marked read-only whose name holds one of :data:`MUTATING_WORDS`
  (``delete_all``) is a warning. ``description``: present.
* **Only tools the author marks safe are called**: with ``call_read_only``, those whose
  ``readOnlyHint`` is exactly ``true``; and those matching an ``allow`` pattern (a name or an
  ``fnmatch`` glob). Each gets up to ``examples`` valid and ``examples`` invalid argument sets
  from :mod:`weavehost.testing.check_arguments` (the invalid ones are the first valid set with
  one fault each). A valid set must get a result (``isError`` included), and its structured
  content must fit the output schema as the host reads it (one
  :class:`~weavehost.mcp.catalog.Catalog` per server, :meth:`~Catalog.output_problems`); an
  invalid set must be rejected (an ``isError`` result or a JSON-RPC error).
* **A crash or a hang is a failure naming the tool and the arguments** (a hang: no answer and
  no progress notification within ``call_timeout_s``; a call still sending progress then is
  slow, a warning). That tool is not called again; the server is pinged (which restarts a dead
  one through the pool) before the next tool, and a server that will not come back leaves its
  remaining tools skipped, not hanging.
* **Every wait is bounded**: each call by ``call_timeout_s``; a new call starts only while the
  ``budget_s`` lasts, so calls end within ``budget_s + call_timeout_s``; starting and listing are
  bounded by the config's ``timeouts``.

Results: ``fail`` is a server that would break a host or breaks a MUST of the spec (a crash, a
hang, a reply over ``limits.maxMessageBytes``, an invalid schema, a remote ``$ref``, a bad name, a
hint of the wrong type, structured content that misses the output schema). ``warn`` is one a host
copes with but a model or a user may be misled by (a read-only hint that the name contradicts,
invalid arguments accepted, a result over ``limits.maxResultChars``, a JSON-RPC error for valid
arguments, every valid call answered with ``isError`` (the schema admits more than the tool
takes), a call still reporting progress when its timeout passed, no description). A report
fails on a ``fail``, and on a ``warn`` when ``strict``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

import anyio
from mcp.shared.exceptions import MCPError

from weavehost.config import HostConfig, Limits
from weavehost.errors import (
    ClientFeatureError,
    ConfigError,
    MessageTooLargeError,
    SchemaError,
    ServerDiedError,
    ServerError,
    ServerTimeoutError,
)
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import result_text
from weavehost.mcp.features import Progress
from weavehost.mcp.schemas import normalize_schema
from weavehost.mcp.servers import ServerPool
from weavehost.testing.check_arguments import invalid_arguments, valid_arguments
from weavehost.testing.check_tools import (
    MUTATING_WORDS,
    Finding,
    Result,
    server_findings,
    tool_findings,
)

__all__ = [
    "DEFAULT_BUDGET_S",
    "DEFAULT_CALL_TIMEOUT_S",
    "DEFAULT_EXAMPLES",
    "MUTATING_WORDS",
    "CallRecord",
    "CheckOptions",
    "CheckReport",
    "Finding",
    "ServerSummary",
    "run_check",
    "tool_findings",
]

DEFAULT_EXAMPLES = 3  # valid and invalid argument sets per called tool (each)
DEFAULT_BUDGET_S = 60.0  # no new call starts after this many seconds of calls
DEFAULT_CALL_TIMEOUT_S = 10.0  # one call; longer is a hang
MAX_SHOWN_ARGUMENTS = 160  # characters of a call's arguments in a finding

Outcome = Literal[
    "ok",
    "isError",
    "rpc-error",
    "died",
    "timeout",
    "slow",
    "too-large",
    "bad-reply",
    "client-feature",
]


# --------------------------------------------------------------------------- records


@dataclass(frozen=True, slots=True)
class CheckOptions:
    """What a run may call and how long it may take (the CLI's flags)."""

    call_read_only: bool = False
    allow: tuple[str, ...] = ()
    examples: int = DEFAULT_EXAMPLES
    budget_s: float = DEFAULT_BUDGET_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    seed: int = 0
    strict: bool = False


@dataclass(frozen=True, slots=True)
class CallRecord:
    """One call the check made: its arguments (and why they are invalid), and what came back."""

    server: str
    tool: str
    kind: Literal["valid", "invalid"]
    arguments: dict[str, Any]
    outcome: Outcome
    time_s: float
    chars: int = 0
    detail: str = ""
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ServerSummary:
    """One server: how it was started, whether it came up, and what it lists."""

    name: str
    command: str
    started: bool
    protocol: str | None = None
    tools: int = 0
    resources: int = 0
    prompts: int = 0


@dataclass(frozen=True, slots=True)
class CheckReport:
    """Everything a run found; :attr:`ok` is the exit status the CLI gives."""

    servers: tuple[ServerSummary, ...]
    findings: tuple[Finding, ...]
    calls: tuple[CallRecord, ...]
    strict: bool = False
    elapsed_s: float = 0.0

    def count(self, result: Result) -> int:
        return sum(1 for f in self.findings if f.result == result)

    @property
    def ok(self) -> bool:
        return self.count("fail") == 0 and not (self.strict and self.count("warn"))

    def to_json(self) -> dict[str, Any]:
        results: tuple[Result, ...] = ("pass", "warn", "fail", "skip")
        return {
            "ok": self.ok,
            "strict": self.strict,
            "elapsed_s": round(self.elapsed_s, 3),
            "summary": {**{r: self.count(r) for r in results}, "calls": len(self.calls)},
            "servers": [asdict(s) for s in self.servers],
            "findings": [asdict(f) for f in self.findings],
            "calls": [asdict(c) for c in self.calls],
        }

    def table(self) -> list[str]:
        """The report as text: per server a header line and a table (tool, check, result,
        time, detail), then one summary line."""
        lines: list[str] = []
        for server in self.servers:
            state = (
                f"protocol {server.protocol}, {server.tools} tools, {server.resources} "
                f"resources, {server.prompts} prompts"
                if server.started
                else "did not start"
            )
            lines.append(f"server {server.name} ({server.command}): {state}")
            rows = [("TOOL", "CHECK", "RESULT", "TIME", "DETAIL")]
            rows += [
                (f.tool or "-", f.check, f.result.upper(), _time(f.time_s), f.detail)
                for f in self.findings
                if f.server == server.name
            ]
            widths = [max(len(r[i]) for r in rows) for i in range(4)]
            for row in rows:
                cells = [c.ljust(w) for c, w in zip(row[:4], widths, strict=True)]
                lines.append(("  " + "  ".join(cells) + "  " + row[4]).rstrip())
            lines.append("")
        verdict = "passed" if self.ok else "FAILED"
        lines.append(
            f"check {verdict}: {_counted(len(self.servers), 'server')}, "
            f"{_counted(len(self.calls), 'call')} in "
            f"{self.elapsed_s:.1f} s; {self.count('pass')} passed, {self.count('warn')} "
            f"warnings{' (--strict)' if self.strict else ''}, {self.count('fail')} failures, "
            f"{self.count('skip')} skipped"
        )
        return lines


def _time(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _shown(arguments: Mapping[str, Any]) -> str:
    text = json.dumps(arguments, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= MAX_SHOWN_ARGUMENTS else text[: MAX_SHOWN_ARGUMENTS - 1] + "…"


# --------------------------------------------------------------------------- the run


@dataclass(slots=True)
class _Run:
    """The state of one run (only :func:`run_check` touches it)."""

    pool: ServerPool
    config: HostConfig
    options: CheckOptions
    deadline: float = 0.0
    findings: list[Finding] = field(default_factory=list)
    calls: list[CallRecord] = field(default_factory=list)


async def run_check(config: HostConfig, options: CheckOptions) -> CheckReport:
    """Start every server of ``config``, check what each lists, call the tools ``options``
    allows, and return the report. Raises :class:`ConfigError` (before any call) for an
    ``allow`` pattern that matches no listed tool."""
    started = anyio.current_time()
    summaries: list[ServerSummary] = []
    async with ServerPool(config, strict=False) as pool:
        run = _Run(pool, config, options)
        listed: dict[str, list[dict[str, Any]]] = {}
        for server in config.servers:
            summary, tools = await _list(run, server.name, server.describe())
            summaries.append(summary)
            if tools is not None:
                listed[server.name] = tools
        chosen = _chosen(listed, options)
        run.deadline = anyio.current_time() + options.budget_s
        for server, tools in chosen.items():
            await _call_server(run, server, tools)
    return CheckReport(
        servers=tuple(summaries),
        findings=tuple(run.findings),
        calls=tuple(run.calls),
        strict=options.strict,
        elapsed_s=anyio.current_time() - started,
    )


async def _list(
    run: _Run, name: str, command: str
) -> tuple[ServerSummary, list[dict[str, Any]] | None]:
    """The listings and the static checks of one server; ``None`` tools if it is down."""
    status = run.pool.status()[name]
    if status.state != "running":
        run.findings.append(Finding(name, None, "start", "fail", status.last_error or ""))
        return ServerSummary(name, command, started=False), None
    counts: dict[str, int] = {}
    tools: list[dict[str, Any]] | None = None
    for what in ("tools", "resources", "prompts"):
        began = anyio.current_time()
        try:
            if what == "tools":
                tools = await run.pool.list_tools(name)
                items: list[Any] = tools
            elif what == "resources":
                items = await run.pool.list_resources(name)
            else:
                items = await run.pool.list_prompts(name)
        except ServerError as exc:
            run.findings.append(
                Finding(name, None, f"list-{what}", "fail", str(exc), anyio.current_time() - began)
            )
            continue
        counts[what] = len(items)
        detail = f"{len(items)} {what}"
        run.findings.append(
            Finding(name, None, f"list-{what}", "pass", detail, anyio.current_time() - began)
        )
    run.findings.extend(server_findings(name, tools or []))
    for tool in tools or []:
        run.findings.extend(tool_findings(name, tool, run.config.limits))
    protocol = run.pool.status()[name].protocol
    summary = ServerSummary(name, command, True, protocol, **counts)
    return summary, tools


def _chosen(
    listed: Mapping[str, list[dict[str, Any]]], options: CheckOptions
) -> dict[str, list[dict[str, Any]]]:
    """The tools to call, per server: read-only ones (if asked) and those ``allow`` names."""
    names = [t.get("name") for tools in listed.values() for t in tools]
    for pattern in options.allow:
        if not any(isinstance(n, str) and fnmatchcase(n, pattern) for n in names):
            known = ", ".join(sorted(str(n) for n in names)) or "none"
            raise ConfigError(f"--allow {pattern!r} matches no tool; tools: {known}")

    def wanted(tool: Mapping[str, Any]) -> bool:
        name = tool.get("name")
        hints = tool.get("annotations")
        read_only = isinstance(hints, Mapping) and hints.get("readOnlyHint") is True
        allowed = isinstance(name, str) and any(fnmatchcase(name, p) for p in options.allow)
        return (options.call_read_only and read_only) or allowed

    chosen = {server: [t for t in tools if wanted(t)] for server, tools in listed.items()}
    return {server: tools for server, tools in chosen.items() if tools}


async def _call_server(run: _Run, server: str, tools: list[dict[str, Any]]) -> None:
    # The catalog a host would build of these tools, for its reading of their output schemas.
    # Only the limits of the config: its include/exclude filters do not narrow what is checked.
    catalog = Catalog.from_listings({server: tools}, HostConfig(limits=run.config.limits))
    for index, tool in enumerate(tools):
        name = str(tool.get("name"))
        if anyio.current_time() >= run.deadline:
            spent = f"the --budget of {run.options.budget_s:g} s was spent"
            run.findings.append(Finding(server, name, "calls", "skip", spent))
            continue
        broke = await _call_tool(run, server, tool, catalog)
        if broke and index + 1 < len(tools):
            try:
                await run.pool.ping(server)
            except ServerError as exc:
                down = f"the server is down: {exc}"
                for rest in tools[index + 1 :]:
                    run.findings.append(
                        Finding(server, str(rest.get("name")), "calls", "skip", down)
                    )
                return


async def _call_tool(run: _Run, server: str, tool: Mapping[str, Any], catalog: Catalog) -> bool:
    """Call one tool with valid, then invalid arguments; ``True`` if it crashed or hung."""
    name = str(tool.get("name"))
    options, limits = run.options, run.config.limits
    try:
        schema = normalize_schema(tool.get("inputSchema"), limits=limits)
    except SchemaError:
        run.findings.append(Finding(server, name, "calls", "skip", "its input schema is unusable"))
        return False
    valid = valid_arguments(schema, options.examples, options.seed)
    base = valid[0] if valid else {}
    plan: list[tuple[Literal["valid", "invalid"], dict[str, Any], str]] = [
        ("valid", args, "") for args in valid
    ]
    plan += [
        ("invalid", bad.arguments, bad.reason)
        for bad in invalid_arguments(schema, base, options.examples)
    ]
    if not valid:
        none = "no valid arguments could be generated from its schema"
        run.findings.append(Finding(server, name, "valid-calls", "skip", none))
    records: list[CallRecord] = []
    for kind, args, reason in plan:
        if anyio.current_time() >= run.deadline:
            spent = f"the --budget of {options.budget_s:g} s ran out"
            run.findings.append(Finding(server, name, "calls", "skip", spent))
            break
        record = await _one_call(run, server, tool, catalog, kind, args, reason)
        records.append(record)
        run.calls.append(record)
        if record.outcome in ("died", "timeout", "slow"):
            break  # one is enough, and another would cost the same again
    run.findings.extend(_call_findings(server, name, records, limits))
    return any(r.outcome in ("died", "timeout") for r in records)


async def _one_call(
    run: _Run,
    server: str,
    tool: Mapping[str, Any],
    catalog: Catalog,
    kind: Literal["valid", "invalid"],
    args: dict[str, Any],
    reason: str,
) -> CallRecord:
    name = str(tool.get("name"))
    timeout = run.options.call_timeout_s
    began = anyio.current_time()
    progress: list[Progress] = []

    def record(outcome: Outcome, detail: str = "", chars: int = 0) -> CallRecord:
        took = anyio.current_time() - began
        return CallRecord(server, name, kind, args, outcome, took, chars, detail, reason)

    try:
        result = await run.pool.call_tool(
            server, name, args, timeout=timeout, on_progress=progress.append
        )
    except ServerTimeoutError:
        if progress:  # working, only slower than the timeout: not a hang
            still = f"still working after {timeout:g} s ({len(progress)} progress notifications)"
            return record("slow", still)
        return record("timeout", f"no answer within {timeout:g} s")
    except ServerDiedError as exc:
        return record("died", str(exc))
    except MessageTooLargeError as exc:
        return record("too-large", str(exc))
    except ClientFeatureError as exc:
        return record("client-feature", str(exc))
    except ServerError as exc:
        if isinstance(exc.__cause__, MCPError):
            return record("rpc-error", f"{exc.__cause__.code}: {exc.__cause__.message}")
        return record("bad-reply", str(exc))
    text = result_text(result)
    if result.is_error:
        return record("isError", text[:200], len(text))
    problem = _output_problem(catalog, name, result.structured_content)
    if kind == "valid" and problem is not None:
        return record("bad-reply", problem, len(text))
    return record("ok", "", len(text))


def _output_problem(catalog: Catalog, name: str, structured: Any) -> str | None:
    """Why a successful result's structuredContent misses the tool's output schema, as
    :meth:`Catalog.output_problems` reads it; ``None`` too for a tool the catalog left out (its
    schema is reported by the static checks)."""
    spec = next((s for s in catalog if s.name == name), None)
    return None if spec is None else catalog.output_problems(spec.qualified_name, structured)


_CALL_FAULT = {
    "died": "the server died",
    "timeout": "it hung",
    "too-large": "the reply was over limits.maxMessageBytes",
    "bad-reply": "the reply was invalid",
}


def _call_findings(
    server: str, tool: str, records: Sequence[CallRecord], limits: Limits
) -> list[Finding]:
    """One finding per call that failed or warned, and one per kind for the rest."""
    out: list[Finding] = []
    for kind in ("valid", "invalid"):
        check = f"{kind}-calls"
        mine = [r for r in records if r.kind == kind]
        quiet = []
        for r in mine:
            why = f" ({r.reason})" if r.reason else ""
            shown = f"{_shown(r.arguments)}{why}"
            if r.outcome in _CALL_FAULT:
                detail = f"{_CALL_FAULT[r.outcome]} on {shown}: {r.detail}"
                out.append(Finding(server, tool, check, "fail", detail, r.time_s))
            elif r.outcome == "slow":
                detail = f"passed --timeout on {shown}, {r.detail}"
                out.append(Finding(server, tool, check, "warn", detail, r.time_s))
            elif r.outcome == "client-feature":
                out.append(Finding(server, tool, check, "skip", r.detail, r.time_s))
            elif kind == "invalid" and r.outcome == "ok":
                detail = f"accepted invalid arguments without an error: {shown}"
                out.append(Finding(server, tool, check, "warn", detail, r.time_s))
            elif kind == "valid" and r.outcome == "rpc-error":
                detail = f"a JSON-RPC error, not a result, for {shown}: {r.detail}"
                out.append(Finding(server, tool, check, "warn", detail, r.time_s))
            else:
                quiet.append(r)
        if kind == "valid" and len(mine) > 1 and all(r.outcome == "isError" for r in mine):
            detail = (
                f"every valid call came back isError (first: {mine[0].detail[:80]!r}): the "
                "schema admits more than the tool takes; an enum, pattern or format would say"
            )
            out.append(Finding(server, tool, check, "warn", detail))
        if quiet:
            tally: dict[str, int] = {}
            for r in quiet:
                tally[r.outcome] = tally.get(r.outcome, 0) + 1
            detail = ", ".join(f"{n} {outcome}" for outcome, n in tally.items())
            slowest = max(r.time_s for r in quiet)
            out.append(Finding(server, tool, check, "pass", detail, slowest))
    biggest = max(records, key=lambda r: r.chars, default=None)
    if biggest is not None and biggest.chars > limits.max_result_chars:
        detail = (
            f"{biggest.chars} characters on {_shown(biggest.arguments)}, over "
            f"limits.maxResultChars ({limits.max_result_chars}): a model reads it cut"
        )
        out.append(Finding(server, tool, "result-size", "warn", detail, biggest.time_s))
    return out


def _counted(n: int, thing: str) -> str:
    """``1 server``, ``2 servers``."""
    return f"{n} {thing}" if n == 1 else f"{n} {thing}s"
