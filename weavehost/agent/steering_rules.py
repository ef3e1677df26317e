"""The steering rules a :class:`~weavehost.agent.session.Session` applies, each a switch.

Stage: agent (the loop's decisions about a small model's turn; issue 30, ``docs/agent.md``,
"Steering", lists each rule and what it did). A session is a :class:`SteeringRules`: these
methods read its conversation and its turn's state (declared below) and decide, at a step,
which tools a call must be written with, which would not be run, and whether an answer is
written again; the session acts on what they decide. Each rule is a class attribute, so its
effect can be measured with the rule off.
"""

from __future__ import annotations

from typing import Any

from weavehost.agent.model import AgentModel, FreeText
from weavehost.agent.named_values import bind_named_values
from weavehost.agent.options import ToolChoice
from weavehost.agent.steering import (
    call_shaped,
    ignores_results,
    invented_numbers,
    may_restate_earlier_result,
    restates_earlier_result,
    told_texts,
)
from weavehost.agent.tools import named_not_called, names_tool, relevance, tool_schema
from weavehost.decode import ToolSchema
from weavehost.formats import ToolCall
from weavehost.mcp.catalog import Catalog

__all__ = ["SteeringRules"]


class SteeringRules:
    """The rules, and the session state they read (set by the session)."""

    # Steering that helps small models end a turn right, each rule a switch so its effect can
    # be measured (issue 30; docs/agent.md, "Steering", says what each does and did).
    recall_call_shaped = True  # an answer that is a call to no tool on offer: written as a call
    answer_after_result = True  # a tool called again after its good result: not run
    recall_stale = True  # a follow-up restating an earlier result for a new name: a call
    related_later_calls = True  # after a result, a tool the message does not mention: not run
    call_named_tools = True  # under auto, each tool the message names is called (local models)
    refuse_invented_numbers = True  # a call with a long number told nowhere: not run
    bind_named_values = True  # an enum value the message names is the call's (local models)
    reanswer_ignored_results = True  # an answer saying nothing of the results: once again

    model: AgentModel
    catalog: Catalog
    messages: list[dict[str, Any]]
    tool_choice: ToolChoice
    call_on_description: bool
    _turn_start: int
    _turn_calls: set[str]
    _turn_tools: set[str]
    _answered_tools: set[str]
    _answer_only: bool
    _forced: list[ToolSchema]
    _recall: list[ToolSchema] | None
    _avoid: frozenset[int] | None

    def _steered_away(self, call: ToolCall, *, in_reply: bool) -> str | None:
        """Why ``call`` is not run (``None``: it runs). Shown a good result, a small model calls
        the same tool again with other arguments (a line of the result as a path, the same
        alarm without its days) instead of answering; or, after a good result or another call
        of its reply, a tool the request never mentions (an alarm for 01:01 after the wifi); or
        it writes a long number nothing it was told holds (a phone number for Dmitri)."""
        name = call.name
        if self.answer_after_result and name in self._answered_tools:
            return "again after its good result"
        if self.related_later_calls and self._unrelated(name, in_reply=in_reply):
            return "after its first call, though the request does not mention it"
        if self.refuse_invented_numbers:
            numbers = invented_numbers(dict(call.arguments), told_texts(self.messages))
            if numbers:
                return f"with {', '.join(numbers)}, found nowhere in the conversation"
        return None

    def _refused(self, tools: list[ToolSchema]) -> set[str]:
        """The tools whose call this step would not run (:meth:`_run_calls`), refused to the
        reply writer: those that answered this turn, and after a good result those that share
        no word with the user's message."""
        refused = set(self._answered_tools) if self.answer_after_result else set()
        if self.related_later_calls:
            refused |= {t.name for t in tools if self._unrelated(t.name)}
        return refused

    def _unrelated(self, name: str, *, in_reply: bool = False) -> bool:
        """Whether a call to ``name`` comes after a good result of the turn or another call of
        its reply (``in_reply``; not after failures: a correction may go elsewhere), names a
        tool no call of the turn named ("Oslo and Paris?": one tool twice) and shares no word
        with the user's message (:func:`~.tools.relevance`)."""
        after = self._answered_tools or in_reply
        if not after or name in self._turn_tools or name not in self.catalog:
            return False
        request = str(self.messages[self._turn_start].get("content", ""))
        return relevance(tool_schema(self.catalog.get(name)), request) == 0

    def _ignores_results(self, free: FreeText) -> bool:
        """Whether an answer, after a good result of the turn, states nothing of the turn's
        results (:func:`~.steering.ignores_results`; the called tools' names and argument names
        do not count), once a turn, on a model that can ban its first token next."""
        if not self.reanswer_ignored_results or self._avoid is not None:
            return False
        if not (self._answered_tools and free.token_ids and self.model.avoids_tokens):
            return False
        tools = [tool_schema(self.catalog.get(n)) for n in self._turn_tools if n in self.catalog]
        called = [w for t in tools for w in (t.name, *t.parameters.get("properties", {}))]
        return ignores_results(free.text, self.messages[self._turn_start :], called)

    def _bound(self, tools: list[ToolSchema]) -> list[ToolSchema]:
        """The tools as this turn's calls are written, each ``enum`` value the message names
        bound (:func:`~.named_values.bind_named_values`); a remote server writes its own."""
        if not self.bind_named_values or not self.model.writes_forced_calls:
            return tools
        request = str(self.messages[self._turn_start].get("content", ""))
        return [bind_named_values(t, request) for t in tools]

    def _forced_tools(self, step: int, tools: list[ToolSchema]) -> list[ToolSchema]:
        """The tools a call must be written with now (none: the model decides): the first
        step's under ``required``, a tool's name, or ``auto`` where the message names a tool
        (:func:`~.tools.names_tool`; with ``call_on_description``, where it shares a word with
        one: :func:`~.tools.relevance`); once a turn after a good result, the read-only tools it
        names that no call answered (:func:`~.tools.named_not_called`)."""
        if self._recall:
            recall, self._recall = self._recall, []  # once a turn: a second one stands
            return recall
        if not tools:
            return []
        if self.tool_choice == "auto" and self.call_named_tools and self.model.writes_forced_calls:
            request = str(self.messages[self._turn_start].get("content", ""))
            if step == 1:
                said = relevance if self.call_on_description else names_tool
                return tools if any(said(t, request) for t in tools) else []
            if not self._answered_tools or self._answer_only or self._recall is not None:
                return []
            left, catalog = named_not_called(tools, request, self._turn_tools), self.catalog
            later = [t for t in left if t.name in catalog and catalog.get(t.name).read_only]
            if not later:
                return []
            self._recall = []  # the turn's one steered step
            return later
        return (tools if self.tool_choice == "required" else self._forced) if step == 1 else []

    def _recall_tools(self, text: str, tools: list[ToolSchema]) -> list[ToolSchema]:
        """The tools an answer that is a call to no tool on offer is written again as a call
        to (none: it stands): once a turn, where calls may be made, those on offer that take
        an argument the answer's call names (``enabled``: ``toggle_setting``). A call to a tool
        that is on offer would have begun a call, and one whose arguments fit no tool (a
        ``calculator`` for a sum) is no call the tools on offer can make."""
        shaped = call_shaped(text)
        if (
            not self.recall_call_shaped
            or shaped is None
            or self._recall is not None
            or self._answer_only
            or self.tool_choice == "none"
        ):
            return []
        name, keys = shaped
        if name in {t.name for t in tools}:
            return []
        return [t for t in tools if keys & set(t.parameters.get("properties", {}))]

    def _stale(self, text: str, tools: list[ToolSchema]) -> bool:
        """Whether an answer made without a call restates an earlier turn's result for a new
        name (:func:`~.steering.restates_earlier_result`), once a turn, where calls may be."""
        if not self._may_be_stale(tools):
            return False
        return restates_earlier_result(text, self.messages, self._turn_start)

    def _may_be_stale(self, tools: list[ToolSchema]) -> bool:
        """Whether this step's answer could be found stale (:meth:`_stale`) once written: then
        it is held back from the stream until it is judged, so a stale one is never shown."""
        blocked = self._recall is not None or self._turn_calls or self._answer_only
        if not self.recall_stale or blocked or self.tool_choice == "none" or not tools:
            return False
        return may_restate_earlier_result(self.messages, self._turn_start)
