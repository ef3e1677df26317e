"""What the agent loop needs from a model: :class:`AgentModel`, the seam between the loop and
whatever writes the replies (the engine-backed :class:`~weavehost.agent.model.EngineModel`, a
remote server's :class:`~weavehost.agent.remote.RemoteModel`, the test kit's scripted model).

Stage: agent. The module docstring of :mod:`weavehost.agent.model` says how the loop uses it;
its methods are blocking, called from a worker thread one at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from weavehost.agent.outcomes import FreeText, SyncReport
from weavehost.decode import MAX_CALLS, CallResult, ToolSchema
from weavehost.decode.reply import Sampling, TextSink
from weavehost.engine import EngineStats
from weavehost.formats import ToolCall

__all__ = ["AgentModel", "IndexedProvisionalSink", "ProvisionalSink"]

ProvisionalSink = Callable[[ToolCall], None]
# A reply's provisional calls, each with its place in the reply.
IndexedProvisionalSink = Callable[[int, ToolCall], None]


class AgentModel(Protocol):
    """What the agent loop needs from a model. Blocking; called from one worker at a time."""

    # Whether a call the host forces is written under the host's own constraint (a local or
    # scripted model), so the host may force one of its own accord (``call_named_tools``);
    # a remote model asks its server with ``tool_choice``, which servers support unevenly.
    writes_forced_calls: bool
    # Whether free_decode's ``avoid`` bans tokens (a local model's vocabulary): only then is
    # an answer written again begun otherwise (``reanswer_ignored_results``). A remote
    # server's vocabulary is its own, and a scripted model's text is its script.
    avoids_tokens: bool

    @property
    def n_ctx(self) -> int: ...

    def count_tokens(self, text: str) -> int: ...

    def prompt_tokens(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
    ) -> int: ...

    def reset(self) -> None: ...

    @property
    def threads(self) -> int: ...

    def set_threads(self, n_threads: int) -> None: ...

    def sync(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
    ) -> SyncReport: ...

    def free_decode(
        self,
        on_text: TextSink,
        max_tokens: int,
        allow_call: bool = True,
        *,
        sampling: Sampling | None = None,
        refused: Collection[str] = (),
        made: Collection[str] = (),
        avoid: Collection[int] = (),
    ) -> FreeText: ...

    def write_calls(
        self,
        tools: Sequence[ToolSchema],
        on_provisional: IndexedProvisionalSink,
        max_tokens: int,
        *,
        budget: int,
        max_calls: int = MAX_CALLS,
        made: Collection[str] = (),
        on_final: IndexedProvisionalSink | None = None,
    ) -> list[CallResult]: ...

    # The last reply's free text continued where its call began, calls no longer allowed,
    # once every call of that reply was not run (``None``: this model cannot).
    def resume_free(
        self,
        on_text: TextSink,
        max_tokens: int,
        *,
        refused: Collection[str] = (),
        made: Collection[str] = (),
    ) -> FreeText | None: ...

    def abort(self) -> None: ...

    def clear_abort(self) -> None: ...

    def stats(self) -> EngineStats: ...
