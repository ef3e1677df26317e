"""Argument values the user names: a choice the request already made, bound in the call.

Stage: agent (the calls of a turn, local models). Asked for "Weather in Chicago in imperial
units, please.", SmolLM2-135M writes ``"units": "metric"``; asked to "Set the ring volume to
3.", Qwen2.5-Coder-0.5B leaves ``stream`` out (the tool's default, ``media``). Both values are
among the argument's ``enum``, and the user wrote one of them word for word.

:func:`bind_named_values` gives the decoder, for one turn, a tool whose such argument allows only
the value named and is required: the call holds it, and the decoder writes it as fixed text.

Invariants: only string ``enum`` arguments at the top of a tool's arguments; a value counts as
named when the request holds it as whole words, case aside, ``_`` and ``-`` read as spaces
(``do_not_disturb``: "do not disturb"); a value named only inside a longer named value does not
count ("dark" in "dark high contrast"); an argument with two or more values named is left as it
is ("the flashlight and do not disturb"), and so is every other argument. The prompt still shows
the tool's own schema; the call still meets it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from weavehost.decode import ToolSchema

__all__ = ["bind_named_values", "named_values"]

_SPACES = re.compile(r"[\s_\-]+")


def _spoken(text: str) -> str:
    return _SPACES.sub(" ", text.lower()).strip()


def _names(request: str, value: str) -> bool:
    spoken = _spoken(value)
    if spoken not in request or not re.search(r"[a-z]", spoken):  # cheap first: huge enums
        return False
    pattern = r"(?<![a-z0-9])" + re.escape(spoken) + r"(?![a-z0-9])"
    return re.search(pattern, request) is not None


def named_values(tool: ToolSchema, request: str) -> dict[str, str]:
    """Each string-``enum`` argument of ``tool`` whose values ``request`` names exactly one of,
    and that value ("imperial units": ``{"units": "imperial"}``)."""
    spoken = _spoken(request)
    bound: dict[str, str] = {}
    for name, prop in tool.parameters.get("properties", {}).items():
        values = prop.get("enum") if isinstance(prop, Mapping) else None
        if not values or not all(isinstance(v, str) for v in values):
            continue
        named = [v for v in dict.fromkeys(values) if _names(spoken, v)]
        # A value named only as part of a longer named one is not named on its own.
        named = [v for v in named if not any(w != v and _names(_spoken(w), v) for w in named)]
        if len(named) == 1:
            bound[name] = named[0]
    return bound


def bind_named_values(tool: ToolSchema, request: str) -> ToolSchema:
    """``tool`` with each argument of :func:`named_values` required and allowing only the value
    named; ``tool`` itself where the request names none."""
    bound = named_values(tool, request)
    if not bound:
        return tool
    params: dict[str, Any] = dict(tool.parameters)
    properties = dict(params.get("properties", {}))
    for name, value in bound.items():
        rest = {k: v for k, v in properties[name].items() if k != "default"}
        properties[name] = {**rest, "enum": [value]}
    params["properties"] = properties
    required = list(params.get("required", []))
    params["required"] = required + [name for name in bound if name not in required]
    return ToolSchema(tool.name, tool.description, params)
