"""The agent's seam to "the model": the protocol the loop calls and the engine-backed model.

Stage: agent (between the agent loop and the engine/decoder). The loop never touches llama.cpp
itself; it asks an :class:`AgentModel` to

1. :meth:`~AgentModel.sync` its resident conversation to a list of messages (prefilling only
   what the KV cache lacks),
2. :meth:`~AgentModel.free_decode` greedily (or, for a server's sampling request, with the
   :class:`Sampling` it asks for: a temperature, stop sequences) until an end-of-generation
   token, the format's call opener or a stop sequence, streaming text,
3. :meth:`~AgentModel.write_calls` with a decoding strategy once the opener was seen: the
   reply's calls, through the decoder's one driver of several calls
   (:func:`weavehost.decode.several.write_calls`), which decides after each call whether the
   model begins another.

Every method but ``abort``/``clear_abort`` is blocking and is called from a worker thread, one
at a time, by a task holding the model's :class:`~weavehost.agent.lock.ModelLock`. A scripted
stand-in for tests is the test kit's :mod:`weavehost.testing.model`. Invariants of
:class:`EngineModel`:

* Sequence 0 always holds ``self.held``: the rendered conversation so far, then what the model
  wrote after it. :meth:`sync` renders the whole conversation, keeps the longest common prefix
  of the old and new tokens and prefills only the rest (``engine.stats.prefilled_tokens``
  counts it), so a conversation is never re-prefilled.
* When one of the format's triggers appears in free text (``<tool_call>``, Qwen's bare
  ``{"name"`` …), sequence 0 is rolled back to the token that holds its first character; the
  text before it stays as assistant content, and the strategy writes the whole call from there
  in the trigger's layout (``forced=True``), whose head begins with the trigger's text.
* Text that could still become a trigger is held back from the stream, so a call's opening
  characters are never shown as assistant text.
* Several calls in one reply are the decoder's (:func:`weavehost.decode.several.write_calls`);
  afterwards sequence 0 holds the reply as
  :func:`~weavehost.formats.several.render_calls` renders it, and the reply (its free text and
  all its calls) is remembered once, whole.
"""

from __future__ import annotations

import functools
import json
import re
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from weavehost.agent.call_text import CallText

from weavehost.agent.prompt_cache import CacheStatus, PromptCache, common_prefix, stable_prefix
from weavehost.decode import MAX_CALLS, CallRequest, CallResult, DecodeStrategy, ToolSchema
from weavehost.decode import write_calls as write_reply
from weavehost.decode.drafts import DraftSource
from weavehost.engine import Engine, EngineStats
from weavehost.engine.vocab import SPECIAL_MARK, marked_tokens
from weavehost.errors import ContextOverflowError
from weavehost.formats import ModelFormat, ToolCall, tool_to_openai
from weavehost.formats.base import Trigger

__all__ = [
    "AgentModel",
    "EngineModel",
    "FreeText",
    "IndexedProvisionalSink",
    "ProvisionalSink",
    "Sampling",
    "SyncReport",
    "TextSink",
    "common_prefix",
    "first_trigger",
    "opener_position",
]

MAX_REMEMBERED_REPLIES = 64
# A letter, a digit or a non-ASCII character's byte: the text has begun to say something.
_WORD = re.compile(rb"[0-9A-Za-z\x80-\xff]")
# With calls not allowed, how many times call-shaped text is taken back and the token that
# began it banned at its place before the answer is cut there instead (weavehost.agent.call_text).
CALL_TEXT_RETRIES = 4
TextSink = Callable[[str], None]
ProvisionalSink = Callable[[ToolCall], None]
# A reply's provisional calls, each with its place in the reply.
IndexedProvisionalSink = Callable[[int, ToolCall], None]


@dataclass(frozen=True, slots=True)
class SyncReport:
    """What :meth:`AgentModel.sync` did: tokens the conversation has, reused (resident, or
    restored from the prompt cache on a ``hit``) and prefilled."""

    total: int
    reused: int
    prefilled: int
    prompt_cache: CacheStatus = "off"


@dataclass(frozen=True, slots=True)
class FreeText:
    """Free decoding's outcome: the assistant text, and whether a call was opened after it."""

    text: str
    call: bool
    # "end" (end-of-generation token), "call" (opener seen), "max_tokens", "stop_sequence",
    # "call_text" (calls not allowed, and the text turned into a call naming a tool on offer:
    # it is cut where that began, see weavehost.agent.call_text)
    stop: str
    tokens: int = 0


@dataclass(frozen=True, slots=True)
class Sampling:
    """How free text is chosen when a server's sampling request asks for more than the agent's
    greedy answer: ``temperature`` (``None`` or 0: greedy; above 0: drawn from the softmax at
    that temperature with a generator seeded by ``seed``, so one request always gets one
    answer) and ``stop`` sequences (the text ends before the first one; it is not returned)."""

    temperature: float | None = None
    seed: int = 0
    stop: tuple[str, ...] = ()

    @property
    def greedy(self) -> bool:
        return not self.temperature or self.temperature <= 0


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
        self,
        on_text: TextSink,
        max_tokens: int,
        allow_call: bool = True,
        *,
        sampling: Sampling | None = None,
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

    def abort(self) -> None: ...

    def clear_abort(self) -> None: ...

    def stats(self) -> EngineStats: ...


def opener_position(text: bytes, opener: bytes, *, at_start_only: bool) -> int:
    """Where the opener begins in ``text`` (-1 if absent). ``at_start_only``: only after
    leading whitespace (Llama 3's JSON call is the whole reply)."""
    if at_start_only:
        stripped = text.lstrip()
        return len(text) - len(stripped) if stripped.startswith(opener) else -1
    return text.find(opener)


def first_trigger(
    text: bytes, triggers: Sequence[tuple[Trigger, bytes]], skip: int = 0
) -> tuple[int, Trigger]:
    """The trigger that begins earliest in ``text`` at or after ``skip`` and where (``(-1, …)``
    if none does); at one position the longer text wins, as the more specific way of writing a
    call."""
    found = []
    for index, (trigger, text_bytes) in enumerate(triggers):
        if trigger.at_start:
            at = opener_position(text, text_bytes, at_start_only=True)
        else:
            at = text.find(text_bytes, skip)
        if at >= skip:
            found.append((at, -len(text_bytes), index))
    if not found:
        return -1, triggers[0][0]
    at, _, index = min(found)
    return at, triggers[index][0]


def _held_back(text: bytes, opener: bytes, *, at_start_only: bool) -> int:
    """How many trailing bytes of ``text`` could still grow into the opener (not streamed)."""
    if at_start_only:
        stripped = text.lstrip()
        return len(text) if opener.startswith(stripped) else 0
    for size in range(min(len(opener) - 1, len(text)), 0, -1):
        if opener.startswith(text[-size:]):
            return size
    return 0


def _choose(logits: np.ndarray, rng: np.random.Generator | None, temperature: float | None) -> int:
    """The next token: the most likely one, or (with ``rng``) one drawn from the softmax of the
    logits at ``temperature``."""
    if rng is None or not temperature:
        return int(logits.argmax())
    scaled = logits.astype(np.float64) / temperature
    scaled -= scaled.max()  # banned tokens stay at -inf: probability 0
    probs = np.exp(scaled)
    probs /= probs.sum()
    return int(rng.choice(len(probs), p=probs))


def _first_stop(data: bytes, stops: Sequence[bytes]) -> int:
    """Where the earliest stop sequence begins in ``data`` (-1 if none does)."""
    found = [at for at in (data.find(s) for s in stops) if at >= 0]
    return min(found) if found else -1


class EngineModel:
    """The real model: one engine, one format, one strategy; sequence 0 holds the conversation."""

    def __init__(
        self,
        engine: Engine,
        fmt: ModelFormat,
        strategy: DecodeStrategy,
        *,
        chat_template: str | None = None,
        prompt_cache: PromptCache | None = None,
    ) -> None:
        self.engine, self.format, self.strategy = engine, fmt, strategy
        self.chat_template = chat_template
        self.prompt_cache = prompt_cache  # consulted only when nothing of a conversation is held
        # Drafts for verified decoding: the texts of the conversation last synced.
        self._drafts: DraftSource | None = None
        self.held: list[int] = []
        # Replies as the model wrote them (text -> tokens): the history re-renders a reply as
        # text, and its tokens are reused so the cache keeps exactly what the model wrote.
        self._replies: OrderedDict[str, list[int]] = OrderedDict()
        self._reply_start = 0
        self._rendered: tuple[str, list[int]] | None = None  # the last render: key, tokens
        # The format's call triggers (data: ``<tool_call>``, Qwen's bare ``{"name"`` …) and the
        # one the last free decode stopped at, whose layout the next call is written in.
        self._triggers = [(trigger, trigger.text.encode("utf-8")) for trigger in fmt.triggers]
        self._call_trigger: Trigger | None = None
        self._offered: tuple[str, ...] = ()  # tool names of the last render: those on offer

    @property
    def n_ctx(self) -> int:
        return self.engine.n_ctx

    @functools.cached_property
    def _no_word_start(self) -> np.ndarray:
        """Per token of the vocabulary: whether it cannot begin a word of an answer — its text,
        after leading whitespace, is empty or begins with neither a letter, a digit nor a
        non-ASCII character (so ``{``, ``(``, ``"``, ``<``, a line break alone), or it is a
        special, control or end-of-generation token. Built once per model from the engine's
        vocabulary table (:func:`~weavehost.engine.vocab.marked_tokens`, kept on disk)."""
        out = np.fromiter(
            map(_begins_no_word, marked_tokens(self.engine)), dtype=bool, count=self.engine.n_vocab
        )
        out[list(self.engine.end_of_generation_tokens)] = True
        return out

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
        """Empty the KV cache; the next :meth:`sync` prefills the whole conversation (after its
        stable prefix, when the prompt cache has that)."""
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
        self._offered = tuple(t.name for t in tools)
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
        self._drafts = DraftSource.from_messages(messages, syntax=self.format.value_syntax)
        if len(tokens) >= engine.n_ctx:
            raise ContextOverflowError(
                f"the conversation takes {len(tokens)} tokens, more than the context size of "
                f"{engine.n_ctx}; start a new session or raise the context size"
            )
        if engine.seq_len(0) != len(self.held):  # someone else used the context: trust nothing
            engine.clear()
            self.held = []
        common = common_prefix(self.held, tokens)
        status: CacheStatus = "off"
        if common == 0 and self.prompt_cache is not None:
            # A cold sync: the stable prefix (system prompt, tools) may be saved on disk. The
            # sentinel renders must not replace the view's render that the context policy keeps.
            rendered = self._rendered
            stable = stable_prefix(messages, tokens, lambda view: self.render(view, tools))
            self._rendered = rendered
            if 0 < stable < len(tokens):
                engine.clear()
                try:
                    status = self.prompt_cache.prefill(engine, 0, tokens[:stable])
                finally:
                    self.held = list(tokens[: engine.seq_len(0)])
                common = stable
        # The last token is read again when nothing is new, so its next-token logits exist.
        keep = min(common, len(tokens) - 1)
        engine.drop(0, keep)
        self.held = self.held[:keep]
        try:
            engine.prefill(0, tokens[keep:])
        finally:
            self.held = list(tokens[: engine.seq_len(0)])
        reused = 0 if status == "miss" else keep  # a miss prefilled its prefix just now
        return SyncReport(
            total=len(tokens), reused=reused, prefilled=len(tokens) - reused, prompt_cache=status
        )

    def free_decode(
        self,
        on_text: TextSink,
        max_tokens: int,
        allow_call: bool = True,
        *,
        sampling: Sampling | None = None,
    ) -> FreeText:
        engine = self.engine
        start = engine.seq_len(0)
        self._reply_start = start
        self._call_trigger = None  # a call asked for without a trigger uses the format's layout
        sampling = sampling or Sampling()
        rng = None if sampling.greedy else np.random.default_rng(sampling.seed)
        stops = [s.encode("utf-8") for s in sampling.stop if s]
        logits = engine.last_logits(0)
        tokens: list[int] = []
        offsets: list[int] = []
        data = b""
        shown = ""
        # With calls not allowed, a token that began the opener is banned at its position.
        banned: dict[int, set[int]] = {}
        # With calls not allowed, call-shaped text written past the ban ends the answer.
        call_text = None if allow_call else CallText(self._offered)
        skip = 0  # bytes before this are prose: a trigger there named no tool on offer
        retries = 0  # call-shaped texts taken back so far
        words: set[int] = set()  # where a call (opener or text) was taken back: a word must come
        worded = False  # the answer has written a letter or a digit

        def take_back(first: int) -> None:
            """The text and sequence 0 cut back to before token ``first``, which is banned at
            its place, where a word must now begin."""
            nonlocal data, worded, logits
            self._roll_back(start + first)
            banned.setdefault(first, set()).add(tokens[first])
            words.add(first)
            data = data[: offsets[first]]
            del tokens[first:], offsets[first:]
            if call_text is not None:
                call_text.cut(len(data))
            worded = worded and _WORD.search(data) is not None
            logits = engine.last_logits(0)

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
            if len(tokens) in words:  # call text was taken back here: a word comes instead
                logits = np.where(self._no_word_start, -np.inf, logits)
            token = _choose(logits, rng, sampling.temperature)
            if engine.is_end_of_generation(token):
                stop = "end"
                break
            offsets.append(len(data))
            tokens.append(token)
            data += engine.token_bytes(token)
            cut = _first_stop(data, stops)
            if cut >= 0:  # the text ends before the stop sequence; this token is not read
                data = data[:cut]
                stop = "stop_sequence"
                break
            at, trigger = first_trigger(data, self._triggers, skip)
            verdict = self._names_a_tool(data[at:], trigger) if at >= 0 else None
            while verdict is False:  # JSON that names no tool on offer: prose, look further
                skip = at + 1
                at, trigger = first_trigger(data, self._triggers, skip)
                verdict = self._names_a_tool(data[at:], trigger) if at >= 0 else None
            if verdict:
                # Roll back to the token holding the opener's first byte. The token before it
                # is read again for its next-token logits.
                first = max(i for i, offset in enumerate(offsets) if offset <= at)
                if allow_call:
                    self._roll_back(start + first)
                    self._call_trigger = trigger
                    stream(offsets[first])
                    text = data[: offsets[first]].decode("utf-8", errors="replace")
                    return FreeText(text=text, call=True, stop="call", tokens=first)
                take_back(first)
                continue
            # Past a banned trigger, a call written another way is taken back and the token
            # that began it banned there, a few times; then it ends the answer.
            found, call_held = call_text.scan(data) if call_text else (-1, len(data))
            if found >= 0:  # this token is not read
                begins = found + len(data[found:]) - len(data[found:].lstrip())
                first = max(i for i, offset in enumerate(offsets) if offset <= begins)
                unseen = offsets[first] >= len(shown.encode("utf-8"))
                if retries < CALL_TEXT_RETRIES and unseen:
                    retries += 1
                    take_back(first)
                    continue
                data = data[: max(found, len(shown.encode("utf-8")))]  # keep what was shown
                stop = "call_text"
                break
            logits = engine.decode_one(0, token)
            self.held.append(token)
            held = max(_held_back(data, b, at_start_only=t.at_start) for t, b in self._triggers)
            for stop_bytes in stops:  # nor is text that could still become a stop sequence
                held = max(held, _held_back(data, stop_bytes, at_start_only=False))
            # A call still undecided is not shown, nor is text that could become call text,
            # nor, where calls may not be made, an answer's opening marks before its first word
            # (``>`` fused with ``{"name"`` begins Qwen's call text: it is taken back whole).
            if call_text is not None and not worded:
                worded = _WORD.search(data, 0, call_held) is not None
                call_held = call_held if worded else 0
            stream(min(at if at >= 0 else len(data) - held, call_held))
        stream(len(data))
        self._remember_reply()
        return FreeText(
            text=data.decode("utf-8", errors="replace"), call=False, stop=stop, tokens=len(tokens)
        )

    def _names_a_tool(self, text: bytes, trigger: Trigger) -> bool | None:
        """Whether what the model wrote from ``trigger`` on is a call: its own tags always are
        (the strategy then picks the tool); a trigger with a layout of its own (JSON that may be
        a call) is one only once it names a tool on offer, and is not once it cannot (None:
        not yet known)."""
        if trigger.layout is None:
            return True
        written = text.decode("utf-8", errors="ignore")
        namings = [trigger.layout.naming(name) for name in self._offered]
        if any(written.startswith(naming) for naming in namings):
            return True
        return None if any(naming.startswith(written) for naming in namings) else False

    def _roll_back(self, position: int) -> None:
        """Sequence 0 cut back to ``position``, with next-token logits there."""
        if position < self.engine.seq_len(0):
            del self.held[position:]
            self.engine.drop(0, position)
            self._refeed_last()

    def _refeed_last(self) -> None:
        last = self.held[-1]
        self.engine.drop(0, len(self.held) - 1)
        self.engine.prefill(0, [last])

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
        """The reply's calls, each at most ``max_tokens``, all of them (and what separates and
        closes them) at most ``budget`` tokens, at most ``max_calls``: one result per call
        written, a failed one last; a call equal to one in ``made`` (canonical texts of the
        turn's earlier calls) ends the reply. ``on_final(index, call)`` hears each kept call as
        soon as it is final, while the reply goes on. A call begun by a trigger with a layout
        of its own (Qwen's bare JSON) is written in that layout and then, where more may
        follow, held again in the format's own (:func:`weavehost.decode.several.write_calls`).
        """
        trigger, self._call_trigger = self._call_trigger, None
        request = CallRequest(
            engine=self.engine,
            format=self.format,
            tools=tools,
            max_tokens=max_tokens,
            forced=True,
            drafts=self._drafts,
        )
        start = len(self.held)
        reply = write_reply(
            request,
            self.strategy,
            first=trigger,
            max_calls=max_calls,
            budget=budget,
            on_provisional=on_provisional,
            made=made,
            on_final=on_final,
        )
        # The driver leaves sequence 0 holding the conversation plus the reply it wrote.
        self.held.extend(reply.tokens)
        if self.engine.seq_len(0) != len(self.held):  # never expected: trust nothing written
            self.engine.drop(0, start)
            del self.held[start:]
        elif reply.calls:
            self._remember_reply()  # once, the whole reply
        return reply.results

    def write_call(
        self, tools: Sequence[ToolSchema], on_provisional: ProvisionalSink, max_tokens: int
    ) -> CallResult:
        """A reply of exactly one call (the reply is closed after it)."""
        results = self.write_calls(
            tools, lambda _index, call: on_provisional(call), max_tokens,
            budget=self.engine.n_ctx - len(self.held), max_calls=1,
        )  # fmt: skip
        return results[0]


def _begins_no_word(piece: bytes) -> bool:
    """A token's bytes (a special one marked ``b"\\xff"``) begin no word: after leading
    whitespace, nothing, or neither a letter, a digit nor a non-ASCII character."""
    first = piece.lstrip()[:1]
    return not first or first == SPECIAL_MARK or not (first.isalnum() or first >= b"\x80")
