"""A model on a remote OpenAI-compatible server (llama.cpp's, vLLM, Ollama), behind the seam.

Stage: agent (the model seam, :class:`~weavehost.agent.model.AgentModel`). :class:`RemoteModel`
is what the loop calls instead of the in-process :class:`~weavehost.agent.model.EngineModel`;
everything above the seam (catalog, trust, approvals, the result cache, events, sampling, the
context policy) is unchanged. What moves to the server: rendering the prompt, its KV cache, and
writing the call (the server's own constrained tool calling; the local strategies need the KV
cache in this process and do not apply).

How one step maps onto one ``POST /chat/completions``:

* :meth:`~RemoteModel.sync` keeps the conversation as OpenAI messages (assistant calls get ids,
  each tool result the id of the call it answers) and the tools; it sends nothing. Tokens are
  **estimated** (:func:`approx_tokens`: UTF-8 bytes / :data:`CHARS_PER_TOKEN`, which over-counts
  English and JSON, plus :data:`MESSAGE_OVERHEAD_TOKENS` a message), never the server's
  tokenizer, so the context policy errs on the side of room; ``reused`` is always 0 (what the
  server's own prompt cache keeps is not known here).
* :meth:`~RemoteModel.free_decode` sends the request with ``tool_choice`` ``auto`` (``none``
  when calls are not allowed) and streams text deltas to the sink. At the first tool-call delta
  it returns ``call=True`` and keeps the stream open; :meth:`~RemoteModel.write_calls` (next,
  under the same model lock) reads the rest. One streamed content delta counts as one token for
  ``max_tokens`` (servers send one a token; the count is approximate otherwise).
* A call forced by the turn (``free_decode`` with ``max_tokens=0``, then ``write_calls`` with
  the forced tools) is one request with ``tool_choice`` naming the tool (one tool) or
  ``required`` (several).
* **Provisional calls from the stream.** While a call's ``arguments`` stream,
  :class:`~weavehost.agent.openai_stream.ArgumentScanner` reads them; once every *required*
  argument of the tool is complete (the scanner has read past its value), the provisional sink
  gets a :class:`~weavehost.formats.ToolCall` of those arguments (a tool with none required:
  once the whole object is read). The session starts it early exactly as with local ``weave``
  (trusted read-only tools only); the final call confirms or replaces it. ``earlyStart: false``
  turns this off (the calls then run when the reply ends).
* **Faults are errors, never calls.** Connection refused, a timeout, an HTTP error, a stream
  that ends before the server finished it (mid-call included: no ``finish_reason`` and no
  ``[DONE]``, or ``finish_reason: length`` inside a call), a call whose arguments are not a JSON
  object or that names no tool on offer: each raises a
  :class:`~weavehost.errors.RemoteModelError` (the turn ends with an ``error`` event; nothing
  of that reply runs, and its provisional runs are discarded by the session). A chat completion
  is never retried (it may have started); the idempotent ``GET /models`` and ``GET /props`` are,
  ``retries`` times with doubling back-off from
  :data:`~weavehost.agent.remote_http.RETRY_BACKOFF_S`.
* :meth:`~RemoteModel.abort` shuts down the connection being read (from any thread): the
  reading worker wakes and stops with :class:`~weavehost.errors.AbortedError`. A whole
  (unstreamed) reply's body is read only when asked for, and a request the server has not
  begun to answer (a whole reply still being computed) is stopped too: each request opens its
  own connection (:class:`~weavehost.agent.remote_http.Line`).
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import httpx2

from weavehost.agent.model import FreeText, IndexedProvisionalSink, Sampling, SyncReport, TextSink
from weavehost.agent.openai_stream import Chunk
from weavehost.agent.remote_http import (
    ERROR_BODY_CHARS,
    REMOTE_ENGINE,
    Boundary,
    Draft,
    Line,
    Reply,
    ServerInfo,
    describe_remote_model,
    make_client,
    probe_server,
)
from weavehost.config_model import RemoteModelConfig
from weavehost.decode import MAX_CALLS, CallResult, ToolSchema
from weavehost.engine import EngineStats
from weavehost.errors import AbortedError, ContextOverflowError, RemoteStreamError
from weavehost.formats import ToolCall, tool_to_openai

__all__ = [
    "REMOTE_ENGINE",
    "RemoteModel",
    "ServerInfo",
    "approx_tokens",
    "describe_remote_model",
    "open_remote_model",
    "probe_server",
    "wire_messages",
]

logger = logging.getLogger(__name__)

CHARS_PER_TOKEN = 3  # UTF-8 bytes per estimated token: over-counts English text and JSON
MESSAGE_OVERHEAD_TOKENS = 8  # a message's role and template markers, estimated
CALL_TOKEN_ALLOWANCE = 512  # what a reply may spend on calls after its free text
STRATEGY = "remote"  # CallResult.strategy: the server wrote the call


def approx_tokens(text: str) -> int:
    """An estimate of ``text``'s tokens (see the module docstring: it over-counts)."""
    return math.ceil(len(text.encode("utf-8")) / CHARS_PER_TOKEN)


def wire_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The loop's messages as the chat-completions API takes them: an assistant's calls with
    ids (``call_1`` …) and JSON-text arguments; a tool result with the id of the call it
    answers (the earliest unanswered call of its name, else the earliest unanswered one)."""
    wire: list[dict[str, Any]] = []
    unanswered: list[tuple[str, str]] = []  # (id, name)
    counter = 0
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else ("" if content is None else str(content))
        if role == "assistant" and message.get("tool_calls"):
            calls = []
            for call in message["tool_calls"]:
                counter += 1
                call_id = f"call_{counter}"
                arguments = json.dumps(dict(call.get("arguments") or {}), ensure_ascii=False)
                function = {"name": call["name"], "arguments": arguments}
                calls.append({"id": call_id, "type": "function", "function": function})
                unanswered.append((call_id, call["name"]))
            # Content as a string, empty or not: some servers (llama-cpp-python) refuse null.
            wire.append({"role": "assistant", "content": text, "tool_calls": calls})
        elif role == "tool":
            name = message.get("name")
            match = next((u for u in unanswered if u[1] == name), None)
            match = match or (unanswered[0] if unanswered else None)
            if match is not None:
                unanswered.remove(match)
                call_id = match[0]
            else:
                counter += 1
                call_id = f"call_{counter}"
            wire.append({"role": "tool", "tool_call_id": call_id, "content": text})
        else:
            wire.append({"role": role, "content": text})
    return wire


def _wire_tools(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    return [tool_to_openai(t.name, t.description, t.parameters) for t in tools]


def _estimate(wire: Sequence[Mapping[str, Any]], wire_tools: Sequence[Mapping[str, Any]]) -> int:
    """The estimated tokens of wire messages with wire tools on offer."""
    text = json.dumps(wire, ensure_ascii=False) + json.dumps(wire_tools)
    return approx_tokens(text) + MESSAGE_OVERHEAD_TOKENS * len(wire)


@contextmanager
def open_remote_model(
    config: RemoteModelConfig, *, n_ctx: int, transport: httpx2.BaseTransport | None = None
) -> Iterator[RemoteModel]:
    """A :class:`RemoteModel` on its own HTTP client, probed (:func:`probe_server`); the client
    is closed on exit. ``transport``: httpx2's seam (tests)."""
    with make_client(config, transport) as client:
        aborted = threading.Event()
        info = probe_server(client, config, n_ctx, aborted)
        yield RemoteModel(client, config, info, aborted)


class RemoteModel:
    """An :class:`~weavehost.agent.model.AgentModel` on a remote server; made by
    :func:`open_remote_model`. See the module docstring."""

    # A forced call is the server's tool_choice, which not every server takes ("required":
    # llama-cpp-python's chatml-function-calling asserts "auto"): the host forces none itself.
    writes_forced_calls = False
    avoids_tokens = False  # its vocabulary is the server's

    def __init__(
        self,
        client: httpx2.Client,
        config: RemoteModelConfig,
        info: ServerInfo,
        aborted: threading.Event | None = None,
    ) -> None:
        self.client, self.config, self.info = client, config, info
        self._aborted = aborted or threading.Event()
        self._boundary = Boundary(config, self._aborted)
        self._messages: list[dict[str, Any]] = []  # the synced conversation, as sent
        self._tools: list[dict[str, Any]] = []  # the synced tools, as sent
        self._reply: Reply | None = None  # a reply whose calls write_calls reads next
        self._live: Line | None = None  # the request in flight (abort shuts it down)
        self._stats = EngineStats()
        self._prompt_estimate = 0  # the synced conversation's estimated tokens

    # ------------------------------------------------------------------ the seam's plain parts

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def n_ctx(self) -> int:
        return self.info.n_ctx

    @property
    def threads(self) -> int:
        return 0  # the server's own

    def set_threads(self, n_threads: int) -> None:
        """Nothing to set: the server decides how it computes."""

    def count_tokens(self, text: str) -> int:
        return approx_tokens(text)

    def prompt_tokens(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
    ) -> int:
        """The estimated tokens of the conversation with ``tools`` on offer."""
        return _estimate(wire_messages(messages), _wire_tools(tools))

    def stats(self) -> EngineStats:
        return self._stats.snapshot()

    def reset(self) -> None:
        """Forget a reply still open; the server keeps no state of ours to reset."""
        self._drop_reply()

    def abort(self) -> None:
        """Stop the request in flight (any thread), whether the server has begun its reply or
        not: its reader raises ``AbortedError``."""
        self._aborted.set()
        live = self._live
        if live is not None:
            live.interrupt()

    def clear_abort(self) -> None:
        self._aborted.clear()

    def sync(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
    ) -> SyncReport:
        """Keep the conversation for the next request (nothing is sent): the messages and
        tools are put in wire form once, for the estimate and every request until the next
        sync."""
        self._drop_reply()
        wire, wire_tools = wire_messages(messages), _wire_tools(tools)
        total = _estimate(wire, wire_tools)
        if total >= self.n_ctx:
            raise ContextOverflowError(
                f"the conversation takes about {total} tokens, more than the model server's "
                f"context size of {self.n_ctx}; start a new session"
            )
        self._messages, self._tools = wire, wire_tools
        self._prompt_estimate = total
        return SyncReport(total=total, reused=0, prefilled=total)

    # ------------------------------------------------------------------ requests

    def _drop_reply(self) -> None:
        reply, self._reply = self._reply, None
        if reply is not None:
            reply.close()

    def _check_abort(self) -> None:
        if self._aborted.is_set():
            raise AbortedError("the model server's reply was stopped")

    def _start(self, tool_choice: Any, max_tokens: int, sampling: Sampling | None) -> Reply:
        """Send one chat completion (never retried: it may have started)."""
        self._check_abort()
        stream = self.config.stream is True or (
            self.config.stream == "forced" and tool_choice != "auto"
        )
        sampling = sampling or Sampling()
        body: dict[str, Any] = {
            "model": self.name,
            "messages": self._messages,
            "stream": stream,
            # Never past the context (vLLM refuses a request whose prompt and max_tokens do
            # not fit); the estimate over-counts the prompt, so this errs on the safe side.
            "max_tokens": max(1, min(max_tokens, self.n_ctx - self._prompt_estimate)),
            "temperature": 0.0 if sampling.greedy else sampling.temperature,
        }
        if not sampling.greedy:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if self._tools:
            body["tools"] = self._tools
            body["tool_choice"] = tool_choice
        if stream:
            body["stream_options"] = {"include_usage": True}
        logger.debug("POST /chat/completions: tool_choice %s, stream %s, max_tokens %d",
                     body.get("tool_choice"), stream, body["max_tokens"])  # fmt: skip
        url = f"{self.config.url.rstrip('/')}/chat/completions"
        line = self._live = Line(self._aborted)
        request = self.client.build_request("POST", url, json=body,
                                            extensions={"trace": line.trace})  # fmt: skip
        with self._boundary.mapped("POST /chat/completions"):
            response = self.client.send(request, stream=True)
        try:
            self._boundary.check_status(response, "POST /chat/completions")
        except BaseException:
            response.close()
            raise
        self._stats.prefill_passes += 1
        return Reply(response, stream, self._boundary)

    def _read(self, reply: Reply) -> Chunk | None:
        self._check_abort()
        try:
            chunk = reply.next()
        except Exception as exc:  # abort() closed the response under the reader
            if self._aborted.is_set():
                raise AbortedError("the model server's reply was stopped") from exc
            raise
        self._check_abort()
        if chunk is not None:
            pieces = sum(1 for p in chunk.calls if p.arguments) + (1 if chunk.text else 0)
            self._stats.decoded_tokens += pieces
        return chunk

    def _finish(self, reply: Reply, during: str) -> None:
        """The reply was read to its end: it must have been finished by the server. The prompt
        tokens the server reports (``usage``) are counted here, for text and calls alike."""
        if reply.usage:
            self._stats.prefilled_tokens += int(reply.usage.get("prompt_tokens") or 0)
        if reply.complete:
            return
        if reply.received == 0:
            raise RemoteStreamError(
                f"the model server at {self._boundary.shown} ended the stream without sending "
                "anything; a server that cannot stream a reply leaving the call to the model "
                '(llama-cpp-python\'s cannot) needs "stream": "forced" or false under '
                "weavehost.model"
            )
        raise RemoteStreamError(
            f"the model server's stream ended before the reply was finished ({during})"
        )

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
    ) -> FreeText:
        """Stream the reply's text until it ends or a call begins (the stream then stays open
        for :meth:`write_calls`). ``max_tokens=0`` sends nothing: the call is forced next.
        ``refused`` and ``made`` are not the server's to know: a call it writes to a refused
        tool, or one the turn made, is written whole, and the session does not run it.
        ``avoid`` (token ids) is not either: the server's vocabulary is its own."""
        self._drop_reply()
        if max_tokens <= 0:
            return FreeText(text="", call=False, stop="max_tokens")
        choice = "auto" if allow_call else "none"
        reply = self._start(choice, max_tokens + (CALL_TOKEN_ALLOWANCE if allow_call else 0),
                            sampling)  # fmt: skip
        parts: list[str] = []
        tokens = 0
        try:
            while (chunk := self._read(reply)) is not None:
                if chunk.text:
                    if tokens >= max_tokens:  # the answer's bound: the rest is not read
                        return FreeText("".join(parts), call=False, stop="max_tokens",
                                        tokens=tokens)  # fmt: skip
                    on_text(chunk.text)
                    parts.append(chunk.text)
                    tokens += 1
                if reply.calls and allow_call:
                    self._reply, reply = reply, None  # write_calls reads on
                    return FreeText("".join(parts), call=True, stop="call", tokens=tokens)
            self._finish(reply, "in its text")
        finally:
            if reply is not None:
                reply.close()
                self._live = None
        stop = "max_tokens" if reply.finish == "length" else "end"
        return FreeText("".join(parts), call=False, stop=stop, tokens=tokens)

    def resume_free(
        self,
        on_text: TextSink,
        max_tokens: int,
        *,
        refused: Collection[str] = (),
        made: Collection[str] = (),
    ) -> FreeText | None:
        """``None``: the server wrote the reply's calls, and a reply it ended cannot be
        continued from inside; the loop asks for an answer in a new step."""
        return None

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
    ) -> list[CallResult]:
        """The reply's calls as the server writes them, at most ``max_calls``, up to the first
        equal to a call in ``made`` (the turn's earlier calls, canonical); a trusted
        read-only one may start early from the stream (see the module docstring). The calls
        are final only when the stream ends, so ``on_final`` is not called. Raises
        :class:`~weavehost.errors.RemoteModelError` for a fault; never returns a call whose
        arguments did not parse into an object."""
        started = time.perf_counter()
        reply, self._reply = self._reply, None
        if reply is None:  # a forced call: no free text was asked for
            choice: Any = "required"
            if len(tools) == 1:
                choice = {"type": "function", "function": {"name": tools[0].name}}
            reply = self._start(choice, max(1, budget), None)
        offered = {t.name: t for t in tools}
        fired: dict[int, tuple[ToolCall, float]] = {}
        try:
            while True:
                self._fire(reply, offered, fired, on_provisional, max_calls, started)
                if self._read(reply) is None:
                    break
            name = next(reversed(reply.calls.values())).name if reply.calls else ""
            self._finish(reply, f"in the middle of a call to {name}" if name else "before a call")
            if reply.finish == "length" and reply.calls:
                last = list(reply.calls.values())[-1]
                if not last.scanner.closed:
                    raise RemoteStreamError(
                        f"the model server stopped at its token limit in the middle of a call "
                        f"to {last.name}"
                    )
        finally:
            reply.close()
            self._live = None
        ended = time.perf_counter() - started
        results = []
        for draft in list(reply.calls.values())[:max_calls]:
            results.append(self._result(draft, offered, fired.get(draft.place), ended))
            if any(call.canonical() in made for call in results[-1].calls):
                break
        if not results:
            stats = EngineStats()
            return [CallResult(STRATEGY, [], None, "", stats, ended, ended,
                               error="the model server's reply held no call")]  # fmt: skip
        return results

    def _fire(
        self,
        reply: Reply,
        offered: Mapping[str, ToolSchema],
        fired: dict[int, tuple[ToolCall, float]],
        on_provisional: Callable[[int, ToolCall], None],
        max_calls: int,
        started: float,
    ) -> None:
        """Hand each call whose required arguments are all complete to the provisional sink,
        once."""
        if not self.config.early_start:
            return
        for draft in reply.calls.values():
            tool = offered.get(draft.name)
            if draft.place in fired or draft.place >= max_calls or tool is None:
                continue
            members, required = draft.scanner.members, tool.required
            ready = all(k in members for k in required) if required else draft.scanner.closed
            if ready and not draft.scanner.broken:
                call = ToolCall(draft.name, {k: members[k] for k in required})
                fired[draft.place] = (call, time.perf_counter() - started)
                on_provisional(draft.place, call)

    def _result(
        self,
        draft: Draft,
        offered: Mapping[str, ToolSchema],
        fired: tuple[ToolCall, float] | None,
        ended: float,
    ) -> CallResult:
        if draft.name not in offered:
            raise RemoteStreamError(
                f"the model server returned a call of {draft.name or '(no name)'!r}, which is "
                f"not a tool on offer ({', '.join(offered) or 'none'})"
            )
        text = draft.arguments.strip() or "{}"
        try:
            arguments = json.loads(text)
        except json.JSONDecodeError as exc:
            raise RemoteStreamError(
                f"the model server returned a call of {draft.name} whose arguments are not "
                f"valid JSON ({exc.msg}): {text[:ERROR_BODY_CHARS]!r}"
            ) from exc
        if not isinstance(arguments, dict):
            raise RemoteStreamError(
                f"the model server returned a call of {draft.name} whose arguments are not a "
                f"JSON object: {text[:ERROR_BODY_CHARS]!r}"
            )
        provisional, early = fired if fired is not None else (None, ended)
        return CallResult(
            strategy=STRATEGY,
            calls=[ToolCall(draft.name, arguments)],
            provisional=provisional,
            text=text,
            stats=EngineStats(),
            tool_latency_s=early,
            final_latency_s=ended,
        )
