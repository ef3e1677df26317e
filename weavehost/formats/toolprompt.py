"""What the model is shown of a tool: its description and a clean view of its schema.

Stage: prompt rendering (every prompt's tool definitions pass through
:func:`~weavehost.formats.base.tool_to_openai`, which applies this view). The schema the decoder
constrains and the executor validates is the full one; only the text in the prompt changes.

A small model copies what it reads: pydantic's ``"title": "get_current_timeArguments"`` ends up
inside its calls, and ``"additionalProperties": false`` or ``$schema`` cost tokens on every turn
while telling it nothing it can act on. Guarantees of :func:`prompt_parameters`:

* Schema keywords that change nothing for the model are dropped: ``title``, ``$schema``,
  ``$id``, ``$anchor``, ``$comment``, ``$defs``/``definitions`` (local ``$ref`` s were inlined by
  the catalog), and ``additionalProperties``/``unevaluatedProperties`` when they are booleans (a
  schema there says what a map's values are, and stays).
* Property *names* are never dropped (a property called ``title`` stays); only keywords are.
* ``examples`` keep their first :data:`PROMPT_EXAMPLES`; descriptions inside the schema are cut at
  :data:`PARAMETER_DESCRIPTION_BUDGET` characters. The tool's own description is not cut here:
  its one cap is the config's ``limits.maxDescriptionChars``, applied by the catalog.
* Pure and total: any JSON value in, a JSON value out; nothing is mutated.
* Built once per schema: every render of a step shows the same tools again, so the view of a
  schema is kept (at most :data:`PROMPT_VIEW_CACHE` of them, least recently used dropped),
  keyed by the schema's JSON text, from which the view is built: a schema that changed (a
  server re-listing its tools) is another key, never a stale view. The view handed out is
  shared: read it (render, serialise), never change it.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "PARAMETER_DESCRIPTION_BUDGET",
    "PROMPT_EXAMPLES",
    "PROMPT_VIEW_CACHE",
    "cut_description",
    "prompt_parameters",
]

# ~60 tokens per argument: what the value means and its unit, not a tutorial.
PARAMETER_DESCRIPTION_BUDGET = 240
PROMPT_EXAMPLES = 2  # examples of one value the model is shown
# Schemas whose view is kept: a catalog of hundreds of tools, rendered at every step.
PROMPT_VIEW_CACHE = 1024
CUT_MARK = " …"

_DROPPED = frozenset({"title", "$schema", "$id", "$anchor", "$comment", "$defs", "definitions"})
_BOOLEAN_NOISE = frozenset({"additionalProperties", "unevaluatedProperties"})
_NAMED_SCHEMAS = frozenset({"properties", "patternProperties", "dependentSchemas"})
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_ONE_SCHEMA = frozenset(
    {"items", "additionalProperties", "unevaluatedProperties", "not", "if", "then", "else",
     "contains", "propertyNames", "unevaluatedItems", "additionalItems"}
)  # fmt: skip


def cut_description(text: str, budget: int) -> str:
    """``text`` if it fits ``budget`` characters, otherwise its head, cut at a word boundary
    where one is near, with a mark that says it was cut."""
    if len(text) <= budget:
        return text
    head = text[: max(0, budget - len(CUT_MARK))]
    space = head.rfind(" ")
    if space >= len(head) * 4 // 5:
        head = head[:space]
    return head.rstrip() + CUT_MARK


def prompt_parameters(schema: Any) -> Any:
    """The view of a tool's (normalised) argument schema that goes into the prompt; shared
    between calls with the same schema (see the module docstring), so never to be changed."""
    if not isinstance(schema, Mapping):
        return schema
    try:
        text = json.dumps(schema, separators=(",", ":"), default=_json_mapping)
    except (TypeError, ValueError):  # not JSON (a value json cannot write, a cycle): not kept
        return _view(schema)
    return _kept_view(text)


@functools.lru_cache(maxsize=PROMPT_VIEW_CACHE)
def _kept_view(text: str) -> Any:
    """The view of the schema written as ``text``, built from ``text`` itself."""
    return _view(json.loads(text))


def _json_mapping(value: Any) -> Any:
    """A frozen catalog's mappings, written as JSON objects (tuples already are arrays)."""
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{type(value).__name__} is not JSON")


def _view(schema: Any) -> Any:
    if not isinstance(schema, Mapping):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _DROPPED or (key in _BOOLEAN_NOISE and isinstance(value, bool)):
            continue
        if key in _NAMED_SCHEMAS and isinstance(value, Mapping):
            out[key] = {name: _view(item) for name, item in value.items()}
        elif key in _SCHEMA_LISTS and isinstance(value, list | tuple):
            out[key] = [_view(item) for item in value]
        elif key in _ONE_SCHEMA:
            out[key] = _view(value)
        elif key == "description" and isinstance(value, str):
            out[key] = cut_description(value, PARAMETER_DESCRIPTION_BUDGET)
        elif key == "examples" and isinstance(value, list | tuple):
            out[key] = list(value[:PROMPT_EXAMPLES])
        else:
            out[key] = _plain(value)
    return out


def _plain(value: Any) -> Any:
    """A JSON copy (mappings and tuples from a frozen catalog become dicts and lists)."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
