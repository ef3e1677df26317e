"""Decoding strategies behind one interface, and :func:`run_case` to run one on one request.

``STRATEGIES`` lists them in one literal dict of factories: ``serial`` (no grammar),
``constrained``, ``jump_forward`` and ``weave`` (SchemaWeaver), and ``weave``'s ablations
(``weave:no_drafts``, …: :data:`~weavehost.decode.weave.ABLATIONS`). Each factory makes a
strategy for one model's :class:`~weavehost.decode.state.DecodeState` (:func:`get_strategy`),
so what a strategy learns about one model stays with it. All run greedily on the same engine.
Several calls in one reply are written by one driver,
:func:`~weavehost.decode.several.write_calls`, for the agent and :func:`run_case` alike.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from weavehost.decode.base import CallRequest, CallResult, DecodeStrategy, ToolSchema
from weavehost.decode.drafts import DraftSource
from weavehost.decode.guided import ConstrainedStrategy, JumpForwardStrategy
from weavehost.decode.serial import SerialStrategy
from weavehost.decode.several import MAX_CALLS, Reply, write_calls
from weavehost.decode.state import DecodeState
from weavehost.decode.weave import ABLATIONS, WeaveStrategy
from weavehost.engine import Engine
from weavehost.errors import ConfigError
from weavehost.formats.base import ModelFormat, tool_to_openai

__all__ = [
    "DEFAULT_STRATEGY",
    "MAX_CALLS",
    "STRATEGIES",
    "CallRequest",
    "CallResult",
    "CaseOutcome",
    "DecodeState",
    "DecodeStrategy",
    "Reply",
    "StrategyFactory",
    "ToolSchema",
    "get_strategy",
    "run_case",
    "write_calls",
]

# Makes a strategy for a model's decode state (``None``: the strategy makes its own for the
# first engine it serves).
StrategyFactory = Callable[[DecodeState | None], DecodeStrategy]

STRATEGIES: dict[str, StrategyFactory] = {
    "serial": SerialStrategy,
    "constrained": ConstrainedStrategy,
    "jump_forward": JumpForwardStrategy,
    "weave": WeaveStrategy,
    # weave with one component off each (weave:no_drafts, …), for measuring each one's share.
    **{name: functools.partial(WeaveStrategy, options=o) for name, o in ABLATIONS.items()},
}


# What writes a call when nobody says otherwise (the host, the command line).
DEFAULT_STRATEGY = "weave"


def get_strategy(name: str, state: DecodeState | None = None) -> DecodeStrategy:
    """A new ``name`` strategy for the model whose decode state is ``state`` (``None``: one of
    its own, for the first engine it serves)."""
    try:
        factory = STRATEGIES[name]
    except KeyError:
        known = ", ".join(STRATEGIES)
        raise ConfigError(f"unknown strategy {name!r}; known strategies: {known}") from None
    return factory(state)


@dataclass(frozen=True, slots=True)
class CaseOutcome:
    """One strategy's calls for one conversation, with the prompt's prefill time apart.

    ``result`` is the whole reply as one :class:`CallResult` (every call, the work summed, the
    first call's tool latency, the time to the last final call; :meth:`Reply.combined`);
    ``per_call`` each call's own result, in order (empty where the writer has none)."""

    result: CallResult
    prompt_tokens: int
    prompt_prefill_s: float
    per_call: tuple[CallResult, ...] = ()


def run_case(
    engine: Engine,
    fmt: ModelFormat,
    strategy: str | DecodeStrategy,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[ToolSchema],
    *,
    chat_template: str | None = None,
    max_tokens: int = 256,
    max_calls: int = MAX_CALLS,
    state: DecodeState | None = None,
) -> CaseOutcome:
    """Render and prefill the prompt on an empty KV cache, then let ``strategy`` write the
    reply's calls (``max_tokens`` each, at most ``max_calls``): after each call the model's own
    greedy choice says whether another follows, the same for every strategy. A strategy named
    is made for ``state`` (the model's decode state; ``None``: a new one, so nothing is learned
    across cases)."""
    chosen = get_strategy(strategy, state) if isinstance(strategy, str) else strategy
    engine.clear()
    offered = [tool_to_openai(t.name, t.description, t.parameters) for t in tools]
    segments = fmt.render_prompt(messages, offered, chat_template=chat_template)
    prompt = engine.tokenize_segments(segments)
    started = time.perf_counter()
    engine.prefill(0, prompt)
    prefill_s = time.perf_counter() - started
    request = CallRequest(
        engine=engine,
        format=fmt,
        tools=tools,
        max_tokens=max_tokens,
        drafts=DraftSource.from_messages(messages, syntax=fmt.value_syntax),
    )
    reply = write_calls(request, chosen, max_calls=max_calls)
    return CaseOutcome(
        result=reply.combined(),
        prompt_tokens=len(prompt),
        prompt_prefill_s=prefill_s,
        per_call=tuple(reply.results),
    )
