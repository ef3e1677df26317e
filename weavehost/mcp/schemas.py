"""Tool schemas: normalised, self-contained, checked, and hashed, before any tool uses them.

Stage: catalog (the schema half; :mod:`weavehost.mcp.catalog` builds the records). Used for MCP
tools and for the benchmark's BFCL functions alike, so both get the same caps and ``$ref``
handling.

Invariants of :func:`normalize_schema`:

* The result is a self-contained Draft 2020-12 schema: local ``$ref`` inlined (a cycle is an
  error), ``$defs`` dropped, BFCL type spellings (``dict``, ``float``, ``tuple``, ``any`` …)
  mapped to JSON Schema.
* A ``$ref`` that is not a local JSON pointer is never fetched: nothing here opens a socket or a
  file (the checks run with an empty ``referencing.Registry``).
* Depth is measured iteratively before anything recursive runs, so no ``RecursionError``
  escapes; size and depth are capped by :class:`~weavehost.config.Limits`.
* Every problem is a :class:`~weavehost.errors.SchemaError` naming ``where`` and the problem.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as JsonSchemaError

from weavehost.config import Limits
from weavehost.errors import SchemaError

__all__ = ["json_depth", "normalize_schema", "schema_hash"]

_BFCL_TYPES: Mapping[str, str | None] = MappingProxyType(
    {
        "dict": "object",
        "object": "object",
        "float": "number",
        "double": "number",
        "number": "number",
        "int": "integer",
        "integer": "integer",
        "long": "integer",
        "bool": "boolean",
        "boolean": "boolean",
        "str": "string",
        "string": "string",
        "char": "string",
        "list": "array",
        "array": "array",
        "tuple": "array",
        "arraylist": "array",
        "hashmap": "object",
        "null": "null",
        "any": None,  # no constraint
    }
)
_SUPPORTED_DIALECTS = frozenset(
    {
        "https://json-schema.org/draft/2020-12/schema",
        "https://json-schema.org/draft/2019-09/schema",
        "http://json-schema.org/draft-07/schema",
        "http://json-schema.org/draft-06/schema",
        "http://json-schema.org/draft-04/schema",
    }
)
_SCHEMA_MAP_KEYS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SCHEMA_LIST_KEYS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE_KEYS = (
    "items", "additionalProperties", "not", "if", "then", "else", "contains",
    "propertyNames", "unevaluatedItems", "unevaluatedProperties", "additionalItems",
)  # fmt: skip


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, measured iteratively; stops counting past ``limit``."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _map_type(value: Any, where: str) -> Any:
    """Map one ``type`` value (string or list) from BFCL/Python spellings to JSON Schema."""
    if isinstance(value, list):
        mapped = [_map_type(v, where) for v in value]
        return None if None in mapped else mapped
    if not isinstance(value, str):
        raise SchemaError(f"{where}: 'type' must be a string or a list of strings, got {value!r}")
    key = value.strip().lower()
    if key not in _BFCL_TYPES:
        raise SchemaError(f"{where}: unknown type {value!r}")
    return _BFCL_TYPES[key]


def _resolve_pointer(root: Any, ref: str, where: str) -> Any:
    if not ref.startswith("#"):
        # Remote ($ref to a URL or a file) or $id-relative: never fetched, never guessed.
        raise SchemaError(
            f"{where}: $ref {ref!r} is not a local reference; remote schemas are never fetched"
        )
    node = root
    pointer = ref[1:]
    if pointer and not pointer.startswith("/"):
        raise SchemaError(f"{where}: $ref {ref!r} uses an anchor; only JSON pointers are supported")
    for raw_part in pointer.split("/")[1:]:
        part = raw_part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise SchemaError(f"{where}: $ref {ref!r} does not resolve inside the schema")
    return node


def normalize_schema(
    schema: Any, *, limits: Limits | None = None, where: str = "schema"
) -> dict[str, Any]:
    """Return a self-contained, Draft 2020-12-valid copy of ``schema``.

    Local ``$ref`` are inlined (a reference cycle is an error, never infinite recursion); a
    remote ``$ref`` is an error and is never fetched; BFCL spellings are mapped (``dict`` →
    ``object``, ``float`` → ``number``, ``tuple`` → ``array``, ``any`` → no constraint …).
    Raises :class:`~weavehost.errors.SchemaError` naming ``where`` and the problem.
    """
    limits = limits or Limits()
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: a schema must be an object, got {type(schema).__name__}")
    if json_depth(schema, limits.max_schema_depth) > limits.max_schema_depth:
        raise SchemaError(f"{where}: nested deeper than {limits.max_schema_depth} levels")
    size = len(json.dumps(schema))
    if size > limits.max_schema_bytes:
        raise SchemaError(f"{where}: {size} bytes, over the {limits.max_schema_bytes}-byte cap")
    dialect = schema.get("$schema")
    if dialect is not None and (
        not isinstance(dialect, str) or dialect.rstrip("#") not in _SUPPORTED_DIALECTS
    ):
        raise SchemaError(f"{where}: unsupported $schema dialect {dialect!r}")

    budget = [limits.max_schema_bytes]  # inlining may grow a schema; bound the nodes it makes

    def walk(node: Any, active: tuple[str, ...], depth: int) -> Any:
        if depth > limits.max_schema_depth:
            raise SchemaError(
                f"{where}: nested deeper than {limits.max_schema_depth} levels after $ref"
            )
        budget[0] -= 1
        if budget[0] < 0:
            raise SchemaError(f"{where}: too large after inlining $ref")
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            raise SchemaError(f"{where}: expected a schema object, got {node!r:.60}")
        if "$dynamicRef" in node or "$recursiveRef" in node:
            raise SchemaError(f"{where}: $dynamicRef/$recursiveRef are not supported")
        if "$ref" in node:
            ref = node["$ref"]
            if not isinstance(ref, str):
                raise SchemaError(f"{where}: $ref must be a string, got {ref!r:.60}")
            if ref in active:
                raise SchemaError(f"{where}: recursive $ref {ref!r}")
            target = walk(_resolve_pointer(schema, ref, where), (*active, ref), depth + 1)
            siblings = {k: v for k, v in node.items() if k not in ("$ref", "$defs", "definitions")}
            if not siblings:
                return target
            rest = walk(siblings, active, depth + 1)
            return {"allOf": [target, rest]} if target is not True else rest
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key in ("$defs", "definitions", "$schema", "$id", "$comment"):
                continue
            if key == "type":
                mapped = _map_type(value, where)
                if mapped is not None:
                    out["type"] = mapped
            elif key in _SCHEMA_MAP_KEYS and isinstance(value, dict):
                out[key] = {k: walk(v, active, depth + 1) for k, v in value.items()}
            elif key in _SCHEMA_LIST_KEYS and isinstance(value, list):
                out[key] = [walk(v, active, depth + 1) for v in value]
            elif key in _SCHEMA_ONE_KEYS and isinstance(value, dict | bool):
                out[key] = walk(value, active, depth + 1)
            elif key == "items" and isinstance(value, list):
                out["prefixItems"] = [
                    walk(v, active, depth + 1) for v in value
                ]  # draft-07 tuple form
            else:
                out[key] = copy.deepcopy(value)
        return out

    normalized = walk(schema, (), 1)
    if not isinstance(normalized, dict):
        normalized = {} if normalized is True else {"not": {}}
    if "type" not in normalized and "properties" in normalized:
        normalized["type"] = "object"
    try:
        Draft202012Validator.check_schema(normalized)
    except JsonSchemaError as exc:
        raise SchemaError(f"{where}: invalid JSON Schema: {exc.message}") from None
    return normalized


def schema_hash(
    name: str,
    description: str,
    input_schema: Mapping[str, Any],
    annotations: Mapping[str, Any],
    output_schema: Mapping[str, Any] | None = None,
) -> str:
    """SHA-256 over what approval depends on; a change (rug pull) changes the hash.

    ``description`` is the full text the server sent, not the capped text the model reads.
    """
    blob = json.dumps(
        {
            "name": name,
            "description": description,
            "inputSchema": input_schema,
            "annotations": annotations,
            "outputSchema": output_schema,
        },
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()
