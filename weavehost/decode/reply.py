"""A reply, written: free text token by token until a call, an end or a bound, then its calls.

Stage: decoding (after the conversation's prefill; the one place a reply is written). A
:class:`ReplyWriter` belongs to one opened model and writes each of its replies on sequence 0:
:meth:`ReplyWriter.continue_reply` writes free text until one of the format's call triggers, an
end-of-generation token, a stop sequence or the bound, and :meth:`ReplyWriter.write_calls`
writes the reply's calls from where the trigger began, through the decoder's one driver of
several calls (:func:`weavehost.decode.several.write_calls`). The free text of one reply is one
:class:`~weavehost.decode.continuation.Continuation`.

The free text's guarantees (triggers, hold-back, bans, call text taken back, scripts, the bound,
drafts verified losslessly) are :mod:`weavehost.decode.continuation`'s.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import numpy as np

from weavehost.decode.answer_drafts import AnswerDrafts, DraftPricing
from weavehost.decode.base import CallRequest, DecodeStrategy, ToolSchema
from weavehost.decode.calibration import decode_state
from weavehost.decode.choice import Margins, Sampling
from weavehost.decode.continuation import Continuation
from weavehost.decode.followers import Followers
from weavehost.decode.free_text import Continued, Stop, TextSink
from weavehost.decode.padding import DecodePlan
from weavehost.decode.several import MAX_CALLS, IndexedProvisional, Reply
from weavehost.decode.several import write_calls as write_reply
from weavehost.engine import Engine
from weavehost.engine.scripts import ScriptTable, script_table
from weavehost.engine.vocab import no_word_start
from weavehost.formats.base import ModelFormat, ToolCall, Trigger

if TYPE_CHECKING:
    from weavehost.decode.drafts import DraftSource
    from weavehost.decode.state import DecodeState

__all__ = [
    "Continued",
    "ReplyWriter",
    "Sampling",
    "Stop",
    "TextSink",
]


class ReplyWriter:
    """Writes one model's replies on sequence 0: free text, then the calls a trigger opens.

    One per opened model (its engine and format); it keeps the vocabulary's word-start mask,
    the trigger the last reply stopped at (:meth:`write_calls` writes the calls in its layout),
    and how many drafted tokens of free text a pass carries (:attr:`pricing`: the plan's costs
    and this model's measured acceptance, kept in the model's ``state``). ``plan``: a cost plan
    to price with instead (its acceptance kept by this writer)."""

    def __init__(
        self,
        engine: Engine,
        fmt: ModelFormat,
        *,
        state: DecodeState | None = None,
        plan: DecodePlan | None = None,
        scripts: ScriptTable | None = None,
        no_word_start: np.ndarray | None = None,
    ) -> None:
        self.engine, self.format = engine, fmt
        self._scripts = scripts  # given where the model's opening built it
        self._no_word_start = no_word_start  # likewise
        self._own_pricing = DraftPricing(plan) if plan is not None else None
        self._own_followers = Followers() if plan is not None else None  # kept as its acceptance
        self._state = state
        # The format's call triggers (data: ``<tool_call>``, Qwen's bare ``{"name"`` …).
        self.triggers = [(trigger, trigger.text.encode("utf-8")) for trigger in fmt.triggers]
        self.trigger: Trigger | None = None  # where the last reply's call began (None: no call)

    @property
    def no_word_start(self) -> np.ndarray:
        """Per token: whether it cannot begin a word of an answer (:func:`no_word_start`): given
        at construction (built while the model opened), else built at the first use (~40 ms for
        Qwen's vocabulary, in the gap before the next token)."""
        if self._no_word_start is None:
            self._no_word_start = no_word_start(self.engine)
        return self._no_word_start

    @property
    def scripts(self) -> ScriptTable:
        """Per token of the vocabulary: the scripts it writes, built once per model (kept beside
        the vocabulary table); given at construction, else read back at the first use."""
        if self._scripts is None:
            self._scripts = script_table(self.engine)
        return self._scripts

    @property
    def pricing(self) -> DraftPricing:
        """How many drafted tokens a pass of free text carries, for this model at its current
        thread count (its acceptance measured over its replies)."""
        if self._own_pricing is not None:
            return self._own_pricing
        if self._state is None:
            self._state = decode_state(self.engine)
        return self._state.serve(self.engine).answer_pricing(self.engine)

    @property
    def followers(self) -> Followers:
        """The tokens this model wrote after each token and pair, over its replies."""
        if self._own_followers is not None:
            return self._own_followers
        if self._state is None:
            self._state = decode_state(self.engine)
        return self._state.serve(self.engine).followers

    def continue_reply(
        self,
        held: list[int],
        bound: int,
        on_text: TextSink,
        *,
        offered: Collection[str] = (),
        allow_call: bool = True,
        sampling: Sampling | None = None,
        drafts: AnswerDrafts | None = None,
        scripts: int | None = None,
        refused: Collection[str] = (),
        made: Sequence[ToolCall] = (),
        margins: bool = False,
        avoid: Collection[int] = (),
    ) -> Continued:
        """Continue the reply on sequence 0 (whose tokens ``held`` mirrors, kept in step) until
        a call, an end or ``bound`` tokens, streaming its text to ``on_text``. ``offered``: the
        names of the tools on offer (JSON that names one is a call, or call text where
        ``allow_call`` is false). ``drafts``: where greedy text may be drafted from (verified
        many tokens a pass where :attr:`pricing` says it pays; the text is the same).
        ``scripts``: the bits (:func:`~weavehost.engine.scripts.scripts_in`) of the scripts the
        text may use besides Latin and common characters (``None``: any). ``refused``: tools
        on offer whose call would not run now (the caller's rule): JSON that names one is taken
        back as where calls are not allowed, and the text goes on. ``made``: the turn's calls
        so far; where calls are allowed, JSON that writes one again whole is taken back so
        (:meth:`~weavehost.decode.namings.Namings.repeats`). ``margins``: record each token's
        top-two gap (:class:`~weavehost.decode.choice.Margins`). ``avoid``: tokens the text
        may not begin with; given any, it begins with a word (the caller's rule: an answer
        written again, begun otherwise)."""
        self.trigger = None  # a call asked for without a trigger uses the format's layout
        continuation = Continuation(
            self, held, on_text, offered, allow_call, sampling, drafts, scripts=scripts,
            refused=refused, made=made, avoid=avoid,
        )  # fmt: skip
        continuation.margins = Margins() if margins else None
        before, started = self.engine.stats.passes, time.perf_counter()
        continued = continuation.run(bound)
        self.trigger = continued.trigger
        done = dataclasses.replace(
            continued,
            passes=self.engine.stats.passes - before,
            seconds=time.perf_counter() - started,
            token_ids=tuple(continuation.tokens[: continued.tokens]),
        )
        if continuation.margins is not None:
            done = continuation.margins.recorded(done)
        return done

    def write_calls(
        self,
        strategy: DecodeStrategy,
        tools: Sequence[ToolSchema],
        max_tokens: int,
        *,
        drafts: DraftSource | None = None,
        budget: int | None = None,
        max_calls: int = MAX_CALLS,
        made: Collection[str] = (),
        on_provisional: IndexedProvisional | None = None,
        on_final: IndexedProvisional | None = None,
    ) -> Reply:
        """The reply's calls with ``strategy``, from where :meth:`continue_reply` stopped at a
        trigger (in that trigger's layout; with none, the format's own): each at most
        ``max_tokens``, all at most ``budget`` tokens, at most ``max_calls``, a call equal to
        one in ``made`` ending the reply (:func:`weavehost.decode.several.write_calls`, which
        leaves sequence 0 holding the conversation and :attr:`Reply.tokens`)."""
        trigger, self.trigger = self.trigger, None
        request = CallRequest(
            engine=self.engine, format=self.format, tools=tools, max_tokens=max_tokens,
            forced=True, drafts=drafts,
        )  # fmt: skip
        return write_reply(
            request, strategy, first=trigger, max_calls=max_calls, budget=budget,
            on_provisional=on_provisional, made=made, on_final=on_final,
        )  # fmt: skip
