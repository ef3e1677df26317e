"""Sampling answered by the local model: a server's ``sampling/createMessage`` as one model call.

Stage: agent (behind the :class:`~weavehost.mcp.features.Sampler` seam the pool calls). A
server that asks the client's model to write something gets weavehost's own model, rendered in
that model's own chat format, deciding its calls with the agent's decoding strategy.

Invariants:

* **Approved once per server.** The first request from a server needs approval under the
  config's policy: ``always`` allows it, ``never`` refuses it, ``ask`` asks the approver's
  ``approve_sampling`` (it is shown :meth:`~weavehost.mcp.features.SamplingRequest.describe`:
  the server's system prompt and every message). An approver without ``approve_sampling``, or
  none at all, cannot be asked: refused. Once approved, the server is not asked again while
  this sampler lives (one host). A refusal is asked again next time.
* **One model lock.** The request runs under the agent's :class:`~weavehost.agent.lock.ModelLock`
  through :meth:`~weavehost.agent.lock.ModelLock.run`, never concurrently with decoding. It
  waits for the lock at most ``wait_s`` (:data:`SAMPLING_WAIT_S`); past that it is refused with
  :class:`~weavehost.errors.ClientFeatureError`. This is also what keeps it from deadlocking:
  a tool started by an agent step (a provisional call runs while the step still holds the lock
  to write its calls) may ask for sampling; the step never awaits a tool while it holds the
  lock, so the request runs as soon as the step's writing ends, and if a step ever did hold the
  lock until its tool answered, the request would fail after ``wait_s`` with a message naming
  the cause, the tool would read that error, and the step would go on.
* **A flood is bounded.** At most :data:`MAX_WAITING_PER_SERVER` requests of one server wait
  for the model at once; more are refused at once, so a user's step waits behind at most that
  many answers per server. The request's text is rendered as conversation text (special-token
  parsing off), so it cannot open a turn of its own.
* **The agent's conversation is never corrupted.** The request is synced to the model as a
  conversation of its own, exactly as a second session on one model is
  (:meth:`~weavehost.agent.model.AgentModel.sync` keeps the longest common prefix); the agent's
  next step syncs its own conversation back the same way. A decode failure resets the KV cache,
  which every next sync notices.
* **What the request asks is honoured:** ``maxTokens`` bounds the text (and what the context
  has room for), ``stopSequences`` end it (stop reason ``stopSequence``), ``systemPrompt`` is
  the conversation's system message, ``temperature`` above 0 samples at that temperature with a
  generator seeded by ``seed`` (reproducible), 0 or absent is greedy. When the request offers
  ``tools``, the model may write calls with the host's strategy; the reply is then the calls
  (``tool_use``, stop reason ``toolUse``). ``toolChoice`` ``required`` forces a call, ``none``
  forbids one.
* **Text only.** Image and audio content are refused by the pool before a record is built
  (:mod:`weavehost.mcp.wire`), so a :class:`~weavehost.mcp.features.SamplingRequest` cannot
  carry one; a message whose content is not text (an embedder building records by hand) is
  refused here too, never sent to the model.
* The model may be loaded late: :class:`ModelSampler` asks its provider for the model and its
  lock only once a request is approved (``weavehost call`` loads the model only when a server
  asks it for something).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, Protocol

import anyio

from weavehost.agent.lock import ModelLock
from weavehost.agent.model import AgentModel, FreeText, Sampling
from weavehost.decode import ToolSchema
from weavehost.errors import AbortedError, ClientFeatureError, WeavehostError
from weavehost.mcp.features import SamplingReply, SamplingRequest, ToolUse
from weavehost.mcp.schemas import normalize_schema

__all__ = [
    "DEFAULT_SAMPLING_SEED",
    "SAMPLING_CALL_TOKENS",
    "SAMPLING_WAIT_S",
    "ModelProvider",
    "ModelSampler",
    "SamplingApprover",
    "sampling_messages",
    "sampling_tools",
]

logger = logging.getLogger(__name__)

SAMPLING_WAIT_S = 30.0  # how long a sampling request waits for the model lock before refusal
SAMPLING_CALL_TOKENS = 256  # one call's value budget when a sampling request offers tools
DEFAULT_SAMPLING_SEED = 0  # temperature > 0 samples from a generator seeded with this

ModelProvider = Callable[[], Awaitable[tuple[AgentModel, ModelLock]]]
ApprovalPolicy = Literal["ask", "always", "never"]
_APPROVED = frozenset({True, "yes", "always_tool", "always_server"})


class SamplingApprover(Protocol):
    """An approver that can also be asked about sampling (the console's implements both);
    ``True`` or any ``yes``/``always_…`` decision approves the server for this host."""

    async def approve_sampling(self, request: SamplingRequest) -> bool | str: ...


def sampling_messages(request: SamplingRequest) -> list[dict[str, Any]]:
    """The request as the conversation the model's chat format renders: the system prompt, the
    messages, tool calls as ``tool_calls`` and tool results as ``tool`` messages (named by the
    call they answer)."""
    messages: list[dict[str, Any]] = []
    if request.system_prompt:
        messages.append({"role": "system", "content": request.system_prompt})
    names: dict[str, str] = {}
    for message in request.messages:
        for call_id, result in message.tool_results:
            messages.append({"role": "tool", "name": names.get(call_id, call_id),
                             "content": result})  # fmt: skip
        if message.tool_uses:
            for use in message.tool_uses:
                names[use.id] = use.name
            calls = [{"name": u.name, "arguments": dict(u.arguments)} for u in message.tool_uses]
            messages.append({"role": "assistant", "content": message.text, "tool_calls": calls})
        elif message.text or not message.tool_results:
            messages.append({"role": message.role, "content": message.text})
    return messages


def sampling_tools(request: SamplingRequest) -> list[ToolSchema]:
    """The request's MCP tool dicts as the decoder's tools, schemas normalised as the catalog
    normalises a server's; a tool that cannot be offered refuses the request."""
    tools = []
    for index, tool in enumerate(request.tools):
        name = tool.get("name")
        if not isinstance(name, str) or not name:
            raise ClientFeatureError(f"sampling request tool #{index} has no name")
        description = tool.get("description")
        try:
            schema = normalize_schema(
                tool.get("inputSchema") or {"type": "object"}, where=f"sampling tool {name!r}"
            )
        except WeavehostError as exc:
            raise ClientFeatureError(str(exc)) from exc
        tools.append(ToolSchema(name, description if isinstance(description, str) else "", schema))
    return tools


def _refuse_media(request: SamplingRequest) -> None:
    for message in request.messages:
        if not isinstance(message.text, str):
            kind = type(message.text).__name__
            raise ClientFeatureError(
                f"server {request.server!r} asked the model to read {kind} content; "
                "weavehost's model reads text only (image and audio are refused)"
            )


# A server's sampling requests that may wait for the model at once; more are refused, so a
# flooding server holds the model for at most this many answers before a user's step.
MAX_WAITING_PER_SERVER = 4


class ModelSampler:
    """Answers ``sampling/createMessage`` with the agent's model. See the module docstring.

    ``provider`` returns the model and its lock (loading the model on first use, if the host
    loads it lazily). ``approval`` is the config's policy; ``approver`` is asked under ``ask``.
    """

    def __init__(
        self,
        provider: ModelProvider,
        *,
        approval: ApprovalPolicy | str = "ask",
        approver: object | None = None,
        wait_s: float = SAMPLING_WAIT_S,
        seed: int = DEFAULT_SAMPLING_SEED,
        call_tokens: int = SAMPLING_CALL_TOKENS,
        model_name: str = "weavehost",
    ) -> None:
        self.provider, self.approval, self.approver = provider, approval, approver
        self.wait_s, self.seed, self.call_tokens = wait_s, seed, call_tokens
        self.model_name = model_name
        self.approved: set[str] = set()  # servers approved for sampling in this host
        # One question per server at a time: a second request waits for the first's answer.
        self._asking: dict[str, anyio.Lock] = {}
        self._waiting: dict[str, int] = {}  # requests of each server not yet answered

    # ------------------------------------------------------------------ approval

    async def _approve(self, request: SamplingRequest) -> None:
        server = request.server
        if server in self.approved or self.approval == "always":
            return
        async with self._asking.setdefault(server, anyio.Lock()):
            await self._ask(request)

    async def _ask(self, request: SamplingRequest) -> None:
        server = request.server
        if server in self.approved:  # approved while this request waited for the question
            return
        if self.approval == "never":
            raise ClientFeatureError(
                f"server {server!r} asked the model to write a message: the approval policy "
                "refuses it (approval: never)"
            )
        ask = getattr(self.approver, "approve_sampling", None)
        if ask is None:
            raise ClientFeatureError(
                f"server {server!r} asked the model to write a message; it needs approval and "
                "no one can be asked (set approval 'always' to allow it)"
            )
        try:
            answer = await ask(request)
        except Exception as exc:  # boundary: an approver that fails must fail closed
            logger.warning("sampling approver failed for %s: %s", server, exc)
            answer = False
        if answer not in _APPROVED:
            raise ClientFeatureError(f"the user declined server {server!r}'s sampling request")
        self.approved.add(server)

    # ------------------------------------------------------------------ sampling

    async def sample(self, request: SamplingRequest) -> SamplingReply:
        server = request.server
        waiting = self._waiting.get(server, 0)
        if waiting >= MAX_WAITING_PER_SERVER:
            raise ClientFeatureError(
                f"server {server!r} already has {waiting} sampling requests waiting for the "
                "model; this one is refused"
            )
        self._waiting[server] = waiting + 1
        try:
            return await self._sample_in_turn(request)
        finally:
            self._waiting[server] -= 1

    async def _sample_in_turn(self, request: SamplingRequest) -> SamplingReply:
        _refuse_media(request)
        if request.max_tokens < 1:
            raise ClientFeatureError(f"server {request.server!r}: maxTokens must be at least 1")
        tools = sampling_tools(request) if request.tool_choice != "none" else []
        messages = sampling_messages(request)
        if not messages:
            raise ClientFeatureError(f"server {request.server!r}: the request has no messages")
        await self._approve(request)
        model, lock = await self.provider()
        sampling = Sampling(
            temperature=request.temperature, seed=self.seed, stop=request.stop_sequences
        )
        work = functools.partial(self._sample, model, messages, tools, request, sampling)
        if lock.held():  # the asking task holds the model itself: waiting could never end
            raise ClientFeatureError(
                f"server {request.server!r}: the sampling request came from the task that holds "
                "the model; it cannot be answered until that task lets go"
            )
        if not await lock.acquire(within=self.wait_s):
            raise ClientFeatureError(
                f"server {request.server!r}: the model stayed busy for {self.wait_s:g} s "
                "(another step or request held it); the sampling request was not answered"
            )
        try:
            return await lock.run(work)
        except AbortedError as exc:
            raise ClientFeatureError(f"the sampling request was stopped: {exc}") from exc
        except ClientFeatureError:
            raise
        except WeavehostError as exc:
            raise ClientFeatureError(
                f"server {request.server!r}: the model could not answer: {exc}"
            ) from exc
        finally:
            lock.release()

    def _sample(
        self,
        model: AgentModel,
        messages: list[dict[str, Any]],
        tools: list[ToolSchema],
        request: SamplingRequest,
        sampling: Sampling,
    ) -> SamplingReply:
        """In the worker, under the lock: sync the request's conversation, write the text (and
        any calls)."""
        try:
            synced = model.sync(messages, tools)
        except WeavehostError:
            model.reset()  # whatever was half read, the next sync starts clean
            raise
        left = model.n_ctx - synced.total
        if left < 1:
            raise ClientFeatureError(
                f"server {request.server!r}: the request fills the model's {model.n_ctx}-token "
                "context; there is no room to answer"
            )
        max_tokens = min(request.max_tokens, left)
        if tools and request.tool_choice == "required":
            free = model.free_decode(_ignore, 0, sampling=sampling)
            free = FreeText(free.text, call=True, stop="call")
        else:
            free = model.free_decode(_ignore, max_tokens, bool(tools), sampling=sampling)
        if free.call and tools:
            budget = max(0, min(left - free.tokens - 1, max_tokens - free.tokens))
            results = model.write_calls(
                tools, _ignore_call, min(self.call_tokens, max(1, budget)), budget=budget
            )
            calls = [call for result in results for call in result.calls]
            if calls:
                uses = tuple(
                    ToolUse(id=f"call_{i}", name=c.name, arguments=dict(c.arguments))
                    for i, c in enumerate(calls, start=1)
                )
                return SamplingReply(free.text, self.model_name, "toolUse", uses)
            error = results[-1].error if results else None
            raise ClientFeatureError(
                f"server {request.server!r}: the model began a call but wrote none"
                + (f" ({error})" if error else "")
            )
        stop = _STOP_REASONS.get(free.stop, "endTurn")
        return SamplingReply(free.text, self.model_name, stop)


_STOP_REASONS: Mapping[str, Literal["endTurn", "maxTokens", "stopSequence"]] = {
    "end": "endTurn",
    "max_tokens": "maxTokens",
    "stop_sequence": "stopSequence",
    "call": "endTurn",
}


def _ignore(_text: str) -> None:
    """Sampled text is returned whole, not streamed."""


def _ignore_call(_index: int, _call: Any) -> None:
    """A sampled call is returned to the server, never run here: no provisional start."""
