"""Benchmark cases in the Berkeley Function Calling Leaderboard (BFCL) format.

Stage: benchmark input. :func:`load_cases` reads any BFCL case file (JSON lines: ``id``,
``question`` = turns of ``{"role", "content"}`` messages, ``function`` = tool schemas) and
:func:`load_answers` the matching ``possible_answer`` file (``id``, ``ground_truth``).

Guarantees:

- Every problem in a file is a :class:`BenchError` naming the file and the 1-based line; nothing
  half-read is returned.
- A :class:`BenchCase` carries its tools twice: as :class:`ToolSchema` with parameters in plain
  JSON Schema (:func:`normalize_bfcl_schema`), which the decoders and the prompt see, and as the
  file's raw ``function`` records, which the correctness checker reads (BFCL's rules are written
  against BFCL's own type names).
- The turns of ``question`` are joined in order into one conversation; the call is decoded after
  its last message. (The single-turn categories, simple/multiple/parallel, have one turn.)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weavehost.decode.base import ToolSchema
from weavehost.errors import BenchError, SchemaError
from weavehost.mcp.schemas import normalize_schema

__all__ = [
    "AnswerSet",
    "BenchCase",
    "load_answers",
    "load_cases",
    "normalize_bfcl_schema",
    "parse_case",
]

# BFCL's type spellings (Python-flavoured) and their JSON Schema names. ``any`` has none: it
# constrains nothing, so the type is dropped.


@dataclass(frozen=True, slots=True)
class BenchCase:
    """One BFCL case: its conversation, its tools as JSON Schema, and the raw BFCL functions."""

    id: str
    messages: tuple[Mapping[str, Any], ...]
    tools: tuple[ToolSchema, ...]
    functions: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True, slots=True)
class AnswerSet:
    """The accepted calls of one case: ``[{func_name: {param: [accepted values]}}]``."""

    id: str
    ground_truth: tuple[Mapping[str, Mapping[str, list[Any]]], ...]


def normalize_bfcl_schema(schema: Any, where: str = "schema") -> dict[str, Any]:
    """A BFCL parameter schema as plain JSON Schema.

    BFCL's own ``"optional": true`` on a property takes it out of its object's ``required``
    (and a ``required`` entry naming no property is dropped); everything else — ``dict`` →
    ``object``, ``float`` → ``number``, ``tuple`` → ``array``, ``any`` → no constraint, local
    ``$ref``, size and depth caps — is the catalog's
    :func:`~weavehost.mcp.schemas.normalize_schema`, the same normalisation every MCP tool gets.
    The input is not changed.
    """
    try:
        return normalize_schema(_without_optional_flags(schema), where=where)
    except SchemaError as exc:
        raise BenchError(str(exc)) from exc


def _without_optional_flags(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_without_optional_flags(item) for item in schema]
    if not isinstance(schema, Mapping):
        return schema
    out = {k: _without_optional_flags(v) for k, v in schema.items() if k != "optional"}
    properties = schema.get("properties")
    if isinstance(properties, Mapping) and isinstance(out.get("required"), list):
        optional = {
            name
            for name, sub in properties.items()
            if isinstance(sub, Mapping) and sub.get("optional") is True
        }
        out["required"] = [n for n in out["required"] if n in properties and n not in optional]
    return out


def _read_json_lines(path: Path, what: str) -> Iterator[tuple[int, dict[str, Any]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise BenchError(f"{what} file {path} does not exist") from None
    except IsADirectoryError:
        raise BenchError(f"{what} file {path} is a directory") from None
    except UnicodeDecodeError as exc:
        raise BenchError(f"{what} file {path} is not UTF-8 text ({exc.reason})") from exc
    except OSError as exc:
        raise BenchError(f"cannot read {what} file {path}: {exc.strerror}") from exc
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            problem = f"not JSON ({exc.msg} at column {exc.colno})"
            raise BenchError(f"{path}:{number}: {problem}") from exc
        if not isinstance(record, dict):
            raise BenchError(f"{path}:{number}: a line must hold a JSON object")
        yield number, record


def _messages(question: Any, where: str) -> tuple[dict[str, Any], ...]:
    if not isinstance(question, list) or not question:
        raise BenchError(f"{where}: 'question' must be a non-empty list of turns")
    # A flat list of messages (some hand-made files) is read as one turn.
    turns = [question] if all(isinstance(m, Mapping) for m in question) else question
    messages: list[dict[str, Any]] = []
    for turn in turns:
        if not isinstance(turn, list):
            raise BenchError(f"{where}: each turn of 'question' must be a list of messages")
        for message in turn:
            if not isinstance(message, Mapping):
                raise BenchError(f"{where}: a message must be an object with role and content")
            role, content = message.get("role"), message.get("content")
            if not isinstance(role, str) or not isinstance(content, str):
                raise BenchError(f"{where}: a message needs a string 'role' and 'content'")
            messages.append({"role": role, "content": content})
    if not messages:
        raise BenchError(f"{where}: 'question' holds no message")
    return tuple(messages)


def _tool(function: Any, where: str) -> ToolSchema:
    if not isinstance(function, Mapping):
        raise BenchError(f"{where}: each entry of 'function' must be an object")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise BenchError(f"{where}: a function has no string 'name'")
    description = function.get("description", "")
    if not isinstance(description, str):
        raise BenchError(f"{where}: the description of {name!r} must be a string")
    parameters = function.get("parameters", {"type": "dict", "properties": {}})
    if not isinstance(parameters, Mapping):
        raise BenchError(f"{where}: the parameters of {name!r} must be an object")
    properties = parameters.get("properties", {})
    if not isinstance(properties, Mapping):
        raise BenchError(f"{where}: the properties of {name!r} must be an object")
    if not isinstance(parameters.get("required", []), list):
        raise BenchError(f"{where}: 'required' of {name!r} must be a list")
    normalized = normalize_bfcl_schema(parameters, where=f"{where}: {name}")
    normalized.setdefault("properties", {})
    normalized["type"] = "object"
    return ToolSchema(name=name, description=description, parameters=normalized)


def parse_case(record: Mapping[str, Any], where: str) -> BenchCase:
    """One case from its decoded JSON line; ``where`` (``file:line``) prefixes every error."""
    case_id = record.get("id")
    if not isinstance(case_id, str | int) or isinstance(case_id, bool):
        raise BenchError(f"{where}: the case has no 'id'")
    functions = record.get("function")
    if not isinstance(functions, list) or not functions:
        raise BenchError(f"{where}: case {case_id!r} has no 'function' list of tools")
    tools = tuple(_tool(function, where) for function in functions)
    names = [tool.name for tool in tools]
    if len(set(names)) != len(names):
        raise BenchError(f"{where}: case {case_id!r} offers two tools with the same name")
    return BenchCase(
        id=str(case_id),
        messages=_messages(record.get("question"), where),
        tools=tools,
        functions=tuple(functions),
    )


def load_cases(path: str | Path, *, limit: int | None = None) -> list[BenchCase]:
    """The cases of a BFCL JSON-lines file, in file order (the first ``limit`` if given)."""
    file_path = Path(path)
    cases: list[BenchCase] = []
    seen: dict[str, int] = {}
    for number, record in _read_json_lines(file_path, "case"):
        if limit is not None and len(cases) >= limit:
            break
        where = f"{file_path}:{number}"
        case = parse_case(record, where)
        if case.id in seen:
            raise BenchError(f"{where}: case id {case.id!r} already used on line {seen[case.id]}")
        seen[case.id] = number
        cases.append(case)
    if not cases:
        raise BenchError(f"case file {file_path} holds no case")
    return cases


def _ground_truth(value: Any, where: str) -> tuple[Mapping[str, Mapping[str, list[Any]]], ...]:
    if not isinstance(value, list):
        raise BenchError(f"{where}: 'ground_truth' must be a list of calls")
    calls = []
    for call in value:
        if not isinstance(call, Mapping) or len(call) != 1:
            raise BenchError(f"{where}: each ground-truth call must be {{func_name: {{...}}}}")
        ((name, params),) = call.items()
        if not isinstance(params, Mapping):
            raise BenchError(
                f"{where}: the parameters of ground-truth call {name!r} must be an object"
            )
        for param, accepted in params.items():
            if not isinstance(accepted, list):
                raise BenchError(f"{where}: accepted values of {name}.{param} must be a list")
        calls.append({name: dict(params)})
    return tuple(calls)


def load_answers(path: str | Path) -> dict[str, AnswerSet]:
    """A BFCL ``possible_answer`` file, by case id."""
    file_path = Path(path)
    answers: dict[str, AnswerSet] = {}
    for number, record in _read_json_lines(file_path, "answer"):
        where = f"{file_path}:{number}"
        case_id = record.get("id")
        if not isinstance(case_id, str | int) or isinstance(case_id, bool):
            raise BenchError(f"{where}: the answer has no 'id'")
        if "ground_truth" not in record:
            raise BenchError(f"{where}: answer {case_id!r} has no 'ground_truth'")
        truth = _ground_truth(record["ground_truth"], where)
        answers[str(case_id)] = AnswerSet(str(case_id), truth)
    return answers
