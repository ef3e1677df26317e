"""Executor: decide whether a call may run, run it through the ServerPool, turn the reply into text.

Stage: execution (after the decoder has a call, before the agent loop appends its result).

Invariants:

* A call runs **provisionally** only if the tool's raw ``readOnlyHint`` is exactly ``true`` and
  the user trusts its server in config (:func:`may_run_provisionally`). Annotations from an
  untrusted server are hints and decide nothing (MCP spec, ToolAnnotations).
* Every other call needs approval under the config's policy: ``ask`` (the :class:`Approver`
  decides; with no approver it is refused), ``always`` (approved), ``never`` (refused). A refused
  call, an unknown tool and invalid arguments never reach a server.
* Under ``ask``, an approval can outlive its call, always for one definition: a tool pinned in
  the config's ``approved`` (server → tool → its ``schema_hash`` or a prefix of at least
  :data:`MIN_PINNED_HASH_DIGITS` hex digits) runs without asking while its hash matches; an
  approver's :data:`Decision` ``always_tool`` approves that tool's current definition and
  ``always_server`` every tool of that server as listed then (and tools it adds later) for this
  executor's life (one host). A definition that changed since (a rug pull) asks again.
* Outcomes the model caused or should read are data: a :class:`ToolResult` with a ``status``;
  :meth:`ToolResult.raise_for_status` turns one into the matching error for callers that want
  exceptions. A result that reached a server also keeps the reply as sent (its content blocks
  and ``structuredContent``, in wire form) beside the text the model reads.
* A tool whose definition changed after it was first listed (``ToolSpec.changed``, a rug pull)
  never runs provisionally again, and an approval given for one definition is void if the
  definition changed while the approver was deciding: the call is refused, never sent.
* A result whose ``structuredContent`` breaks the tool's ``outputSchema`` becomes a
  ``tool_error`` naming the problem; an ``isError`` result is passed on without that check.
* Result text is capped at ``limits.max_result_chars`` with a visible marker, and the chat-control
  markers the executor was given (:class:`ControlMarkers`: ``<|im_end|>``,
  ``<start_function_call>``, ``<escape>`` …) are broken with a zero-width space. ``mcp/`` knows
  no model format: the host passes every format's markers (``weavehost.formats.control_markers``);
  an executor built without them breaks none. The engine also tokenizes tool text with
  special-token parsing off, so a result can never open a new chat turn; the neutralising here
  is a second, independent fence.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import anyio
import mcp_types as types

from weavehost.config import HostConfig
from weavehost.errors import (
    ApprovalDeniedError,
    ArgumentValidationError,
    ServerError,
    ServerTimeoutError,
    UnknownToolError,
    WeavehostError,
)
from weavehost.mcp.catalog import Catalog, ToolSpec
from weavehost.mcp.features import Progress

__all__ = [
    "DECISIONS",
    "MIN_PINNED_HASH_DIGITS",
    "ApprovalRequest",
    "Approver",
    "ControlMarkers",
    "Decision",
    "Executor",
    "ProvisionalPolicy",
    "StaticApprover",
    "ToolCaller",
    "ToolResult",
    "as_decision",
    "may_run_provisionally",
    "needs_approval",
    "pinned_hash_matches",
    "raise_for_status",
    "result_text",
    "truncate_text",
]

logger = logging.getLogger(__name__)

Status = Literal[
    "ok",  # the tool ran and succeeded
    "tool_error",  # the tool ran and returned isError: the model reads it
    "denied",  # approval refused; nothing was sent
    "not_provisional",  # a provisional run was asked for a tool that may not run early
    "unknown_tool",  # no such tool in the catalog; nothing was sent
    "invalid_arguments",  # arguments failed the schema; nothing was sent
    "timeout",  # the server did not answer in time (the request was cancelled)
    "server_error",  # the server died, or sent something unusable
]
_SENT: frozenset[str] = frozenset({"ok", "tool_error", "timeout", "server_error"})
REFRESH_WAIT_MARGIN = 1.0  # past timeouts.list_tools, for a re-listing a call waits on
MIN_PINNED_HASH_DIGITS = 16  # a pinned approval names at least this much of the schema hash
TRUNCATION_MARKER = "\n…[truncated by weavehost: showing {shown} of {total} characters]"
_ZWSP = "\u200b"


# --------------------------------------------------------------------------- policy


def may_run_provisionally(spec: ToolSpec, config: HostConfig | None = None) -> bool:
    """True only for ``readOnlyHint`` exactly ``true`` from a server the user trusts, on a tool
    that has not changed since it was first listed.

    ``config`` (when given) is consulted again, so a trust list changed after the catalog was
    built takes effect at once; trust can only be narrowed this way, never widened.
    """
    if spec.annotations.get("readOnlyHint") is not True or not spec.read_only or not spec.trusted:
        return False
    if spec.changed:
        return False
    return config is None or config.is_trusted(spec.server)


def needs_approval(spec: ToolSpec, config: HostConfig | None = None) -> bool:
    """Every call that could not run provisionally needs approval (a read-only claim from an
    untrusted server is only a hint, so it needs approval too)."""
    return not may_run_provisionally(spec, config)


@dataclass(frozen=True, slots=True)
class ProvisionalPolicy:
    """The provisional-call rule bound to one config, for the decoder and agent loop."""

    config: HostConfig

    def allows(self, spec: ToolSpec) -> bool:
        return may_run_provisionally(spec, self.config)


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What an approver is shown: the tool's full description, schema hash and the arguments."""

    spec: ToolSpec
    arguments: Mapping[str, Any]

    def describe(self) -> str:
        """Every character of the description the server sent (not the model's capped copy),
        the arguments, and the hash; a changed tool says so first."""
        spec = self.spec
        hint = "read-only (hint)" if spec.read_only else "may change things"
        trust = "trusted server" if spec.trusted else "untrusted server"
        warning = (
            f"  CHANGED since first listed (hash was {spec.changed_from[:16]})\n"
            if spec.changed_from
            else ""
        )
        return (
            f"{spec.qualified_name} on {spec.server} ({hint}, {trust})\n"
            f"{warning}"
            f"  description: {spec.full_description or spec.description}\n"
            f"  arguments:   {json.dumps(dict(self.arguments), ensure_ascii=False)}\n"
            f"  schema hash: {spec.schema_hash[:16]}"
        )


# An approver's answer: run it once, refuse it, or run it and do not ask again (for this tool's
# definition, or for every tool of its server) while the host lives.
Decision = Literal["yes", "no", "always_tool", "always_server"]
DECISIONS: tuple[Decision, ...] = ("yes", "no", "always_tool", "always_server")


def as_decision(answer: object) -> Decision:
    """An approver's answer as a :data:`Decision`: ``True`` is ``yes``; a decision's name is
    itself; anything else (``False``, ``None``, a typo) is ``no`` (fail closed)."""
    if answer is True:
        return "yes"
    if isinstance(answer, str) and answer in DECISIONS:
        return answer  # type: ignore[return-value]
    return "no"


class Approver(Protocol):
    """The seam the CLI implements with a prompt: ``True`` (or ``"yes"``) approves this call,
    ``"always_tool"``/``"always_server"`` approve it and remember; anything else refuses. An
    approver that returns a plain ``bool`` keeps working unchanged."""

    async def approve(self, request: ApprovalRequest) -> bool | Decision: ...


def pinned_hash_matches(pinned: str, schema_hash: str) -> bool:
    """Whether a pinned approval (a hash, or a prefix of at least
    :data:`MIN_PINNED_HASH_DIGITS` hex digits) names the definition with ``schema_hash``."""
    pinned = pinned.strip().lower()
    if len(pinned) < MIN_PINNED_HASH_DIGITS or any(c not in "0123456789abcdef" for c in pinned):
        return False
    return schema_hash.lower().startswith(pinned)


@dataclass(frozen=True, slots=True)
class StaticApprover:
    """An approver that always answers the same (tests, scripted runs): a ``bool`` or a
    :data:`Decision`, for tool calls and sampling requests alike."""

    answer: bool | Decision
    seen: list[Any] = field(default_factory=list, compare=False)

    async def approve(self, request: ApprovalRequest) -> bool | Decision:
        self.seen.append(request)
        return self.answer

    async def approve_sampling(self, request: Any) -> bool | Decision:
        self.seen.append(request)
        return self.answer


class ToolCaller(Protocol):
    """What the executor needs from a pool (``ServerPool`` satisfies it)."""

    async def call_tool(
        self,
        server: str,
        tool: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 - mirrors ServerPool.call_tool
        on_progress: Callable[[Progress], None] | None = None,
    ) -> types.CallToolResult: ...


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class ToolResult:
    """One call's outcome as data; ``text`` is what the model reads.

    ``structured`` is the structured content the host accepted (``None`` when it broke the
    tool's output schema); ``content`` and ``structured_content`` are the reply as the server
    sent it, in wire form (JSON-ready dicts, MCP's field names), for a caller that shows the raw
    result (``weavehost call --json``). A call that never reached a server has neither.
    """

    name: str
    server: str | None
    arguments: Mapping[str, Any]
    status: Status
    text: str
    truncated: bool = False
    total_chars: int = 0
    structured: Any = None
    duration_s: float = 0.0
    provisional: bool = False
    content: tuple[dict[str, Any], ...] = ()
    structured_content: Any = None

    @property
    def is_error(self) -> bool:
        return self.status != "ok"

    @property
    def reached_server(self) -> bool:
        return self.status in _SENT

    def raise_for_status(self) -> ToolResult:
        """Return self when ok or a tool error (both are results); raise for the rest."""
        raise_for_status(self.status, self.text)
        return self


_STATUS_ERRORS: dict[str, type[WeavehostError]] = {
    "denied": ApprovalDeniedError,
    "not_provisional": ApprovalDeniedError,
    "unknown_tool": UnknownToolError,
    "invalid_arguments": ArgumentValidationError,
    "timeout": ServerTimeoutError,
    "server_error": ServerError,
}


def raise_for_status(status: str, text: str) -> None:
    """Raise the error a result's ``status`` stands for, with its ``text``; nothing for ``ok``
    and ``tool_error`` (both are results). For a result held as event data (``Host.call``'s
    ``tool_result``); :meth:`ToolResult.raise_for_status` is the same for a record."""
    if status in _STATUS_ERRORS:
        raise _STATUS_ERRORS[status](text)


class ControlMarkers:
    """The chat-control markers to break in text a server wrote (a tool result, a resource).

    Given by the caller, who knows the model side: the host passes the markers of every model
    format (``weavehost.formats.control_markers()``), so a result is fenced for whichever model
    reads it. :meth:`neutralize` puts a zero-width space after each marker's first character;
    text without a marker is left byte-identical.
    """

    __slots__ = ("markers", "_pattern")

    def __init__(self, markers: Iterable[str] = ()) -> None:
        self.markers = frozenset(markers)
        short = sorted(m for m in self.markers if len(m) < 2)
        if short:  # a space after its only character would leave it whole
            raise ValueError(f"a control marker has at least two characters: {short!r}")
        # Longest first, so a marker is broken whole, never at a shorter one inside it.
        ordered = sorted(self.markers, key=lambda m: (-len(m), m))
        self._pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None

    def neutralize(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: m.group(0)[0] + _ZWSP + m.group(0)[1:], text)


def truncate_text(text: str, cap: int) -> tuple[str, bool]:
    """Cut ``text`` to at most ``cap`` characters including a marker saying how much was cut."""
    if len(text) <= cap:
        return text, False
    keep = max(cap - len(TRUNCATION_MARKER.format(shown=cap, total=len(text))), 0)
    return text[:keep] + TRUNCATION_MARKER.format(shown=keep, total=len(text)), True


def _block_text(block: Any) -> str:
    kind = getattr(block, "type", None)
    if kind == "text":
        return block.text
    if kind in ("image", "audio"):
        return f"[{kind}: {block.mime_type}, {len(block.data) * 3 // 4} bytes]"
    if kind == "resource":
        resource = block.resource
        body = getattr(resource, "text", None)
        return body if body is not None else f"[resource {resource.uri}: binary]"
    if kind == "resource_link":
        return f"[resource link: {block.uri}]"
    return f"[{kind or type(block).__name__} content]"


def _wire_blocks(blocks: Sequence[Any]) -> tuple[dict[str, Any], ...]:
    """Content blocks in the form the server sent them: JSON-ready dicts, MCP's field names."""
    return tuple(b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in blocks)


def result_text(result: types.CallToolResult) -> str:
    """All content blocks as one text; structured content when there is no text."""
    parts = [_block_text(b) for b in result.content]
    if not any(parts) and result.structured_content is not None:
        parts = [json.dumps(result.structured_content, ensure_ascii=False, sort_keys=True)]
    return "\n".join(parts)


# --------------------------------------------------------------------------- executor


class Executor:
    """Validate, approve and run calls; every return is a :class:`ToolResult`."""

    def __init__(
        self,
        pool: ToolCaller,
        catalog: Catalog,
        config: HostConfig,
        approver: Approver | None = None,
        *,
        markers: ControlMarkers | None = None,
    ) -> None:
        self.pool, self.catalog, self.config, self.approver = pool, catalog, config, approver
        # Broken in every result's text (the module docstring: the caller knows the formats).
        self.markers = markers if markers is not None else ControlMarkers()
        self.policy = ProvisionalPolicy(config)
        # Approvals given "always" at the prompt, for this executor's life: (server, tool) ->
        # the schema hash approved; server -> {tool: hash} of its tools when it was approved.
        self.tool_approvals: dict[tuple[str, str], str] = {}
        self.server_approvals: dict[str, dict[str, str]] = {}

    async def run(
        self,
        name: str,
        arguments: Any,
        *,
        provisional: bool = False,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> ToolResult:
        """Run one call by its qualified name.

        ``provisional=True`` runs it only if :func:`may_run_provisionally` allows, and never
        asks for approval (an early call must not block on the user). ``on_progress`` hears the
        server's progress notifications for this call (they never extend its timeout).
        """
        args = arguments if isinstance(arguments, Mapping) else {}
        try:
            spec = await self._current(name)
            if spec is None:
                server = self.catalog.get(name).server
                text = f"the tools of server {server!r} changed and could not be re-listed in time"
                return self._local(name, server, args, "server_error", text, provisional)
            self.catalog.validate_arguments(name, arguments)
        except (UnknownToolError, ArgumentValidationError) as exc:
            status: Status = (
                "unknown_tool" if isinstance(exc, UnknownToolError) else "invalid_arguments"
            )
            return self._local(name, None, args, status, str(exc), provisional)
        if provisional and not self.policy.allows(spec):
            reason = (
                "untrusted server"
                if not spec.trusted
                else "its definition changed after it was first listed"
                if spec.changed
                else "not marked readOnlyHint: true"
            )
            text = f"{name} may not run provisionally ({reason})"
            return self._local(name, spec.server, args, "not_provisional", text, provisional)
        if not provisional and needs_approval(spec, self.config):
            refusal = await self._approve(spec, args)
            if refusal is None and not self._unchanged(spec):
                refusal = (
                    f"{name} changed while approval was pending (tools/list_changed); "
                    "the approval was for the old definition"
                )
            if refusal is not None:
                return self._local(name, spec.server, args, "denied", refusal, provisional)
        return await self._call(spec, args, provisional, on_progress)

    def starts_early(self, name: str, arguments: Any) -> bool:
        """Whether ``run(name, arguments, provisional=True)`` would send the call right now:
        a known tool whose server is not being re-listed, that the provisional rule allows,
        with arguments that validate. The agent asks this before it opens a cache entry."""
        if name not in self.catalog:
            return False
        spec = self.catalog.get(name)
        if self.catalog.is_stale(spec.server) or not self.policy.allows(spec):
            return False
        try:
            self.catalog.validate_arguments(name, arguments)
        except ArgumentValidationError:
            return False
        return True

    async def _current(self, name: str) -> ToolSpec | None:
        """The tool's spec after any re-listing of its server; None if that did not finish."""
        with anyio.move_on_after(self.config.timeouts.list_tools + REFRESH_WAIT_MARGIN):
            return await self.catalog.current(name)
        return None

    def _unchanged(self, spec: ToolSpec) -> bool:
        """The catalog still offers exactly the definition ``spec`` describes."""
        name = spec.qualified_name
        if name not in self.catalog or self.catalog.is_stale(spec.server):
            return False
        return self.catalog.get(name).schema_hash == spec.schema_hash

    def approved_before(self, spec: ToolSpec) -> str | None:
        """How this definition of the tool is already approved under ``ask`` (``pinned``,
        ``tool`` or ``server``), or None: it must be asked about."""
        pinned = self.config.approved.get(spec.server, {}).get(spec.name)
        if pinned is not None and pinned_hash_matches(pinned, spec.schema_hash):
            return "pinned"
        if self.tool_approvals.get((spec.server, spec.name)) == spec.schema_hash:
            return "tool"
        listed = self.server_approvals.get(spec.server)
        if listed is not None and listed.get(spec.name, spec.schema_hash) == spec.schema_hash:
            return "server"
        return None

    def _server_listing(self, server: str) -> dict[str, str]:
        return {s.name: s.schema_hash for s in self.catalog if s.server == server}

    async def _approve(self, spec: ToolSpec, args: Mapping[str, Any]) -> str | None:
        """None when approved, else the refusal text the model reads. An ``always`` answer is
        remembered only once the definition it was given for is confirmed unchanged."""
        policy = self.config.approval
        if policy == "always":
            return None
        if policy == "never":
            return f"the user's approval policy refuses {spec.qualified_name} (approval: never)"
        if self.approved_before(spec) is not None:
            return None
        if self.approver is None:
            return f"{spec.qualified_name} needs approval and no one can be asked"
        listing = self._server_listing(spec.server)  # what "always for this server" covers
        listing[spec.name] = spec.schema_hash
        try:
            answer = as_decision(await self.approver.approve(ApprovalRequest(spec, dict(args))))
        except Exception as exc:  # boundary: an approver that fails must fail closed
            logger.warning("approver failed for %s: %s", spec.qualified_name, exc)
            answer = "no"
        if answer == "no":  # declined, or no one at a terminal to ask: either way, no result
            return f"{spec.qualified_name} was not run: the user did not approve it"
        if self._unchanged(spec):
            if answer == "always_tool":
                self.tool_approvals[(spec.server, spec.name)] = spec.schema_hash
            elif answer == "always_server":
                self.server_approvals[spec.server] = listing
        return None

    async def _call(
        self,
        spec: ToolSpec,
        args: Mapping[str, Any],
        provisional: bool,
        on_progress: Callable[[Progress], None] | None = None,
    ) -> ToolResult:
        started = time.perf_counter()
        # Only a caller that wants progress passes it: a ToolCaller without the argument works.
        extra: dict[str, Any] = {} if on_progress is None else {"on_progress": on_progress}
        try:
            reply = await self.pool.call_tool(spec.server, spec.name, dict(args), **extra)
        except ServerTimeoutError as exc:
            return self._local(
                spec.qualified_name, spec.server, args, "timeout", str(exc), provisional
            )
        except ServerError as exc:
            text = str(exc)
            return self._local(
                spec.qualified_name, spec.server, args, "server_error", text, provisional
            )
        status: Status = "tool_error" if reply.is_error else "ok"
        raw, structured = result_text(reply), reply.structured_content
        problem = (
            None
            if reply.is_error  # an error result is passed on as it is, unchecked
            else self.catalog.output_problems(spec.qualified_name, structured)
        )
        if problem is not None:
            logger.warning("tool %s: %s", spec.qualified_name, problem)
            status, structured = "tool_error", None
            raw = f"{spec.qualified_name} returned an invalid result: {problem}"
        text, truncated = truncate_text(raw, self.config.limits.max_result_chars)
        return ToolResult(
            name=spec.qualified_name,
            server=spec.server,
            arguments=dict(args),
            status=status,
            text=self.markers.neutralize(text),
            truncated=truncated,
            total_chars=len(raw),
            structured=structured,
            duration_s=time.perf_counter() - started,
            provisional=provisional,
            content=_wire_blocks(reply.content),
            structured_content=reply.structured_content,
        )

    def _local(
        self,
        name: str,
        server: str | None,
        args: Mapping[str, Any],
        status: Status,
        text: str,
        provisional: bool,
    ) -> ToolResult:
        if status in ("denied", "not_provisional", "unknown_tool", "invalid_arguments"):
            logger.info("call %s not sent: %s", name, text)
        shown, truncated = truncate_text(text, self.config.limits.max_result_chars)
        return ToolResult(
            name=name,
            server=server,
            arguments=dict(args),
            status=status,
            text=self.markers.neutralize(shown),
            truncated=truncated,
            total_chars=len(text),  # the full length, as on the main path: before truncation
            provisional=provisional,
        )
