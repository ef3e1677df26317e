"""``weavehost check``: the checks of one tool as a server lists it, before anything is called.

Stage: testing (under :mod:`weavehost.testing.check`, which runs them on every listed tool). Pure
functions of the raw tool dict the server sent (no I/O), so a test can hold each rule directly.
The rules, and why each result is what it is, are in :mod:`weavehost.testing.check`'s docstring.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jsonschema import (
    Draft4Validator,
    Draft6Validator,
    Draft7Validator,
    Draft201909Validator,
    Draft202012Validator,
)
from jsonschema.exceptions import SchemaError as JsonSchemaError

from weavehost.config import Limits
from weavehost.errors import SchemaError
from weavehost.mcp.schemas import normalize_schema

__all__ = [
    "MUTATING_WORDS",
    "Finding",
    "Result",
    "schema_problem",
    "server_findings",
    "tool_findings",
]

# Words that say a tool changes something; one of them in a read-only tool's name is a warning.
# Ambiguous words are left out on purpose ("add" sums numbers, "post" is a noun, "open" reads).
MUTATING_WORDS = frozenset(
    "append archive assign cancel clear commit create delete deploy destroy disable drop edit "
    "enable erase exec execute grant insert install kill merge modify move overwrite patch pay "
    "publish purge push put remove rename replace reset restart revoke save send set shutdown "
    "start stop submit toggle transfer truncate uninstall update upload write".split()
)


Result = Literal["pass", "warn", "fail", "skip"]
_NAME_RULE = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_WORD_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")
_HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint")
_DIALECTS: Mapping[str, Any] = {
    "https://json-schema.org/draft/2020-12/schema": Draft202012Validator,
    "https://json-schema.org/draft/2019-09/schema": Draft201909Validator,
    "http://json-schema.org/draft-07/schema": Draft7Validator,
    "http://json-schema.org/draft-06/schema": Draft6Validator,
    "http://json-schema.org/draft-04/schema": Draft4Validator,
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One check of one tool (``tool`` is ``None`` for the server as a whole)."""

    server: str
    tool: str | None
    check: str
    result: Result
    detail: str = ""
    time_s: float | None = None


# --------------------------------------------------------------------------- static checks


def tool_findings(server: str, tool: Mapping[str, Any], limits: Limits) -> list[Finding]:
    """The checks of one tool as the server listed it (no calls); pure, for tests too."""
    name = tool.get("name")
    label = name if isinstance(name, str) else repr(name)

    def finding(check: str, result: Result, detail: str = "") -> Finding:
        return Finding(server, label, check, result, detail)

    out = [finding(*_name_check(name))]
    schema = tool.get("inputSchema")
    remote = _remote_refs(schema) + _remote_refs(tool.get("outputSchema"))
    out.append(finding(*_input_schema_check(schema, limits, skip_catalog=bool(remote))))
    if remote:
        where = ", ".join(repr(r) for r in remote[:3])
        out.append(finding("remote-ref", "fail", f"$ref to {where}: never fetched by a host"))
    else:
        out.append(finding("remote-ref", "pass"))
    if "outputSchema" in tool and tool["outputSchema"] is not None:
        out.append(finding("output-schema", *_output_schema_check(tool["outputSchema"])))
    out.append(finding("annotations", *_annotations_check(tool)))
    hints = tool.get("annotations")
    if isinstance(hints, Mapping) and hints.get("readOnlyHint") is True:
        out.append(finding("read-only-hint", *_read_only_check(label, hints)))
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        out.append(finding("description", "fail", f"not a string: {description!r:.60}"))
    elif not description:
        out.append(finding("description", "warn", "none: a model has only the name to go on"))
    else:
        out.append(finding("description", "pass"))
    return out


def _name_check(name: Any) -> tuple[str, Result, str]:
    if not isinstance(name, str):
        return "name", "fail", f"not a string: {name!r:.60}"
    if not _NAME_RULE.fullmatch(name):
        bad = sorted({c for c in name if not re.fullmatch(r"[A-Za-z0-9_.-]", c)})
        why = f"{len(name)} characters" if not bad else "has " + " ".join(repr(c) for c in bad)
        return "name", "fail", f"breaks MCP's rule (1-128 characters of A-Z a-z 0-9 _ - .): {why}"
    if name[0] in "-." or name[-1] in "-.":
        return "name", "warn", "starts or ends with '-' or '.' (allowed, but parsed badly by some)"
    return "name", "pass", ""


def _validator_class(schema: Mapping[str, Any]) -> Any:
    dialect = schema.get("$schema")
    if dialect is None:
        return Draft202012Validator
    return _DIALECTS.get(str(dialect).rstrip("#")) if isinstance(dialect, str) else None


def schema_problem(schema: Any) -> str | None:
    """Why ``schema`` is not a valid JSON Schema (Draft 2020-12 unless ``$schema`` says)."""
    if isinstance(schema, bool):
        return None
    if not isinstance(schema, Mapping):
        return f"not a JSON object: {schema!r:.60}"
    validator = _validator_class(schema)
    if validator is None:
        return f"unknown $schema dialect {schema.get('$schema')!r}"
    try:
        validator.check_schema(schema)
    except JsonSchemaError as exc:
        return f"at {exc.json_path}: {exc.message}"
    return None


def _input_schema_check(
    schema: Any, limits: Limits, *, skip_catalog: bool
) -> tuple[str, Result, str]:
    if schema is None:
        return "input-schema", "fail", "missing (MCP requires inputSchema)"
    problem = schema_problem(schema)
    if problem is not None:
        return "input-schema", "fail", f"invalid JSON Schema: {problem}"
    if schema.get("type") != "object":
        return "input-schema", "fail", f"root type is {schema.get('type')!r}; MCP requires 'object'"
    if not skip_catalog:
        try:
            normalize_schema(schema, limits=limits, where="inputSchema")
        except SchemaError as exc:
            return "input-schema", "fail", f"a host leaves the tool out: {exc}"
    return "input-schema", "pass", ""


def _output_schema_check(schema: Any) -> tuple[Result, str]:
    problem = schema_problem(schema)
    if problem is not None:
        return "fail", f"invalid JSON Schema: {problem}"
    if not isinstance(schema, Mapping) or schema.get("type") != "object":
        return "warn", "root type is not 'object': clients before protocol 2026-07-28 reject it"
    return "pass", ""


def _annotations_check(tool: Mapping[str, Any]) -> tuple[Result, str]:
    hints = tool.get("annotations")
    if hints is None:
        return "pass", "none"
    if not isinstance(hints, Mapping):
        return "fail", f"not an object: {hints!r:.60}"
    problems = [
        f"{key} is {hints[key]!r} ({type(hints[key]).__name__}), not a boolean"
        for key in _HINTS
        if key in hints and not isinstance(hints[key], bool)
    ]
    if "title" in hints and not isinstance(hints["title"], str):
        problems.append(f"title is {hints['title']!r:.40}, not a string")
    if problems:
        read_only = " (a host reads it as not read-only)" if "readOnlyHint" in str(problems) else ""
        return "fail", "; ".join(problems) + read_only
    return "pass", ", ".join(k for k in _HINTS if hints.get(k) is True) or "no hint true"


def _read_only_check(name: str, hints: Mapping[str, Any]) -> tuple[Result, str]:
    words = {w.lower() for w in _WORD_SPLIT.split(name) if w}
    hits = sorted(words & MUTATING_WORDS)
    if hits:
        return "warn", (
            f"marked read-only, but {', '.join(repr(h) for h in hits)} in the name says it "
            "changes something: a host may run it without asking"
        )
    if hints.get("destructiveHint") is True:
        return "warn", "readOnlyHint and destructiveHint are both true"
    return "pass", ""


def _remote_refs(schema: Any) -> list[str]:
    """Every ``$ref``/``$dynamicRef`` in ``schema`` that does not point inside it."""
    found: list[str] = []
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                    if not value.startswith("#"):
                        found.append(value)
                else:
                    stack.append(value)
        elif isinstance(node, list):
            stack.extend(node)
    return found


def server_findings(server: str, tools: Sequence[Mapping[str, Any]]) -> list[Finding]:
    names = [t.get("name") for t in tools]
    twice = sorted({n for n in names if isinstance(n, str) and names.count(n) > 1})
    if twice:
        listed = ", ".join(repr(n) for n in twice)
        return [Finding(server, None, "unique-names", "fail", f"listed more than once: {listed}")]
    return []
