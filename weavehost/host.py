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
  also when the body was cancelled (Ctrl-C).
* :meth:`Host.abort` stops decoding between or inside passes and cancels everything running.
* Events are yielded from a memory stream fed by a task in the host's task group, so a consumer
  that stops iterating cancels its turn and nothing leaks.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread
from anyio import AsyncContextManagerMixin

from weavehost.agent import DEFAULT_MAX_STEPS, AgentModel, EngineModel, Event, ModelLock, Session
from weavehost.agent.options import DEFAULT_MAX_ANSWER_TOKENS, check_tool_choice
from weavehost.agent.thermal import (
    Backoff,
    backoff_for,
    default_thread_count,
    performance_thread_count,
    read_thermal_status,
)
from weavehost.config import HostConfig, build_config
from weavehost.decode import DEFAULT_STRATEGY
from weavehost.engine import DEFAULT_N_CTX
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import Approver, Executor
from weavehost.mcp.servers import ServerPool

__all__ = ["Host", "HostSession"]

logger = logging.getLogger(__name__)


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
    ) -> None:
        base = config or HostConfig()
        if servers or trust or approval:
            extra = build_config(None, servers, trust=(), approval=approval)  # type: ignore[arg-type]
            taken = {s.name for s in base.servers}
            merged = base.servers + tuple(s for s in extra.servers if s.name not in taken)
            names = {s.name for s in merged} | set(inproc or {})
            unknown = [t for t in trust if t not in names]
            if unknown:
                from weavehost.errors import ConfigError

                raise ConfigError(f"--trust {unknown[0]!r}: no such server")
            base = HostConfig(
                servers=merged,
                model=base.model,
                threads=base.threads,
                trusted_servers=base.trusted_servers | frozenset(trust),
                approval=extra.approval if approval else base.approval,
                tool_choice=base.tool_choice,
                timeouts=base.timeouts,
                limits=base.limits,
                prompt_cache=base.prompt_cache,
                source=base.source,
            )
        self.config = base
        self.approver = approver
        self.model_path = model or base.model
        self.format_name = format
        self.strategy = strategy
        self.threads = threads or base.threads
        self.n_ctx = n_ctx
        self.max_steps = max_steps
        self.inproc = inproc
        self.on_loading = on_loading
        # auto | required | none | a tool's name (checked once the catalog is listed); None
        # (and no toolChoice in the config): "required" on the embedded SmolLM2-135M (it almost
        # never opens a call by itself), "auto" on any other model.
        self.tool_choice = tool_choice or base.tool_choice
        self.max_answer_tokens = max_answer_tokens
        # The persistent prompt-prefix cache: None follows the config (on by default), False is
        # --no-prompt-cache. Only a model the host loads uses it (not ``agent_model``).
        self.prompt_cache = base.prompt_cache.enabled if prompt_cache is None else prompt_cache
        self.model: AgentModel | None = agent_model
        self.pool: ServerPool | None = None
        self.catalog: Catalog | None = None
        self.executor: Executor | None = None
        self.description: dict[str, Any] = {}
        self._lock = ModelLock()
        self._cool_threads: int | None = None
        self._tg: anyio.abc.TaskGroup | None = None

    # ------------------------------------------------------------------ lifetime

    @asynccontextmanager
    async def __asynccontextmanager__(self) -> AsyncIterator[Host]:
        from weavehost.decode import get_strategy

        get_strategy(self.strategy)  # fail fast on a typo, before anything starts
        with contextlib.ExitStack() as native:
            try:
                async with ServerPool(self.config, inproc=self.inproc) as pool:
                    self.pool = pool
                    self.catalog = await Catalog.load(pool)
                    if self.tool_choice is not None:  # a typo fails before the model loads
                        check_tool_choice(self.tool_choice, self.catalog.names)
                    self.executor = Executor(pool, self.catalog, self.config, self.approver)
                    if self.model is None:
                        self.model = await self._load_model(native)
                    async with anyio.create_task_group() as tg:
                        self._tg = tg
                        try:
                            yield self
                        finally:
                            tg.cancel_scope.cancel()
            finally:
                self._tg = None
                # Free the model in a worker, shielded: llama.cpp may still be finishing a pass.
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(native.close)

    async def _load_model(self, native: contextlib.ExitStack) -> AgentModel:
        from weavehost.agent.prompt_cache import PromptCache
        from weavehost.decode import get_strategy
        from weavehost.engine import Engine
        from weavehost.formats import detect_format
        from weavehost.gguf import read_metadata
        from weavehost.models import resolve_model

        choice = resolve_model(self.model_path)
        metadata = read_metadata(choice.path, full_arrays=("tokenizer.ggml.tokens",))
        detection = detect_format(metadata, self.format_name)
        threads = self.threads or default_thread_count()
        # What a cool device gets back after a thermal back-off (seed 003).
        self._cool_threads = self.threads or performance_thread_count()
        if self.on_loading:
            self.on_loading(f"loading {choice.path.name} ({threads} threads)")

        def load() -> Engine:
            return native.enter_context(
                Engine.open(choice.path, n_ctx=self.n_ctx, n_threads=threads)
            )

        engine = await anyio.to_thread.run_sync(load)
        if self.tool_choice is None:
            self.tool_choice = "required" if choice.source == "embedded" else "auto"
        self.description = {
            "model": str(choice.path),
            "tool_choice": self.tool_choice,
            "format": detection.format.name,
            "strategy": self.strategy,
            "threads": threads,
            "n_ctx": engine.n_ctx,
        }
        return EngineModel(
            engine,
            detection.format,
            get_strategy(self.strategy),
            chat_template=metadata.chat_template,
            prompt_cache=PromptCache.from_config(
                replace(self.config.prompt_cache, enabled=self.prompt_cache)
            ),
        )

    # ------------------------------------------------------------------ conversations

    def session(self, *, system: str | None = None, max_steps: int | None = None) -> HostSession:
        """A new conversation (several turns)."""
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
                pacing=functools.partial(_thermal_pacing, threads=self._loaded_threads()),
                tool_choice=self.tool_choice or "auto",
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

    async def _events(self, session: Session, prompt: str) -> AsyncIterator[Event]:
        if self._tg is None:
            raise RuntimeError("use the Host inside 'async with'")
        send, receive = anyio.create_memory_object_stream[Event](math.inf)
        scope = anyio.CancelScope()
        failure: list[BaseException] = []

        async def turn() -> None:
            async with send:
                with scope:
                    try:
                        await session.turn(prompt, send.send_nowait)
                    except Exception as exc:  # handed to the consumer, in its own task
                        failure.append(exc)

        self._tg.start_soon(turn)
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
