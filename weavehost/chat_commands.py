"""Resources and prompts in a conversation: the chat's slash commands and ``@server:uri``.

Stage: command line (between what a person types in ``weavehost chat`` and the turn the model
runs). :func:`handle_line` reads one line and says what to do with it:

* ``/resources`` and ``/prompts`` list what the servers offer (lines for the terminal);
* ``/prompt NAME k=v…`` (``NAME`` or ``SERVER:NAME``; values may be quoted) gets the prompt and
  makes its messages' text the user turn;
* ``@server:uri`` anywhere in a message attaches that resource's text after the message.

Invariants:

* Text a server wrote (a resource, a prompt) is capped and neutralised exactly as a tool result is:
  at ``limits.max_result_chars`` with the visible truncation marker, chat-control markers broken
  (:func:`~weavehost.mcp.executor.truncate_text`, every format's markers through
  :class:`~weavehost.mcp.executor.ControlMarkers`). The cap counts the whole attachment, header
  included.
* A server is asked only for what it declared (the pool answers "none" for a server without
  ``resources`` or ``prompts`` in its capabilities).
* Every failure here (an unknown prompt or server, a missing required argument, a resource the
  server cannot read) is a :class:`~weavehost.errors.WeavehostError` whose message says what to
  fix; chat prints it and goes on, and no turn runs.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from weavehost.errors import ConfigError, WeavehostError
from weavehost.formats import control_markers
from weavehost.mcp.executor import ControlMarkers, truncate_text
from weavehost.mcp.features import PromptInfo, PromptMessage, ResourceInfo, ResourceText

__all__ = [
    "ChatReply",
    "ResourcePool",
    "attach_resources",
    "format_prompts",
    "format_resources",
    "handle_line",
    "list_prompts",
    "list_resources",
    "prompt_turn",
    "prompts_json",
    "resources_json",
]

# ``@server:uri``: a server name as config.py allows it, then a URI up to the next whitespace.
_MENTION = re.compile(r"(?<![\w@])@([A-Za-z0-9_.-]+):(\S+)")
_TRAILING = ".,;!?)]}'\""  # punctuation after a mention ends the sentence, not the URI


class ResourcePool(Protocol):
    """What this module needs of a :class:`~weavehost.mcp.servers.ServerPool`."""

    @property
    def names(self) -> tuple[str, ...]: ...

    async def list_resources(self, server: str) -> list[ResourceInfo]: ...

    async def read_resource(self, server: str, uri: str) -> list[ResourceText]: ...

    async def list_prompts(self, server: str) -> list[PromptInfo]: ...

    async def get_prompt(
        self, server: str, name: str, arguments: Mapping[str, str]
    ) -> list[PromptMessage]: ...


@dataclass(frozen=True, slots=True)
class ChatReply:
    """What chat does with a line: print ``lines`` (on stderr), then run ``turn`` if it is set."""

    lines: tuple[str, ...] = ()
    turn: str | None = None


# --------------------------------------------------------------------------- listing


async def list_resources(pool: ResourcePool) -> list[ResourceInfo]:
    """Every resource and resource template of every server, in server order."""
    found: list[ResourceInfo] = []
    for server in pool.names:
        found.extend(await pool.list_resources(server))
    return found


async def list_prompts(pool: ResourcePool) -> list[PromptInfo]:
    """Every prompt of every server, in server order."""
    found: list[PromptInfo] = []
    for server in pool.names:
        found.extend(await pool.list_prompts(server))
    return found


def resources_json(items: Sequence[ResourceInfo]) -> list[dict[str, Any]]:
    return [
        {"server": r.server, "uri": r.uri, "name": r.name, "title": r.title,
         "description": r.description, "mimeType": r.mime_type, "template": r.template}
        for r in items
    ]  # fmt: skip


def prompts_json(items: Sequence[PromptInfo]) -> list[dict[str, Any]]:
    return [
        {"server": p.server, "name": p.name, "title": p.title, "description": p.description,
         "arguments": [{"name": a.name, "description": a.description, "required": a.required}
                       for a in p.arguments]}
        for p in items
    ]  # fmt: skip


def _prompt_signature(prompt: PromptInfo) -> str:
    args = " ".join(f"{a.name}=…" + ("*" if a.required else "") for a in prompt.arguments)
    return f"{prompt.name} {args}".rstrip()


def format_resources(items: Sequence[ResourceInfo]) -> list[str]:
    """One line per resource: ``server:uri  name  [mime]  description`` (templates marked)."""
    if not items:
        return ["no resources"]
    lines = []
    for r in items:
        kind = "  (template)" if r.template else ""
        mime = f"  [{r.mime_type}]" if r.mime_type else ""
        about = f"  {r.description}" if r.description else ""
        lines.append(f"@{r.server}:{r.uri}  {r.title or r.name}{mime}{kind}{about}")
    return lines


def format_prompts(items: Sequence[PromptInfo]) -> list[str]:
    """One line per prompt: ``server  name arg=…* …  description`` (``*``: required)."""
    if not items:
        return ["no prompts"]
    lines = []
    for p in items:
        about = f"  {p.description}" if p.description else ""
        lines.append(f"{p.server}  {_prompt_signature(p)}{about}")
    return lines


# --------------------------------------------------------------------------- server text


def _fence(text: str, cap: int) -> str:
    """Server text made safe to put in a prompt: capped like a tool result, markers broken."""
    shown, _ = truncate_text(text, cap)
    return ControlMarkers(control_markers()).neutralize(shown)


async def attach_resources(pool: ResourcePool, line: str, *, max_chars: int) -> str:
    """``line`` with the text of each ``@server:uri`` it mentions appended (each capped at
    ``max_chars``, header included). A mention of something that is not a server is left as
    typed; a resource the server cannot read raises, so no turn runs with half its context."""
    servers = set(pool.names)
    blocks: list[str] = []
    seen: set[tuple[str, str]] = set()
    for match in _MENTION.finditer(line):
        server, uri = match.group(1), match.group(2).rstrip(_TRAILING)
        if server not in servers or (server, uri) in seen:
            continue
        seen.add((server, uri))
        try:
            contents = await pool.read_resource(server, uri)
        except WeavehostError as exc:
            raise type(exc)(f"@{server}:{uri}: {exc}") from exc
        body = "\n".join(c.text for c in contents) if contents else "(empty resource)"
        blocks.append(_fence(f"[resource {uri} from server {server}]\n{body}", max_chars))
    if not blocks:
        return line
    return "\n\n".join([line, *blocks])


def _parse_prompt_command(rest: str) -> tuple[str, dict[str, str]]:
    try:
        words = shlex.split(rest)
    except ValueError as exc:
        raise ConfigError(f"/prompt: cannot split the line: {exc}") from None
    if not words:
        raise ConfigError("/prompt NAME [key=value …]: which prompt? (/prompts lists them)")
    arguments: dict[str, str] = {}
    for word in words[1:]:
        key, sep, value = word.partition("=")
        if not sep or not key:
            raise ConfigError(f"/prompt: {word!r} is not key=value")
        arguments[key] = value
    return words[0], arguments


def _find_prompt(prompts: Sequence[PromptInfo], wanted: str) -> PromptInfo:
    server, sep, name = wanted.partition(":")
    if not sep:
        server, name = "", wanted
    matches = [p for p in prompts if p.name == name and (not server or p.server == server)]
    if not matches:
        known = ", ".join(sorted({p.name for p in prompts})) or "none"
        raise ConfigError(f"/prompt: no prompt named {wanted!r} (prompts: {known})")
    if len(matches) > 1:
        where = ", ".join(f"{p.server}:{p.name}" for p in matches)
        raise ConfigError(f"/prompt: {name!r} is offered by several servers; name one: {where}")
    return matches[0]


async def prompt_turn(pool: ResourcePool, rest: str, *, max_chars: int) -> str:
    """The user turn ``/prompt NAME k=v…`` stands for: the prompt's messages, as text."""
    wanted, arguments = _parse_prompt_command(rest)
    prompt = _find_prompt(await list_prompts(pool), wanted)
    names = {a.name for a in prompt.arguments}
    missing = [a.name for a in prompt.arguments if a.required and a.name not in arguments]
    unknown = [k for k in arguments if k not in names]
    if missing or unknown:
        problem = f"missing {', '.join(missing)}" if missing else f"unknown {', '.join(unknown)}"
        raise ConfigError(f"/prompt {prompt.name}: {problem} (arguments: "
                          f"{_prompt_signature(prompt)}; * required)")  # fmt: skip
    messages = await pool.get_prompt(prompt.server, prompt.name, arguments)
    text = "\n\n".join(m.text for m in messages if m.text)
    if not text.strip():
        raise ConfigError(f"/prompt {prompt.name}: the server returned no text")
    return _fence(text, max_chars)


# --------------------------------------------------------------------------- chat


async def handle_line(pool: ResourcePool, line: str, *, max_chars: int) -> ChatReply | None:
    """What chat does with ``line`` beyond plain text: ``None`` when this module has nothing to
    say (send the line as it is). Failures are :class:`WeavehostError` for chat to print."""
    stripped = line.strip()
    if stripped == "/resources":
        return ChatReply(lines=tuple(format_resources(await list_resources(pool))))
    if stripped == "/prompts":
        return ChatReply(lines=tuple(format_prompts(await list_prompts(pool))))
    if stripped == "/prompt" or stripped.startswith("/prompt "):
        return ChatReply(
            turn=await prompt_turn(pool, stripped[len("/prompt") :], max_chars=max_chars)
        )
    if "@" in line:
        attached = await attach_resources(pool, line, max_chars=max_chars)
        if attached != line:
            return ChatReply(turn=attached)
    return None
