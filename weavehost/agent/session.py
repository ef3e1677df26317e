"""The agent loop: a resident conversation, free text, calls written by a strategy, results.

Stage: agent (on top of the decoder, the catalog and the executor). One :class:`Session` is one
conversation; :meth:`Session.turn` runs one user message to its answer and reports what happens
as :class:`Event` s (the same records ``--json`` prints, one per line).

Invariants:

* **Resident conversation.** Each step syncs the model to the message list; the model reuses
  what its KV cache holds and prefills only the new tokens (``SyncReport``).
* **One inference lock.** Every model call runs in a worker thread behind a
  ``CapacityLimiter(1)``, and a whole step (sync, free decode, call) holds one ``anyio.Lock``
  per model, so the model is never entered by two tasks and the event loop stays free for
  servers and tools.
* **Provisional calls.** When the strategy hands over a provisional call of a tool that
  :func:`~weavehost.mcp.executor.may_run_provisionally` allows (read-only hint *and* trusted
  server), the tool starts at once in the turn's task group. A final call equal to it uses its
  result; a different final call cancels and discards it (the model never sees it) and runs the
  corrected call. Nothing else runs before the final call, and those calls go through approval.
* **Result cache.** Results of provisional-eligible calls are kept per session, keyed by the
  canonical call, bounded in entries and age; an identical call awaits the cached (possibly
  still running) result instead of calling again (seed 002's client-side speculation).
* **Bounded.** At most ``max_steps`` model steps per turn; a turn that hits the bound says so.
* **Always fits.** Before each step the model is shown a view of the transcript that fits its
  context with room for the step (:mod:`weavehost.agent.context`): old turns dropped whole, then the
  current turn's tool output cut. The transcript (``messages``) itself is never cut.
* **Engine faults end a turn, not the program.** When ``llama_decode`` fails (no KV slot, or
  another code), the KV cache is reset and the step is tried once more; a second failure, or a
  message that cannot fit at all, ends the turn with an ``error`` event and ``done`` with
  ``stop: "error"``. The conversation stays usable. Ctrl-C (``AbortedError``) is not caught.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import anyio
import anyio.abc
import anyio.from_thread
import anyio.to_thread

from weavehost.agent.context import fit_conversation
from weavehost.agent.model import AgentModel, FreeText
from weavehost.agent.thermal import Backoff
from weavehost.config import HostConfig
from weavehost.decode import ToolSchema
from weavehost.errors import (
    AbortedError,
    ConfigError,
    DecodeFailedError,
    KVCacheFullError,
    WeavehostError,
)
from weavehost.formats import ToolCall, tool_to_openai
from weavehost.mcp.catalog import Catalog, ToolSpec
from weavehost.mcp.executor import Executor, ToolResult, may_run_provisionally

__all__ = [
    "DEFAULT_CATALOG_SHARE",
    "DEFAULT_MAX_STEPS",
    "Event",
    "ModelLock",
    "ResultCache",
    "Session",
    "TOOL_CHOICES",
    "ToolChoice",
    "rank_tools",
    "select_tools",
]

logger = logging.getLogger(__name__)

ToolChoice = Literal["auto", "required"]
"""``auto``: the model decides whether to call (a call begins when it writes the format's
opener). ``required``: each turn's first step is a call, written by the strategy from the
opener on; later steps are ``auto`` again, so a turn cannot loop on calls (the OpenAI Agents
SDK resets ``tool_choice`` after a call for the same reason)."""
TOOL_CHOICES: tuple[str, ...] = ("auto", "required")

DEFAULT_MAX_STEPS = 6
DEFAULT_FREE_TOKENS = 512  # free text per step
DEFAULT_CALL_TOKENS = 256  # one call's value or optional-argument budget
DEFAULT_CATALOG_SHARE = 0.25  # tool descriptions may take this share of n_ctx
CACHE_MAX_ENTRIES = 64
CACHE_MAX_AGE_S = 120.0


# --------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened in a turn. ``type`` is one of:

    ``text`` (``text``: streamed assistant text), ``step`` (``step``: a model step begins),
    ``provisional_call`` (``name``, ``arguments``, ``started``: whether the tool started early),
    ``final_call`` (``name``, ``arguments``, ``replaced``: the provisional call differed),
    ``call_failed`` (``error``: the model's call did not decode; treated as no call),
    ``tool_result`` (``name``, ``arguments``, ``status``, ``text``, ``source``: ``final``,
    ``provisional`` or ``cache``), ``notice`` (``text``), ``timings`` (numbers of one step),
    ``error`` (``error``: the message, ``kind``: the error class, ``exit_code``),
    ``done`` (``stop``: ``answer``, ``max_steps``, ``call_failed`` or ``error``; ``steps``).
    """

    type: str
    data: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"type": self.type, **self.data}, ensure_ascii=False, default=str)

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)


# --------------------------------------------------------------------------- result cache


@dataclass
class _Entry:
    call: ToolCall
    created: float
    done: anyio.Event = field(default_factory=anyio.Event)
    result: ToolResult | None = None
    scope: anyio.CancelScope | None = None


class ResultCache:
    """Results of read-only, trusted calls by canonical call text; bounded in size and age.

    An entry is created when a call starts, so an identical call awaits it while it runs.
    Failed results are removed once known, so they are tried again.
    """

    def __init__(
        self,
        max_entries: int = CACHE_MAX_ENTRIES,
        max_age_s: float = CACHE_MAX_AGE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_entries, self.max_age_s, self.clock = max_entries, max_age_s, clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, call: ToolCall) -> _Entry | None:
        key = call.canonical()
        entry = self._entries.get(key)
        if entry is None:
            return None
        if self.clock() - entry.created > self.max_age_s:
            del self._entries[key]
            return None
        self._entries.move_to_end(key)
        return entry

    def open(self, call: ToolCall) -> _Entry:
        entry = _Entry(call, self.clock())
        self._entries[call.canonical()] = entry
        self._entries.move_to_end(call.canonical())
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        return entry

    def finish(self, entry: _Entry, result: ToolResult | None) -> None:
        entry.result = result
        entry.done.set()
        if result is None or result.status != "ok":
            self.discard(entry)

    def discard(self, entry: _Entry) -> None:
        key = entry.call.canonical()
        if self._entries.get(key) is entry:
            del self._entries[key]


# --------------------------------------------------------------------------- large catalogs

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an and are as at be by can do for from get how i in is it me my of on or please set "
    "the this to was what when where which will with you your".split()
)


def _words(text: str) -> set[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1 \2", text).replace("_", " ").lower()
    return {w for w in _WORD.findall(spaced) if w not in _STOP}


def rank_tools(tools: Sequence[ToolSchema], request: str) -> list[ToolSchema]:
    """Tools by how many words of the request their name (counted twice) and description
    share; ties keep catalog order. Cheap: no model, no embeddings."""
    wanted = _words(request)

    def score(item: tuple[int, ToolSchema]) -> tuple[int, int]:
        index, tool = item
        name = _words(tool.name) & wanted
        desc = _words(tool.description) & wanted
        return (-(2 * len(name) + len(desc)), index)

    return [tool for _, tool in sorted(enumerate(tools), key=score)]


def select_tools(
    tools: Sequence[ToolSchema],
    request: str,
    *,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
) -> tuple[list[ToolSchema], int]:
    """The tools to offer for ``request``: all of them when their descriptions fit in
    ``budget_tokens``, otherwise the best-ranked ones that fit (at least one). Also returns
    the token estimate of the whole catalog."""
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
    order = {t.name: i for i, t in enumerate(tools)}
    return sorted(chosen, key=lambda t: order[t.name]), total


# --------------------------------------------------------------------------- the loop


class ModelLock:
    """One per model: the lock a step holds and the limiter its worker threads run under."""

    def __init__(self) -> None:
        self.lock = anyio.Lock()
        self.limiter = anyio.CapacityLimiter(1)

    async def run(self, func: Callable[..., Any], *args: Any) -> Any:
        return await anyio.to_thread.run_sync(func, *args, limiter=self.limiter)


def _schema(spec: ToolSpec) -> ToolSchema:
    return ToolSchema(spec.qualified_name, spec.description, spec.schema_dict())


class Session:
    """One conversation with the model, its tools and its result cache. Made by ``Host``."""

    def __init__(
        self,
        model: AgentModel,
        lock: ModelLock,
        catalog: Catalog,
        executor: Executor,
        config: HostConfig,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        free_tokens: int = DEFAULT_FREE_TOKENS,
        call_tokens: int = DEFAULT_CALL_TOKENS,
        catalog_share: float = DEFAULT_CATALOG_SHARE,
        system: str | None = None,
        pacing: Callable[[int], Backoff | None] | None = None,
        tool_choice: ToolChoice = "auto",
        reserve_tokens: int | None = None,
    ) -> None:
        if tool_choice not in TOOL_CHOICES:
            raise ConfigError(
                f"tool choice must be one of {', '.join(TOOL_CHOICES)}, got {tool_choice!r}"
            )
        self.tool_choice = tool_choice
        self.model, self.lock, self.catalog, self.executor = model, lock, catalog, executor
        self.config = config
        self.max_steps, self.free_tokens, self.call_tokens = max_steps, free_tokens, call_tokens
        self.catalog_share = catalog_share
        self.pacing = pacing
        self.messages: list[dict[str, Any]] = []
        if system:
            self.messages.append({"role": "system", "content": system})
        self.cache = ResultCache()
        self.prefilled: list[int] = []  # tokens prefilled per step, for tests and timings
        # Context kept free for what one step writes; the prompt gets the rest (the "room").
        # A small context gives the prompt at least three quarters; each step's budgets then
        # shrink to what is left (see _step).
        if reserve_tokens is None:
            reserve_tokens = min(free_tokens + call_tokens, max(64, model.n_ctx // 4))
        self.reserve_tokens = min(reserve_tokens, model.n_ctx // 2)
        self._view_start = 0  # the context view: first transcript message shown, and cuts
        self._view_cuts: dict[int, int] = {}
        self.shown: list[dict[str, Any]] = []  # the view the model was last synced to

    # ------------------------------------------------------------------ tools on offer

    def offered_tools(self, request: str) -> tuple[list[ToolSchema], str | None]:
        tools = [_schema(spec) for spec in self.catalog]
        budget = int(self.model.n_ctx * self.catalog_share)
        chosen, total = select_tools(
            tools, request, budget_tokens=budget, count_tokens=self.model.count_tokens
        )
        if len(chosen) == len(tools):
            return chosen, None
        note = (
            f"the {len(tools)} tools would take ~{total} tokens, over {self.catalog_share:.0%} of "
            f"the {self.model.n_ctx}-token context: offering the {len(chosen)} most relevant "
            f"({', '.join(t.name for t in chosen)})"
        )
        return chosen, note

    # ------------------------------------------------------------------ one turn

    async def turn(self, prompt: str, emit: Callable[[Event], None]) -> None:
        """Run one user message to an answer (or the step bound), emitting events."""
        self.model.clear_abort()
        self.messages.append({"role": "user", "content": prompt})
        self._turn_calls: set[str] = set()
        self._answer_only = False
        tools, note = self.offered_tools(prompt)
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
            async with self.lock.lock:
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
        notes = []
        if view.dropped_turns:
            notes.append(f"the conversation outgrew the {self.model.n_ctx}-token context: the "
                         f"{view.dropped_turns} oldest turn(s) are no longer shown to the "
                         "model")  # fmt: skip
        for index in view.cut_now:
            kept = view.cuts[index]
            full = len(str(self.messages[index].get("content", "")))
            notes.append(f"a tool result of {full} characters was cut to {kept} to fit the "
                         f"{self.model.n_ctx}-token context")  # fmt: skip
        return view.messages, notes

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
        early: dict[str, Any] = {"entry": None, "call": None}

        def on_text(text: str) -> None:
            anyio.from_thread.run_sync(emit, Event("text", {"text": text}))

        def on_provisional(call: ToolCall) -> None:
            anyio.from_thread.run_sync(self._provisional, call, tg, early, emit)

        started = time.perf_counter()
        async with self.lock.lock:
            if backoff is not None and backoff.threads != self.model.threads:
                # Seed 003: fewer threads while the phone is hot, all of them again after.
                await self.lock.run(self.model.set_threads, backoff.threads)
            before = self.model.stats()
            shown, notes = await self.lock.run(self._fit, tools)
            for note in notes:
                emit(Event("notice", {"text": note}))
            self.shown = shown
            try:
                synced = await self.lock.run(self.model.sync, shown, tools)
                self.prefilled.append(synced.prefilled)
                # What this step may write: never past the context (half of it kept for a call).
                left = self.model.n_ctx - synced.total
                free_tokens = min(free_tokens, max(0, left - min(self.call_tokens, left // 2)))
                if self.tool_choice == "required" and step == 1 and tools:
                    # The turn must start with a call: no free text, the strategy writes it.
                    free = await self.lock.run(self.model.free_decode, on_text, 0)
                    free = FreeText(free.text, call=True, stop="call")
                else:
                    free = await self.lock.run(
                        self.model.free_decode, on_text, free_tokens, not self._answer_only
                    )
                result = None
                if free.call:
                    call_tokens = min(self.call_tokens, max(0, left - free.tokens - 1))
                    result = await self.lock.run(
                        self.model.write_call, tools, on_provisional, call_tokens
                    )
            except BaseException:
                await self._discard(early)  # a provisional run of a call that never finished
                raise
            spent = self.model.stats().since(before)
        timings = {
            "step": step,
            "prompt_tokens": synced.total,
            "reused_tokens": synced.reused,
            "prefilled_tokens": synced.prefilled,
            "decoded_tokens": spent.decoded_tokens,
            "model_s": round(time.perf_counter() - started, 4),
        }
        if result is not None:
            timings["tool_latency_s"] = round(result.tool_latency_s, 4)
            timings["final_latency_s"] = round(result.final_latency_s, 4)
        emit(Event("timings", timings))

        if result is None:
            self.messages.append({"role": "assistant", "content": free.text})
            return "answer"
        if not result.calls:
            await self._discard(early)
            error = result.error or "the model wrote no call"
            emit(Event("call_failed", {"error": error}))
            self.messages.append({"role": "assistant", "content": free.text})
            return "call_failed"

        final = result.calls[0]
        provisional = result.provisional
        replaced = provisional is not None and provisional != final
        emit(Event("final_call", {"name": final.name, "arguments": dict(final.arguments),
                                  "replaced": replaced}))  # fmt: skip
        if replaced:
            await self._discard(early)
        if final.canonical() in self._turn_calls:
            # A model that repeats a call whose result it already has would loop to the step
            # bound (SmolLM2-135M does): drop the repeat and let it answer, calls not allowed.
            await self._discard(early)
            self._answer_only = True
            emit(Event("notice", {"text": f"the model repeated {final.name} with the same "
                                          "arguments; asking it to answer instead"}))  # fmt: skip
            return None
        self._turn_calls.add(final.canonical())
        self.messages.append(
            {
                "role": "assistant",
                "content": free.text,
                "tool_calls": [{"name": final.name, "arguments": dict(final.arguments)}],
            }
        )
        outcome, source = await self._execute(final, early)
        emit(Event("tool_result", {"name": outcome.name, "arguments": dict(outcome.arguments),
                                   "status": outcome.status, "text": outcome.text,
                                   "source": source}))  # fmt: skip
        self.messages.append({"role": "tool", "name": final.name, "content": outcome.text})
        return None

    def _spec(self, name: str) -> ToolSpec | None:
        return self.catalog.get(name) if name in self.catalog else None

    def _provisional(
        self,
        call: ToolCall,
        tg: anyio.abc.TaskGroup,
        early: dict[str, Any],
        emit: Callable[[Event], None],
    ) -> None:
        """On the event loop: start a provisional call if the tool may run early."""
        allowed = self.executor.starts_early(call.name, dict(call.arguments))
        cached = allowed and self.cache.get(call) is not None
        emit(Event("provisional_call", {"name": call.name, "arguments": dict(call.arguments),
                                        "started": allowed and not cached,
                                        "cached": cached}))  # fmt: skip
        if not allowed or cached:
            return  # not allowed early, or already known or running: the final call awaits it
        early["call"] = call
        entry = self.cache.open(call)
        early["entry"] = entry
        tg.start_soon(self._run_entry, entry, True)

    async def _run_entry(self, entry: Any, provisional: bool) -> None:
        result: ToolResult | None = None
        try:
            with anyio.CancelScope() as scope:
                entry.scope = scope
                result = await self.executor.run(
                    entry.call.name, dict(entry.call.arguments), provisional=provisional
                )
        finally:
            self.cache.finish(entry, result)

    async def _discard(self, early: dict[str, Any]) -> None:
        """Cancel and forget the provisional run this step started (never shown to the model)."""
        entry = early.get("entry")
        if entry is None:
            return
        early["entry"] = None
        if entry.scope is not None:
            entry.scope.cancel()
        self.cache.discard(entry)

    async def _execute(self, final: ToolCall, early: dict[str, Any]) -> tuple[ToolResult, str]:
        spec = self._spec(final.name)
        cacheable = spec is not None and may_run_provisionally(spec, self.config)
        if cacheable:
            entry = self.cache.get(final)
            source = "provisional" if early.get("entry") is entry else "cache"
            if entry is None:
                entry = self.cache.open(final)
                source = "final"
                await self._run_entry(entry, False)
            with anyio.fail_after(self.config.timeouts.call + 5):
                await entry.done.wait()
            if entry.result is not None:
                return entry.result, source
        return await self.executor.run(final.name, dict(final.arguments)), "final"

    def transcript(self) -> list[dict[str, Any]]:
        return [dict(m) for m in self.messages]


def event_dict(event: Event) -> dict[str, Any]:
    """An event as a plain dict (``type`` plus its data)."""
    return {"type": event.type, **asdict(event)["data"]}
