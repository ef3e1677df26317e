"""Call text as tokens: how a call's text is written into the KV cache, and how the model
spells the text a format fixes.

Stage: decoding (shared by the strategies and the reply driver). Every rule about where
llama.cpp's tokenizer would put a token the model never writes lives here, once:

- **The added-token rule.** llama.cpp matches a user-defined added token (Qwen's
  ``<tool_call>``, ``</tool_call>``) wherever its text occurs, special parsing or not, and the
  model never writes that token itself: after the BFCL prompt Qwen2.5-Coder-0.5B gives it a
  logit of -3.4 against 17.0 for ``<``, and after the added token it ends the reply where after
  its own spelling (``<`` ``tool`` ``_call`` ``>``) it goes on. So fixed call text is either
  parsed with the model's special tokens where the format renders them
  (:func:`tokenize_call_text`, a call assembled by ``weave``), or written in ordinary tokens
  only (:func:`plain_tokens`), or spelled by the model itself, greedily among the tokens that
  spell on (:func:`spells_on`): an opener a free call begins with (:func:`spell_opener`,
  ``serial``) and a closer the reply driver writes again before it decides whether another call
  follows (:func:`respell_closer`).
- :func:`tokenize_call_text`: a format's special tokens are parsed only inside the call's fixed
  parts; values are plain text, and the text is tokenized in runs as long as possible, so no
  artificial boundary falls between a key and its value.

What the model's spellings cost to find is kept in its
:class:`~weavehost.decode.state.DecodeState` (an opener's table of the tokens that spell on at
each offset, a closer's last spelling, every token by its bytes).
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from weavehost.engine import Engine, Row
from weavehost.engine.vocab import SPECIAL_MARK, marked_tokens

if TYPE_CHECKING:
    from weavehost.decode.padding import DecodePlan
    from weavehost.decode.state import DecodeState, DraftAcceptance

__all__ = [
    "Respelled",
    "SpellingIndex",
    "SpellingPricing",
    "opener_tables",
    "plain_tokens",
    "respell_closer",
    "spell_opener",
    "spells_on",
    "tokenize_call_text",
]

# The texts left to spell whose tokens a SpellingIndex keeps found (a model's openers and
# closers have a few dozen suffixes between them); past this many it forgets them all.
SPELLING_RESTS_CAP = 256


def tokenize_call_text(engine: Engine, parts: Sequence[tuple[str, bool]]) -> list[int]:
    """Tokens of call text given as (text, fixed) parts: the model's special tokens are parsed
    only inside fixed parts; everything else (values) is plain text, tokenized in runs as long
    as possible so no artificial token boundary appears between a key and its value."""
    specials = sorted(engine.special_texts, key=len, reverse=True)
    tokens: list[int] = []
    plain = ""
    for text, fixed in parts:
        if not fixed:
            plain += text
            continue
        cursor = 0
        while cursor < len(text):
            hits = [(text.find(s, cursor), s) for s in specials if text.find(s, cursor) >= 0]
            if not hits:
                plain += text[cursor:]
                break
            at, special = min(hits, key=lambda hit: (hit[0], -len(hit[1])))
            plain += text[cursor:at]
            if plain:
                tokens.extend(engine.tokenize(plain))
                plain = ""
            tokens.extend(engine.tokenize(special, special=True))
            cursor = at + len(special)
    if plain:
        tokens.extend(engine.tokenize(plain))
    return tokens


def plain_tokens(engine: Engine, text: str) -> list[int]:
    """``text`` in ordinary tokens, never an added token (the added-token rule of the module
    docstring): the text is cut before the last character of each such occurrence and each
    part tokenized alone (at a ``>``, where the tokenizer's pre-split cuts anyway)."""
    cuts = {0, len(text)}
    for special in engine.special_texts:
        at = text.find(special)
        while at >= 0:
            cuts.add(at + len(special) - 1)
            at = text.find(special, at + 1)
    bounds = sorted(cuts)
    return [
        token
        for start, end in zip(bounds, bounds[1:], strict=False)
        for token in engine.tokenize(text[start:end])
    ]


def _opener_table(state: DecodeState, engine: Engine, opener: bytes) -> list[np.ndarray]:
    """For each offset ``i`` of ``opener``, the tokens that spell on from there
    (:meth:`SpellingIndex.spelling_on` of ``opener[i:]``)."""
    index = state.spelling_index(engine)
    return [index.spelling_on(opener[i:]) for i in range(len(opener))]


def opener_tables(
    state: DecodeState, engine: Engine, openers: Sequence[bytes]
) -> dict[bytes, list[np.ndarray]]:
    """The spelling tables of ``openers`` (see :func:`spell_opener`), built once per model."""
    return {opener: _opener_table(state, engine, opener) for opener in openers if opener}


def spell_opener(
    engine: Engine, tables: Mapping[bytes, list[np.ndarray]]
) -> tuple[list[int], bytes]:
    """Write one of the openers of ``tables`` (:func:`opener_tables`) on sequence 0, the model
    choosing greedily from sequence 0's next-token logits among the tokens that spell any
    opener still possible; return the tokens and their bytes (a whole opener, and what the
    last token wrote past it)."""
    tokens: list[int] = []
    text = b""
    if not tables:
        return tokens, text
    logits = engine.last_logits(0)
    while not any(text.startswith(opener) for opener in tables):
        live = [opener for opener in tables if opener.startswith(text)]
        allowed = np.unique(np.concatenate([tables[opener][len(text)] for opener in live]))
        if not allowed.size:  # no token spells on (a vocabulary without bytes for it)
            rest = engine.tokenize(live[0][len(text) :].decode(errors="replace"), special=True)
            engine.prefill(0, rest)
            return tokens + rest, text + b"".join(engine.token_bytes(t) for t in rest)
        token = int(allowed[int(np.argmax(logits[allowed]))])
        tokens.append(token)
        text += engine.token_bytes(token)
        logits = engine.decode_one(0, token)
    return tokens, text


@dataclass(frozen=True, slots=True)
class Respelled:
    """A call's closer written again in the model's tokens: how many of the strategy's tokens
    it replaced at the end of sequence 0, the tokens now there, and what the last of them wrote
    past the closer."""

    replaced: int
    tokens: list[int]
    past: bytes


def respell_closer(
    state: DecodeState, engine: Engine, closer: str, call: list[int]
) -> Respelled | None:
    """The call's closer (the last tokens of ``call``, on sequence 0) written again in the
    model's own tokens, so that the decision after the call reads the closer as the model
    writes it. A strategy writes ``</tool_call>`` as llama.cpp tokenizes it, Qwen's added
    token, which Qwen2.5-Coder-0.5B never writes itself: after that token it ends the reply;
    after ``<`` ``/`` ``to`` ``ol`` ``_`` ``call`` ``>``, its own greedy spelling, it goes on
    with another call (``docs/agent.md``; after the tokenizer's plain ``</`` ``tool`` ``_call``
    ``>`` it ends too). The text is unchanged and the model's tokens stay (the conversation's
    next prefill re-reads the closer where a chat template renders the added token).
    ``None``: the call does not end with the closer (nothing done)."""
    target = closer.encode("utf-8")
    held, cut = b"", len(call)
    while cut > 1 and len(held) < len(target):
        cut -= 1
        held = engine.token_bytes(call[cut]) + held
    if not target or not held.endswith(target):
        return None
    engine.drop(0, engine.seq_len(0) - (len(call) - cut) - 1)
    # This closer's last spelling first, then any other's whose tail spells what is left: a
    # call whose last value ends otherwise (``"}}`` or ``}}`` before ``\n</tool_call>``)
    # still writes ``</tool_call>`` as the last one did.
    state.closer_spellings.get(held)  # marked newest: this closer's own spelling is tried first
    guesses = state.closer_spellings.newest()
    pricing = SpellingPricing(state.plan(engine), state.acceptance(SPELLING))
    vocabulary = state.spelling_index(engine)
    tokens, text = _spell(engine, vocabulary, held, call[cut - 1], guesses, pricing)
    state.closer_spellings[held] = tokens
    return Respelled(len(call) - cut, tokens, text[len(held) :])


# The draft kinds of a spelling, for its acceptance (:class:`SpellingPricing`): the tail of an
# earlier spelling, or the tokenizer's own split of what is left.
SPELLING = "spelling"
TAIL, PLAIN = "tail", "plain"


@dataclass(frozen=True, slots=True)
class SpellingPricing:
    """How many drafted tokens a spelling's pass carries: the plan's price of its rows (each
    drafted one asks for logits) against the acceptance of that kind of draft, measured over
    the model's spellings (``acceptance``, by :data:`TAIL` and :data:`PLAIN`). On a table where
    a drafted row costs most of a pass, a spelling that often parts from its guess is written a
    token a pass."""

    plan: DecodePlan
    acceptance: DraftAcceptance

    def length(self, kind: str, base_rows: int, available: int) -> int:
        rate = self.acceptance.rate(kind)
        return self.plan.draft_length(base_rows, [rate] * available)

    def record(self, kind: str, drafted: int, kept: int) -> None:
        """A pass reached ``kept`` drafted tokens and the one after them, if any."""
        if drafted:
            self.acceptance.add({kind: (min(drafted, kept + 1), kept)})


def _spell(
    engine: Engine,
    vocabulary: SpellingIndex,
    target: bytes,
    first: int,
    guesses: Sequence[list[int]],
    pricing: SpellingPricing | None = None,
) -> tuple[list[int], bytes]:
    """``target`` written on sequence 0 after ``first`` (read again here) in the model's own
    tokens: each the greedy choice among the tokens that spell on (a prefix of what is left, or
    all of it and more), and the text they write. Earlier spellings (``guesses``) are drafted
    and verified: each drafted token is kept only if it is that greedy choice, so the result is
    the same with any guesses, in fewer passes with a good one; ``pricing`` says how many
    (``None``: all). ``vocabulary`` finds the tokens that spell on. Sequence 0 ends with the
    spelling, its last token read with logits."""
    tokens: list[int] = []
    text = b""
    pending = [first]
    while pending:
        draft, kind = _spelling_draft(engine, target[len(text) :], guesses)
        if pricing is not None and draft:
            draft = draft[: pricing.length(kind, len(pending), len(draft))]
        rows = [Row(t, (0,), logits=i == len(pending) - 1) for i, t in enumerate(pending)]
        rows += [Row(t, (0,), logits=True) for t in draft]
        start = engine.seq_len(0)
        outs = engine.run_pass(rows)
        pending, kept = [], 0
        for index, logits in enumerate(outs):
            rest = target[len(text) :]
            if not rest:
                break
            allowed = vocabulary.spelling_on(rest)
            choice = int(allowed[int(np.argmax(logits[allowed]))]) if allowed.size else None
            if choice is None:  # no token spells on: the tokenizer's own tokens for the rest
                engine.drop(0, start + len(rows) - len(draft) + kept, next_logits=logits)
                rest_tokens = plain_tokens(engine, rest.decode("utf-8", errors="replace"))
                engine.prefill(0, rest_tokens)
                return tokens + rest_tokens, text + rest
            tokens.append(choice)
            text += engine.token_bytes(choice)
            if index < len(draft) and choice == draft[index]:
                kept += 1
                continue
            pending = [choice]
            break
        if pricing is not None:
            pricing.record(kind, len(draft), kept)
        if kept < len(draft):
            engine.drop(0, start + len(rows) - len(draft) + kept, next_logits=outs[kept])
    return tokens, text


def _spelling_draft(
    engine: Engine, rest: bytes, guesses: Sequence[list[int]]
) -> tuple[list[int], str]:
    """What to draft while ``rest`` is left to spell, and its kind: the tail of the first
    earlier spelling (``guesses``, in order) that spells it from a token's start (:data:`TAIL`),
    else the tokenizer's own tokens for it (:data:`PLAIN`: a spelling that splits otherwise,
    ``_call`` where the last had ``_`` ``call``, then still ends in one more pass)."""
    if not rest:
        return [], PLAIN
    for guess in guesses:
        tail = _tail_spelling(engine, guess, rest)
        if tail:
            return tail, TAIL
    try:
        return plain_tokens(engine, rest.decode("utf-8")), PLAIN
    except UnicodeDecodeError:  # the rest begins inside a character the last token began
        return [], PLAIN


def _tail_spelling(engine: Engine, guess: list[int], rest: bytes) -> list[int] | None:
    """The last tokens of ``guess`` that spell ``rest`` from the first one's start, the last
    one perhaps spelling past it (as a spelling's last token may); ``None``: no such tail."""
    if not guess:
        return None
    last = len(engine.token_bytes(guess[-1]))
    tail = b""
    for start in range(len(guess) - 1, -1, -1):
        tail = engine.token_bytes(guess[start]) + tail
        if len(tail) - last >= len(rest):
            return None  # the tail already spells past ``rest`` before its last token
        if tail.startswith(rest):
            return guess[start:]
    return None


def spells_on(engine: Engine, rest: bytes, token: int) -> bool:
    """Whether ``token`` spells on where ``rest`` is left to write: its bytes are a prefix of
    ``rest`` or begin with it (an end-of-generation token, or one without bytes, never)."""
    piece = engine.token_bytes(token)
    if not piece or engine.is_end_of_generation(token):
        return False
    return rest.startswith(piece) or piece.startswith(rest)


class SpellingIndex:
    """Every token of a vocabulary by its bytes (special ones as their text), for the tokens
    that spell on where some bytes are left (:func:`spells_on`, found without a scan). Built
    once per model from :func:`~weavehost.engine.vocab.marked_tokens` (0.16–0.24 s for Qwen's
    152k tokens)."""

    def __init__(self, pieces: Sequence[bytes], excluded: Collection[int]) -> None:
        self._tokens: dict[bytes, list[int]] = {}
        for token, piece in enumerate(pieces):
            if piece and token not in excluded:
                self._tokens.setdefault(piece, []).append(token)
        self._sorted = sorted(self._tokens)
        # By rest: what is left to spell repeats (a closer's, an opener's suffixes).
        self._found: dict[bytes, np.ndarray] = {}

    @classmethod
    def of(cls, engine: Engine) -> SpellingIndex:
        """The index of ``engine``'s vocabulary; end-of-generation tokens spell nothing. A marked
        piece (a special token's, or a plain one whose bytes begin with the mark's byte) is read
        again from the engine: the mark alone cannot tell the two apart."""
        pieces = [
            engine.token_bytes(token) if piece.startswith(SPECIAL_MARK) else piece
            for token, piece in enumerate(marked_tokens(engine))
        ]
        return cls(pieces, engine.end_of_generation_tokens)

    def spelling_on(self, rest: bytes) -> np.ndarray:
        """The tokens whose bytes are a prefix of ``rest`` or begin with it (:func:`spells_on`),
        in token order."""
        found = self._found.get(rest)
        if found is None:
            prefixes = (rest[:end] for end in range(1, len(rest) + 1))
            tokens = [t for prefix in prefixes for t in self._tokens.get(prefix, ())]
            at = bisect.bisect_left(self._sorted, rest)
            while at < len(self._sorted) and self._sorted[at].startswith(rest):
                tokens.extend(self._tokens[self._sorted[at]])
                at += 1
            if len(self._found) >= SPELLING_RESTS_CAP:
                self._found.clear()
            found = self._found[rest] = np.unique(np.array(tokens, dtype=np.int64))
        return found
