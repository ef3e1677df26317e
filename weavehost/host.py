"""The embeddable host: servers, catalog, executor and the model, owned by one context manager.

Stage: the top (what ``weavehost chat``/``run`` and other programs use)::

    async with Host(servers=["tools/weather.py"], trust=["weather"]) as host:
        async for event in host.run("What's the weather in Paris?"):
            print(event.to_json())

        session = host.session()                      # several turns, one resident conversation
        async for event in session.run("And in Oslo?"):
            ...

Invariants:

* Entering starts every server (:class:`~weavehost.mcp.servers.ServerPool`), lists their tools and
  loads the model in a worker thread; leaving stops the servers (no orphans) and frees the model,
  also when the body was cancelled (Ctrl-C). A local model file is resolved first (a missing
  one fails before anything starts) and opened while the servers start (both take ~0.5 s on a
  2-core machine: a Python server's imports, the GGUF's metadata and llama.cpp's load); it is
  handed over, or its error raised, once the tools are listed, and leaving waits for it before
  freeing anything.
  With ``load_model="lazy"`` the model is loaded only when something needs it: a server's
  sampling request, :meth:`Host.load_model`, or a conversation started after that
  (``weavehost call`` loads no model unless a server asks).
* The servers are offered the client features (:class:`~weavehost.mcp.features.ClientFeatures`):
  **sampling** answered by this host's model (:class:`~weavehost.agent.sampling.ModelSampler`,
  under the one model lock, approved once per server under ``approval``, asking the approver's
  ``approve_sampling``); **elicitation** answered by ``elicitor``, and declined when there is
  none (the capability is declared either way, so a server asking gets a ``decline``, as it does
  from a console with no terminal); **roots**: ``roots``, else the config's, else none (an
  empty list: a server keeps the directories it was started with; ``docs/host.md``), changed
  with :meth:`Host.set_roots` (servers hear ``roots/list_changed``); server
  **log** messages become ``log`` events of the turn or call running when they arrive (and
  ``logging`` records of ``weavehost.host``).
* :meth:`Host.abort` stops decoding between or inside passes and cancels everything running;
  a tool call running in a turn or in :meth:`Host.call` is cancelled with its scope, so the
  pool tells its server (``notifications/cancelled``) before abandoning it.
* Events are yielded from a memory stream fed by a task in the host's task group, so a consumer
  that stops iterating cancels its turn and nothing leaks.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import logging
import math
import os
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

import anyio
import anyio.abc
import anyio.to_thread
from anyio import AsyncContextManagerMixin

from weavehost.agent import DEFAULT_MAX_STEPS, AgentModel, EngineModel, Event, ModelLock, Session
from weavehost.agent.options import DEFAULT_MAX_ANSWER_TOKENS, check_tool_choice
from weavehost.agent.runs import progress_event
from weavehost.agent.sampling import SAMPLING_WAIT_S, ModelSampler
from weavehost.config import HostConfig, RemoteModelConfig, merge_flags
from weavehost.decode import DEFAULT_STRATEGY
from weavehost.engine import DEFAULT_N_CTX
from weavehost.engine.thermal import (
    Backoff,
    backoff_for,
    default_thread_count,
    performance_thread_count,
    read_thermal_status,
)
from weavehost.errors import ClientFeatureError, ConfigError
from weavehost.formats import control_markers
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.elicitors import DecliningElicitor
from weavehost.mcp.executor import Approver, ControlMarkers, Executor, ToolResult
from weavehost.mcp.features import ClientFeatures, Elicitor, LogMessage, Roots
from weavehost.mcp.servers import ServerPool

if TYPE_CHECKING:
    from weavehost.decode.padding import DecodePlan
    from weavehost.models import LocalModel


__all__ = ["Host", "HostSession", "LoadModel"]

logger = logging.getLogger(__name__)

# When the host loads its model: on entry (True), on first need ("lazy"), or never (False: no
# model; sampling requests are refused and conversations cannot start).
LoadModel = bool | Literal["lazy"]
_LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO,
               "warning": logging.WARNING, "error": logging.ERROR, "critical": logging.CRITICAL,
               "alert": logging.CRITICAL, "emergency": logging.CRITICAL}  # fmt: skip


class HostSession:
    """A conversation of several turns; ``run(prompt)`` yields that turn's events."""

    def __init__(self, host: Host, session: Session) -> None:
        self._host, self.session = host, session

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.session.messages

    def run(self, prompt: str) -> AsyncIterator[Event]:
        return self._host._events(self.session, prompt)


class Host(AsyncContextManagerMixin):
    """MCP servers + catalog + executor + model. See the module docstring."""

    def __init__(
        self,
        config: HostConfig | None = None,
        *,
        servers: Sequence[str] = (),
        trust: Sequence[str] = (),
        approval: str | None = None,
        approver: Approver | None = None,
        model: str | None = None,
        format: str | None = None,  # noqa: A002 - the word users know
        strategy: str = DEFAULT_STRATEGY,
        threads: int | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        max_steps: int = DEFAULT_MAX_STEPS,
        agent_model: AgentModel | None = None,
        inproc: Mapping[str, Any] | None = None,
        on_loading: Callable[[str], None] | None = None,
        tool_choice: str | None = None,
        max_answer_tokens: int = DEFAULT_MAX_ANSWER_TOKENS,
        prompt_cache: bool | None = None,
        answer_drafts: bool | None = None,
        guidance: bool | None = None,
        script_guard: bool | None = None,
        elicitor: Elicitor | None = None,
        roots: Sequence[str | os.PathLike[str]] | None = None,
        load_model: LoadModel = True,
        decode_plan: DecodePlan | None = None,
        record_margins: bool = False,
        kv_cache: str | None = None,
    ) -> None:
        # The flags over the config, in one place (weavehost.config.merge_flags).
        base = merge_flags(
            config or HostConfig(), servers=servers, trust=trust, approval=approval,  # type: ignore[arg-type]
            inproc=tuple(inproc or ()), model=model, threads=threads, tool_choice=tool_choice,
            prompt_cache=prompt_cache, answer_drafts=answer_drafts, guidance=guidance,
            script_guard=script_guard, kv_cache=kv_cache,
        )  # fmt: skip
        if load_model not in (True, False, "lazy"):
            raise ConfigError(f"load_model must be True, False or 'lazy', not {load_model!r}")
        self.config = base
        self.approver = approver
        self.elicitor = elicitor
        self.load_model_when: LoadModel = load_model
        self.model_path = base.model
        # A remote OpenAI-compatible server (an http(s) --model, or the config's "model": {url})
        # instead of a GGUF file; a flag's URL keeps the config's other remote settings.
        self.remote: RemoteModelConfig | None = base.remote
        self.format_name = format
        self.strategy = strategy
        self.threads = base.threads
        self.n_ctx = n_ctx
        self.max_steps = max_steps
        self.inproc = inproc
        self.on_loading = on_loading
        # auto | required | none | a tool's name (checked once the catalog is listed); None
        # (and no toolChoice in the config): "auto".
        self.tool_choice = base.tool_choice
        self._call_on_description = False  # set where the embedded model is loaded
        self.max_answer_tokens = max_answer_tokens
        # Decode (calls, and how many drafted tokens an answer's pass carries) by this plan
        # instead of this machine's calibration: another machine's costs, what `bench-agent
        # --cost-model` projects with. None: the calibration.
        self.decode_plan = decode_plan
        # Each free token's top-two gap in the steps' timings (what `bench-agent` reports where
        # drafted and undrafted answers part). Only a model the host loads records them.
        self.record_margins = record_margins
        # The persistent prompt-prefix cache: None follows the config (on by default), False is
        # --no-prompt-cache. Only a model the host loads uses it (not ``agent_model``).
        self.prompt_cache = base.prompt_cache.enabled
        # Greedy answers drafted and verified many tokens a pass (the same text): None follows
        # the config (on by default). Only a model the host loads drafts (not ``agent_model``).
        self.answer_drafts = base.answer_drafts
        # The host's guidance in the prompt (off unless the config or a flag turns it on) and the
        # answer's script guard (on unless they turn it off). Only a model the host loads uses them.
        self.guidance = base.guidance
        self.script_guard = base.script_guard
        self.kv_cache = base.kv_cache  # the KV cache's type (q8_0-k unless configured or asked)
        self.model: AgentModel | None = agent_model
        self.pool: ServerPool | None = None
        self.catalog: Catalog | None = None
        self.executor: Executor | None = None
        self.description: dict[str, Any] = {}
        self._lock = ModelLock()
        self._cool_threads: int | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._native: contextlib.ExitStack | None = None
        # The local model file being opened while the servers start (see the module docstring).
        self._opening: concurrent.futures.Future[LocalModel] | None = None
        self._loading = anyio.Lock()  # one model load at a time (a lazy load may race a turn)
        self._model_ready = anyio.Event()
        self._sinks: set[Callable[[Event], None]] = set()  # running turns' and calls' streams
        self.sampler = ModelSampler(self._sampling_model, approval=base.approval, approver=approver)
        self.roots = Roots(roots or base.roots)
        self.features = ClientFeatures(
            sampler=self.sampler,
            elicitor=elicitor if elicitor is not None else DecliningElicitor(),
            roots=self.roots,
            on_log=self._on_log,
        )

    # ------------------------------------------------------------------ lifetime

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Host]:
        from weavehost.decode import get_strategy

        get_strategy(self.strategy)  # fail fast on a typo, before anything starts
        with contextlib.ExitStack() as native:
            self._native = native
            try:
                if self.model is None and self.load_model_when is True and self.remote is None:
                    self._opening = self._begin_opening(native)
                async with ServerPool(
                    self.config, inproc=self.inproc, features=self.features
                ) as pool:
                    self.pool = pool
                    self.catalog = await Catalog.load(pool)
                    if self.tool_choice is not None:  # a typo fails before the model loads
                        check_tool_choice(self.tool_choice, self.catalog.names)
                    self.executor = Executor(
                        pool,
                        self.catalog,
                        self.config,
                        self.approver,
                        markers=ControlMarkers(control_markers()),  # every format's
                    )
                    if self.model is None and self.load_model_when is True:
                        await self.load_model()
                    elif self.model is not None:
                        self._model_ready.set()
                    async with anyio.create_task_group() as tg:
                        self._tg = tg
                        try:
                            yield self
                        finally:
                            tg.cancel_scope.cancel()
            finally:
                self._tg = None
                self._native = None
                # Free the model in a worker, shielded: llama.cpp may still be finishing a pass,
                # or opening the file when the servers failed first (its error is theirs now).
                opening, self._opening = self._opening, None
                with anyio.CancelScope(shield=True):
                    if opening is not None:
                        await anyio.to_thread.run_sync(concurrent.futures.wait, [opening])
                    await anyio.to_thread.run_sync(native.close)

    async def load_model(self) -> AgentModel:
        """The host's model, loaded now if it is not yet (``load_model="lazy"``); one load at a
        time. Inside ``async with`` only."""
        if self.model is not None:
            return self.model
        async with self._loading:
            if self.model is None:
                if self._native is None:
                    raise RuntimeError("use the Host inside 'async with'")
                self.model = await self._load_model(self._native)
                self._model_ready.set()
        return self.model

    async def _sampling_model(self) -> tuple[AgentModel, ModelLock]:
        """The sampler's provider: the model and its lock, loading a lazy model on first use;
        an eager model still loading is waited for (at most ``SAMPLING_WAIT_S``)."""
        if self.model is None and self.load_model_when == "lazy":
            await self.load_model()
        elif self.model is None and self.load_model_when is True:
            with anyio.move_on_after(SAMPLING_WAIT_S):
                await self._model_ready.wait()
        if self.model is None:
            raise ClientFeatureError(
                "a server asked the model to write a message, but this host has no model"
            )
        return self.model, self._lock

    def set_roots(self, paths: Sequence[str | os.PathLike[str]]) -> None:
        """Offer the servers these directories from now on; each running server is told
        (``notifications/roots/list_changed``) and lists them again when it wants."""
        self.roots.set(paths)

    def _on_log(self, message: LogMessage) -> None:
        """A server's log message: a ``logging`` record, and a ``log`` event for every turn or
        call running now."""
        level = _LOG_LEVELS.get(message.level, logging.INFO)
        logger.log(level, "server %s: %s", message.server, message.data)
        event = Event("log", {"server": message.server, "level": message.level,
                              "data": message.data, "logger": message.logger})  # fmt: skip
        for sink in list(self._sinks):
            sink(event)

    async def _load_remote(self, native: contextlib.ExitStack, remote: RemoteModelConfig) -> Any:
        """The remote server's model (:mod:`weavehost.agent.remote`), its client owned by
        ``native``; the server is asked its model and context size."""
        from weavehost.agent.remote import open_remote_model

        if self.on_loading:
            self.on_loading(f"connecting to the model server at {remote.describe()}")

        def connect() -> Any:
            return native.enter_context(open_remote_model(remote, n_ctx=self.n_ctx))

        model = await anyio.to_thread.run_sync(connect)
        self.sampler.model_name = model.name
        if self.tool_choice is None:
            self.tool_choice = "auto"
        self.description = {
            "model": remote.describe(),
            **model.info.describe(),
            "tool_choice": self.tool_choice,
            "strategy": "the server's own tool calling",
        }
        return model

    async def _load_model(self, native: contextlib.ExitStack) -> AgentModel:
        if self.remote is not None:
            return await self._load_remote(native, self.remote)  # type: ignore[no-any-return]
        from weavehost.agent.answer_memory import AnswerMemory
        from weavehost.agent.prompt_cache import PromptCache

        # Taken only now: until it is awaited, leaving the host waits for it.
        opening, self._opening = self._opening, None
        if opening is None:  # not begun while the servers started (a lazy load)
            opening = self._begin_opening(native)
        opened = await anyio.to_thread.run_sync(opening.result)
        choice, detection, engine = opened.choice, opened.detection, opened.engine
        # What a cool device gets back after a thermal back-off (seed 003).
        self._cool_threads = self.threads or performance_thread_count()
        self.sampler.model_name = choice.path.stem  # what a server's sampling reply names
        if self.tool_choice is None:
            self.tool_choice = "auto"
        # The embedded SmolLM2-135M almost never opens a call by itself: under auto, a message
        # sharing a word with a tool's name or description begins with one (Session).
        self._call_on_description = choice.embedded
        self.description = {
            "model": str(choice.path),
            "tool_choice": self.tool_choice,
            "format": detection.format.name,
            "strategy": self.strategy,
            "guidance": self.guidance,
            "script_guard": self.script_guard,
            "threads": opened.threads,
            "n_ctx": engine.n_ctx,
        }
        prompt_cache = PromptCache.from_config(
            replace(self.config.prompt_cache, enabled=self.prompt_cache)
        )
        return EngineModel(
            engine,
            detection.format,
            opened.strategy,
            chat_template=opened.metadata.chat_template,
            prompt_cache=prompt_cache,
            # Beside the prompt cache, and only with it: the model's earlier answers, kept by
            # the drafting that reads them (with answer drafts off, none are read or kept, so a
            # bench-agent A/B's drafts-on variant drafts only from its own earlier answers).
            answer_memory=AnswerMemory.beside(prompt_cache.directory, choice.path)
            if prompt_cache is not None and self.answer_drafts
            else None,
            answer_drafts=self.answer_drafts,
            guidance=self.guidance,
            script_guard=self.script_guard,
            scripts=opened.scripts,
            no_word_start=opened.no_word_start,
            record_margins=self.record_margins,
        )

    def _begin_opening(self, native: contextlib.ExitStack) -> concurrent.futures.Future[LocalModel]:
        """The local model resolved now (a missing file fails here, before anything waits on
        it) and opened in a thread of its own, owned by ``native``
        (:func:`weavehost.models.open_local_model`)."""
        from weavehost.models import open_local_model, resolve_model

        choice = resolve_model(self.model_path)
        threads = self.threads or default_thread_count()
        if self.on_loading:
            self.on_loading(f"loading {choice.path.name} ({threads} threads)")
        return open_local_model(
            choice,
            native,
            n_ctx=self.n_ctx,
            threads=threads,
            format_name=self.format_name,
            strategy=self.strategy,
            script_guard=self.script_guard,
            plan=self.decode_plan,
            kv_cache=self.kv_cache,
        )

    # ------------------------------------------------------------------ conversations

    def session(self, *, system: str | None = None, max_steps: int | None = None) -> HostSession:
        """A new conversation (several turns). A lazy host must have loaded its model
        (:meth:`load_model`)."""
        if self.model is None and self.load_model_when is not True and self.catalog is not None:
            raise RuntimeError(
                f"this host loads no model yet (load_model={self.load_model_when!r}); "
                "await host.load_model() before starting a conversation"
            )
        if self.model is None or self.catalog is None or self.executor is None:
            raise RuntimeError("use the Host inside 'async with'")
        return HostSession(
            self,
            Session(
                self.model,
                self._lock,
                self.catalog,
                self.executor,
                self.config,
                max_steps=max_steps or self.max_steps,
                system=system,
                # A remote model does not heat this device: no thermal pacing.
                pacing=None
                if self.remote is not None
                else functools.partial(_thermal_pacing, threads=self._loaded_threads()),
                tool_choice=self.tool_choice or "auto",
                call_on_description=self._call_on_description,
                free_tokens=self.max_answer_tokens,
            ),
        )

    def _loaded_threads(self) -> int:
        """The threads the model runs with when the device is cool."""
        return self._cool_threads or self.model.threads  # type: ignore[union-attr]

    def run(self, prompt: str) -> AsyncIterator[Event]:
        """One turn in a fresh conversation: yields its events."""
        return self.session().run(prompt)

    def abort(self) -> None:
        """Stop decoding (between or inside passes) and cancel every running turn and call."""
        if self.model is not None:
            self.model.abort()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    def call(self, name: str, arguments: Mapping[str, Any]) -> AsyncIterator[Event]:
        """Run one tool call directly, without the model, through the executor (validation,
        approval, result checks): yields its ``progress`` and ``log`` events, then one
        ``tool_result`` (``name``, ``server``, ``arguments``, ``status``, ``text``, ``source``:
        ``direct``, ``structured``: the structured content accepted; and the reply as the server
        sent it, ``content``: its content blocks and ``structuredContent``, both in wire form).
        :meth:`abort` cancels it (the server is told)."""
        if self.executor is None:
            raise RuntimeError("use the Host inside 'async with'")
        executor = self.executor

        async def work(emit: Callable[[Event], None]) -> None:
            def on_progress(update: Any) -> None:
                emit(progress_event(name, update))

            result: ToolResult = await executor.run(name, arguments, on_progress=on_progress)
            emit(Event("tool_result", {
                "name": result.name,
                "server": result.server,
                "arguments": dict(result.arguments),
                "status": result.status,
                "text": result.text,
                "source": "direct",
                "structured": result.structured,
                "content": list(result.content),
                "structuredContent": result.structured_content,
            }))  # fmt: skip

        return self._stream(work)

    def _events(self, session: Session, prompt: str) -> AsyncIterator[Event]:
        async def work(emit: Callable[[Event], None]) -> None:
            await session.turn(prompt, emit)

        return self._stream(work)

    async def _stream(self, work: Callable[[Callable[[Event], None]], Any]) -> AsyncIterator[Event]:
        """Run ``work(emit)`` in the host's task group (so :meth:`abort` reaches it) and yield
        what it emits, with the servers' log events while it runs; a consumer that stops
        iterating cancels it."""
        if self._tg is None:
            raise RuntimeError("use the Host inside 'async with'")
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
        scope = anyio.CancelScope()
        failure: list[BaseException] = []

        def emit(event: Event) -> None:
            try:
                send.send_nowait(event)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the consumer stopped reading; its scope is being cancelled

        async def run() -> None:
            async with send:
                self._sinks.add(emit)
                try:
                    with scope:
                        await work(emit)
                except Exception as exc:  # handed to the consumer, in its own task
                    failure.append(exc)
                finally:
                    self._sinks.discard(emit)

        self._tg.start_soon(run)
        try:
            async with receive:
                async for event in receive:
                    yield event
        finally:
            scope.cancel()
        if failure:
            raise failure[0]


def _thermal_pacing(max_tokens: int, *, threads: int) -> Backoff | None:
    """Seed 003's back-off between agent steps, where the device's temperature is readable:
    ``threads`` is what the model was loaded with, what a cool phone gets back."""
    status = read_thermal_status()
    return None if status is None else backoff_for(status, threads, max_tokens)
