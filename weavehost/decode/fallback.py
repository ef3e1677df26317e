"""Post-validation: the way out when a tool's schema cannot be constrained.

Stage: decoding (RELIABILITY rows 16 and 24). A schema whose grammar llguidance refuses, or
that passes the size caps in :mod:`weavehost.decode.grammar`, is not a crash: the constrained
strategies decode the call under a looser grammar (:func:`loosened`: the same tools and keys,
any JSON value for each argument) or, if even that cannot be built, with no constraint at all
(``serial`` with the opener forced), and then validate the call against the real schema
(:func:`invalid_reason`). A call that does not validate is a failed call like any other: no
call is returned and sequence 0 goes back to the prompt. A warning is logged each time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError as JsonSchemaError
from referencing import Registry

from weavehost.decode.base import ToolSchema
from weavehost.formats.base import ToolCall

__all__ = ["invalid_reason", "loosened"]


def loosened(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The tool's arguments with their keys and required set, each value any JSON value."""
    props = parameters.get("properties") or {}
    return {
        "type": "object",
        "properties": {key: {} for key in props},
        "required": [k for k in parameters.get("required", []) if k in props],
    }


def invalid_reason(calls: Sequence[ToolCall], tools: Sequence[ToolSchema]) -> str | None:
    """Why ``calls`` may not be passed on (an unknown tool, arguments that do not validate
    against the tool's schema), or ``None`` if every call is valid."""
    by_name = {tool.name: tool for tool in tools}
    for call in calls:
        tool = by_name.get(call.name)
        if tool is None:
            return f"the model called {call.name!r}, which is not offered"
        try:
            # An empty Registry: a $ref left in a schema could never be fetched.
            validator = Draft202012Validator(dict(tool.parameters), registry=Registry())
            error = next(iter(validator.iter_errors(dict(call.arguments))), None)
        except (JsonSchemaError, RecursionError, ValueError) as exc:
            return f"the arguments of {call.name!r} cannot be checked: {exc}"
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(root)"
            return f"the call to {call.name!r} does not validate: {where}: {error.message}"
    return None
