"""The agent loop: a resident conversation, free text, calls written by a strategy, results.

Stage: agent (on top of the decoder, the catalog and the executor). One :class:`Session` is one
conversation; :meth:`Session.turn` runs one user message to its answer and reports what happens
as :class:`~weavehost.agent.events.Event` s (the same records ``--json`` prints, one per line).

Invariants:

* **Resident conversation.** Each step syncs the model to the message list; the model reuses
  what its KV cache holds and prefills only the new tokens (``SyncReport``).
* **One model lock.** Every model call (offering tools, sync, free decode, the call, a reset)
  runs in a worker thread through the model's :class:`~weavehost.agent.lock.ModelLock`, and a
  whole step holds it from sync to the end of its call, so the model is never entered by two
  tasks and the event loop stays free for servers and tools. A step never awaits a tool while
  it holds the lock (a provisional run only starts then), so a server's sampling request made
  by a running tool (:mod:`weavehost.agent.sampling`) gets the model once the step's writing
  ends; its wait is bounded all the same.
* **Several calls a step.** The model writes a reply's calls in one
  :meth:`~weavehost.agent.model.AgentModel.write_calls` (the decoder's driver decides after
  each call, greedily, whether another follows); a reply holds at most
  :data:`MAX_CALLS_PER_STEP` calls, which share what is left of the context. A call equal to
  one already made in the turn is dropped and ends the reply (the turn's calls go to
  ``write_calls`` as ``made``); results go back to the model in call order. Where every call
  of a reply is dropped after text the user was shown, the next step goes on after that text
  (:meth:`~weavehost.agent.model.AgentModel.resume_free`, calls not allowed) instead of
  writing the answer again from its start: the text is shown once.
* **Provisional calls, result cache, bounded runs** (:mod:`weavehost.agent.runs`): a trusted
  read-only call starts as soon as it is provisional, each call of a reply on its own, and is
  stopped at :func:`run_bound`; a different final call discards it and starts itself as soon
  as it is final (``on_final``), while the reply goes on; the other calls run (and are
  approved) one by one, in order, after the reply is written.
* **Bounded.** At most ``max_steps`` model steps per turn; a turn that hits the bound says so.
  A step's free text (the answer) stops at the model's end of turn, at a repeated call, or at
  ``free_tokens`` (``--max-answer-tokens``), with a ``notice`` when that bound cut it. Its
  bound leaves the reply a whole call, the decision after it and the format's close
  (:mod:`weavehost.agent.budget`), so a call is never cut by the bound. Where
  no call may be made (``none``, or after a repeat) an answer that turns into a call anyway
  is taken back and a word written where it began, a few times, then cut where the call
  began, with a ``notice`` (:mod:`weavehost.decode.call_text`).
* **Steering to a call or an answer** (issue 30; ``docs/agent.md``, "Steering", lists each
  rule and what it did): a call-shaped answer or a stale follow-up is written again as a call,
  and an answer stating nothing of the turn's results is written again, begun otherwise;
  a tool called again after its good result, a tool the request does not mention after a
  result, and a call with an invented number are not run; a message that names a tool begins
  with a call; an ``enum`` value the message names is the value its calls write
  (:mod:`weavehost.agent.named_values`). Each is a class switch, so its effect can be
  measured. The tools whose call would not run are refused to the reply writer, which takes
  their JSON back at their name, and the turn's calls too, taken back where written again whole.
* **Tool choice** (:mod:`weavehost.agent.options`): ``required`` or a tool's name makes the
  first step a call (to that tool only, for a name); ``none`` never lets a call begin.
* **Always fits.** Before each step the model is shown a view of the transcript that fits its
  context with room for the step (:mod:`weavehost.agent.context`): old turns dropped whole, then
  the current turn's tool output cut. The transcript (``messages``) itself is never cut.
* **Engine faults end a turn, not the program.** When ``llama_decode`` fails (no KV slot, or
  another code), the KV cache is reset and the step is tried once more; a second failure, or a
  message that cannot fit at all, ends the turn with an ``error`` event and ``done`` with
  ``stop: "error"``. The conversation stays usable. Ctrl-C (``AbortedError``) is not caught.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
from collections.abc import Callable
from typing import Any

import anyio
import anyio.abc
import anyio.from_thread

from weavehost.agent.budget import StepBudget, close_tokens
from weavehost.agent.cache import CacheEntry, ResultCache
from weavehost.agent.context import fit_conversation, view_notes
from weavehost.agent.events import Event, step_timings
from weavehost.agent.lock import ModelLock
from weavehost.agent.model import (
    AgentModel,
    FreeText,
    IndexedProvisionalSink,
    SyncReport,
    TextSink,
)
from weavehost.agent.options import (
    DEFAULT_MAX_ANSWER_TOKENS,
    DEFAULT_MAX_STEPS,
    TOOL_CHOICES,
    ToolChoice,
    check_tool_choice,
)
from weavehost.agent.runs import RUN_BOUND_SLACK_S, CallRuns, EarlyRuns, run_bound
from weavehost.agent.steering_rules import SteeringRules
from weavehost.agent.tools import (
    DEFAULT_CATALOG_SHARE,
    offer_tools,
    tool_schema,
)
from weavehost.config import HostConfig
from weavehost.decode import CallResult, ToolSchema
from weavehost.engine.thermal import Backoff
from weavehost.errors import (
    AbortedError,
    DecodeFailedError,
    KVCacheFullError,
    WeavehostError,
)
from weavehost.formats import ToolCall
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import Executor

__all__ = [
    "DEFAULT_MAX_STEPS",
    "MAX_CALLS_PER_STEP",
    "RUN_BOUND_SLACK_S",
    "TOOL_CHOICES",
    "Session",
    "ToolChoice",
    "run_bound",
]

logger = logging.getLogger(__name__)

DEFAULT_CALL_TOKENS = 256  # one call's value or optional-argument budget
MAX_CALLS_PER_STEP = 8  # calls one reply may hold; past it the reply's calls are closed


class Session(SteeringRules):
    """One conversation with the model, its tools and its result cache. Made by ``Host``. The
    steering rules it applies, each a switch, are its
    :class:`~weavehost.agent.steering_rules.SteeringRules`."""

    def __init__(
        self,
        model: AgentModel,
        lock: ModelLock,
        catalog: Catalog,
        executor: Executor,
        config: HostConfig,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        free_tokens: int = DEFAULT_MAX_ANSWER_TOKENS,
        call_tokens: int = DEFAULT_CALL_TOKENS,
        catalog_share: float = DEFAULT_CATALOG_SHARE,
        system: str | None = None,
        pacing: Callable[[int], Backoff | None] | None = None,
        tool_choice: ToolChoice = "auto",
        reserve_tokens: int | None = None,
        run_bound_s: float | None = None,
        call_on_description: bool = False,
    ) -> None:
        # A tool's name must be a tool of the catalog now; a re-listing may drop it later (the
        # turn then writes no forced call, see turn).
        self.tool_choice = check_tool_choice(tool_choice, catalog.names)
        self.model, self.lock, self.catalog, self.executor = model, lock, catalog, executor
        # Under auto, a message sharing a word with a tool's description (not only its name)
        # begins with a call: for a model that cannot tell when to call (the embedded 135M).
        self.call_on_description = call_on_description
        self.config = config
        self.max_steps, self.free_tokens, self.call_tokens = max_steps, free_tokens, call_tokens
        self.catalog_share = catalog_share
        self.pacing = pacing
        self.messages: list[dict[str, Any]] = []
        if system:
            self.messages.append({"role": "system", "content": system})
        self.cache = ResultCache()
        # How long a trusted read-only run may take (see run_bound); a parameter so an app can
        # choose a shorter wait than the sum of every stage's bound.
        self.run_bound_s = run_bound(config.timeouts) if run_bound_s is None else run_bound_s
        self.runs = CallRuns(executor, catalog, config, self.cache, self.run_bound_s)
        self.prefilled: list[int] = []  # tokens prefilled per step, for tests and timings
        # What a step keeps for its reply's calls (a whole call, the decision after it and the
        # format's close), so its answer's bound never cuts a call.
        self.budget = StepBudget(call_tokens, close_tokens(model))
        # Context kept free for what one step writes; the prompt gets the rest (the "room").
        # A small context gives the prompt at least three quarters; each step's budgets then
        # shrink to what is left (see _step).
        if reserve_tokens is None:
            reserve_tokens = min(free_tokens + self.budget.reserve, max(64, model.n_ctx // 4))
        self.reserve_tokens = min(reserve_tokens, model.n_ctx // 2)
        self._view_start = 0  # the context view: first transcript message shown, and cuts
        self._view_cuts: dict[int, int] = {}
        self.shown: list[dict[str, Any]] = []  # the view the model was last synced to
        self._turn_calls: set[str] = set()  # this turn's calls, canonical: a repeat is dropped
        self._turn_tools: set[str] = set()  # the tools those calls named
        self._answer_only = False  # the model repeated a call: this turn must answer now
        # The last reply that began a call: its step's sync and the tokens of its free text;
        # where its calls were all dropped after that text, what the next step continues.
        self._written: tuple[SyncReport, int] | None = None
        self._resume = False
        # The step's answer, held back from the stream until judged (_may_be_stale): None
        # where it streamed.
        self._unshown: str | None = None
        self._forced: list[ToolSchema] = []  # the tools the first step's forced call may use
        # Steering a small model to a call or an answer (see _recall and _run_calls): tools
        # that returned a good result in an earlier step of this turn, and whether this turn's
        # call-shaped answer was already written again as a call (once a turn).
        self._answered_tools: set[str] = set()
        self._turn_start = 0  # this turn's user message, in messages
        # None: not yet this turn; tools: the next step is a call to one of them; []: it was.
        self._recall: list[ToolSchema] | None = None
        # The tokens a written-again answer may not begin with (None: none was, this turn).
        self._avoid: frozenset[int] | None = None

    # ------------------------------------------------------------------ tools on offer

    def offered_tools(self, request: str) -> tuple[list[ToolSchema], str | None]:
        """The tools this request is offered, and a note when some were left out. Blocking (it
        counts tokens on the model)."""
        return self._offer([tool_schema(spec) for spec in self.catalog], request)

    def _offer(self, tools: list[ToolSchema], request: str) -> tuple[list[ToolSchema], str | None]:
        return offer_tools(tools, request, n_ctx=self.model.n_ctx, share=self.catalog_share,
                           count_tokens=self.model.count_tokens)  # fmt: skip

    # ------------------------------------------------------------------ one turn

    async def turn(self, prompt: str, emit: Callable[[Event], None]) -> None:
        """Run one user message to an answer (or the step bound), emitting events."""
        self.model.clear_abort()
        self.messages.append({"role": "user", "content": prompt})
        self._turn_start = len(self.messages) - 1
        self._turn_calls, self._turn_tools = set(), set()
        self._answer_only = False
        self._written = self._unshown = None
        self._resume = False
        self._answered_tools = set()
        self._recall = None
        self._avoid = None
        # The catalog is read here, on the event loop that re-lists it; only counting tokens
        # (on the model) runs in the worker.
        catalog = [tool_schema(spec) for spec in self.catalog]
        # required: a call to any offered tool; a tool's name: to that tool only (the prompt
        # still shows every offered tool, so the conversation's prefix stays the same).
        self._forced = [t for t in catalog if t.name == self.tool_choice]
        if self.tool_choice == "none":
            # No call may be made: the model is shown no tools, as a prompt without tools
            # (llama-cpp-python's server does the same, and so does sampling here). Shown
            # them, a small model begins a call, is refused it and is forced into prose that
            # reads as a result ("Here is the weather in Paris: 1. Temperature: 22°C ...").
            tools, note = [], None
        else:
            async with self.lock:
                tools, note = await self.lock.run(self._offer, catalog, prompt)
        if note:
            logger.info("%s", note)
            emit(Event("notice", {"text": note}))
        async with anyio.create_task_group() as tg:
            for step in range(1, self.max_steps + 1):
                try:
                    stop = await self._step_or_retry(step, tools, tg, emit)
                except AbortedError:
                    raise
                except WeavehostError as exc:
                    logger.info("turn ended by %s: %s", type(exc).__name__, exc)
                    emit(Event("error", {"error": str(exc), "kind": type(exc).__name__,
                                         "exit_code": exc.exit_code}))  # fmt: skip
                    emit(Event("done", {"stop": "error", "steps": step}))
                    return
                if stop is not None:
                    emit(Event("done", {"stop": stop, "steps": step}))
                    return
            text = f"stopped after {self.max_steps} steps (the step bound) without a final answer"
            emit(Event("notice", {"text": text}))
            emit(Event("done", {"stop": "max_steps", "steps": self.max_steps}))

    async def _step_or_retry(
        self,
        step: int,
        tools: list[ToolSchema],
        tg: anyio.abc.TaskGroup,
        emit: Callable[[Event], None],
    ) -> str | None:
        """One step; when llama_decode fails, reset the KV cache and try the step once more."""
        try:
            return await self._step(step, tools, tg, emit)
        except (KVCacheFullError, DecodeFailedError) as exc:
            logger.warning("step %d: %s; resetting the KV cache and trying again", step, exc)
            emit(Event("notice", {"text": f"{exc}; the KV cache was reset and the step is "
                                          "tried once more"}))  # fmt: skip
            async with self.lock:
                await self.lock.run(self.model.reset)
            return await self._step(step, tools, tg, emit)

    def _fit(self, tools: list[ToolSchema]) -> tuple[list[dict[str, Any]], list[str]]:
        """The view of the transcript the model is shown this step (in the worker thread)."""
        view = fit_conversation(
            self.messages,
            lambda messages: self.model.prompt_tokens(messages, tools),
            room=self.model.n_ctx - self.reserve_tokens,
            start=self._view_start,
            cuts=self._view_cuts,
        )
        self._view_start, self._view_cuts = view.start, dict(view.cuts)
        return view.messages, view_notes(view, self.messages, self.model.n_ctx)

    async def _step(
        self,
        step: int,
        tools: list[ToolSchema],
        tg: anyio.abc.TaskGroup,
        emit: Callable[[Event], None],
    ) -> str | None:
        backoff = self.pacing(self.free_tokens) if self.pacing else None
        free_tokens = self.free_tokens
        if backoff is not None:
            if backoff.step_pause_s:
                await anyio.sleep(backoff.step_pause_s)
            free_tokens = min(free_tokens, backoff.max_tokens)
        emit(Event("step", {"step": step}))
        early = EarlyRuns(tg, emit)

        def on_text(text: str) -> None:
            anyio.from_thread.run_sync(emit, Event("text", {"text": text}))

        def on_provisional(index: int, call: ToolCall) -> None:
            anyio.from_thread.run_sync(self.runs.provisional, index, call, early)

        def on_final(index: int, call: ToolCall) -> None:
            anyio.from_thread.run_sync(self.runs.final, index, call, early)

        started = time.perf_counter()
        async with self.lock:
            if backoff is not None and backoff.threads != self.model.threads:
                # Seed 003: fewer threads while the phone is hot, all of them again after.
                await self.lock.run(self.model.set_threads, backoff.threads)
            before = self.model.stats()
            try:
                synced, free, results = await self._resumed(on_text, free_tokens, tools) or (
                    await self._write(
                        step, tools, free_tokens, emit, on_text, on_provisional, on_final
                    )
                )
            except BaseException:
                await self.runs.discard_all(early)  # provisional runs of calls never finished
                raise
            spent = self.model.stats().since(before)
        model_s = time.perf_counter() - started
        recall = [] if results else self._recall_tools(free.text, tools)
        stale = not results and not recall and self._stale(free.text, tools)
        unshown, self._unshown = self._unshown, None  # held back where it could be stale
        if unshown and not stale:
            emit(Event("text", {"text": unshown}))
        emit(Event("timings", step_timings(step, synced, free, spent, results, model_s)))

        if not results:
            # Text shown and then set aside: the person is told (housekeeping otherwise).
            aside = not free.text.strip() or unshown is not None
            if stale:
                self._recall = tools
                logger.info("steering: a stale follow-up answer is written again as a call")
                emit(Event("notice", {"text": "the model answered a question about a new name "
                                              "with an earlier turn's result; that answer is "
                                              "set aside and the step written again as a call",
                                      "housekeeping": aside}))  # fmt: skip
                return None
            if recall:
                self._recall = recall
                logger.info("steering: a call-shaped answer is written again as a call")
                names = ", ".join(t.name for t in recall)
                emit(Event("notice", {"text": "the model answered with a call to a tool not "
                                              "on offer; that answer is set aside and the step "
                                              "written again as a call to a tool that takes "
                                              f"its arguments ({names})",
                                      "housekeeping": aside}))  # fmt: skip
                return None
            if self._ignores_results(free):
                self._avoid, self._answer_only = frozenset(free.token_ids[:1]), True
                logger.info("steering: an answer stating nothing of the results is written again")
                text = "the model's answer stated nothing of the tool results; it is written again"
                emit(Event("notice", {"text": text + ", begun otherwise"}))  # shown: it was read
                return None
            if free.stop == "call_text":
                text = "the model wrote a call where none may be made now; its answer was cut"
                emit(Event("notice", {"text": text + " where the call began",
                                      "housekeeping": True}))  # fmt: skip
            if free.stop == "max_tokens":
                emit(Event("notice", {"text": f"the answer reached its bound of {free_tokens} "
                                              "tokens and was cut (--max-answer-tokens "
                                              f"{self.free_tokens})"}))  # fmt: skip
            self.messages.append({"role": "assistant", "content": free.text})
            return "answer"
        for index, result in enumerate(results):
            if not result.calls and result.provisional is not None:
                # Every required value was decided (the provisional call), then the optional
                # arguments ran on (SmolLM2-135M's alarm label to the token bound): the call
                # the model chose runs with what it decided, as its provisional run began.
                results[index] = dataclasses.replace(result, calls=[result.provisional])
                why = result.error or "no final call"
                emit(Event("notice", {"text": f"{result.provisional.name}'s optional arguments"
                                              f" did not finish ({why}); the call runs with "
                                              "its required ones"}))  # fmt: skip
        if not results[0].calls:
            await self.runs.discard_all(early)
            error = results[0].error or "the model wrote no call"
            emit(Event("call_failed", {"error": error}))
            self.messages.append({"role": "assistant", "content": free.text})
            return "call_failed"
        return await self._run_calls(free.text, results, early, emit)

    async def _write(
        self,
        step: int,
        tools: list[ToolSchema],
        free_tokens: int,
        emit: Callable[[Event], None],
        on_text: TextSink,
        on_provisional: IndexedProvisionalSink,
        on_final: IndexedProvisionalSink,
    ) -> tuple[SyncReport, FreeText, list[CallResult]]:
        """The step's reply, under the model lock: the view of the transcript synced, the free
        text, and the calls where it began one."""
        shown, notes = await self.lock.run(self._fit, tools)
        for note in notes:
            emit(Event("notice", {"text": note}))
        self.shown = shown
        synced = await self.lock.run(self.model.sync, shown, tools)
        self.prefilled.append(synced.prefilled)
        # What this step may write: never past the context, the reply's calls kept.
        left = self.model.n_ctx - synced.total
        free_tokens = self.budget.free_bound(left, free_tokens)
        forced = self._forced_tools(step, tools)
        if forced:
            # The turn must start with a call: no free text, the strategy writes it.
            free = await self.lock.run(self.model.free_decode, on_text, 0)
            free = FreeText(free.text, call=True, stop="call")
        else:
            allow_call = not self._answer_only and self.tool_choice != "none"
            # A tool that answered this turn would not run again (_run_calls), nor a
            # repeat: JSON naming one is taken back at its name, a repeat once whole.
            refused, made = self._refused(tools), frozenset(self._turn_calls)
            decode = functools.partial(
                self.model.free_decode, refused=refused, made=made, avoid=self._avoid or ()
            )
            held: list[str] | None = [] if self._may_be_stale(tools) else None
            sink = on_text if held is None else held.append
            free = await self.lock.run(decode, sink, free_tokens, allow_call)
            if held and free.call:  # not an answer: its text is shown before the call
                emit(Event("text", {"text": "".join(held)}))
            elif held is not None:
                self._unshown = "".join(held)
        results: list[CallResult] = []
        if free.call:
            self._written = (synced, free.tokens)
            # The reply's calls share what is left of the context after the free text.
            budget = self.budget.reply_budget(left, free.tokens)
            write = functools.partial(
                self.model.write_calls, budget=budget, max_calls=MAX_CALLS_PER_STEP,
                made=frozenset(self._turn_calls), on_final=on_final,
            )  # fmt: skip
            results = await self.lock.run(
                write, self._bound(forced or tools), on_provisional, self.call_tokens
            )
        return synced, free, results

    async def _resumed(
        self, on_text: TextSink, free_tokens: int, tools: list[ToolSchema]
    ) -> tuple[SyncReport, FreeText, list[CallResult]] | None:
        """The last step's free text continued where its call began, calls not allowed, where
        every call of that step was dropped after text the user was shown (``_resume``): the
        text stays shown once, and the answer goes on after it in this step instead of being
        written again from its start. ``None``: nothing to continue (the step is written as
        any other), or the model cannot."""
        resume, self._resume = self._resume, False
        if not resume or self._written is None:
            return None
        synced, written = self._written
        refused, made = self._refused(tools), frozenset(self._turn_calls)
        more = functools.partial(self.model.resume_free, refused=refused, made=made)
        free = await self.lock.run(more, on_text, max(1, free_tokens - written))
        if free is None:
            return None
        self.prefilled.append(0)
        held = synced.total + written  # the conversation and the text, read already
        return SyncReport(total=held, reused=held, prefilled=0, digest=synced.digest), free, []

    async def _run_calls(
        self,
        content: str,
        results: list[CallResult],
        early: EarlyRuns,
        emit: Callable[[Event], None],
    ) -> None:
        """The reply's calls, in order: each final call told (unless it was as soon as it was
        written), a repeat dropped, the others run (read-only trusted ones already running since
        they were provisional or final) and their results given to the model in call order."""
        kept: list[tuple[ToolCall, CacheEntry | None]] = []
        for index, result in enumerate(results):
            # A free-writing strategy may read several calls from one run: the first is the
            # run's provisional one.
            for place, final in enumerate(result.calls[: MAX_CALLS_PER_STEP - len(kept)]):
                provisional = result.provisional if place == 0 else None
                entry = early.take(index) if place == 0 else None
                replaced = provisional is not None and provisional != final
                if place or index not in early.told:
                    emit(Event("final_call", {"name": final.name,
                                              "arguments": dict(final.arguments),
                                              "replaced": replaced}))  # fmt: skip
                if replaced and (entry is None or entry.call != final):
                    await self.runs.discard(entry)
                    entry = None
                if final.canonical() in self._turn_calls:
                    # A model that repeats a call whose result it already has would loop to the
                    # step bound (SmolLM2-135M does): the repeat is dropped.
                    await self.runs.discard(entry)
                    emit(Event("notice", {"text": f"the model repeated {final.name} with the "
                                                  "same arguments; the repeat is not run",
                                          "housekeeping": True}))  # fmt: skip
                    continue
                steered = self._steered_away(final, in_reply=bool(kept))
                if steered:
                    await self.runs.discard(entry)
                    logger.info("steering: %s not run (%s)", final.name, steered)
                    emit(Event("notice", {"text": f"the model called {final.name} {steered}; "
                                                  "the call is not run",
                                          "housekeeping": True}))  # fmt: skip
                    continue
                self._turn_calls.add(final.canonical())
                self._turn_tools.add(final.name)
                kept.append((final, entry))
        await self.runs.discard_all(early)  # runs of calls past the bound or not written
        if not kept:  # nothing new to run: let it answer, calls not allowed
            self._answer_only = True
            if content:  # shown: the next step goes on after it (_resumed)
                self._resume = True
            return None
        calls = [{"name": c.name, "arguments": dict(c.arguments)} for c, _ in kept]
        self.messages.append({"role": "assistant", "content": content, "tool_calls": calls})
        answered: set[str] = set()
        for final, entry in kept:
            outcome, source = await self.runs.execute(final, entry, emit)
            if outcome.status == "ok":
                answered.add(final.name)
            emit(Event("tool_result", {"name": outcome.name, "arguments": dict(outcome.arguments),
                                       "status": outcome.status, "text": outcome.text,
                                       "source": source}))  # fmt: skip
            self.messages.append({"role": "tool", "name": final.name, "content": outcome.text})
        # Known only now: a later step's call to one of these tools is a repeat (see above).
        self._answered_tools |= answered
        return None

    def transcript(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.messages]
