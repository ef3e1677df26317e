"""The agent's seam to "the model": the protocol the loop calls and the engine-backed model.

Stage: agent (between the agent loop and the engine/decoder). The loop never touches llama.cpp
itself; it asks an :class:`AgentModel` to

1. :meth:`~AgentModel.sync` its resident conversation to a list of messages (prefilling only
   what the KV cache lacks),
2. :meth:`~AgentModel.free_decode` greedily (or, for a server's sampling request, with the
   :class:`Sampling` it asks for: a temperature, stop sequences) until an end-of-generation
   token, the format's call opener or a stop sequence, streaming text,
3. :meth:`~AgentModel.write_calls` with a decoding strategy once the opener was seen: the
   reply's calls;
4. where none of those calls ran (each a repeat) after text that was shown,
   :meth:`~AgentModel.resume_free`: the free text goes on from where the call began, calls no
   longer allowed, instead of a new step writing it again.

The engine-backed :class:`EngineModel` keeps the conversation: it renders it, syncs sequence 0
to it and consults the prompt cache. Everything token-level in a reply (free text, triggers,
hold-back, banned openers, word-start rules, sampling, the calls) is written by the decoder's
one :class:`~weavehost.decode.reply.ReplyWriter` (:mod:`weavehost.decode.reply`), steps 2 and 3
being its :meth:`~weavehost.decode.reply.ReplyWriter.continue_reply` and
:meth:`~weavehost.decode.reply.ReplyWriter.write_calls`.

Every method but ``abort``/``clear_abort`` is blocking and is called from a worker thread, one
at a time, by a task holding the model's :class:`~weavehost.agent.lock.ModelLock`. A scripted
stand-in for tests is the test kit's :mod:`weavehost.testing.model`. Invariants of
:class:`EngineModel`:

* Sequence 0 always holds ``self.held``: the rendered conversation so far, then what the model
  wrote after it. :meth:`sync` renders the whole conversation, keeps the longest common prefix
  of the old and new tokens and prefills only the rest (``engine.stats.prefilled_tokens``
  counts it), so a conversation is never re-prefilled.
* The writer keeps ``self.held`` in step with sequence 0 while it writes. Several calls in one
  reply are the decoder's (:func:`weavehost.decode.several.write_calls`); afterwards sequence 0
  holds the reply as :func:`~weavehost.formats.several.render_calls` renders it, and the reply
  (its free text and all its calls) is remembered once, whole, so the history's next render
  reuses the tokens the model wrote.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import json
import re
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from weavehost.agent.answer_memory import AnswerMemory
from weavehost.agent.model_protocol import AgentModel, IndexedProvisionalSink, ProvisionalSink
from weavehost.agent.outcomes import FreeText, SyncReport
from weavehost.agent.prompt_cache import CacheStatus, PromptCache, common_prefix, stable_prefix
from weavehost.decode import MAX_CALLS, CallResult, DecodeStrategy, ToolSchema
from weavehost.decode.answer_drafts import AnswerDrafts, AnswerForesight, conversation_texts
from weavehost.decode.drafts import DraftSource
from weavehost.decode.reply import ReplyWriter, Sampling, TextSink
from weavehost.engine import Engine, EngineStats
from weavehost.engine.scripts import ScriptTable, scripts_in
from weavehost.engine.segment import Segment
from weavehost.errors import ContextOverflowError, FormatError
from weavehost.formats import ModelFormat, ToolCall, tool_to_openai
from weavehost.formats.base import call_texts, message_calls

__all__ = [
    "AgentModel",
    "EngineModel",
    "FreeText",
    "IndexedProvisionalSink",
    "ProvisionalSink",
    "Sampling",
    "SyncReport",
    "TextSink",
    "allowed_scripts",
    "common_prefix",
]

MAX_REMEMBERED_REPLIES = 64
# At most this many tokens of the generation prompt's tail are read again before a call that
# opens a reply, to hold them as the history will render them (EngineModel).
MAX_REHELD_TOKENS = 4
# Stands for the conversation while the prompt's head is rendered (EngineModel.prompt_head): a
# private-use character around it, so no template writes it by chance.
_CONVERSATION_MARK = "\U000f0ffeWEAVEHOST_CONVERSATION\U000f0ffe"


def allowed_scripts(messages: Sequence[Mapping[str, Any]]) -> int:
    """The scripts an answer may use besides Latin and common characters
    (:func:`~weavehost.engine.scripts.scripts_in`): those of the user's messages (its system
    prompt included) and of the tool results."""
    texts = (
        str(m.get("content") or "") for m in messages if m.get("role") in ("user", "system", "tool")
    )
    return scripts_in("\n".join(texts))


class EngineModel:
    """The real model: one engine, one format, one strategy; sequence 0 holds the conversation."""

    writes_forced_calls = True
    avoids_tokens = True

    def __init__(
        self,
        engine: Engine,
        fmt: ModelFormat,
        strategy: DecodeStrategy,
        *,
        chat_template: str | None = None,
        prompt_cache: PromptCache | None = None,
        answer_drafts: bool = True,
        guidance: bool = False,
        script_guard: bool = False,
        scripts: ScriptTable | None = None,
        no_word_start: np.ndarray | None = None,
        record_margins: bool = False,
        answer_memory: AnswerMemory | None = None,
    ) -> None:
        self.engine, self.format, self.strategy = engine, fmt, strategy
        # This model's answers of earlier conversations, drafted from too; each answer that
        # ends by itself is added (weavehost.agent.answer_memory).
        self.answer_memory = answer_memory
        # Each free token's top-two gap recorded in its FreeText (weavehost.decode.choice):
        # what bench-agent reports where drafted and undrafted answers part. Off: nothing paid.
        self.record_margins = record_margins
        self.chat_template = chat_template
        # The host's guidance in the system text (weavehost.formats.prompt); it changes the
        # rendered prefix, and with it the prompt cache's key (the exact tokens).
        self.guidance = guidance
        # The answer may use only the scripts of the user's messages and the tool results
        # (weavehost.engine.scripts).
        self.script_guard = script_guard
        self._scripts: int | None = None  # those of the conversation last synced (None: any)
        self.prompt_cache = prompt_cache  # consulted only when nothing of a conversation is held
        # Drafts for verified decoding: the texts of the conversation last synced.
        self._drafts: DraftSource | None = None
        # Drafts of greedy free text (the texts of the conversation last synced), verified many
        # tokens a pass where the machine's costs say it pays; None: answer drafts off.
        self.answer_drafts = answer_drafts
        self._answer_drafts: AnswerDrafts | None = None
        self._synced: Sequence[Mapping[str, Any]] = ()  # the conversation last synced
        self.held: list[int] = []
        # Replies as the model wrote them (text -> tokens): the history re-renders a reply as
        # text, and its tokens are reused so the cache keeps exactly what the model wrote.
        self._replies: OrderedDict[str, list[int]] = OrderedDict()
        # Calls as the strategy wrote them (text -> tokens): the history renders a call's text
        # in pieces (its string values apart), which tokenize otherwise than it was written.
        self._calls: OrderedDict[str, list[int]] = OrderedDict()
        self._reply_start = 0
        # Where the last free text stopped at a call: its tokens, and the logits its trigger's
        # first token was chosen from (resume_free continues there; None: nothing to resume).
        self._stopped: tuple[list[int], np.ndarray] | None = None
        self._rendered: tuple[str, list[int]] | None = None  # the last render: key, tokens
        self._head: tuple[str, tuple[str, ...]] = ("", ())  # the last prompt head: key, texts
        # Writes each reply: free text, then its calls; what it learns is the model's state's.
        # ``scripts`` and ``no_word_start``: the vocabulary's tables where the opening built
        # them (else the writer builds them at the first answer that reads them).
        self._writer = ReplyWriter(
            engine, fmt, state=strategy.state_for(engine), scripts=scripts,
            no_word_start=no_word_start,
        )  # fmt: skip
        self._offered: tuple[str, ...] = ()  # tool names of the last render: those on offer

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
        segments = self.format.render_prompt(
            messages, offered, chat_template=self.chat_template, guidance=self.guidance
        )
        tokens = self._tokenize(segments)
        self._rendered = (key, list(tokens))
        return tokens

    def prompt_head(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[ToolSchema]
    ) -> tuple[str, ...]:
        """The texts the prompt shows before the conversation: the system text (the user's or
        the model's own, with any guidance) and the tools as the template describes them,
        split at special tokens' texts; what an answer copies when it says what it can do
        (:data:`~weavehost.decode.answer_drafts.SYSTEM`). Rendered with the conversation
        stood for by a mark, and kept while the system message and the tools stay the same;
        ``()`` where the template refuses that or writes nothing before the mark."""
        system = [m for m in messages[:1] if m.get("role") in ("system", "developer")]
        offered = [tool_to_openai(t.name, t.description, t.parameters) for t in tools]
        key = json.dumps([system, offered], ensure_ascii=False, default=str)
        if self._head[0] == key:
            return self._head[1]
        head: tuple[str, ...] = ()
        marked = [*system, {"role": "user", "content": _CONVERSATION_MARK}]
        try:
            segments = self.format.render_prompt(
                marked, offered, chat_template=self.chat_template, guidance=self.guidance
            )
        except FormatError:
            segments = []
        before, found, _ = "".join(segment.text for segment in segments).partition(
            _CONVERSATION_MARK
        )
        if found:
            specials = sorted(self.engine.special_texts, key=len, reverse=True)
            pieces = re.split("|".join(map(re.escape, specials)), before) if specials else [before]
            head = tuple(piece for piece in pieces if len(piece.strip()) >= 8)  # not a role
        self._head = (key, head)
        return head

    def _tokenize(self, segments: Sequence[Segment]) -> list[int]:
        """The tokens of rendered ``segments``: a reply's text as the model wrote it where a
        segment is that whole text, and a call's where the template wrote the call's text as
        the strategy did (from template text to template text, its values inside), else each
        piece tokenized as its segment says (special tokens parsed only in template text)."""
        spans = self._call_spans(segments)
        tokens: list[int] = []
        offset = 0
        for segment in segments:
            start, end = offset, offset + len(segment.text)
            offset = end
            cuts = sorted(
                {start, end, *(at for span in spans for at in span[:2] if start < at < end)}
            )
            for left, right in itertools.pairwise(cuts):
                inside = next((span for span in spans if span[0] <= left < span[1]), None)
                if inside is not None:
                    if left == inside[0]:
                        tokens.extend(inside[2])
                    continue
                text = segment.text[left - start : right - start]
                whole = left == start and right == end
                written = None if segment.special or not whole else self._replies.get(text)
                if written is not None:
                    tokens.extend(written)
                else:
                    tokens.extend(self.engine.tokenize(text, special=segment.special))
        return tokens

    def _call_spans(self, segments: Sequence[Segment]) -> list[tuple[int, int, list[int]]]:
        """Where the rendered text holds a call as the strategy wrote it: (start, end, its
        tokens), not overlapping. A span begins and ends inside template text, so a tool's
        result or a user's message that spells a call is never read as one."""
        if not self._calls:
            return []
        text = "".join(segment.text for segment in segments)
        special: list[tuple[int, int]] = []
        offset = 0
        for segment in segments:
            if segment.special:
                special.append((offset, offset + len(segment.text)))
            offset += len(segment.text)

        def in_template(at: int) -> bool:
            return any(start <= at < end for start, end in special)

        spans: list[tuple[int, int, list[int]]] = []
        for written, tokens in reversed(self._calls.items()):  # the latest first
            at = text.find(written)
            while at >= 0:
                end = at + len(written)
                free = all(end <= s or e <= at for s, e, _ in spans)
                if free and in_template(at) and in_template(end - 1):
                    spans.append((at, end, tokens))
                at = text.find(written, at + 1)
        return sorted(spans, key=lambda span: span[0])

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
        self._stopped = None
        tokens = self.render(messages, tools)
        self._drafts = DraftSource.from_messages(messages, syntax=self.format.value_syntax)
        self._answer_drafts = None
        head = self.prompt_head(messages, tools)  # drafts off too: answer_foresight reads it
        if self.answer_drafts:
            earlier = self.answer_memory.texts() if self.answer_memory else ()
            self._answer_drafts = AnswerDrafts.from_messages(
                messages, earlier, render_calls=functools.partial(call_texts, self.format),
                head=head,
            )  # fmt: skip
        self._synced = messages  # what an answer may copy, which its memory does not keep
        self._scripts = allowed_scripts(messages) if self.script_guard else None
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
        digest = hashlib.blake2b(np.asarray(tokens, np.int64).tobytes(), digest_size=8).hexdigest()
        return SyncReport(
            total=len(tokens), reused=reused, prefilled=len(tokens) - reused,
            prompt_cache=status, digest=digest,
        )  # fmt: skip

    def answer_foresight(self, token_ids: Sequence[int]) -> AnswerForesight | None:
        """``token_ids``, a text written after the conversation last synced (a turn's answer),
        drafted again with foresight by this model's plan (:meth:`AnswerDrafts.foreseen
        <weavehost.decode.answer_drafts.AnswerDrafts.foreseen>`), from the conversation and
        the prompt's head only: the answer is among the remembered ones once written. For
        ``bench-agent``."""
        drafts = AnswerDrafts.from_messages(
            self._synced, render_calls=functools.partial(call_texts, self.format),
            head=self._head[1],
        )  # fmt: skip
        engine, plan = self.engine, self._writer.pricing.plan
        return drafts.foreseen(token_ids, engine.token_bytes, engine.tokenize, plan)

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
        """The reply's free text (:meth:`~weavehost.decode.reply.ReplyWriter.continue_reply`):
        remembered whole when it ends without a call. ``refused``: tools whose call would not
        run now, taken back where the model's JSON names one (its passes not spent).
        ``made``: the turn's calls (canonical texts), each taken back where the model writes
        it again whole, read as the conversation shows it (:func:`made_calls`). ``avoid``:
        tokens the text may not begin with, a word first (an answer written again)."""
        self._reply_start = self.engine.seq_len(0)
        free = self._continue(on_text, max_tokens, allow_call, sampling, refused, made, avoid)
        self._stopped = None
        if free.call:
            self._stopped = (self.held[self._reply_start :], self.engine.last_logits(0))
        return free

    def resume_free(
        self,
        on_text: TextSink,
        max_tokens: int,
        *,
        refused: Collection[str] = (),
        made: Collection[str] = (),
    ) -> FreeText | None:
        """The last reply's free text, which stopped at a call that was then not run (every
        call of the reply a repeat), continued where that call began, calls no longer allowed
        (the token that began it banned there): the text already shown stays the reply's, and
        at most ``max_tokens`` more follow it. Its ``text`` is the whole reply's; its tokens,
        passes and choices are the continuation's. ``None`` where there is nothing to resume
        (no reply stopped at a call since the last :meth:`sync`)."""
        stopped, self._stopped = self._stopped, None
        if stopped is None:
            return None
        (before, logits), start = stopped, self._reply_start
        if self.held[start : start + len(before)] != before:  # the context changed since
            return None
        self.engine.drop(0, start + len(before), next_logits=logits)
        del self.held[start + len(before) :]
        shown = self.engine.detokenize(before)
        more = self._continue(on_text, max_tokens, False, None, refused, made, (), shown)
        return dataclasses.replace(more, text=shown + more.text)

    def _continue(
        self,
        on_text: TextSink,
        max_tokens: int,
        allow_call: bool,
        sampling: Sampling | None,
        refused: Collection[str],
        made: Collection[str],
        avoid: Collection[int],
        before: str = "",
    ) -> FreeText:
        """Free text on from sequence 0's end (:meth:`free_decode`); ``before``: the reply's
        text already written, with which a reply that ends is remembered."""
        free = self._writer.continue_reply(
            self.held, max_tokens, on_text,
            offered=self._offered, allow_call=allow_call, sampling=sampling,
            drafts=self._answer_drafts, scripts=self._scripts, refused=refused,
            made=made_calls(self._synced, made), margins=self.record_margins, avoid=avoid,
        )  # fmt: skip
        if not free.call:
            self._remember_reply()
            if self.answer_memory is not None and free.stop in ("end", "stop_sequence"):
                self.answer_memory.add(before + free.text, conversation_texts(self._synced))
        return FreeText(
            text=free.text, call=free.call, stop=free.stop, tokens=free.tokens,
            passes=free.passes, seconds=free.seconds, token_ids=free.token_ids,
            margins=free.margins,
            stop_margin=free.stop_margin, choice_log=free.choices,
        )  # fmt: skip

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
        follow, held again in the format's own
        (:meth:`~weavehost.decode.reply.ReplyWriter.write_calls`)."""
        self._hold_reply_start_as_rendered()
        start = len(self.held)
        reply = self._writer.write_calls(
            self.strategy, tools, max_tokens, drafts=self._drafts, budget=budget,
            max_calls=max_calls, made=made, on_provisional=on_provisional, on_final=on_final,
        )  # fmt: skip
        # The driver leaves sequence 0 holding the conversation plus the reply it wrote.
        self.held.extend(reply.tokens)
        if self.engine.seq_len(0) != len(self.held):  # never expected: trust nothing written
            self.engine.drop(0, start)
            del self.held[start:]
        elif reply.calls:
            self._remember_reply()  # once, the whole reply
            for result in reply.results:
                if result.calls and result.text and result.tokens:
                    self._calls[result.text] = list(result.tokens)
            while len(self._calls) > MAX_REMEMBERED_REPLIES:
                self._calls.popitem(last=False)
        return reply.results

    def _hold_reply_start_as_rendered(self) -> None:
        """Where the reply's first call begins with no text before it, sequence 0's last
        tokens held as the next step's history will render them. Qwen2.5's template writes a
        reply of calls with an empty text as ``assistant\n\n<tool_call>`` where the model
        read ``assistant\n`` and wrote ``<tool_call>`` (``docs/agent.md``: that rendering is
        kept, on purpose). Read again before the call is written (one token, one pass), the
        call is decoded after the text the history shows, and the next step reads the call
        from the cache instead of prefilling it again. A call begun by a trigger with a layout
        of its own (bare JSON) is held again after it is written (``_rehold``)."""
        trigger = self._writer.trigger
        if trigger is not None and trigger.layout is not None:
            return
        lead = self._empty_reply_lead
        engine, held = self.engine, self.held
        if lead is None or len(held) != self._reply_start:
            return
        read, rendered = lead
        if held[len(held) - len(read) :] != read:
            return
        keep = len(held) - len(read)
        engine.drop(0, keep)
        del held[keep:]
        try:
            engine.prefill(0, rendered)
        finally:
            held.extend(rendered[: engine.seq_len(0) - keep])

    @functools.cached_property
    def _empty_reply_lead(self) -> tuple[list[int], list[int]] | None:
        """What the generation prompt ends with, and what the history renders in its place
        before a reply's first call when the reply has no text (``None``: the same, more than
        :data:`MAX_REHELD_TOKENS` apart, or the template fails on the probe: then nothing is
        read again, and the step renders as it always did): found once per model by
        rendering a conversation with and without such a reply."""
        user = {"role": "user", "content": "a"}
        reply = {"role": "assistant", "content": "",
                 "tool_calls": [{"name": "a_tool", "arguments": {}}]}  # fmt: skip
        engine = self.engine

        def tokens_of(messages: list[dict[str, Any]]) -> list[int]:
            segments = self.format.render_prompt(
                messages, [], chat_template=self.chat_template, guidance=self.guidance
            )
            return engine.tokenize_segments(segments)

        try:
            asked, answered = tokens_of([user]), tokens_of([user, reply])
        except FormatError:
            return None
        common = common_prefix(asked, answered)
        at = _last_index(answered, engine.tokenize(self.format.layout.opener, special=True))
        read, rendered = asked[common:], answered[common:at]
        too_far = max(len(read), len(rendered)) > MAX_REHELD_TOKENS
        if at < common or not read or read == rendered or too_far:
            return None
        return read, rendered

    def write_call(
        self, tools: Sequence[ToolSchema], on_provisional: ProvisionalSink, max_tokens: int
    ) -> CallResult:
        """A reply of exactly one call (the reply is closed after it)."""
        results = self.write_calls(
            tools, lambda _index, call: on_provisional(call), max_tokens,
            budget=self.engine.n_ctx - len(self.held), max_calls=1,
        )  # fmt: skip
        return results[0]


def made_calls(messages: Sequence[Mapping[str, Any]], made: Collection[str]) -> list[ToolCall]:
    """The calls whose canonical texts are ``made``, as ``messages`` show them (their arguments
    in the order the model read them), else read from the canonical text."""
    shown = {c.canonical(): c for m in messages for c in message_calls(m)}
    return [shown.get(text) or ToolCall(**json.loads(text)) for text in sorted(made)]


def _last_index(tokens: Sequence[int], part: Sequence[int]) -> int:
    """Where ``part`` last begins in ``tokens`` (-1: nowhere, or ``part`` is empty)."""
    n = len(part)
    if not n:
        return -1
    return next(
        (i for i in range(len(tokens) - n, -1, -1) if list(tokens[i : i + n]) == list(part)), -1
    )
