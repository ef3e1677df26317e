"""Decoding, draft proposal: text a tool call will probably write next, for the decoder to verify.

A decoder that verifies a draft feeds its tokens in one pass and keeps the longest prefix whose
every token equals the constrained argmax, so a draft is only ever a guess: a wrong one costs
rows of a pass, never a different call. This module therefore aims at cheap, likely drafts and
knows nothing of models or tokens (tokenizing a draft is the caller's job); strings are written
as the format writes them, in its :class:`~weavehost.formats.ValueSyntax` (``fmt.value_syntax``:
JSON's ``"…"`` with backslash escapes, FunctionGemma's ``<escape>…<escape>``), given to
:class:`DraftSource` by the caller; the JSON formats' syntax when none is given.

Two sources, both in :class:`DraftSource`: the conversation, and the call's own text.
``guess(written)`` is ``propose``'s draft with its kind (``"string"``, ``"number"``), or, where a
value has not begun, the request's (the last user message's) first number the call has not
written yet (``"start"``); where the conversation has nothing and the call has begun to loop,
the loop's next turns (``"repeat"``). The decoder sizes each kind by its own acceptance rate.
``propose(written)`` looks at the value the call text ends inside. In a string value it finds
the longest suffix of the value written so far (at least ``min_match`` characters, never
reaching back past the value's opening quote) in the conversation's texts and returns what
followed it there; in a number it returns the rest of the most recent number in the texts that
starts with the digits written.
(Drafts from the schema — ``enum`` members, booleans, ``default`` — are not proposed: the call
grammar already forces an enum member's rest once its prefix is unique, and no measurement yet
says a ``default`` is worth a row.)

Guarantees: ``propose`` returns ``""`` when nothing matches, when the value has written nothing
yet (the decoder's own first token decides more than a guess), inside a key, and outside any
value; a string draft is text escaped as the syntax escapes it, that stays inside the string (it
never holds the quote, unescaped); a number draft holds only number characters. Drafts are
written as the format writes values (for JSON ``json.dumps(ensure_ascii=False)``, DEL as
``\\u007f``), so they are the text the constraint accepts. Every syntax has JSON's shape
(``{``, ``[``, ``:`` before a value, ``,`` between members); only its strings differ.

Choices:

- Texts are indexed escaped as the syntax escapes them (once, in the constructor), so
  ``written`` is matched as it stands and a draft needs no escaping; matching is ``str.find``
  on the joined texts under a binary search over the suffix length (a suffix that occurs has
  every shorter suffix occur), about ``log2(len(value))`` C-speed searches per call and no
  Python loop over the conversation.
- Preference: the longest matching suffix, then its most recent occurrence (texts are given
  oldest first, and the last occurrence in their join is the most recent).
- Where a draft stops: at ``max_chars``, at the end of its source text, and before anything the
  source would write as an escape other than ``\\\\`` — a quote, a line break, a tab, a control
  character. Those mostly end a copied span (a quoted name, a line of a file or a command), and
  when the model does write one the next pass proposes again from after it, so stopping early
  costs one pass while running on costs rows in every pass. A backslash runs on: it is part of
  paths. A value that ends inside an escape (``\\``, ``\\u00``) drafts the rest of it first, and
  a match that ends at another point of an escape in the source (``\\\\`` against the end of
  ``\\\\\\"``) drafts nothing.
- A string draft ends with its word, or with the capitalised (or numbered) words that follow it:
  ``Par`` in "Paris today?" drafts ``is``, ``New`` in "New York City to Boston" ``York City``. A
  word ends at a space, a quote or bracket, a clause's punctuation, or a full stop that no more
  of the word follows (so ``notes.txt`` and ``D.C`` run on). A value copied from a request is
  mostly a name; the rest of the sentence was nearly always rejected, and a rejected guess
  lowers its kind's rate, so the decoder sent fewer guesses. With every guess sent, on the first
  40 ``simple_python`` and 40 ``multiple`` cases and ``multiple_89`` (tuning set), string
  guesses were accepted 70 times of 148 reached tokens (Qwen2.5-Coder-0.5B Q4_0) when they ran
  to the end of the source's span, 31 of 33 (Qwen) and 125 of 144 (SmolLM2-135M) when they end
  with the name.
- A value that has copied a phrase (its matched suffix holds a word and a lowercase word after
  it: "Wake me", which no name does) goes on with the source's clause, up to a clause's
  punctuation, a quote or a bracket (kind ``"phrase"``): a label or a message copied from the
  request ("Wake me at a quarter past seven in the morning"). Drafted to the end of the word
  only, such a value was guessed to end after each word and wrongly every time, a pass of
  three rows a word (Qwen, ``android_1``); to the clause's end, 41 of 44 reached tokens were
  accepted (Qwen) and 24 of 30 (SmolLM2) on the first 48 Android and 40 ``simple_python`` and
  ``multiple`` cases.
- ``MIN_MATCH`` is 3 characters: about one token, and two characters (``an``, ``e ``) recur in
  almost any text, so their most recent occurrence is mostly unrelated to the value.
- Numbers are matched from their first character against whole numbers of the texts, so no
  ``min_match`` applies (``1`` drafts ``5`` from "15 days"; it never drafts from inside
  ``2015``); an exact number wins over a longer one when it is more recent.
- A repeat is drafted only where the call is in a loop: its text ends with the same piece of
  at least :data:`REPEAT_MIN` characters twice in a row (``"vegetables", "vegetables", ``,
  ``Stalingrad, Stalingrad, ``), and the draft goes on with that piece, as often as
  ``max_chars`` allows. A small model that loops writes until its token budget ends, one
  pass a token without this; with it, a few tokens a pass. A suffix merely seen before in the
  call is not drafted: on the first 40 ``simple_python`` and ``multiple`` cases with
  Qwen2.5-Coder (tuning set) such drafts (``", "`` and a key, a repeated key of an array of
  objects) were accepted 0 times in 10, and loops (every guess sent) 370 times in 371.
- A value's start is no number where the item before it in its array was a string (an array of
  strings goes on with strings; the grammar would cut the number anyway, and the loop's guess
  can stand there instead).
- :meth:`DraftSource.from_messages` indexes user messages, tool results and the assistant's
  earlier text and the argument values of its earlier calls (a later call often repeats a path
  or an id of an earlier one), oldest first; not the system prompt, whose instructions and tool
  descriptions are rarely what a value copies.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from weavehost.formats.base import read_call
from weavehost.formats.declared import ValueSyntax
from weavehost.formats.jsoncalls import JSON_STRINGS

__all__ = [
    "MAX_MATCH",
    "MIN_MATCH",
    "NUMBER_ENDS",
    "REPEAT_MIN",
    "STRING_ENDS",
    "DraftSource",
    "Guess",
    "earlier_suffix",
    "looped",
]

# The shortest suffix of a string value that is looked up (see the module's choices).
MIN_MATCH = 3
# The shortest suffix of the call text looked up in the call itself (see the module's choices).
REPEAT_MIN = 6
# The longest suffix looked up: longer ones would rarely pick a different occurrence, and the
# bound keeps a long value's searches short.
MAX_MATCH = 256
# Ends each indexed text: json.dumps writes NUL as \u0000, so it occurs in no escaped text and
# in no well-formed JSON string (a syntax that writes text as it is has it dropped), and a match
# can never run from one text into the next.
_END = "\x00"

# A token of the call text (:func:`_token_pattern`): a string (group 1 is its closing quote,
# absent while it runs to the end of the text) or a structural character. Text between tokens
# is numbers, literals, spaces, bare keys or the format's own words (``<tool_call>``), none of
# which holds a quote.
_STRUCTURE = r"[{\[\]:,}]"
# A number value being written, at the end of the text: a sign and/or digits so far.
_NUMBER_TAIL = re.compile(r"(?<![\w.+-])(?:-|-?\d[\d.eE+-]*)\Z")
# A number in a text, not glued to a word or another number (``v2``, ``2024-05``): as JSON
# writes it, or with thousands separators (``1,500``), which are dropped.
_NUMBER = re.compile(
    r"(?<![\w.-])-?(?:0|[1-9]\d{0,2}(?:,\d{3})+(?!\d)|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?(?!\d)"
)
# A number the call has written as a value (after a colon, a comma or a bracket).
_WRITTEN_NUMBER = re.compile(r"[:,\[]\s*(-?\d[\d.eE+-]*)")
# A name's rest: the rest of its word (a full stop only inside it: ``notes.txt``, ``D.C``), then
# any words that follow it capitalised or numbered ("New York City"). A word ends at a space, a
# quote or bracket, or a clause's punctuation: where a span copied from prose mostly ends.
_WORD_CHAR = r"[^\s'`(){\[\]}?!;,.\x00\"]"
_NAME_WORD = rf"(?:{_WORD_CHAR}|\.(?={_WORD_CHAR}))*"
_NAME = re.compile(rf"{_NAME_WORD}(?: (?=[A-Z0-9]){_NAME_WORD})*")
# A copied phrase: the value's matched suffix holds a word and a lowercase word after it ("Wake
# me", "late for"), which no name does. Its rest runs to the end of the source's clause: its
# words, with a full stop only inside one, up to a clause's punctuation, a quote or a bracket.
_PHRASE = re.compile(rf"{_WORD_CHAR} [a-z]")
_CLAUSE = re.compile(rf"(?:{_WORD_CHAR}|\.(?={_WORD_CHAR})| (?={_WORD_CHAR}))*")
# The source goes on with the name's word where the draft stopped (cut at ``max_chars``): the
# value does not end there. A quote, a line break (escapes other than ``\\``) or any other
# character a word ends at ends it.
_NAME_GOES_ON = re.compile(rf"(?!\\[^\\]){_WORD_CHAR}")
# A phrase goes on with its clause's next word too.
_PHRASE_GOES_ON = re.compile(rf"(?!\\[^\\]) ?{_WORD_CHAR}")
# Where a name of the request begins: a capitalised word that does not begin the request or a
# sentence ("from Sydney to Melbourne", not "Find ..." or "... today. What ...").
_NAME_BEGINS = re.compile(r"(?<![\w.'-])(?<![.?!:] )[A-Z]")
# The part of an escaped text a draft may hold: anything but an escape, except ``\\``; in a
# syntax without backslash escapes, anything.
_PLAIN = re.compile(r"(?:[^\\\x00]|\\\\)*")
_PLAIN_UNESCAPED = re.compile(r"[^\x00]*")

_HEX = frozenset("0123456789abcdefABCDEF")

_Kind = Literal["string", "number", "start", "repeat", "name", "phrase"]

# What may close a value a guess completes, most likely first (the next member's comma, the
# object's or the array's end): after a string its quote comes first (JSON's; a syntax's own
# are ``ValueSyntax.string_ends``).
STRING_ENDS = JSON_STRINGS.string_ends
NUMBER_ENDS = (",", "}", "]")


class Guess(NamedTuple):
    """A guess at the text that follows: ``text``, its ``kind``, and ``ends``: where the guess
    completes the value (a number of the conversation, a name ended), the texts that may close
    the value after it, most likely first; ``()`` where the value need not end there."""

    text: str
    kind: _Kind
    ends: tuple[str, ...] = ()


class DraftSource:
    """Where drafts come from for one call: the conversation's texts, oldest first."""

    __slots__ = ("_min_match", "_names", "_numbers", "_starts", "_strings", "_text")

    def __init__(
        self,
        texts: Sequence[str],
        *,
        min_match: int = MIN_MATCH,
        request: str = "",
        syntax: ValueSyntax = JSON_STRINGS,
    ) -> None:
        if min_match < 1:
            raise ValueError(f"min_match must be at least 1, got {min_match}")
        self._min_match = min_match
        self._strings = _Strings(syntax)
        # The request's numbers in order, as JSON writes them: guesses for a value not begun.
        self._starts = [m.group().replace(",", "") for m in _NUMBER.finditer(request)]
        # The request's names in order, escaped: guesses for a string not begun.
        self._names = _names(request, syntax)
        kept = [text for text in texts if text]
        # Each text as it stands inside a string value, so a written value matches it verbatim.
        self._text = "".join(_escaped(text, syntax) + _END for text in kept)
        # Every prefix of every number -> the rest of the most recent number with that prefix.
        self._numbers: dict[str, str] = {}
        for text in kept:
            for match in _NUMBER.finditer(text):
                number = match.group().replace(",", "")
                for cut in range(1, len(number) + 1):
                    self._numbers[number[:cut]] = number[cut:]

    @classmethod
    def from_messages(
        cls,
        messages: Sequence[Mapping[str, Any]],
        *,
        min_match: int = MIN_MATCH,
        syntax: ValueSyntax = JSON_STRINGS,
    ) -> DraftSource:
        """The texts of OpenAI-style ``messages`` (oldest first): user and tool content (a
        string, or ``{"type": "text", "text": ...}`` parts), the assistant's text and the
        argument values of its calls; not the system prompt. ``syntax``: the format's
        (``fmt.value_syntax``)."""
        texts: list[str] = []
        request = ""
        for message in messages:
            if message.get("role") in ("system", "developer"):
                continue
            texts.extend(content_texts(message.get("content")))
            if message.get("role") == "user":
                request = " ".join(content_texts(message.get("content")))
            if message.get("role") == "assistant":
                for call in message.get("tool_calls") or ():
                    texts.extend(_argument_texts(call))
        return cls(texts, min_match=min_match, request=request, syntax=syntax)

    def propose(self, written: str, *, max_chars: int = 64, in_string: bool | None = None) -> str:
        """A draft to follow ``written`` (the call text so far), or ``""``.

        ``in_string``: whether ``written`` ends inside a string value, when the caller knows
        (then the value is what follows the last unescaped quote, or all of ``written`` if it
        holds none); ``None`` finds out by scanning ``written``.
        """
        if max_chars <= 0:
            return ""
        if in_string is None:
            kind, value = self._strings.value_at_end(written)
        elif in_string:
            kind, value = "string", self._strings.after_opening_quote(written)
        else:
            kind, value = _number_at_end(written)
        if kind == "number":
            return self._numbers.get(value, "")[:max_chars]
        if kind == "string":
            return self._string_draft(value, max_chars)[0]
        return ""  # a value not begun is guess()'s

    def guess(self, written: str, *, max_chars: int = 64) -> Guess | None:
        """What :meth:`propose` drafts, with its kind (``"string"``: a string value's rest,
        ``"phrase"``: the rest of a phrase the string copies, ``"number"``: a number's rest),
        or for a value not begun (``written`` ends after a member's ``:`` and spaces, or in an
        array) the request's first number not yet written in the call (``"start"``); where
        those have nothing and the call has begun to loop, the loop's next turn
        (``"repeat"``); ``None`` when there is no guess.

        A guess that completes the value says how it may be closed (:class:`Guess` ``ends``):
        a start and a number's rest end with the conversation's number, a string's rest with
        its name (the source's text goes on with no more of the word), a phrase's with its
        clause. Such a guess may be empty: the value written so far is already a whole
        number or name of the conversation."""
        if max_chars <= 0:
            return None
        strings = self._strings
        kind, value = strings.value_at_end(written)
        text, ends = "", False
        if kind == "start":
            if not strings.item_before.search(written):  # an array of strings takes no number
                text = self._first_unwritten_number(written)
                ends = bool(text)
        elif kind == "number":
            rest = self._numbers.get(value)
            text, ends = rest or "", rest is not None
        elif kind == "string" and not value:
            text = self._first_unwritten_name(written)
            kind, ends = ("name", True) if text else (kind, False)
        elif kind == "string":
            text, ends, phrase = self._string_draft(value, max_chars)
            kind = "phrase" if phrase else kind
        if kind is not None and (text or ends):
            ends = ends and len(text) <= max_chars  # a guess cut short does not end the value
            closers = strings.ends if kind in ("string", "name", "phrase") else NUMBER_ENDS
            return Guess(text[:max_chars], kind, closers if ends else ())
        text = _repeat_draft(written, max_chars)
        return Guess(text, "repeat") if text else None

    def _first_unwritten_name(self, written: str) -> str:
        """The request's first name (a capitalised word inside a sentence and the capitalised
        or numbered words after it: "San Francisco") that the call has not written yet."""
        return next((name for name in self._names if name not in written), "")

    def _first_unwritten_number(self, written: str) -> str:
        """The request's first number that the call has not written yet (each occurrence
        counts once: "3 and 3" guesses 3 twice)."""
        left = list(self._starts)
        for match in _WRITTEN_NUMBER.finditer(written):
            if match.group(1) in left:
                left.remove(match.group(1))
        return left[0] if left else ""

    def _string_draft(self, value: str, max_chars: int) -> tuple[str, bool, bool]:
        """The string's rest from the conversation (the module's choices), whether the
        source's name (or phrase) ends there (so the value probably does too), and whether the
        value copies a phrase (its rest then runs to the end of the source's clause)."""
        if len(value) < self._min_match:
            return "", False, False
        text = self._text
        if value[-self._min_match :] not in text:
            return "", False, False
        low = longest_suffix_in(value, text, self._min_match, min(len(value), MAX_MATCH))
        at = text.rfind(value[-low:]) + low
        strings = self._strings
        begun = strings.open_escape(value, len(value))
        if begun != strings.open_escape(text, at):
            return "", False, False  # the match ends at a different point of an escape
        head = ""
        if begun:  # the draft first completes the escape the value has begun
            if begun != "\\":
                head = text[at : at + 6 - len(begun)]
            else:
                head = text[at : at + (5 if text.startswith("u", at) else 1)]
            at += len(head)
        rest = strings.plain.match(text, at, at + max(0, max_chars - len(head)))
        # A value copied from prose is mostly a name: it ends with its word, or with the
        # capitalised words that follow it ("New York City"), rarely with the sentence. A
        # value that has copied a phrase goes on with it to the end of its clause.
        phrase = bool(_PHRASE.search(value[-low:]))
        name = (_CLAUSE if phrase else _NAME).match(rest.group()) if rest else None
        draft = head + (name.group() if name else "")
        goes_on = (_PHRASE_GOES_ON if phrase else _NAME_GOES_ON).match(
            text, at + len(draft) - len(head)
        )
        return draft, not goes_on, phrase


def _escaped(text: str, syntax: ValueSyntax) -> str:
    """``text`` as it stands inside a string value, without NUL (:data:`_END`)."""
    return syntax.escape(text).replace(_END, "")


def _names(request: str, syntax: ValueSyntax) -> list[str]:
    """The request's names in order (see :data:`_NAME_BEGINS`), each with the capitalised or
    numbered words after it, escaped; a word inside a name begins none of its own."""
    names: list[str] = []
    end = 0
    for begin in _NAME_BEGINS.finditer(request):
        if begin.start() == 0 or begin.start() < end:
            continue
        name = _NAME.match(request, begin.start())
        if name is not None and name.group():
            names.append(_escaped(name.group(), syntax))
            end = name.end()
    return names


def longest_suffix_in(text: str, haystack: str, shortest: int, longest: int) -> int:
    """The length of ``text``'s longest suffix that occurs in ``haystack``, from ``shortest``
    (whose suffix must occur) to ``longest`` characters: a binary search, since a suffix that
    occurs has every shorter suffix occur."""
    low, high = shortest, longest
    while low < high:
        middle = (low + high + 1) // 2
        if text[-middle:] in haystack:
            low = middle
        else:
            high = middle - 1
    return low


def earlier_suffix(written: str, shortest: int, longest: int) -> tuple[int, int] | None:
    """The longest suffix of ``written`` (``shortest`` to ``longest`` characters) that occurs
    earlier in ``written`` itself, an occurrence ending before the suffix does: ``(its length,
    where the text that followed its most recent occurrence begins)``; ``None`` where even the
    shortest does not occur."""
    end = len(written)
    earlier = written[: end - 1]
    if end <= shortest or written[-shortest:] not in earlier:
        return None
    length = longest_suffix_in(written, earlier, shortest, min(end - 1, longest))
    return length, earlier.rfind(written[-length:]) + length


def _repeat_draft(written: str, max_chars: int) -> str:
    """Where ``written`` ends in a loop — its last ``d`` characters (at least
    :data:`REPEAT_MIN`) written twice in a row — the loop's next ``max_chars`` characters;
    ``""`` otherwise."""
    found = earlier_suffix(written, REPEAT_MIN, MAX_MATCH)
    if found is None:
        return ""
    (low, at), end = found, len(written)
    if low < end - at:
        return ""  # the text does not end in one period written twice over: not a loop
    return looped(written, at, max_chars)


def looped(written: str, at: int, max_chars: int) -> str:
    """``max_chars`` characters of ``written`` from ``at`` on, going round again from ``at``
    past its end: where the text from ``at`` followed what ``written`` now ends with, it goes
    on so again (the next token's look-up would find the occurrence just drafted)."""
    period = written[at:]
    if not period:
        return ""
    return (period * -(-max_chars // len(period)))[:max_chars]


class _Strings:
    """The call text as a format's :class:`ValueSyntax` writes it: where a value is, where a
    string's escapes are. Every syntax has JSON's shape; its strings are its own."""

    __slots__ = ("ends", "item_before", "plain", "quote", "syntax", "token")

    def __init__(self, syntax: ValueSyntax) -> None:
        self.syntax, self.ends = syntax, syntax.string_ends
        quote = re.escape(syntax.quote)
        if syntax.backslash_escapes:  # a one-character quote (ValueSyntax checks)
            body = rf"(?:[^{quote}\\]+|\\.)*"
        else:
            body = rf"(?:(?!{quote}).)*"
        self.quote = syntax.quote
        # A string (group 1 its closing quote, absent while it runs to the end) or structure.
        self.token = re.compile(rf"{quote}{body}({quote})?|{_STRUCTURE}", re.DOTALL)
        # The text ends after an array item that was a string and its comma: the next item is
        # not begun.
        self.item_before = re.compile(rf"{quote}\s*,\s*\Z")
        self.plain = _PLAIN if syntax.backslash_escapes else _PLAIN_UNESCAPED

    def value_at_end(self, written: str) -> tuple[_Kind | None, str]:
        """What ``written`` ends inside: a string value and its text after the opening quote,
        a number value and its characters, or neither (a key, structure, ``true``…)."""
        stack: list[str] = []
        previous = ""
        end = 0
        for match in self.token.finditer(written):
            token = match.group()
            if token.startswith(self.quote):
                if match.group(1) is None:  # this string runs to the end of the text
                    key = bool(stack) and stack[-1] == "{" and previous in ("{", ",")
                    value = written[match.start() + len(self.quote) :]
                    return (None, "") if key else ("string", value)
                previous = '"'
            elif token in "[{":
                stack.append(token)
                previous = token
            elif token in "]}":
                if stack:
                    stack.pop()
                previous = token
            else:
                previous = token
            end = match.end()
        in_value = previous in ("", ":") or (previous in ("[", ",") and stack[-1:] == ["["])
        if not in_value:
            return None, ""
        rest = written[end:]
        if previous and not rest.strip():
            return "start", ""  # after a member's colon or in an array, nothing written yet
        return _number_at_end(rest)

    def after_opening_quote(self, written: str) -> str:
        """The string value ``written`` ends inside: what follows its last opening quote."""
        at = written.rfind(self.quote)
        while at >= 0 and self.syntax.backslash_escapes and _trailing_backslashes(written, at) % 2:
            at = written.rfind(self.quote, 0, at)
        return written[at + len(self.quote) :] if at >= 0 else written

    def open_escape(self, text: str, end: int) -> str:
        """The escape that escaped ``text`` has begun and not finished at ``end``: ``""``,
        ``\\``, or ``\\u`` with up to three hex digits (always ``""`` in a syntax without
        backslash escapes)."""
        if not self.syntax.backslash_escapes:
            return ""
        for begun in range(1, 6):
            start = end - begun
            if start < 0 or text[start] != "\\" or _trailing_backslashes(text, start) % 2:
                continue  # not a backslash that opens an escape
            rest = text[start + 1 : end]
            if begun == 1 or (rest[0] == "u" and all(c in _HEX for c in rest[1:])):
                return text[start:end]
            return ""
        return ""


def _number_at_end(text: str) -> tuple[_Kind | None, str]:
    match = _NUMBER_TAIL.search(text)
    return ("number", match.group()) if match else (None, "")


def _trailing_backslashes(text: str, end: int) -> int:
    start = end
    while start > 0 and text[start - 1] == "\\":
        start -= 1
    return end - start


def content_texts(content: Any) -> Iterator[str]:
    if isinstance(content, str):
        yield content
    elif isinstance(content, Mapping):
        if content.get("type") == "text" and isinstance(content.get("text"), str):
            yield content["text"]
    elif isinstance(content, Sequence):
        for part in content:
            yield from content_texts(part)


def _argument_texts(call: Any) -> Iterator[str]:
    """The string and number values of a call's arguments (:func:`read_call`), in order;
    arguments that are not JSON, as their text."""
    _, arguments = read_call(call)
    if isinstance(arguments, str):
        yield arguments
        return
    yield from _leaf_texts(arguments)


def _leaf_texts(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield json.dumps(value)  # as every format writes a number, and _NUMBER reads it
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _leaf_texts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaf_texts(item)
