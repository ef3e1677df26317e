"""The agent's seam to "the model": the protocol the loop calls and the engine-backed model.

Stage: agent (between the agent loop and the engine/decoder). The loop never touches llama.cpp
itself; it asks an :class:`AgentModel` to

1. :meth:`~AgentModel.sync` its resident conversation to a list of messages (prefilling only
   what the KV cache lacks),
2. :meth:`~AgentModel.free_decode` greedily until an end-of-generation token or the format's
   call opener, streaming text,
3. :meth:`~AgentModel.write_call` with a decoding strategy once the opener was seen.

Every method but ``abort``/``clear_abort`` is blocking and is called from a worker thread, one
at a time, by a task holding the model's :class:`~weavehost.agent.lock.ModelLock`. A scripted
stand-in for tests is :mod:`weavehost.agent.scripted`. Invariants of :class:`EngineModel`:

* Sequence 0 always holds ``self.held``: the rendered conversation so far, then what the model
  wrote after it. :meth:`sync` renders the whole conversation, keeps the longest common prefix
  of the old and new tokens and prefills only the rest (``engine.stats.prefilled_tokens``
  counts it), so a conversation is never re-prefilled.
* When the opener appears in free text, sequence 0 is rolled back to the token that holds the
  opener's first character; the text before it stays as assistant content, and the strategy
  writes the whole call from the opener on (``forced=True``).
* Text that could still become the opener is held back from the stream, so a call's opening
  characters are never shown as assistant text.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from weavehost.decode import CallRequest, CallResult, DecodeStrategy, ToolSchema
from weavehost.engine import Engine, EngineStats
from weavehost.errors import ContextOverflowError
from weavehost.formats import ModelFormat, ToolCall, tool_to_openai

__all__ = [
    "AgentModel",
    "EngineModel",
    "FreeText",
    "ProvisionalSink",
    "SyncReport",
    "TextSink",
    "common_prefix",
    "opener_position",
]

MAX_REMEMBERED_REPLIES = 64
TextSink = Callable[[str], None]
ProvisionalSink = Callable[[ToolCall], None]


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What :meth:`AgentModel.sync` did: tokens the conversation has, reused and prefilled."""

    total: int
    reused: int
    prefilled: int


@dataclass(frozen=True, slots=True)
class FreeText:
    """Free decoding's outcome: the assistant text, and whether a call was opened after it."""

    text: str
    call: bool
    stop: str  # "end" (end-of-generation token), "call" (opener seen), "max_tokens"
    tokens: int = 0


class AgentModel(Protocol):
    """What the agent loop needs from a model. Blocking; called from one worker at a time."""

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
        self, on_text: TextSink, max_tokens: int, allow_call: bool = True
    ) -> FreeText: ...

    def write_call(
        self, tools: Sequence[ToolSchema], on_provisional: ProvisionalSink, max_tokens: int
    ) -> CallResult: ...

    def abort(self) -> None: ...

    def clear_abort(self) -> None: ...

    def stats(self) -> EngineStats: ...


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def opener_position(text: bytes, opener: bytes, *, at_start_only: bool) -> int:
    """Where the opener begins in ``text`` (-1 if absent). ``at_start_only``: only after
    leading whitespace (Llama 3's JSON call is the whole reply)."""
    if at_start_only:
        stripped = text.lstrip()
        return len(text) - len(stripped) if stripped.startswith(opener) else -1
    return text.find(opener)


def _held_back(text: bytes, opener: bytes, *, at_start_only: bool) -> int:
    """How many trailing bytes of ``text`` could still grow into the opener (not streamed)."""
    if at_start_only:
        stripped = text.lstrip()
        return len(text) if opener.startswith(stripped) else 0
    for size in range(min(len(opener) - 1, len(text)), 0, -1):
        if opener.startswith(text[-size:]):
            return size
    return 0


class EngineModel:
    """The real model: one engine, one format, one strategy; sequence 0 holds the conversation."""

    def __init__(
        self,
        engine: Engine,
        fmt: ModelFormat,
        strategy: DecodeStrategy,
        *,
        chat_template: str | None = None,
    ) -> None:
        self.engine, self.format, self.strategy = engine, fmt, strategy
        self.chat_template = chat_template
        self.held: list[int] = []
        # Replies as the model wrote them (text -> tokens): the history re-renders a reply as
        # text, and its tokens are reused so the cache keeps exactly what the model wrote.
        self._replies: OrderedDict[str, list[int]] = OrderedDict()
        self._reply_start = 0
        self._rendered: tuple[str, list[int]] | None = None  # the last render: key, tokens
        # The format's call trigger (its first; the strategy writes the call from its layout's
        # opener). ``at_start``: it counts only at the start of the reply (Llama 3's JSON call).
        trigger = fmt.triggers[0]
        self._opener = trigger.text.encode("utf-8")
        self._start_only = trigger.at_start

    @property
    def n_ctx(self) -> int:
        return self.engine.n_ctx

    def count_tokens(self, text: str) -> int:
        return len(self.engine.tokenize(text))

    def stats(self) -> EngineStats:
        return self.engine.stats.snapshot()

    def prompt_tokens(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
    ) -> int:
        """Tokens the rendered conversation takes (what :meth:`sync` would hold)."""
        return len(self.render(messages, tools))

    def reset(self) -> None:
        """Empty the KV cache; the next :meth:`sync` prefills the whole conversation."""
        self.engine.clear()
        self.held = []

    @property
    def threads(self) -> int:
        return self.engine.n_threads

    def set_threads(self, n_threads: int) -> None:
        self.engine.set_threads(n_threads)

    def abort(self) -> None:
        self.engine.abort()

    def clear_abort(self) -> None:
        self.engine.clear_abort()

    def render(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
    ) -> list[int]:
        """The tokens of the conversation with ``tools`` on offer. The last render is kept:
        the context policy measures the very view :meth:`sync` then reads, so a step renders
        and tokenizes the conversation once."""
        offered = [tool_to_openai(t.name, t.description, t.parameters) for t in tools]
        key = json.dumps([list(messages), offered], ensure_ascii=False, default=str)
        if self._rendered is not None and self._rendered[0] == key:
            return list(self._rendered[1])
        segments = self.format.render_prompt(messages, offered, chat_template=self.chat_template)
        tokens: list[int] = []
        for segment in segments:
            written = None if segment.special else self._replies.get(segment.text)
            if written is not None:
                tokens.extend(written)
            else:
                tokens.extend(self.engine.tokenize(segment.text, special=segment.special))
        self._rendered = (key, list(tokens))
        return tokens

    def _remember_reply(self) -> None:
        tokens = self.held[self._reply_start :]
        self._rendered = None  # a remembered reply changes how its text renders
        if tokens:
            self._replies[self.engine.detokenize(tokens)] = list(tokens)
            while len(self._replies) > MAX_REMEMBERED_REPLIES:
                self._replies.popitem(last=False)

    def sync(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
    ) -> SyncReport:
        engine = self.engine
        tokens = self.render(messages, tools)
        if len(tokens) >= engine.n_ctx:
            raise ContextOverflowError(
                f"the conversation takes {len(tokens)} tokens, more than the context size of "
                f"{engine.n_ctx}; start a new session or raise the context size"
            )
        if engine.seq_len(0) != len(self.held):  # someone else used the context: trust nothing
            engine.clear()
            self.held = []
        common = common_prefix(self.held, tokens)
        # The last token is read again when nothing is new, so its next-token logits exist.
        keep = min(common, len(tokens) - 1)
        engine.drop(0, keep)
        self.held = self.held[:keep]
        try:
            engine.prefill(0, tokens[keep:])
        finally:
            self.held = list(tokens[: engine.seq_len(0)])
        return SyncReport(total=len(tokens), reused=keep, prefilled=len(tokens) - keep)

    def free_decode(self, on_text: TextSink, max_tokens: int, allow_call: bool = True) -> FreeText:
        engine = self.engine
        start = engine.seq_len(0)
        self._reply_start = start
        logits = engine.last_logits(0)
        tokens: list[int] = []
        offsets: list[int] = []
        data = b""
        shown = ""
        # With calls not allowed, a token that began the opener is banned at its position.
        banned: dict[int, set[int]] = {}

        def stream(upto: int) -> None:
            nonlocal shown
            text = data[:upto].decode("utf-8", errors="ignore")
            if len(text) > len(shown):
                on_text(text[len(shown) :])
                shown = text

        stop = "max_tokens"
        steps = 0
        while steps < max_tokens:
            steps += 1
            if len(tokens) in banned:
                logits = logits.copy()
                logits[list(banned[len(tokens)])] = -np.inf
            token = int(logits.argmax())
            if engine.is_end_of_generation(token):
                stop = "end"
                break
            offsets.append(len(data))
            tokens.append(token)
            data += engine.token_bytes(token)
            at = opener_position(data, self._opener, at_start_only=self._start_only)
            if at >= 0:
                # Roll back to the token holding the opener's first byte. The token before it
                # is read again for its next-token logits.
                first = max(i for i, offset in enumerate(offsets) if offset <= at)
                if start + first < engine.seq_len(0):
                    del self.held[start + first :]
                    engine.drop(0, start + first)
                    self._refeed_last()
                if allow_call:
                    stream(offsets[first])
                    text = data[: offsets[first]].decode("utf-8", errors="replace")
                    return FreeText(text=text, call=True, stop="call", tokens=first)
                banned.setdefault(first, set()).add(tokens[first])
                data = data[: offsets[first]]
                del tokens[first:], offsets[first:]
                logits = engine.last_logits(0)
                continue
            logits = engine.decode_one(0, token)
            self.held.append(token)
            stream(len(data) - _held_back(data, self._opener, at_start_only=self._start_only))
        stream(len(data))
        self._remember_reply()
        return FreeText(
            text=data.decode("utf-8", errors="replace"), call=False, stop=stop, tokens=len(tokens)
        )

    def _refeed_last(self) -> None:
        last = self.held[-1]
        self.engine.drop(0, len(self.held) - 1)
        self.engine.prefill(0, [last])

    def write_call(
        self, tools: Sequence[ToolSchema], on_provisional: ProvisionalSink, max_tokens: int
    ) -> CallResult:
        result = self.strategy.run(
            CallRequest(
                engine=self.engine,
                format=self.format,
                tools=tools,
                max_tokens=max_tokens,
                on_provisional=on_provisional,
                forced=True,
            )
        )
        # Strategies leave sequence 0 holding the conversation plus the call they wrote (or
        # nothing more when a constrained call failed).
        if self.engine.seq_len(0) == len(self.held) + len(result.tokens):
            self.held.extend(result.tokens)
            if result.calls:
                self._remember_reply()
        else:  # a free-writing strategy that failed: what it wrote is unknown here
            self.engine.drop(0, len(self.held))
        return result
