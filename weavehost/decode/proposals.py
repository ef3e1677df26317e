"""What a verified pass drafts: the explicit draft, the grammar's forced tokens and guesses.

Stage: decoding (under :class:`~weavehost.decode.verify.Verifier`, which checks every token
proposed here). :func:`propose` builds the next pass's draft from the rest of an explicit
draft, else the tokens the grammar forces, then guesses: the text the grammar forces past them
and a drafter's text after it, tokenized together, and, where a guess completes a value, the
value's closing text, the grammar's text after it and the next value's guess (:func:`_chain`).
Each guessed token has a kind (:data:`GRAMMAR`, :data:`END`, :data:`CLOSE`, or the drafter's:
``"string"``, ``"number"``, ``"start"``…), whose acceptance rate sizes the draft.

Guarantees: nothing here consumes the constraint for good (what it walks is rolled back), and
every token proposed is one the grammar accepts from where the run is. Guesses are tokenized
as the model splits them (:func:`model_split`): a token the model was seen to write as a
shorter one and the rest (:func:`learn_split`, kept in the model's
:class:`~weavehost.decode.state.DecodeState`) is drafted split so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from weavehost.decode.constraint import Constraint
from weavehost.engine import Engine

if TYPE_CHECKING:
    from weavehost.decode.state import DecodeState

__all__ = [
    "CHAIN_TOKENS",
    "CLOSE",
    "EDGE",
    "END",
    "GRAMMAR",
    "DraftRows",
    "DraftText",
    "Drafter",
    "Drafts",
    "learn_split",
    "model_split",
    "no_rows",
    "propose",
    "split_where_allowed",
]

# Where a guessed token came from; acceptance is counted per kind (VerifiedOutcome.by_kind).
GRAMMAR = "grammar"  # text the grammar forces that no token could be prefilled for yet
# The last token of the grammar's text where nothing is guessed after it (`` {`` after
# ``"arguments":`` where optional arguments may follow, the `` `` before a boolean): text the
# model goes on with may fuse with it (`` {"``, `` false``), so it is guessed at its own rate.
EDGE = "edge"


# The text that closes a value a guess completed (``",`` before the next member, ``}``), and
# what the grammar forces after it, guessed in the same pass (see _chain).
END = "end"
# The most guessed tokens a chain over value ends holds (it is cut to the plan's rows anyway).
CHAIN_TOKENS = 32
# Where the grammar allows more than one closing text (optional arguments may follow): the
# first of the guess's (the next member's comma), guessed at its own rate.
CLOSE = "close"


@dataclass(frozen=True, slots=True)
class DraftText:
    """A drafter's guess at the text that follows, and its kind (``"string"``, ``"number"``,
    ``"start"``: see :mod:`weavehost.decode.drafts`). ``ends``: where the guess completes a
    value, the texts that may close it, most likely first (``",``, ``"}``); the one the grammar
    allows is guessed after it, then the grammar's text and the next value's guess."""

    text: str
    kind: str
    ends: tuple[str, ...] = ()


# Proposes draft text from the text this run has written so far (its bytes).
Drafter = Callable[[bytes], DraftText | None]
# How many of a pass's candidate draft tokens to send: given the rows the pass holds anyway and
# the kind of each candidate, in order.
DraftRows = Callable[[int, Sequence[str]], int]


def no_rows(base_rows: int, kinds: Sequence[str]) -> int:
    """No guessed tokens in any pass."""
    return 0


@dataclass(frozen=True, slots=True)
class Drafts:
    """What a verified run drafts from: ``explicit`` tokens proposed for what follows (the
    call ``weave`` assembled), a ``drafter`` that proposes more as the text grows, ``rows``:
    how many guessed tokens a pass carries, and ``forced``: whether the grammar's forced tokens
    are drafted (off: the ``weave:no_forced`` ablation, each decoded like any other token)."""

    explicit: Sequence[int] = ()
    drafter: Drafter | None = None
    rows: DraftRows = no_rows
    forced: bool = True


def propose(
    state: DecodeState,
    engine: Engine,
    constraint: Constraint,
    explicit: list[int],
    text: bytes,
    room: int,
    pending: int,
    drafts: Drafts,
) -> tuple[list[int], list[str]]:
    """The draft for the next pass and the kind of each guessed token at its end: the rest of
    the explicit draft (whole, no guesses), else the forced tokens, then guesses — the text
    the grammar forces past them (its first token may fuse with what follows, so it is not
    forced) and the drafter's text after it, tokenized together — as many as ``drafts.rows``
    allows beside the pending and forced rows; only what the grammar accepts from here, at
    most ``room``."""
    if explicit:
        proposal = explicit[:room]
        return proposal[: constraint.valid_prefix(proposal)], []
    drafter, forced = drafts.drafter, drafts.forced
    proposal = constraint.forced()[:room] if forced else []
    written = text + b"".join(engine.token_bytes(t) for t in proposal)
    lead = b""  # forced text no token could be prefilled for (never a special token's)
    if forced:
        forced_text, _ = constraint.forced_text()
        if forced_text.startswith(written[len(text) :]):
            lead = _whole_characters(forced_text[len(written) - len(text) :])
    guess = drafter(written + lead) if drafter is not None else None
    candidates, kinds = _guesses(state, engine, lead, guess)
    if forced and drafter is not None and guess is not None and guess.ends:
        more, more_kinds = _chain(
            state,
            engine,
            constraint,
            drafter,
            proposal + candidates,
            written + lead + guess.text.encode(),
            guess.ends,
        )
        candidates += more
        kinds += more_kinds
    cap = min(drafts.rows(pending + len(proposal), kinds), room - len(proposal)) if kinds else 0
    forced_rows = len(proposal)
    proposal += candidates[: max(0, cap)]
    valid = constraint.valid_prefix(proposal)
    return proposal[:valid], kinds[: max(0, valid - forced_rows)]


def _chain(
    state: DecodeState,
    engine: Engine,
    constraint: Constraint,
    drafter: Drafter,
    before: Sequence[int],
    text: bytes,
    ends: tuple[str, ...],
) -> tuple[list[int], list[str]]:
    """Guesses past the end of the value that ``before`` (tokens the grammar has not consumed
    yet, ending with a guess that completes a value; ``text`` is the written text with them)
    completes: a closing text of ``ends`` (:data:`END` when the grammar allows only it, after a
    required value the next member's ``,`` and after the last ``}``; :data:`CLOSE`, the first
    the grammar allows, where optional arguments may follow), the grammar's text after it, and
    the drafter's guess for the next value, tokenized together; then again while guesses
    complete values, at most :data:`CHAIN_TOKENS` tokens. A value copied from the request and
    the members after it are read in one pass, not one pass per value. The constraint walks
    the guesses and is rolled back: nothing is consumed."""
    tokens: list[int] = []
    kinds: list[str] = []
    if constraint.valid_prefix(list(before)) < len(before):
        return [], []  # the guess does not fit: nothing past it (a consumed misfit is an error)
    consumed = 0
    try:
        for token in before:
            constraint.consume(token)
            consumed += 1
        while ends and len(tokens) < CHAIN_TOKENS:
            closings = [(end, _closing_tokens(state, engine, end)) for end in ends]
            fits = [(end, closing) for end, closing in closings if _allows(constraint, closing)]
            if not fits:
                break
            (close, closing), end_kind = fits[0], END if len(fits) == 1 else CLOSE
            for token in closing:
                constraint.consume(token)
            after, special = constraint.forced_text()
            constraint.rollback(len(closing))
            after = _whole_characters(after)
            # Before a special token (a format's closer) the drafter has nothing to say.
            guess = None if special else drafter(text + close.encode() + after)
            parts = [(close.encode(), end_kind), (after, GRAMMAR)]
            if guess is not None:
                parts.append((guess.text.encode(), guess.kind))
            segment, segment_kinds = _tokens_of(
                state, engine, parts, open_end=guess is None and not special
            )
            valid = constraint.valid_prefix(segment)
            for token in segment[:valid]:
                constraint.consume(token)
            consumed += valid
            tokens += segment[:valid]
            kinds += segment_kinds[:valid]
            if valid < len(segment):
                break
            rest = constraint.forced()  # what no text could stand for (a special token)
            for token in rest:
                constraint.consume(token)
            consumed += len(rest)
            tokens += rest
            kinds += [GRAMMAR] * len(rest)
            if guess is None:
                break
            text += b"".join(piece for piece, _ in parts)
            ends = guess.ends
    finally:
        constraint.rollback(consumed)
    return tokens[:CHAIN_TOKENS], kinds[:CHAIN_TOKENS]


def model_split(state: DecodeState, engine: Engine, tokens: list[int]) -> list[int]:
    """``tokens`` (the tokenizer's split of a guess) with each token the model was seen to
    write as a shorter token and the rest (:func:`learn_split`) split that way."""
    out: list[int] = []
    for token in tokens:
        first = state.splits.get(token)
        rest = engine.token_bytes(token)[len(engine.token_bytes(first)) :] if first else b""
        try:
            text = rest.decode("utf-8")
        except UnicodeDecodeError:
            text = ""
        if first is None or not text:
            out.append(token)
        else:
            out += [first, *engine.tokenize(text)]
    return out


def split_where_allowed(
    state: DecodeState, engine: Engine, constraint: Constraint, tokens: list[int]
) -> list[int]:
    """``tokens`` (an explicit draft from the constraint's state) with each token the model
    was seen to write split (:func:`learn_split`) split so where the mask there allows the
    shorter token: where the grammar forces the fused one (``",`` after a tool's name, where
    the model writes ``"`` ``,`` after a value), it stays whole. Nothing is consumed."""
    if not any(t in state.splits for t in tokens):
        return tokens
    out: list[int] = []
    consumed = 0
    try:
        for index, token in enumerate(tokens):
            pieces = model_split(state, engine, [token])
            if len(pieces) > 1 and not constraint.allowed()[pieces[0]]:
                pieces = [token]
            for piece in pieces:
                if not constraint.consume(piece):
                    return out + tokens[index:]
                consumed += 1
            out += pieces
    finally:
        constraint.rollback(consumed)
    return out


def learn_split(state: DecodeState, engine: Engine, guessed: int, chosen: int) -> None:
    """Remember how the model split a guessed token's text: ``chosen`` spells its start (the
    model writes the rest after it), or, the other way round, the model wrote whole what an
    earlier split had cut (the split is forgotten)."""
    guessed_text, chosen_text = engine.token_bytes(guessed), engine.token_bytes(chosen)
    if len(chosen_text) < len(guessed_text) and guessed_text.startswith(chosen_text):
        state.splits[guessed] = chosen
    elif len(chosen_text) > len(guessed_text) and chosen_text.startswith(guessed_text):
        state.splits.pop(chosen)


def _closing_tokens(state: DecodeState, engine: Engine, text: str) -> list[int]:
    """``text`` (a value's closing text) as the engine's tokenizer splits it, tokenized once."""
    tokens = state.closings.get(text)
    if tokens is None:
        tokens = engine.tokenize(text)
        state.closings[text] = tokens
    return tokens


def _allows(constraint: Constraint, tokens: list[int]) -> bool:
    """Whether the grammar accepts ``tokens`` next."""
    return bool(tokens) and constraint.valid_prefix(tokens) == len(tokens)


def _guesses(
    state: DecodeState, engine: Engine, lead: bytes, guess: DraftText | None
) -> tuple[list[int], list[str]]:
    """``lead`` (the grammar's text) and the drafter's ``guess`` as tokens, tokenized together
    so the split is the tokenizer's, each with its kind: a token that begins inside ``lead``
    is the grammar's."""
    parts = [(lead, GRAMMAR)]
    if guess is not None:
        parts.append((guess.text.encode(), guess.kind))
    return _tokens_of(state, engine, parts, open_end=guess is None or not guess.text)


def _tokens_of(
    state: DecodeState,
    engine: Engine,
    parts: Sequence[tuple[bytes, str]],
    *,
    open_end: bool = False,
) -> tuple[list[int], list[str]]:
    """``parts`` (whole-character texts, each with its kind) as tokens, tokenized together so
    the split is the tokenizer's (or the model's own, :func:`model_split`), each token with
    the kind of the part it begins in. ``open_end``: the parts end in the grammar's text and
    unknown text follows, so the last token is an :data:`EDGE` (the model may fuse it with
    what follows)."""
    text = b"".join(piece for piece, _ in parts)
    if not text:
        return [], []
    tokens = model_split(state, engine, engine.tokenize(text.decode("utf-8")))
    bounds, kinds_of, edge = [], [], 0
    for piece, kind in parts:
        edge += len(piece)
        bounds.append(edge)
        kinds_of.append(kind)
    kinds: list[str] = []
    offset = 0
    for token in tokens:
        at = next((i for i, bound in enumerate(bounds) if offset < bound), len(bounds) - 1)
        kinds.append(kinds_of[at])
        offset += len(engine.token_bytes(token))
    if open_end and kinds[-1] == GRAMMAR:
        kinds[-1] = EDGE
    return tokens, kinds


def _whole_characters(data: bytes) -> bytes:
    """``data`` up to its last whole UTF-8 character (forced text may end inside one)."""
    for cut in range(len(data), max(-1, len(data) - 4), -1):
        try:
            data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return data[:cut]
    return b""
