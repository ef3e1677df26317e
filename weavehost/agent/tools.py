"""Which tools a turn offers the model when the whole catalog would not fit its context.

Stage: agent (before each turn's first step). Tool descriptions are part of every prompt, so a
catalog of hundreds of tools would leave no room for the conversation. The catalog is offered
whole while its descriptions fit a share of the context (``DEFAULT_CATALOG_SHARE``); otherwise
the tools that share the most words with the request, as many as fit.

Invariants: cheap (word overlap, no model and no embeddings); deterministic (ties keep catalog
order); at least one tool is offered from a non-empty catalog; a whole catalog keeps its catalog
order (the prompt's prefix stays the same from turn to turn, for the prompt cache), while a cut
one is offered best-ranked first (a small model picks among the first tools it reads: in catalog
order, "Call Dmitri Ivanov." got ``set_alarm``, the android catalog's first tool).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Sequence

from weavehost.decode import ToolSchema
from weavehost.formats import tool_to_openai
from weavehost.mcp.catalog import ToolSpec

__all__ = [
    "DEFAULT_CATALOG_SHARE",
    "names_tool",
    "named_not_called",
    "offer_tools",
    "rank_tools",
    "relevance",
    "select_tools",
    "tool_schema",
]

DEFAULT_CATALOG_SHARE = 0.25  # tool descriptions may take this share of n_ctx

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by can do for from get how i in is it me my of on or please set "
    "the this to was what when where which will with you your".split()
)


def tool_schema(spec: ToolSpec) -> ToolSchema:
    """A catalog tool as the decoder sees it: qualified name, description, input schema."""
    return ToolSchema(spec.qualified_name, spec.description, spec.schema_dict())


def _words(text: str) -> set[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ").lower()
    return {w for w in _WORD.findall(spaced) if w not in _STOP}


def relevance(tool: ToolSchema, request: str) -> int:
    """How many words of ``request`` the tool's name (counted twice) and description share,
    stop words aside (0: none)."""
    return _overlap(tool, _words(request))


def names_tool(tool: ToolSchema, request: str) -> bool:
    """Whether ``request`` holds a word of the tool's name, stop words aside ("Set the ring
    volume to 3." names ``set_volume``; "What is the capital city?" names no
    ``get_current_weather``, whose description says "city")."""
    return bool(_words(tool.name) & _words(request))


def named_not_called(
    tools: Sequence[ToolSchema], request: str, called: Collection[str]
) -> list[ToolSchema]:
    """The tools ``request`` names by a word that no ``called`` tool's name holds: "the weather
    in Rome, and how much battery" after ``get_current_weather`` names ``get_battery_status``
    still; "What time is it in Tokyo?" after ``get_current_time`` names no ``convert_time``
    (its one word, "time", was answered)."""
    wanted = _words(request)
    answered = {w for name in called for w in _words(name)}
    return [t for t in tools if t.name not in called and (_words(t.name) & wanted) - answered]


def _overlap(tool: ToolSchema, wanted: set[str]) -> int:
    return 2 * len(_words(tool.name) & wanted) + len(_words(tool.description) & wanted)


def rank_tools(tools: Sequence[ToolSchema], request: str) -> list[ToolSchema]:
    """Tools by :func:`relevance` to the request; ties keep catalog order. Cheap: no model, no
    embeddings; the request's words read once."""
    wanted = _words(request)
    ranked = sorted(enumerate(tools), key=lambda item: (-_overlap(item[1], wanted), item[0]))
    return [tool for _, tool in ranked]


def select_tools(
    tools: Sequence[ToolSchema],
    request: str,
    *,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
) -> tuple[list[ToolSchema], int]:
    """The tools to offer for ``request``: all of them when their descriptions fit in
    ``budget_tokens`` (in catalog order), otherwise the best-ranked ones that fit (at least
    one), best first. Also returns the token estimate of the whole catalog."""
    cost = {
        t.name: count_tokens(json.dumps(tool_to_openai(t.name, t.description, t.parameters)))
        for t in tools
    }
    total = sum(cost.values())
    if total <= budget_tokens:
        return list(tools), total
    chosen: list[ToolSchema] = []
    used = 0
    for tool in rank_tools(tools, request):
        if chosen and used + cost[tool.name] > budget_tokens:
            continue
        chosen.append(tool)
        used += cost[tool.name]
    return chosen, total


def offer_tools(
    tools: Sequence[ToolSchema],
    request: str,
    *,
    n_ctx: int,
    share: float,
    count_tokens: Callable[[str], int],
) -> tuple[list[ToolSchema], str | None]:
    """The tools ``request`` is offered within ``share`` of an ``n_ctx``-token context
    (:func:`select_tools`), and a note for the user when some were left out."""
    chosen, total = select_tools(
        tools, request, budget_tokens=int(n_ctx * share), count_tokens=count_tokens
    )
    if len(chosen) == len(tools):
        return chosen, None
    return chosen, (
        f"the {len(tools)} tools would take ~{total} tokens, over {share:.0%} of the {n_ctx}-"
        f"token context: offering the {len(chosen)} most relevant "
        f"({', '.join(t.name for t in chosen)})"
    )
