"""Stub server specs: loading a JSON or YAML file and validating it.

Stage: testing (the kit's input). :func:`load_spec` turns a dict or a ``.json``/``.yaml`` file
into a validated spec dict that :mod:`weavehost.testing.stub` serves.

Invariants:

* A spec that :func:`load_spec` returns is valid against the published JSON Schema
  (``stub-spec.schema.json``, Draft 2020-12) and the checks a schema cannot say: tool names are
  unique, ``tools_change_after`` has a ``tools_change`` to apply, ``tools_change`` names tools
  that exist, a prompt has ``text`` or ``messages`` (not both).
* Anything else raises :class:`~weavehost.errors.StubSpecError` whose message starts with the
  JSON path of the fault, written as Python reads it: ``tools[0].response.sequence[2]: expected
  an object``. The schema's own wording is not shown; jsonschema errors are converted here.
* YAML is read only when PyYAML is installed; otherwise a ``.yaml`` spec is refused with a
  message that says to use JSON or install ``pyyaml``. weavehost does not depend on it.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from weavehost.errors import StubSpecError

__all__ = ["DEFAULT_NAME", "SCHEMA_FILE", "json_path", "load_spec", "schema", "spec_name"]

SCHEMA_FILE = "stub-spec.schema.json"
DEFAULT_NAME = "stub"  # the server name of a spec given as a dict without ``name``
YAML_SUFFIXES = (".yaml", ".yml")
_TYPE_NAMES = {
    "object": "an object",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "null": "null",
}


@cache
def schema() -> dict[str, Any]:
    """The published JSON Schema of a stub spec (shipped in the wheel next to this module)."""
    text = resources.files("weavehost.testing").joinpath(SCHEMA_FILE).read_text("utf-8")
    return json.loads(text)


def load_spec(spec: Mapping[str, Any] | str | os.PathLike[str]) -> dict[str, Any]:
    """A validated copy of ``spec`` (a dict, or the path of a JSON or YAML file).

    The returned dict always has ``name`` (the spec's, else the file's stem, else
    :data:`DEFAULT_NAME`). Raises :class:`StubSpecError` naming the path of the first fault.
    """
    if isinstance(spec, str | os.PathLike):
        path = Path(spec)
        data: Any = _read(path)
        default_name = path.stem
    else:  # a dict, or anything else, which validation then refuses by name
        data = copy.deepcopy(dict(spec) if isinstance(spec, Mapping) else spec)
        default_name = DEFAULT_NAME
    validate(data)
    data.setdefault("name", default_name)
    return data


def spec_name(spec: Mapping[str, Any]) -> str:
    return str(spec.get("name") or DEFAULT_NAME)


def validate(data: Any) -> None:
    """Raise :class:`StubSpecError` unless ``data`` is a valid spec."""
    validator = Draft202012Validator(schema())
    error = best_match(validator.iter_errors(data), key=_relevance)
    if error is not None:
        raise StubSpecError(f"{json_path(error.absolute_path)}: {_describe(error)}")
    _check_semantics(data)


def json_path(parts: Iterable[str | int]) -> str:
    """``["tools", 0, "response"]`` → ``tools[0].response`` (``(spec)`` for the root)."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(spec)"


# --------------------------------------------------------------------------- reading


def _read(path: Path) -> Any:
    if not path.is_file():
        raise StubSpecError(f"{path}: no such spec file")
    try:
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise StubSpecError(f"{path}: cannot read it: {exc}") from exc
    if path.suffix.lower() in YAML_SUFFIXES:
        return _read_yaml(path, text)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise StubSpecError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from exc


def _read_yaml(path: Path, text: str) -> Any:
    try:
        import yaml  # optional: weavehost does not depend on PyYAML
    except ImportError:
        raise StubSpecError(
            f"{path}: a YAML spec needs PyYAML, which is not installed; "
            "write the spec as JSON, or `pip install pyyaml`"
        ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise StubSpecError(f"{path}: not valid YAML: {exc}") from exc


# --------------------------------------------------------------------------- messages


def _relevance(error: ValidationError) -> tuple[int, int]:
    # The deepest fault is the one a person fixes; among equals, prefer a type error (it
    # explains the rest) over the noise that follows from it.
    return (len(error.absolute_path), int(error.validator == "type"))


def _describe(error: ValidationError) -> str:
    kind, expected, value = error.validator, error.validator_value, error.instance
    if kind == "type":
        names = [expected] if isinstance(expected, str) else list(expected)
        wanted = " or ".join(_TYPE_NAMES.get(n, n) for n in names)
        return f"expected {wanted}, got {_show(value)}"
    if kind == "required":
        missing = [k for k in expected if isinstance(value, dict) and k not in value]
        return f"missing required key {missing[0]!r}" if missing else error.message
    if kind == "additionalProperties" and isinstance(value, dict):
        allowed = sorted((error.schema.get("properties") or {}).keys())
        unknown = [k for k in value if k not in allowed]
        if unknown:
            hint = difflib.get_close_matches(unknown[0], allowed, n=1)
            tail = f"; did you mean {hint[0]!r}?" if hint else f"; allowed: {', '.join(allowed)}"
            return f"unknown key {unknown[0]!r}{tail}"
    if kind == "enum":
        return f"expected one of {', '.join(map(repr, expected))}, got {_show(value)}"
    if kind == "minimum":
        return f"expected a number >= {expected}, got {_show(value)}"
    if kind == "minItems":
        return f"expected at least {expected} item(s)"
    if kind == "minLength":
        return f"expected at least {expected} character(s)"
    if kind == "minProperties":
        return "expected at least one key"
    if kind == "pattern":
        return f"{_show(value)} does not match {expected!r}"
    if kind == "maxProperties":
        return "a `sequence` stands alone: put text, error or structuredContent in its items"
    if kind == "not":
        return "`error` and `structuredContent` exclude each other"
    return error.message


def _show(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------- semantics


def _check_semantics(data: Mapping[str, Any]) -> None:
    tools: Sequence[Mapping[str, Any]] = data.get("tools") or []
    names = _unique_names(tools, "tools")
    change = data.get("tools_change")
    for i, tool in enumerate(tools):
        if "tools_change_after" in (tool.get("behaviour") or {}) and change is None:
            raise StubSpecError(
                f"tools[{i}].behaviour.tools_change_after: there is no top-level "
                "`tools_change` saying what changes"
            )
    if "tools_change_after" in (data.get("behaviour") or {}) and change is None:
        raise StubSpecError(
            "behaviour.tools_change_after: there is no top-level `tools_change` saying what changes"
        )
    if change is not None:
        _unique_names(change.get("add") or [], "tools_change.add")
        for key in ("remove", "update"):
            for i, entry in enumerate(change.get(key) or []):
                name = entry if isinstance(entry, str) else entry["name"]
                if name not in names:
                    where = f"tools_change.{key}[{i}]" + ("" if key == "remove" else ".name")
                    raise StubSpecError(f"{where}: no tool named {name!r} in `tools`")
    _unique_names(data.get("prompts") or [], "prompts")
    for i, prompt in enumerate(data.get("prompts") or []):
        if ("text" in prompt) == ("messages" in prompt):
            raise StubSpecError(f"prompts[{i}]: give `text` or `messages` (one of them)")
    seen: set[str] = set()
    for i, resource in enumerate(data.get("resources") or []):
        if resource["uri"] in seen:
            raise StubSpecError(f"resources[{i}].uri: {resource['uri']!r} is listed twice")
        seen.add(resource["uri"])


def _unique_names(items: Sequence[Mapping[str, Any]], where: str) -> set[str]:
    names: set[str] = set()
    for i, item in enumerate(items):
        if item["name"] in names:
            raise StubSpecError(f"{where}[{i}].name: {item['name']!r} is listed twice")
        names.add(item["name"])
    return names
