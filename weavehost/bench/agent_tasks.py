"""The agent benchmark's tasks: one JSON object a line, read and checked before anything runs.

Stage: benchmark inputs (``weavehost bench-agent``). A task is::

    {"id": "weather-paris", "servers": ["weather.py"],
     "user": "What is the weather in Paris?",
     "calls": [{"get_current_weather": {"city": ["Paris"], "units": ["metric", ""]}}],
     "facts": ["-2.9"], "tags": ["single", "weather"]}

or, for a conversation of several turns, ``"turns": [{"user", "calls", "facts", "fails"}, ...]``
in place of ``user``/``calls``/``facts``/``fails``. Optional: ``trust`` (server names; default
every server of the task, so read-only tools may run provisionally), ``approval`` (``always``,
the default, or ``never``: nothing in a benchmark waits for a person; ``never`` refuses every
call that needs approval, so only the trusted servers' read-only tools run), ``tool_choice`` (as
``--tool-choice``), ``needs`` (a capability the task needs, e.g. ``multi_call``; reported as a
tag) and ``tags``.

``calls`` are BFCL's accepted values: for each expected call ``{tool: {argument: [accepted
values]}}``, ``""`` among them when the argument may be left out; ``[]`` means no tool may run.
An argument the expectation does not name is not judged (BFCL would refuse it). ``facts`` are
strings the turn's answer must contain, case-insensitively. ``fails`` (optional, same form as
``calls``) are the calls the turn is built to fail on first (a file that is not there, a time
zone name a model gets wrong): given, a call of the turn whose result is an error the model can
correct (:data:`RECOVERABLE`) is not judged, and the turn must still make ``calls``.

A server is a ``--server`` value. A ``.py`` script is looked up as given, then beside the tasks
file, then in the repository's ``tools/`` folder; ``{fixtures}`` stands for the small folder
shipped beside this module (``agent_files/``), the root ``files.py`` reads. The third-party
servers and the per-run fixtures ``{files}`` and ``{repo}`` are placeholders too
(:mod:`weavehost.bench.agent_third_party`): a server's is replaced when the file loads (a server
that is not installed is a :class:`BenchError` then), a fixture's when the task runs
(:func:`bind_task`, in the servers, the user's words, the accepted values, the facts).

Task sets (:data:`TASK_SETS`): ``examples``, the 51 over the example servers in ``tools/``
(``agent_tasks.jsonl``), and ``third-party``, over real third-party servers
(``agent_tasks_third_party.jsonl``). A run is of one set, and its results say which
(:func:`task_set_of`), so the two are never mixed.

Guarantees: every problem is a :class:`BenchError` naming the file and line; the servers are
resolved (scripts found, programs on ``PATH``) and named as :class:`Host` will name them, so a
``trust`` entry is checked here, before any server starts or model loads.
"""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from weavehost.bench.agent_third_party import FIXTURE_NAMES, placeholders_in, resolve_servers
from weavehost.config import server_from_flag
from weavehost.errors import BenchError, ConfigError

__all__ = [
    "FIXTURES",
    "RECOVERABLE",
    "SHIPPED_TASKS",
    "TASK_SETS",
    "THIRD_PARTY_TASKS",
    "TOOLS_DIR",
    "AgentTask",
    "AgentTurn",
    "bind_task",
    "load_tasks",
    "task_set_of",
]

SHIPPED_TASKS = Path(__file__).with_name("agent_tasks.jsonl")
THIRD_PARTY_TASKS = Path(__file__).with_name("agent_tasks_third_party.jsonl")
TASK_SETS = {"examples": SHIPPED_TASKS, "third-party": THIRD_PARTY_TASKS}
CUSTOM_SET = "custom"  # a tasks file of the user's own
# A failed call the model can correct by calling again: the server's error, arguments the
# schema refuses, a tool that does not exist. A refused (``denied``) call is a wrong choice.
RECOVERABLE = frozenset({"tool_error", "invalid_arguments", "unknown_tool"})
FIXTURES = Path(__file__).with_name("agent_files")
# The example servers live in the repository, next to the package (an editable install).
TOOLS_DIR = Path(__file__).resolve().parents[2] / "tools"
TASK_APPROVALS = ("always", "never")
_TASK_KEYS = frozenset(
    {"id", "servers", "user", "calls", "facts", "fails", "turns", "trust", "approval",
     "tool_choice", "needs", "tags"}
)  # fmt: skip
_TURN_KEYS = frozenset({"user", "calls", "facts", "fails"})

ExpectedCall = Mapping[str, Mapping[str, list[Any]]]


@dataclass(frozen=True, slots=True)
class AgentTurn:
    """One user message, the calls it should make (BFCL accepted values) and the facts its
    answer must contain."""

    user: str
    calls: tuple[ExpectedCall, ...] = ()
    facts: tuple[str, ...] = ()
    fails: tuple[ExpectedCall, ...] = ()  # the calls it is built to fail on first


@dataclass(frozen=True, slots=True)
class AgentTask:
    """One task: its servers (``--server`` values, resolved), turns and settings."""

    id: str
    servers: tuple[str, ...]
    turns: tuple[AgentTurn, ...]
    trust: tuple[str, ...] = ()
    approval: str = "always"
    tool_choice: str | None = None
    tags: tuple[str, ...] = ()
    line: int = 0

    @property
    def fixtures(self) -> set[str]:
        """The per-run fixtures (``{files}``, ``{repo}``) the task uses."""
        turns = [json.dumps([t.user, t.calls, t.facts, t.fails]) for t in self.turns]
        texts = [*self.servers, *turns]
        return {name for text in texts for name in placeholders_in(text) if name in FIXTURE_NAMES}


def task_set_of(path: str | Path) -> str:
    """The name of the shipped set ``path`` is (:data:`TASK_SETS`), else ``custom``."""
    resolved = Path(path).resolve()
    return next((n for n, p in TASK_SETS.items() if p.resolve() == resolved), CUSTOM_SET)


def bind_task(task: AgentTask, values: Mapping[str, str]) -> AgentTask:
    """``task`` with each fixture placeholder replaced by its folder (quoted in the servers'
    command lines, as is elsewhere)."""

    def bound(value: Any) -> Any:
        if isinstance(value, str):
            for name, path in values.items():
                value = value.replace(f"{{{name}}}", path)
        elif isinstance(value, list):
            value = [bound(item) for item in value]
        elif isinstance(value, dict):
            value = {key: bound(item) for key, item in value.items()}
        return value

    def command(server: str) -> str:
        for name, path in values.items():
            server = server.replace(f"{{{name}}}", shlex.quote(path))
        return server

    turns = tuple(
        AgentTurn(
            user=bound(turn.user),
            calls=tuple(bound(dict(call)) for call in turn.calls),
            facts=tuple(bound(fact) for fact in turn.facts),
            fails=tuple(bound(dict(call)) for call in turn.fails),
        )
        for turn in task.turns
    )
    return replace(task, servers=tuple(command(s) for s in task.servers), turns=turns)


def load_tasks(path: str | Path) -> list[AgentTask]:
    """Every task of a ``.jsonl`` file; a :class:`BenchError` naming the line otherwise."""
    file_path = Path(path)
    try:
        lines = file_path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BenchError(f"cannot read tasks file {file_path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise BenchError(f"{file_path}: not UTF-8 text ({exc.reason})") from exc
    tasks: list[AgentTask] = []
    seen: set[str] = set()
    for number, text in enumerate(lines, start=1):
        if not text.strip():
            continue
        where = f"{file_path}:{number}"
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BenchError(f"{where}: not JSON ({exc.msg}, column {exc.colno})") from None
        task = _task(raw, where, file_path.parent, number)
        if task.id in seen:
            raise BenchError(f"{where}: task id {task.id!r} is used twice")
        seen.add(task.id)
        tasks.append(task)
    if not tasks:
        raise BenchError(f"{file_path}: no tasks")
    return tasks


def _task(raw: Any, where: str, base: Path, number: int) -> AgentTask:
    if not isinstance(raw, dict):
        raise BenchError(f"{where}: a task is a JSON object, got {type(raw).__name__}")
    _known_keys(raw, _TASK_KEYS, where)
    task_id = raw.get("id")
    if not isinstance(task_id, str) or not task_id:
        raise BenchError(f"{where}: 'id' must be a non-empty string")
    where = f"{where} ({task_id})"
    servers, names = _servers(raw.get("servers"), where, base)
    if "turns" in raw:
        if any(key in raw for key in _TURN_KEYS):
            raise BenchError(f"{where}: give either 'turns' or 'user'/'calls'/'facts', not both")
        turns = raw["turns"]
        if not isinstance(turns, list) or not turns:
            raise BenchError(f"{where}: 'turns' must be a non-empty list")
        parsed = tuple(_turn(t, f"{where} turn {i}") for i, t in enumerate(turns, start=1))
    else:
        parsed = (_turn({k: raw[k] for k in _TURN_KEYS if k in raw}, where),)
    trust = raw.get("trust", names)
    if not _strings(trust):
        raise BenchError(f"{where}: 'trust' must be a list of server names")
    unknown = [name for name in trust if name not in names]
    if unknown:
        raise BenchError(
            f"{where}: trust {unknown[0]!r}: no such server (have: {', '.join(names)})"
        )
    approval = raw.get("approval", "always")
    if approval not in TASK_APPROVALS:
        raise BenchError(
            f"{where}: 'approval' must be one of {', '.join(TASK_APPROVALS)} (nothing in a "
            f"benchmark waits for a person), got {approval!r}"
        )
    tool_choice = raw.get("tool_choice")
    if tool_choice is not None and (not isinstance(tool_choice, str) or not tool_choice):
        raise BenchError(f"{where}: 'tool_choice' must be a non-empty string")
    tags = raw.get("tags", [])
    needs = raw.get("needs")
    if not _strings(tags) or (needs is not None and not isinstance(needs, str)):
        raise BenchError(f"{where}: 'tags' must be a list of strings and 'needs' a string")
    if needs is not None and needs not in tags:
        tags = [*tags, needs]
    return AgentTask(
        id=task_id,
        servers=servers,
        turns=parsed,
        trust=tuple(trust),
        approval=approval,
        tool_choice=tool_choice,
        tags=tuple(tags),
        line=number,
    )


def _turn(raw: Any, where: str) -> AgentTurn:
    if not isinstance(raw, dict):
        raise BenchError(f"{where}: a turn is a JSON object")
    _known_keys(raw, _TURN_KEYS, where)
    user = raw.get("user")
    if not isinstance(user, str) or not user.strip():
        raise BenchError(f"{where}: 'user' must be a non-empty string")
    calls = raw.get("calls", [])
    fails = raw.get("fails", [])
    if not isinstance(calls, list) or not isinstance(fails, list):
        raise BenchError(f"{where}: 'calls' and 'fails' must be lists ([] when no tool should run)")
    facts = raw.get("facts", [])
    if not _strings(facts):
        raise BenchError(f"{where}: 'facts' must be a list of strings")
    return AgentTurn(
        user=user,
        calls=tuple(_expected_call(c, f"{where} call {i}") for i, c in enumerate(calls, start=1)),
        facts=tuple(facts),
        fails=tuple(_expected_call(c, f"{where} fails {i}") for i, c in enumerate(fails, start=1)),
    )


def _expected_call(raw: Any, where: str) -> ExpectedCall:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise BenchError(f"{where}: an expected call is {{tool: {{argument: [accepted values]}}}}")
    ((name, arguments),) = raw.items()
    if not isinstance(arguments, dict):
        raise BenchError(f"{where}: the arguments of {name!r} must be an object")
    for argument, accepted in arguments.items():
        if not isinstance(accepted, list) or not accepted:
            raise BenchError(
                f"{where}: {name}.{argument} must be a non-empty list of accepted values"
            )
    return {name: {argument: list(accepted) for argument, accepted in arguments.items()}}


def _servers(raw: Any, where: str, base: Path) -> tuple[tuple[str, ...], list[str]]:
    """The ``--server`` values with scripts resolved, and the names Host will give them."""
    if not _strings(raw) or not raw:
        raise BenchError(f"{where}: 'servers' must be a non-empty list of server commands")
    resolved: list[str] = []
    names: list[str] = []
    for value in raw:
        command = _resolve_server(value, where, base)
        try:
            names.append(server_from_flag(command, taken=names).name)
        except ConfigError as exc:
            raise BenchError(f"{where}: {exc}") from None
        resolved.append(command)
    return tuple(resolved), names


def _resolve_server(value: str, where: str, base: Path) -> str:
    try:
        text = resolve_servers(value.replace("{fixtures}", shlex.quote(str(FIXTURES))))
    except BenchError as exc:
        raise BenchError(f"{where}: server {value!r}: {exc}") from None
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise BenchError(
            f"{where}: server {value!r}: cannot split the command line: {exc}"
        ) from None
    if not words:
        raise BenchError(f"{where}: an empty server command")
    if not words[0].endswith(".py"):
        return text
    given = Path(words[0]).expanduser()
    candidates = [given] if given.is_absolute() else [given, base / given, TOOLS_DIR / given]
    for candidate in candidates:
        if candidate.is_file():
            return shlex.join([str(candidate.resolve()), *words[1:]])
    looked = ", ".join(str(c.parent.resolve()) for c in candidates)
    raise BenchError(f"{where}: server {value!r}: no such Python file (looked in {looked})")


def _known_keys(raw: Mapping[str, Any], known: frozenset[str], where: str) -> None:
    for key in raw:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise BenchError(f"{where}: unknown key {key!r}{hint}")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) and v for v in value)
