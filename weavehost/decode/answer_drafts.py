"""Drafts of free text: what an answer will probably write next, and how many of its tokens a
pass should carry.

Stage: decoding (a reply's free text, :class:`weavehost.decode.reply.ReplyWriter`). Most answers
restate what a tool returned ("Paris: partly cloudy, -2.9 C"), the user's words or an earlier
reply. :class:`AnswerDrafts` proposes the text that followed the answer's last characters
there; the writer reads its tokens after the token it reads anyway, in the same pass, and keeps
each one only where the writer's own choice (the greedy argmax after every mask) is that token,
so a draft changes how many passes an answer takes, never its text. :class:`DraftPricing` says
how many drafted tokens a pass carries, from the machine's cost table and the drafts' measured
acceptance: none where nothing pays.

Guarantees:

* :meth:`AnswerDrafts.propose` finds the longest suffix of the text written so far (at least
  :data:`MIN_MATCH` characters, at most :data:`MAX_MATCH`) in the conversation's texts, oldest
  first, and returns what followed its most recent occurrence, up to the end of that text and
  at most ``max_chars``; ``""`` when nothing matches. Never a special token's text: the texts
  are tokenized as plain text.
* The texts are the prompt's own text before the conversation (the system prompt and the
  tools' descriptions as the model's template shows them, where the caller gives it: an answer
  to "what can you do?" restates them, and a small model that rambles copies a tool's schema),
  then the model's remembered answers of earlier conversations (where the host keeps them),
  then the user's messages, the tool results and the assistant's earlier text, and, for a
  tool result that is JSON, each scalar member restated as answers restate it (``humidity:
  53``, ``humidity is 53``, with ``_`` read as a space): the answer that writes a key is
  drafted the value; and, where the model's format is given, each call the assistant
  made, in each layout the format reads (:func:`~weavehost.formats.base.call_texts`): a small
  model often begins its answer with the same call again, bare or fenced, and that text,
  drafted, reaches the refused name in a pass or two.
* An answer's first characters, fewer than :data:`MIN_MATCH` (``{"``, a fence's backticks),
  are looked up only where one of those calls begins with them: a small model often begins
  its answer with the call it made again, and that call, drafted from the answer's first
  token, reaches the refused name in the pass that reads that token, not three passes later.
  So are a line's first characters after a line break: Qwen, after "Here is the weather:",
  opens a fenced copy of the call on the next line. Any other text is not looked up so: two
  characters say nothing about which place of it an answer copies. Such a draft is priced
  apart (:data:`START`, :meth:`DraftPricing.kind`).
* Where none of them holds a suffix of :data:`LONG_MATCH` characters or more, the answer's
  structure is read (:func:`result_draft`), since a small model restates a result where no
  suffix of what it wrote says where to copy from: at the start of a line after a line that
  ends ``:`` or ``>`` ("Here is the weather in Paris:", "tool_response>"), the most recent tool
  result from its start (source :data:`RESULT`); after a word and a connective ("humidity
  is", "`wind`:"), the value that follows that word in the most recent result holding it
  (source :data:`KEY`: ``wind 4.7 km/h`` drafts `` 4.7 km/h``), matched without regard to
  case; and where all the answer has written is the beginning of a result ("Mad", "battery"),
  the rest of the most recent such result (source :data:`OPENING`): a small model often answers
  with the result itself, and its first token is too short a suffix to say so.
* Where none of them holds the suffix, the answer's own text before it is looked up (at least
  :data:`MIN_OWN_MATCH` characters, in its last ``4 * MAX_MATCH`` bytes), as llama.cpp's
  prompt lookup reads the text generated so far: a small model that runs on repeats itself
  ("The city has a beautiful skyline … The city has a beautiful music scene"), and a list
  repeats its own frame ("2. **Humidity in Oslo**: … 3. **Wind in Oslo**"). Past the text's
  end such a draft goes round again (:func:`~weavehost.decode.drafts.looped`): a loop
  ("os.path.join(os.path.join(") is drafted a pass full, not one period a pass. Where no
  suffix occurs before and the last line is a numbered list's next number so far ("2"), the
  rest of the line of the item before it is drafted: a list repeats its frame.
* :class:`DraftPricing` belongs to one opened model: its acceptance counts are that model's,
  kept by the length of the match a draft came from and apart for a draft's first token and the
  tokens after it, from every draft looked up, sent or not: a draft no row paid for is checked
  against the tokens the writer chose instead, so a kind whose prior pays for no row is still
  measured, and drafted once it is measured good. Without a cost table, nothing is drafted
  (nothing says a row pays); with one,
  :meth:`DecodePlan.draft_length <weavehost.decode.padding.DecodePlan.draft_length>` decides,
  rows asking for logits priced as such, at the measured rates.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from weavehost.decode.drafts import content_texts, earlier_suffix, longest_suffix_in, looped
from weavehost.decode.followers import FOLLOWERS
from weavehost.decode.padding import MAX_DRAFT_CHARS, MAX_DRAFT_ROWS, DecodePlan, Foreseen
from weavehost.decode.restated import KEY, OPENING, RESULT, restated_members, result_draft
from weavehost.formats.base import ToolCall, message_calls

__all__ = [
    "ACCEPT_PRIORS",
    "BRANCH",
    "CONVERSATION",
    "LONG_MATCH",
    "MAX_MATCH",
    "MIN_MATCH",
    "MIN_OWN_MATCH",
    "OWN",
    "REMEMBERED",
    "START",
    "SYSTEM",
    "AnswerDrafts",
    "AnswerForesight",
    "DraftKind",
    "DraftPricing",
    "conversation_texts",
    "own_match",
]

# The shortest suffix of the answer looked up: shorter ones ("the ", "s a") recur in any text,
# so their most recent occurrence is mostly unrelated to what the answer writes next.
MIN_MATCH = 4
# The longest suffix looked up: longer ones rarely pick another occurrence, and the bound keeps
# each look-up short.
MAX_MATCH = 128
# The shortest suffix looked up in the answer's own earlier text: as short as elsewhere, since
# matches under 8 characters are a kind of their own (a list's frame, "\n- `" before each key;
# "the " says less, and its measured rate prices it). Session 56 replayed 8 against 4 over
# both models' answers on the 51 shipped tasks: 2.67 -> 2.74 tokens a pass for Qwen2.5-Coder-
# 0.5B, 3.64 -> 3.74 for SmolLM2-135M, the same time within 0.5%.
MIN_OWN_MATCH = MIN_MATCH
# A line that is a numbered list's item number so far: its indent, the number, its dot.
_ITEM_NUMBER = re.compile(r"([ \t]*)(\d{1,3})(\.?)")
# The bytes of a reply's end a look-up reads (AnswerDrafts.draft_at): its longest suffix looked
# up, at up to 4 bytes a character.
_TAIL = 4 * MAX_MATCH
# Ends each text: a draft never runs from one text into the next. Dropped from the texts.
_END = "\x00"
# Where a draft's text was found (AnswerDrafts.match): the conversation's texts, the model's
# remembered answers, the prompt's text before the conversation, the answer's own earlier text,
# or the start of a call made (an answer's first characters). Each source's drafts are priced
# apart (DraftPricing).
CONVERSATION, REMEMBERED, SYSTEM = "conversation", "remembered", "system"
OWN, START = "own", "start"
# The token a take-back would choose instead, read beside a call begun again, and the token its
# logits choose after it, drafted where the reply reads it (decode.call_again): a first token
# kept where that draft was sent and kept, not kept where the branch was never followed.
BRANCH = "branch"
# A match at least this long is drafted before what the answer's structure says: a shorter
# one (", ", "the ") says little of which place the answer copies.
LONG_MATCH = 8
# A draft's kind: its source and the least length, in characters, of the matches of its kind
# (under 8, 8-15, 16-31, 32 or more: a longer match says more of what follows).
DraftKind = tuple[str, int]
# Priors of a draft from text that is not this conversation's, by least match length.
_OTHER_TEXT_PRIORS = {0: ((2.0, 1.3), (4.0, 2.7)), 8: ((2.0, 1.2), (4.0, 2.7)),
                      16: ((2.0, 1.5), (4.0, 2.9)), 32: ((2.0, 1.6), (4.0, 3.0))}  # fmt: skip
# Per kind, the acceptance assumed before any draft was checked, as (reached, accepted) counts
# for a draft's first token and for a token after an accepted one: a weight of a few tokens,
# which gives way to what is measured after a few passes.
ACCEPT_PRIORS: Mapping[DraftKind, tuple[tuple[float, float], tuple[float, float]]] = (
    MappingProxyType(
        {
            # Set from what Qwen2.5-Coder-0.5B's answers on the first 25 shipped agent tasks
            # kept (first / later): 8-15 characters 0.69 / 0.96, 16-31 1.0 / 0.94, 32 or more
            # 1.0 / 0.98 (docs/decoder.md). Shorter matches were never drafted there (the
            # prior below pays for no row on x86 tables), so theirs stays a guess.
            (CONVERSATION, 0): ((2.0, 1.0), (4.0, 3.4)),
            (CONVERSATION, 8): ((2.0, 1.4), (4.0, 3.8)),
            (CONVERSATION, 16): ((2.0, 1.8), (4.0, 3.75)),
            (CONVERSATION, 32): ((2.0, 1.9), (4.0, 3.9)),
            # Another conversation's wording parts from this answer's sooner. Qwen2.5-Coder-
            # 0.5B's answers on the 51 shipped tasks kept 0.57-0.80 of such drafts' first
            # tokens and 0.66-0.77 of the tokens after, against 0.84-0.92 and 0.89-0.99 for
            # the conversation's (docs/agent.md). The prompt's head is not this conversation's
            # either: its priors are the same.
            **{
                (source, bound): prior
                for source in (REMEMBERED, SYSTEM)
                for bound, prior in _OTHER_TEXT_PRIORS.items()
            },
            # The first 25 shipped tasks' answers seldom repeat themselves unless they ramble,
            # so these are guesses, set as low as the remembered answers' (the measured rate
            # soon replaces them).
            **{(OWN, bound): prior for bound, prior in _OTHER_TEXT_PRIORS.items()},
            # Matches of fewer than MIN_MATCH characters, so one kind. On the 51 shipped tasks,
            # 54 of Qwen2.5-Coder-0.5B's 74 free texts that took a pass began with `{"`, and 42
            # went on with the call it had made to the refused name (session 45's pass log);
            # the prior is set a little below.
            (START, 0): ((2.0, 1.4), (4.0, 3.6)),
            # Replayed over Qwen2.5-Coder-0.5B's undrafted answers on the 51 shipped tasks
            # (session 54): a result drafted at a line after one ending ":" or ">" kept its
            # first token 43% of the time (19 of 44) and then ran on 19 tokens on average; a
            # keyed value, 82% (23 of 28) and 12 tokens.
            (RESULT, 0): ((2.0, 0.9), (4.0, 3.8)),
            (KEY, 0): ((2.0, 1.6), (4.0, 3.6)),
            # Replayed over SmolLM2-135M's answers on the 51 shipped tasks (session 56): of 22
            # answers that began as a result begins, 18 copied it to the draft's end, 3 parted
            # after 1 to 3 tokens, and one where a name tokenized otherwise than it does alone.
            # Set a little below.
            (OPENING, 0): ((2.0, 1.5), (4.0, 3.8)),
            # Session 57's pass logs (Qwen2.5-Coder-0.5B, 51 shipped tasks): 64 of the 68 passes
            # that read a call begun again were taken back there, and 67 of 67 branches' drafts
            # sent were kept. Set a little below.
            (BRANCH, 0): ((2.0, 1.7), (1.0, 1.0)),
            # The model's own most frequent next token (decode.followers), by how often it was
            # written there: once or twice, or three times or more. Session 59's pass log replayed
            # (Qwen2.5-Coder-0.5B, 51 shipped tasks, where no text held a draft): 0.30-0.42 of
            # first tokens kept at fewer than three, 0.63-0.67 at three or more.
            (FOLLOWERS, 1): ((2.0, 0.7), (4.0, 2.4)),
            (FOLLOWERS, 3): ((2.0, 1.2), (4.0, 3.0)),
        }
    )
)
# Each source's kinds, by least match length, ascending (DraftPricing.kind).
_KINDS = {
    source: tuple(sorted(bound for kind, bound in ACCEPT_PRIORS if kind == source))
    for source, _ in ACCEPT_PRIORS
}
# How many rows answers DraftPricing keeps (by rates in hundredths and room) before it starts
# again.
ROWS_MEMO_CAP = 4096


class AnswerDrafts:
    """The texts an answer may restate, joined for look-ups: see the module docstring."""

    __slots__ = ("_calls", "_earlier", "_head", "_results", "_said", "_text")

    def __init__(
        self,
        texts: Sequence[str],
        earlier: Sequence[str] = (),
        calls: Sequence[str] = (),
        results: Sequence[str] = (),
        head: Sequence[str] = (),
    ) -> None:
        shown = _joined(head)
        remembered = shown + _joined(earlier)
        self._said = _joined(texts)  # the conversation's own texts
        self._text = remembered + self._said
        self._head = len(shown)  # a match that begins before this is the prompt's head's
        self._earlier = len(remembered)  # and before this, the memory's
        # The texts of the calls made (also in ``texts``), each after an end: where an answer's
        # first characters are looked up (match).
        self._calls = _END + _joined(calls)
        self._results = tuple(text for text in results if text)  # the tool results, in order

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[Mapping[str, Any]],
        earlier: Sequence[str] = (),
        *,
        render_calls: Callable[[ToolCall], Sequence[str]] | None = None,
        head: Sequence[str] = (),
    ) -> AnswerDrafts:
        """The texts of OpenAI-style ``messages``, oldest first: user, tool and assistant
        content (a string, or ``{"type": "text", "text": ...}`` parts) and each JSON tool
        result's members restated; not the system prompt. ``earlier``: texts looked up before
        them (the model's remembered answers, :mod:`weavehost.agent.answer_memory`), so where
        both hold a match the conversation's, the most recent, is drafted. ``render_calls``:
        the model format's texts of a call (:func:`~weavehost.formats.base.call_texts`); each
        call an assistant message made is then drafted as the model may write it again, since
        a small model after a result often begins the same call again, bare or fenced, which
        the reply writer takes back where it names a refused tool: drafted, that costs a pass
        or two, not one a token. ``head``: the prompt's texts before the conversation (its
        system text, the tools as the template writes them), looked up before ``earlier``."""
        texts: list[str] = []
        calls: list[str] = []
        results: list[str] = []
        for message in messages:
            contents = conversation_texts([message])
            texts.extend(contents)
            if message.get("role") == "tool":
                results.extend(contents)
                for content in contents:
                    texts.extend(restated_members(content))
            if render_calls is not None and message.get("role") == "assistant":
                for call in message_calls(message):
                    rendered = render_calls(call)
                    texts.extend(rendered)
                    calls.extend(rendered)
        return cls(texts, earlier, calls, results, head)

    def propose(self, written: str, *, max_chars: int = MAX_DRAFT_CHARS) -> str:
        """The text that followed the longest suffix of ``written`` in the texts (its most
        recent occurrence), up to that text's end and ``max_chars``; ``""`` if none matches."""
        return self.match(written, max_chars=max_chars)[0]

    def tokens_after(
        self,
        data: bytes,
        pricing: DraftPricing,
        room: int,
        tokenize: Callable[[str], list[int]],
        decided: Callable[[list[int]], int | None] | None = None,
    ) -> tuple[list[int], DraftKind, tuple[DraftKind, str] | None]:
        """The drafted tokens to read after a reply's bytes ``data``, their kind
        (:meth:`DraftPricing.kind`), and the best draft's kind and text where it is not sent:
        of :meth:`drafts_at`, the first at whose kind's rates a row pays, as many tokens as
        ``pricing`` says pay, at most ``room`` (a draft no row pays for gives way to one that
        pays). None without a cost table (nothing is looked up) or where no row pays. The best
        draft unsent is checked against the tokens chosen instead
        (:class:`~weavehost.decode.continuation.Continuation`): a kind is measured, sent or not.
        A call begun again (:data:`START`) is drafted to where the reply decides it where that
        pays (``decided``: how many of a draft's tokens reach the decision, :meth:`DraftPricing.
        reaching`)."""
        passed: tuple[DraftKind, str] | None = None
        if pricing.plan.table is None or room <= 0:
            return [], (CONVERSATION, 0), passed
        for text, matched, source in self.drafts_at(data):
            kind = pricing.kind(source, matched)
            # Priced first at the most room (memoised): a draft never sent is never tokenized.
            if pricing.rows(room, kind) > 0:
                draft = tokenize(text)
                rows = pricing.rows(min(room, len(draft)), kind)
                if rows > 0 and source == START and decided is not None:
                    rows = pricing.reaching(kind, rows, decided(draft[: min(room, MAX_DRAFT_ROWS)]))
                if rows > 0:
                    return draft[:rows], kind, passed
            passed = passed or (kind, text)
        return [], passed[0] if passed else (CONVERSATION, 0), passed

    def draft_at(self, data: bytes) -> tuple[str, int, str]:
        """The best draft after a reply's bytes ``data`` (:meth:`drafts_at`'s first), as
        ``(text, matched, source)``; ``("", 0, CONVERSATION)`` where there is none."""
        return next(self.drafts_at(data), ("", 0, CONVERSATION))

    def drafts_at(self, data: bytes) -> Iterator[tuple[str, int, str]]:
        """The drafts after a reply's bytes ``data``, best first, each ``(text, matched,
        source)``: :meth:`match`'s where it matched at least :data:`LONG_MATCH` characters or
        found a call made that begins as the answer does (:data:`START`), the answer's
        structure's (:func:`result_draft`), :meth:`match`'s shorter one, the
        conversation's own where :meth:`match`'s is another's (the prompt's head, a remembered
        answer: their longer match hides the conversation's), and the answer's own earlier
        text's (:func:`own_match`, source :data:`OWN`); none where the text ends inside a
        character. Each is looked up only when the one before it is passed over. Only the
        text's end is read (``4 * MAX_MATCH`` bytes): decoding the whole reply on every token
        would cost its length squared; continuation bytes a cut left are dropped."""
        tail = data[-_TAIL:].lstrip(bytes(range(0x80, 0xC0)))
        try:
            written = tail.decode("utf-8")
        except UnicodeDecodeError:
            return
        text, matched, source = self.match(written)
        first = bool(text) and (matched >= LONG_MATCH or source == START)
        if first:
            yield text, matched, source
        structured, kind = result_draft(written, self._results, whole=len(tail) == len(data))
        if structured:
            yield structured, 0, kind
        if text and not first:
            yield text, matched, source
        if text and source in (SYSTEM, REMEMBERED):
            said, length, _ = _followed(written, self._said, MAX_DRAFT_CHARS)
            if said:
                yield said, length, CONVERSATION
        text, matched = own_match(written)
        if text:
            yield text, matched, OWN

    def kept_after(
        self,
        tokens: Sequence[int],
        token_bytes: Callable[[int], bytes],
        tokenize: Callable[[str], list[int]],
    ) -> list[int]:
        """Per token of a text written after these texts (``tokens``), how many of the tokens
        after it the drafts proposed there (:meth:`drafts_at`, tokenized as the writer
        tokenizes them) would have had kept, the most of any, at most :data:`MAX_DRAFT_ROWS`:
        what a drafter that knew its drafts' fate could send there (:meth:`DecodePlan.foreseen
        <weavehost.decode.padding.DecodePlan.foreseen>`). Computed after the text, never while
        it is written."""
        data, ends = _joined_bytes(tokens, token_bytes)
        kept: list[int] = []
        for at, end in enumerate(ends):
            best = 0
            for text, _, _ in self.drafts_at(data[max(0, end - _TAIL) : end]):  # reads no more
                draft = tokenize(text)[:MAX_DRAFT_ROWS]
                same = 0
                while same < len(draft) and at + 1 + same < len(tokens):
                    if draft[same] != tokens[at + 1 + same]:
                        break
                    same += 1
                best = max(best, same)
            kept.append(best)
        return kept

    def copies_after(self, tokens: Sequence[int], token_bytes: Callable[[int], bytes]) -> list[int]:
        """Per token of a text written after these texts, the most tokens after it (at most
        :data:`MAX_DRAFT_ROWS`) whose text these texts or the text before them hold anywhere:
        what no drafter from the conversation can exceed, whichever place it copied from."""
        data, ends = _joined_bytes(tokens, token_bytes)
        copies: list[int] = []
        for at, end in enumerate(ends):
            written = data[:end].decode("utf-8", errors="replace")
            low, high = 0, min(MAX_DRAFT_ROWS, len(ends) - at - 1)
            while low < high:  # a run held has every shorter run held: a binary search
                middle = (low + high + 1) // 2
                piece = data[end : ends[at + middle]].decode("utf-8", errors="replace")
                if piece in self._text or piece in written:
                    low = middle
                else:
                    high = middle - 1
            copies.append(low)
        return copies

    def foreseen(
        self,
        tokens: Sequence[int],
        token_bytes: Callable[[int], bytes],
        tokenize: Callable[[str], list[int]],
        plan: DecodePlan,
    ) -> AnswerForesight | None:
        """A text written after these texts (``tokens``) drafted again with foresight, priced
        by ``plan`` (:meth:`DecodePlan.foreseen
        <weavehost.decode.padding.DecodePlan.foreseen>`): from these drafts
        (:meth:`kept_after`) and from any copy of these texts (:meth:`copies_after`). ``None``
        without a cost table or a text. It reads the whole text again, token by token: after
        the text is written, never while."""
        if plan.table is None or not tokens:
            return None
        proposer = plan.foreseen(self.kept_after(tokens, token_bytes, tokenize))
        copy = plan.foreseen(self.copies_after(tokens, token_bytes))
        assert proposer is not None and copy is not None  # the plan has a table
        return AnswerForesight(proposer, copy)

    def match(self, written: str, *, max_chars: int = MAX_DRAFT_CHARS) -> tuple[str, int, str]:
        """:meth:`propose`'s draft, the length of the suffix it followed (0: none), and where
        it followed it: :data:`CONVERSATION`, :data:`REMEMBERED` (the model's remembered
        answers), :data:`SYSTEM` (the prompt's head) or :data:`START` (the line ``written``
        ends in, shorter than :data:`MIN_MATCH` — an answer's first characters, or a line's
        after a line break — where a call made begins with it; a shorter ``written`` matches
        only so)."""
        text = self._text
        line = written[written.rfind("\n") + 1 :]
        if line and len(line) < MIN_MATCH and max_chars > 0:
            calls = self._calls  # the most recent call that begins with it
            at = calls.rfind(_END + line) + 1 + len(line)
            if at > len(line):
                return calls[at : min(calls.find(_END, at), at + max_chars)], len(line), START
        if len(written) < MIN_MATCH:
            return "", 0, CONVERSATION
        draft, length, found = _followed(written, text, max_chars)
        if not draft:
            return "", 0, CONVERSATION
        source = (
            SYSTEM if found < self._head else REMEMBERED if found < self._earlier else CONVERSATION
        )
        return draft, length, source


@dataclass(frozen=True, slots=True)
class AnswerForesight:
    """:meth:`AnswerDrafts.foreseen`: the schedules of a text drafted with foresight, from the
    reply writer's drafts (``proposer``) and from any copy of the conversation (``copy``)."""

    proposer: Foreseen
    copy: Foreseen


def _joined_bytes(
    tokens: Sequence[int], token_bytes: Callable[[int], bytes]
) -> tuple[bytes, list[int]]:
    """The bytes of ``tokens``, and where each token's bytes end in them."""
    pieces = [token_bytes(token) for token in tokens]
    return b"".join(pieces), list(itertools.accumulate(map(len, pieces)))


def _followed(written: str, text: str, max_chars: int) -> tuple[str, int, int]:
    """What followed the most recent occurrence in ``text`` of ``written``'s longest suffix
    (:data:`MIN_MATCH` to :data:`MAX_MATCH` characters) to the end of its piece, at most
    ``max_chars``, the suffix's length and where it occurs; ``("", 0, -1)`` where none does."""
    if len(written) < MIN_MATCH or max_chars <= 0 or written[-MIN_MATCH:] not in text:
        return "", 0, -1
    length = longest_suffix_in(written, text, MIN_MATCH, min(len(written), MAX_MATCH))
    found = text.rfind(written[-length:])
    at = found + length
    return text[at : min(text.find(_END, at), at + max_chars)], length, found


def _joined(texts: Sequence[str]) -> str:
    """``texts``, each ended by :data:`_END` (dropped from within them), empty ones left out."""
    return "".join(text.replace(_END, "") + _END for text in texts if text)


def own_match(written: str, *, max_chars: int = MAX_DRAFT_CHARS) -> tuple[str, int]:
    """The text that followed the longest suffix of ``written`` (at least
    :data:`MIN_OWN_MATCH` characters) at its most recent earlier occurrence in ``written``
    itself, going round again from there past ``written``'s end, ``max_chars`` of it, and the
    suffix's length. Where none occurs before and the last line is a numbered list's next
    number so far ("2", "  3."): the rest of the line of the item before it, after its number
    (a list repeats its frame: ``. **``, ``. day``), and the line's length. ``("", 0)``
    otherwise."""
    found = earlier_suffix(written, MIN_OWN_MATCH, MAX_MATCH) if max_chars > 0 else None
    if found is not None:
        length, at = found
        return looped(written, at, max_chars), length
    line = written[written.rfind("\n") + 1 :]
    item = _ITEM_NUMBER.fullmatch(line)
    if item is None or max_chars <= 0 or int(item[2]) < 2:
        return "", 0
    before = f"\n{item[1]}{int(item[2]) - 1}{item[3]}"
    at = written.rfind(before, 0, len(written) - len(line))
    while at >= 0 and written[at + len(before) : at + len(before) + 1].isdigit():
        at = written.rfind(before, 0, at)  # "\n1" begins "\n15": not the item before
    if at < 0:
        return "", 0
    start = at + len(before)
    return written[start : written.find("\n", start)][:max_chars], len(line)


def conversation_texts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """The content texts of ``messages``, oldest first, not the system prompt's: what an answer
    may restate."""
    return [
        text
        for message in messages
        if message.get("role") not in ("system", "developer")
        for text in content_texts(message.get("content"))
    ]


class DraftPricing:
    """How many drafted tokens a pass of free text carries, for one model: from the plan's cost
    table and the acceptance measured so far.

    Drafted text is accepted in runs: a draft's first token is a guess (does the answer copy
    here at all?), and once the answer copies, it mostly goes on copying; and a long match of
    what was written says more than a short one. So the rate is kept per kind of draft
    (:data:`ACCEPT_PRIORS`, :meth:`kind`: where the match was found and how long it was), and
    apart for a draft's first token and for a token after an accepted one: a draft of ``n``
    tokens is priced at ``[first, later, later, ...]`` (:meth:`DecodePlan.draft_length
    <weavehost.decode.padding.DecodePlan.draft_length>`, rows asking for logits priced as
    such). ``rows(room, kind)`` is 0 without a table, and where the table says no draft pays
    at those rates: nothing is drafted that the machine's costs do not pay for."""

    __slots__ = ("_counts", "_plan", "_rows")

    def __init__(self, plan: DecodePlan) -> None:
        self._plan = plan
        # Per kind: [[first reached, first accepted], [later reached, later accepted]].
        self._counts = {
            kind: [list(first), list(later)] for kind, (first, later) in ACCEPT_PRIORS.items()
        }
        self._rows: dict[tuple[int, int, int], int] = {}  # by rates in hundredths and room

    @property
    def plan(self) -> DecodePlan:
        """The plan it prices by: set anew as the conversation grows (the model's decode
        state's plan for the tokens held), the acceptance kept."""
        return self._plan

    @plan.setter
    def plan(self, plan: DecodePlan) -> None:
        if plan is not self._plan:
            self._plan = plan
            self._rows.clear()  # answers of the plan before

    @staticmethod
    def kind(source: str, matched: int) -> DraftKind:
        """The kind of a draft that came from a match of ``matched`` characters in ``source``
        (any source of :data:`ACCEPT_PRIORS`; for ``FOLLOWERS``, ``matched`` is how often its
        first token was written there): that source's kind with the longest least length the
        match reaches (its shortest, for a shorter match)."""
        bounds = _KINDS[source]
        return source, next((b for b in reversed(bounds) if matched >= b), bounds[0])

    def rates(self, kind: DraftKind) -> tuple[float, float]:
        """The measured acceptance of a draft's first token and of a token after an accepted
        one, for drafts of ``kind``, with the prior."""
        first, later = self._counts[kind]
        return _rate(first), _rate(later)

    def rows(self, room: int, kind: DraftKind) -> int:
        """Drafted tokens for the next pass (at most ``room``: the bound and the draft's own
        tokens), for a draft of ``kind`` (:meth:`kind`)."""
        room = min(room, MAX_DRAFT_ROWS)
        if self.plan.table is None or room <= 0:
            return 0
        first, later = self.rates(kind)
        key = (round(first * 100), round(later * 100), room)
        rows = self._rows.get(key)
        if rows is None:
            if len(self._rows) >= ROWS_MEMO_CAP:
                self._rows.clear()
            accept = [key[0] / 100] + [key[1] / 100] * (room - 1)
            rows = self._rows[key] = self.plan.draft_length(1, accept)
        return rows

    def reaching(self, kind: DraftKind, rows: int, reach: int | None) -> int:
        """The tokens to draft of a call begun again (``kind``), whose first ``reach`` reach
        where the reply decides it (a call, or text taken back; ``None``: not within the draft),
        given the ``rows`` its rates pay for: ``reach`` where the rows it adds cost less than
        the pass after, one row at least, that the decision saves where they are all kept (at
        the kind's rates), else ``rows``."""
        plan = self.plan
        if reach is None or not rows < reach <= MAX_DRAFT_ROWS or plan.table is None:
            return rows
        first, later = self.rates(kind)
        added = plan.pass_cost(1 + reach, 1 + reach) - plan.pass_cost(1 + rows, 1 + rows)
        return reach if first * later ** (reach - 1) * plan.pass_cost(1, 1) > added else rows

    def count(self, kind: DraftKind, later: bool, accepted: bool) -> None:
        """One drafted token of ``kind`` reached (the first of its draft, or ``later``: every
        one before it accepted), and whether it was kept."""
        counts = self._counts[kind][int(later)]
        counts[0] += 1
        counts[1] += int(accepted)


def _rate(counts: Sequence[float]) -> float:
    return min(1.0, max(0.0, counts[1] / counts[0]))
