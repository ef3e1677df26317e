"""One reply's free text, written token by token: :class:`Continuation`, the loop and its steps.

Stage: decoding (the reply writer's, :class:`weavehost.decode.reply.ReplyWriter`, which makes one
per reply). Its steps are named (choose under the bans and the word-start rule, stop sequences,
scan for triggers, scan for call text, take back, read, hold back, stream), so a writer that
drafts many tokens a pass replaces none of them: drafted or not, the same steps act on the same
tokens in the same order.


* Sequence 0 holds the conversation, then the reply so far; the caller's ``held`` list (its
  tokens) is kept in step with it at every token, also when decoding stops with an error.
* When one of the format's triggers appears in free text (``<tool_call>``, Qwen's bare
  ``{"name"`` …), sequence 0 is rolled back to the token that holds its first character, with
  next-token logits there (those that token was chosen from, kept: no pass reads the token
  before it again); the text before it is the reply's free text, and
  :meth:`ReplyWriter.write_calls` writes the whole call from there in the trigger's layout
  (``forced=True``), whose head begins with the trigger's text. A trigger with a layout of its
  own (JSON that may be a call) is one only once it names a tool on offer; JSON that cannot is
  prose, and the scan looks past it.
* Text that could still become a trigger or a stop sequence is held back from the stream, so a
  call's opening characters are never shown as text; a stop sequence ends the text before it.
  What is shown decides where call text is cut, so it is decided a token at a time, drafted or
  not; it is sent before each pass and at the end (the tokens a pass kept in one piece).
* JSON that names a refused tool (the caller's: one whose call would not run now) is taken back
  as soon as its name has begun and only refused tools' names begin so, before the rest of the
  name is written, as a trigger is where calls are not allowed, and the reply goes on; after a
  format's tag too, read in the format's own layout (:class:`~weavehost.decode.namings.Namings`).
  So is JSON that writes one of the turn's calls (``made``) again whole, through its arguments.
* With calls not allowed, the token that began a trigger is banned at its place, and call-shaped
  text written another way (:class:`~weavehost.decode.call_text.CallText`) is taken back the
  same way up to :data:`CALL_TEXT_RETRIES` times, then cuts the reply where it began (what was
  shown stays). Where either was taken back the next token must begin a word (after any spaces,
  a letter, a digit or a non-ASCII character: no mark, no special token, no end of turn), a
  token of marks that began it is banned for the rest of the reply, and an answer's opening
  marks are not shown before its first word.
* Where the caller names the scripts allowed (those of the user's messages and the tool
  results), no token that writes another script is chosen
  (:class:`~weavehost.engine.scripts.ScriptTable`), drafted or not: every mask on the next
  token (the bans at a place, the word-start rule, the scripts) is applied by one step,
  :meth:`Continuation.masked`.
* At most ``bound`` tokens are chosen; greedy unless a :class:`Sampling` asks for a
  temperature, drawn then from a generator seeded per request.
* Drafted, every token chosen is counted after the one or two before it (the model's
  :class:`~weavehost.decode.followers.Followers`); where no text holds a draft, those counts
  draft the tokens the model wrote most often there (:meth:`Continuation.followers_draft`).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING

import numpy as np

from weavehost.decode.answer_drafts import (
    CONVERSATION,
    START,
    AnswerDrafts,
    DraftKind,
    DraftPricing,
)
from weavehost.decode.call_again import BRANCH_KIND, Branch, branch_pays
from weavehost.decode.call_text import CallText
from weavehost.decode.choice import Margins, Sampling, choose_token
from weavehost.decode.followers import FOLLOWERS
from weavehost.decode.free_text import Continued, Stop, TextSink
from weavehost.decode.namings import Namings, made_texts
from weavehost.decode.padding import MAX_DRAFT_ROWS, run_shaped
from weavehost.decode.trigger_scan import held_back
from weavehost.engine import Row
from weavehost.formats.base import ToolCall, Trigger

if TYPE_CHECKING:
    from weavehost.decode.reply import ReplyWriter

__all__ = ["CALL_TEXT_RETRIES", "KEPT_LOGITS", "Continuation"]

# With calls not allowed, how many times call-shaped text is taken back and the token that
# began it banned at its place before the answer is cut there instead (decode.call_text).
CALL_TEXT_RETRIES = 4
# The latest tokens whose logits a reply keeps (~0.6 MB each on a 152k vocabulary): rolling
# back to one (a trigger, call text taken back, found a few tokens on) needs no pass.
KEPT_LOGITS = 32
# A letter, a digit or a non-ASCII character's byte: the text has begun to say something.
_WORD = re.compile(rb"[0-9A-Za-z\x80-\xff]")


class Continuation:
    """One reply's free text as it is written: the tokens chosen, their text, what was shown,
    and what is banned where. :meth:`run` is the loop; each step it takes is a method.

    Drafted (greedy text with ``drafts``): :meth:`read` reads a chosen token with the draft's
    next tokens after it in one pass, each with logits, and keeps them *ahead*: in sequence 0
    but not yet in ``held``. The loop goes on exactly as without them: :meth:`choose` picks the
    next token from the logits after the last token read, and where that is the next token
    ahead, :meth:`read` only takes its logits (no pass). The first token chosen otherwise drops
    everything ahead from sequence 0 (:meth:`drop_ahead`), as does any roll-back or the end of
    the loop, so the text, the tokens held and every check are those of the undrafted loop."""

    def __init__(
        self,
        writer: ReplyWriter,
        held: list[int],
        on_text: TextSink,
        offered: Collection[str],
        allow_call: bool,
        sampling: Sampling | None,
        drafts: AnswerDrafts | None = None,
        *,
        scripts: int | None = None,
        refused: Collection[str] = (),
        made: Sequence[ToolCall] = (),
        avoid: Collection[int] = (),
    ) -> None:
        self.writer, self.engine, self.held = writer, writer.engine, held
        self.on_text, self.offered, self.allow_call = on_text, tuple(offered), allow_call
        # The tools JSON may name, those whose call is taken back where JSON names one, and
        # where calls may be made, the layout a tag's JSON is judged in while one is refused
        # or the turn made calls (each taken back where written again whole).
        own, fmt = writer.format.layout if allow_call else None, writer.format
        self.namings = Namings(self.offered, refused, own, made_texts(fmt, made) if made else None)
        self.start = self.engine.seq_len(0)
        self.sampling = sampling or Sampling()
        self.rng = None if self.sampling.greedy else np.random.default_rng(self.sampling.seed)
        self.stops = [s.encode("utf-8") for s in self.sampling.stop if s]
        self.logits = self.engine.last_logits(0)
        self.tokens: list[int] = []
        self.lead = held[-2:]  # the tokens before the text: the first tokens' context
        self.offsets: list[int] = []  # where each token's bytes begin in data
        self.data = b""
        self.shown, self.unsent_text = "", ""  # shown a token at a time; its end not sent yet
        # With calls not allowed, a token that began a trigger is banned at its position (the
        # caller's ``avoid`` at the first), and call-shaped text written past the ban is taken
        # back or ends the answer.
        self.banned: dict[int, set[int]] = {0: set(avoid)} if avoid else {}
        self.call_text = None if allow_call else CallText(self.offered)
        self.skip = 0  # bytes before this are prose: a trigger there named no tool on offer
        self.retries = 0  # call-shaped texts taken back so far
        # Where a call was taken back, and where an answer begins again: a word must come.
        self.words: set[int] = {0} if avoid else set()
        # Marks (no letter, no digit) that began call text taken back: banned at every later
        # place too (a new try would cost the passes to write it before it is taken back).
        self.openers: set[int] = set()
        self.worded = False  # the answer has written a letter or a digit
        self.scripts = scripts  # the scripts the text may use besides Latin (None: any)
        # Drafts are verified against the greedy choice only: a sampled token is not an argmax.
        self.drafts = drafts if self.rng is None else None
        # Drafted tokens in sequence 0 after ``held``, not chosen yet, each with its logits; the
        # draft's kind (DraftPricing.kind); whether ahead[0] follows an accepted drafted token.
        self.ahead: list[tuple[int, np.ndarray]] = []
        self.ahead_kind: DraftKind | None = (CONVERSATION, 0)
        self.ahead_later = False
        # A draft no row paid for, checked against the tokens chosen instead (count_draft):
        # its kind, its tokens not yet reached, and whether its first token was kept.
        self.unsent: tuple[DraftKind, list[int], bool] | None = None
        # Per token, the logits it was chosen from, kept for the last KEPT_LOGITS (None before):
        # a roll-back to one of them has its next-token logits without reading a token again.
        self.chosen_from: list[np.ndarray | None] = []
        self.steps = 0  # tokens chosen so far (what the bound counts)
        self.margins: Margins | None = None  # each choice's top-two gap, where asked
        # The token a take-back of a call begun again would choose instead, read beside it.
        self.branch: Branch | None = None
        self.bound = 0

    def run(self, bound: int) -> Continued:
        """Write until a call, an end, a stop sequence, call text that cannot be taken back
        again, or ``bound`` tokens chosen."""
        self.bound = bound
        try:
            return self._run(bound)
        finally:
            self.drop_ahead()  # drafted tokens never chosen leave sequence 0
            self.close_branch()
            self.send()

    def _run(self, bound: int) -> Continued:
        stop: Stop = "max_tokens"
        while self.steps < bound:
            self.steps += 1
            token = self.choose()
            self.count_draft(token)
            if self.engine.is_end_of_generation(token):
                stop = "end"
                break
            self.take(token)
            if self.cut_at_stop_sequence():  # this token is not read
                stop = "stop_sequence"
                break
            at, trigger = self.scan_triggers()
            if trigger is not None:
                first = self.token_at(at)
                if self.allow_call and not self.namings.refuses(self.data[at:], trigger):
                    return self.stop_for_call(first, trigger)
                self.take_back(first)
                continue
            found, call_held = self.scan_call_text()
            if found >= 0:  # this token is not read
                begins = found + len(self.data[found:]) - len(self.data[found:].lstrip())
                first = self.token_at(begins)
                unseen = self.offsets[first] >= len(self.shown.encode("utf-8"))
                if self.retries < CALL_TEXT_RETRIES and unseen:
                    self.retries += 1
                    self.take_back(first)
                    continue
                self.data = self.data[: max(found, len(self.shown.encode("utf-8")))]
                stop = "call_text"  # what was shown stays the answer
                break
            self.read(token, judging=at >= 0)
            self.stream(min(self.hold_back(at), self.hold_back_call_text(call_held)))
        tag = self.namings.undecided_tag(self.data, self.writer.triggers, self.skip)
        if tag is not None:  # still judged where the text stopped: a call, as an unjudged tag is
            return self.stop_for_call(self.token_at(tag[0]), tag[1])
        self.stream(len(self.data))
        text = self.data.decode("utf-8", errors="replace")
        return Continued(text=text, stop=stop, tokens=len(self.tokens))

    def choose(self) -> int:
        """The next token from :meth:`masked` logits: the most likely one, or one drawn at the
        sampling's temperature. A drafted token is kept only where this chooses it."""
        logits = self.masked(self.logits)
        token = choose_token(logits, self.rng, self.sampling.temperature)
        if self.margins is not None:  # asked for: by how much it won (decode.choice)
            self.margins.record(len(self.tokens), logits, token)
        return token

    def masked(self, logits: np.ndarray) -> np.ndarray:
        """``logits`` under every rule at this place: the bans, the word-start rule where a
        call was taken back, and the scripts the text may not use (judged after the text so
        far, whose last character may be unfinished). Drafted or not, every choice's mask is
        applied by :meth:`mask`."""
        place = len(self.tokens)
        bans = self.banned.get(place, set()) | self.openers
        return self.mask(logits, bans, place in self.words, self.data)

    def mask(self, logits: np.ndarray, bans: set[int], word: bool, data: bytes) -> np.ndarray:
        """``logits`` with ``bans`` banned, only a word's start where ``word`` (call text was
        taken back there), and no script the text may not use after ``data``: the one place
        a mask is applied."""
        if bans:
            logits = logits.copy()
            logits[list(bans)] = -np.inf
        if word:
            logits = np.where(self.writer.no_word_start, -np.inf, logits)
        if self.scripts is not None:  # no switch to a script the user and the tools did not use
            banned = self.writer.scripts.banned(self.scripts, data)
            logits = np.where(banned, -np.inf, logits)
        return logits

    def chosen_instead(self, place: int) -> int | None:
        """The token the loop chooses at ``place`` once the token there is taken back
        (:meth:`take_back`: it banned there, and everywhere if it is marks, and a word first),
        greedy; ``None`` where that would end the text, or its logits are no longer kept."""
        logits, token = self.chosen_from[place], self.tokens[place]
        if logits is None:
            return None
        bans = self.banned.get(place, set()) | self.openers | {token}
        masked = self.mask(logits, bans, True, self.data[: self.offsets[place]])
        instead = int(masked.argmax())
        if masked[instead] == -np.inf or self.engine.is_end_of_generation(instead):
            return None
        return instead

    def take(self, token: int) -> None:
        """``token`` written into the text (not read yet: a check may still take it back)."""
        if len(self.chosen_from) >= KEPT_LOGITS:
            self.chosen_from[-KEPT_LOGITS] = None
        self.chosen_from.append(self.logits)
        self.offsets.append(len(self.data))
        if self.drafts is not None:
            self.writer.followers.add(self.context(), token)
        self.tokens.append(token)
        self.data += self.engine.token_bytes(token)

    def cut_at_stop_sequence(self) -> bool:
        """Whether the text now holds a stop sequence; it then ends before it."""
        found = [at for at in (self.data.find(s) for s in self.stops) if at >= 0]
        if not found:
            return False
        self.data = self.data[: min(found)]
        return True

    def scan_triggers(self) -> tuple[int, Trigger | None]:
        """Where a call begins in the text and with which trigger (``None``: none does yet):
        :meth:`Namings.scan`, the prose it finds skipped from then on."""
        at, trigger, self.skip = self.namings.scan(self.data, self.writer.triggers, self.skip)
        return at, trigger

    def scan_call_text(self) -> tuple[int, int]:
        """Past a banned trigger, a call written another way: where it begins (-1: nowhere),
        and from where the text could still become one."""
        if self.call_text is None:
            return -1, len(self.data)
        return self.call_text.scan(self.data)

    def token_at(self, at: int) -> int:
        """The index of the token that holds byte ``at`` of the text."""
        return max(i for i, offset in enumerate(self.offsets) if offset <= at)

    def stop_for_call(self, first: int, trigger: Trigger) -> Continued:
        """Sequence 0 back to token ``first``, which holds the trigger's first byte; the text
        before it is the reply's free text, shown whole."""
        self.roll_back(self.start + first)
        self.stream(self.offsets[first])
        text = self.data[: self.offsets[first]].decode("utf-8", errors="replace")
        return Continued(text=text, stop="call", tokens=first, trigger=trigger)

    def take_back(self, first: int) -> None:
        """The text and sequence 0 cut back to before token ``first``, which is banned at its
        place, where a word must now begin."""
        self.roll_back(self.start + first)
        opener = self.tokens[first]
        self.banned.setdefault(first, set()).add(opener)
        self.words.add(first)
        if self.bans_everywhere(opener):
            self.openers.add(opener)
        self.data = self.data[: self.offsets[first]]
        del self.tokens[first:], self.offsets[first:], self.chosen_from[first:]
        if self.call_text is not None:
            self.call_text.cut(len(self.data))
        self.worded = self.worded and _WORD.search(self.data) is not None
        self.logits = self.engine.last_logits(0)

    def bans_everywhere(self, opener: int) -> bool:
        """Whether ``opener``, which began call text taken back, is banned at every later place
        of the reply: a token of marks (no letter, no digit), which prose can do without."""
        return _WORD.search(self.engine.token_bytes(opener)) is None

    def roll_back(self, position: int) -> None:
        """Sequence 0 cut back to ``position``, with next-token logits there: those the token
        at ``position`` was chosen from, where this reply chose it lately, else its last token
        is read again."""
        self.drop_ahead()
        self.unsent = None  # its text followed text that is no longer there
        if self.branch is not None and position < self.branch.position:
            self.close_branch()  # the text the branch followed is no longer there
        engine, held = self.engine, self.held
        if position < engine.seq_len(0):
            del held[position:]
            place = position - self.start
            kept = self.chosen_from[place] if 0 <= place < len(self.chosen_from) else None
            if kept is not None:
                engine.drop(0, position, next_logits=kept)
                return
            engine.drop(0, position)
            last = held[-1]
            engine.drop(0, len(held) - 1)
            engine.prefill(0, [last])

    def read(self, token: int, *, judging: bool = False) -> None:
        """``token`` read on sequence 0: the next token's logits. Where it is the drafted token
        ahead, it is in sequence 0 already; otherwise it is read with a new draft after it,
        where one pays (:meth:`draft_after`), or, where the text ends in JSON still judged
        (``judging``: a trigger the scan found, undecided), the rest of a call made."""
        pricing = self.writer.pricing if self.drafts is not None else None
        if self.ahead:
            if self.ahead[0][0] == token:
                self.logits = self.ahead.pop(0)[1]
                self.ahead_later = True
                self.held.append(token)
                self.engine.count_accepted(1)
                return
            self.drop_ahead()
        self.send()  # before a pass: what the tokens kept since the last one showed
        guess = self.branch_guess(token)
        draft = self.draft_after(pricing, guess) if pricing is not None else []
        draft = draft or (self.repeat_draft() if judging else [])
        self.ahead_later = False
        if not draft:
            self.logits = self.engine.decode_one(0, token)
            self.held.append(token)
            return
        rows = [Row(token, (0,), logits=True)]
        rows += [Row(t, (0,), logits=True, draft=True) for t in draft]
        if pricing is not None and self.ahead_kind is not None and self.ahead_kind[0] == START:
            self.open_branch(pricing, len(rows))
        branch = self.branch if self.branch is not None and self.branch.logits is None else None
        if branch is not None:  # opened for this pass: its row last, its cell gone after it
            rows.append(branch.row())
        # Padding rows go on the engine's last sequence: never sequence 0 itself.
        shape = pricing.plan.shape_for if pricing and self.engine.n_seq_max > 1 else None
        try:
            out = run_shaped(self.engine, rows, shape)
        finally:
            if branch is not None:
                Branch.close(self.engine)
        self.held.append(token)
        if branch is not None:
            branch.logits = out.pop()
        self.logits = out[0]
        self.ahead = list(zip(draft, out[1:], strict=True))

    def open_branch(self, pricing: DraftPricing, rows: int) -> None:
        """Where the token read now begins a call made again (a :data:`START` draft after
        it) and a branch's row pays in its pass of ``rows`` rows and fits in the cache: a
        branch for the token a take-back there would choose instead
        (:mod:`weavehost.decode.call_again`)."""
        self.close_branch()
        place, engine = len(self.tokens) - 1, self.engine
        width = pricing.plan.shape_for(rows + 1, rows + 1)[0]  # its pass, padding rows too
        if not branch_pays(pricing, rows) or engine.kv_cells + width > engine.n_ctx:
            return  # no row pays, or the cache has no cell for it
        if (instead := self.chosen_instead(place)) is not None:
            self.branch = Branch.open(engine, place, instead)

    def close_branch(self) -> None:
        """The branch, never followed, forgotten (counted so: its guess was not kept)."""
        if self.branch is not None:
            if self.branch.logits is not None:
                self.writer.pricing.count(BRANCH_KIND, False, False)
            self.branch = None

    def branch_guess(self, token: int) -> int | None:
        """Where ``token``, read now, is the one a branch read at this place (the call begun
        again taken back there, the text before it as it was): the token its logits choose
        next under this place's masks, drafted first (verified as any draft); else ``None``."""
        branch, place = self.branch, len(self.tokens) - 1
        if branch is None or not branch.follows(place, token, self.engine.seq_len(0)):
            return None
        self.branch = None
        assert branch.logits is not None
        guess = int(self.masked(branch.logits).argmax())
        return None if self.engine.is_end_of_generation(guess) else guess

    def count_draft(self, token: int) -> None:
        """A drafted token ahead was reached by this choice: kept if ``token`` is it. Counted at
        the choice, so a reply that ends, stops or is taken back there counts it too. So is an
        unsent draft's next token (the draft tokenized as it would have been sent, so sent or
        not its tokens are counted alike), beside a lesser draft sent in its place or not."""
        if self.drafts is None:
            return
        if self.ahead and self.ahead_kind is not None:  # None: a repeat's rest, no kind's rate
            kept = self.ahead[0][0] == token
            self.writer.pricing.count(self.ahead_kind, self.ahead_later, kept)
        if self.unsent is not None:
            kind, left, later = self.unsent
            kept = left[0] == token
            self.writer.pricing.count(kind, later, kept)
            self.unsent = (kind, left[1:], True) if kept and len(left) > 1 else None

    def draft_after(self, pricing: DraftPricing, guess: int | None = None) -> list[int]:
        """The drafted tokens to read after the text so far (its last token being read now),
        within the bound and the context (:meth:`AnswerDrafts.tokens_after`); after a branch's
        ``guess`` (:meth:`branch_guess`), first, where one is given (a draft of its kind)."""
        assert self.drafts is not None
        engine = self.engine
        room = min(
            self.bound - self.steps,  # each drafted token would be one more choice
            engine.n_ctx - engine.seq_len(0) - 1,
            engine.n_batch - 1,
        )
        if guess is not None and room > 0:
            data, room = self.data + engine.token_bytes(guess), room - 1
            draft, _, _ = self.drafts.tokens_after(data, pricing, room, engine.tokenize)
            self.ahead_kind, self.unsent = BRANCH_KIND, None
            return self.until_decided([guess, *draft])
        draft, kind, passed = self.drafts.tokens_after(
            self.data, pricing, room, engine.tokenize, self.decided_at
        )
        if not draft and passed is None and room > 0:  # no text holds it: the model's own
            draft, kind = self.followers_draft(pricing, room)
        self.ahead_kind = kind
        if draft and passed is None:
            self.unsent = None  # the best draft, sent, is counted as it is reached instead
        elif passed and self.unsent is None and (tokens := engine.tokenize(passed[1])):
            self.unsent = (passed[0], tokens[:MAX_DRAFT_ROWS], False)
        return self.until_decided(draft)

    def context(self) -> list[int]:
        """The last two tokens before the next one (those before the text where it has fewer)."""
        return [*self.lead, *self.tokens[-2:]][-2:]

    def followers_draft(self, pricing: DraftPricing, room: int) -> tuple[list[int], DraftKind]:
        """:meth:`draft_after`'s draft where no text holds one: the tokens the model wrote most
        often after these (:meth:`Followers.draft <weavehost.decode.followers.Followers.
        draft>`), as many as its kind's rates pay for, and its kind; where none pays, none, the
        draft kept as unsent (checked against the tokens chosen instead: measured unsent)."""
        tokens, seen = self.writer.followers.draft(self.context(), min(room, MAX_DRAFT_ROWS))
        if not tokens:
            return [], (CONVERSATION, 0)
        kind = pricing.kind(FOLLOWERS, seen)
        rows = pricing.rows(len(tokens), kind)
        if not rows and self.unsent is None:
            self.unsent = (kind, tokens, False)
        return tokens[:rows], kind

    def repeat_draft(self) -> list[int]:
        """The rest of a call the turn made where the text is writing it again
        (:meth:`Namings.repeat_rest <weavehost.decode.namings.Namings.repeat_rest>`), drafts
        or not: verified in this pass, it is judged a repeat (or a call where it parts) in a
        pass or two, where a pass a token would cost more than the strategy writing it."""
        rest = self.namings.repeat_rest(self.data, self.writer.triggers, self.skip)
        engine = self.engine
        room = min(self.bound - self.steps, engine.n_ctx - engine.seq_len(0) - 1,
                   engine.n_batch - 1, MAX_DRAFT_ROWS)  # fmt: skip
        if not rest or room <= 0:
            return []
        self.ahead_kind, self.unsent = None, None  # counted as no kind's draft
        return self.until_decided(engine.tokenize(rest)[:room])

    def until_decided(self, draft: list[int]) -> list[int]:
        """``draft`` up to the token with which the loop would stop writing on, if chosen: one
        that completes a stop sequence, a trigger (a call begins, or JSON that can name only
        refused tools is taken back) or call text. Rows past it are only cost (the loop drops
        what is ahead there unread): the text is the same."""
        decided = self.decided_at(draft)
        return draft if decided is None else draft[:decided]

    def decided_at(self, draft: list[int]) -> int | None:
        """How many tokens of ``draft`` reach the one with which the loop would stop writing
        on (:meth:`until_decided`), if chosen; ``None`` where none of them is such a token."""
        data, skip = self.data, self.skip
        for place, token in enumerate(draft):
            data += self.engine.token_bytes(token)
            if any(stop in data for stop in self.stops):
                return place + 1
            at, trigger, skip = self.namings.scan(data, self.writer.triggers, skip)
            if trigger is not None or (self.call_text and self.call_text.begins_in(data)):
                return place + 1
        return None

    def drop_ahead(self) -> None:
        """The drafted tokens ahead (not chosen) out of sequence 0, which then ends with the
        last token read and its logits."""
        if self.ahead:
            self.ahead = []
            self.engine.drop(0, len(self.held), next_logits=self.logits)

    def hold_back(self, at: int) -> int:
        """How much of the text may be shown: not a trigger found and still undecided (at
        ``at``), nor trailing text that could still become a trigger or a stop sequence."""
        if at >= 0:
            return at
        held = max(
            held_back(self.data, b, at_start_only=t.at_start) for t, b in self.writer.triggers
        )
        for stop_bytes in self.stops:
            held = max(held, held_back(self.data, stop_bytes, at_start_only=False))
        return len(self.data) - held

    def hold_back_call_text(self, call_held: int) -> int:
        """How much may be shown where calls may not be made: not text that could become call
        text, nor an answer's opening marks before its first word (``>`` fused with
        ``{"name"`` begins Qwen's call text: it is taken back whole)."""
        if self.call_text is not None and not self.worded:
            self.worded = _WORD.search(self.data, 0, call_held) is not None
            return call_held if self.worded else 0
        return call_held

    def stream(self, upto: int) -> None:
        """The text up to byte ``upto`` shown, as far as it is whole characters (:meth:`send`)."""
        text = self.data[:upto].decode("utf-8", errors="ignore")
        if len(text) > len(self.shown):
            self.unsent_text += text[len(self.shown) :]
            self.shown = text

    def send(self) -> None:
        """The text shown since the last send, to ``on_text``."""
        if text := self.unsent_text:
            self.unsent_text = ""
            self.on_text(text)
