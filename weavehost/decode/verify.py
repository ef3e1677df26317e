"""Verified decoding: greedy constrained decoding that reads drafted tokens many per pass.

Stage: decoding (the loop under ``weave``'s selector, its write-back and everything after it).
:func:`verified_decode` writes exactly the tokens that greedy token-by-token constrained
decoding (the ``constrained`` strategy) writes on the same sequence under the same constraint,
up to floating-point differences between a pass of one row and a pass of many. It only changes
how many passes that takes:

- Each pass holds the *pending* tokens (chosen already as the constrained argmax, not yet read
  into the KV cache) followed by a *draft*: tokens proposed before the pass. A drafted token is
  accepted when it equals the masked argmax of the logits of the row before it; the first one
  that does not is rejected with everything after it, and that argmax becomes the next pending
  token. A drafted token that is the only one the grammar allows at its place
  (:meth:`~weavehost.decode.constraint.Constraint.certain`: the mask is checked, so this holds
  by construction) is the masked argmax whatever the logits, so the row before it reads none:
  a logits row costs a pass about 1.3 ms on Qwen's 151,936-token vocabulary (AVX-512, 2
  threads), and llguidance's forced tokens are such tokens (all 3,002 forced positions of 40
  Qwen and 60 SmolLM2 bench-200 calls were). Every pass therefore advances the sequence by at
  least one token, and a draft that is wrong costs rows, never the call.
- Drafts come, in this order: from an explicit draft given by the caller (the call ``weave``
  assembled from its parallel values — verified at write-back — with each token the model
  was seen to write in two split so where the mask allows it, :func:`_split_where_allowed`),
  from the tokens the grammar
  forces (jump-forward's canonical tokens — verified too, so a forced run whose canonical
  split differs from the model's own split is caught), then *guesses*: the text the grammar
  forces past those tokens (``" "`` before a string value, which no token can be forced for)
  and a ``drafter``'s text after it (:mod:`weavehost.decode.drafts`), tokenized together;
  where that guess completes a value, the value's closing text, the grammar's text after it
  and the next value's guess, again and again (:func:`_chain`). Each
  guessed token has a kind, and ``draft_rows`` says how many of them a pass carries beside its
  pending and forced rows (the plan, from each kind's acceptance rate); ``by_kind`` on the
  outcome counts, per kind, the guessed tokens a pass reached and those it accepted.
- On return the sequence holds every written token (the last one read with logits; with
  ``read_last=False`` all but the ``unread`` last ones) and nothing rejected; the constraint
  has consumed exactly the written tokens.
- ``completed_at`` is when the text was known: its last token taken, or, where a pass held
  only tokens the grammar forces up to its end (the closer after a chosen ``}}``), before
  that pass, as :func:`~weavehost.decode.guided.guided_decode` counts a forced run once it
  is consumed.

``mismatch`` records where an explicit draft first differed from the argmax, with the logit
gap there (the model's argmax logit minus the drafted token's), so a rejected parallel value
can be told apart as a near-tie or a real difference.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from weavehost.decode.constraint import Constraint, only_allowed
from weavehost.decode.padding import Shape, run_shaped
from weavehost.engine import Engine, Row

__all__ = [
    "CHAIN_TOKENS",
    "CLOSE",
    "END",
    "GRAMMAR",
    "DraftMismatch",
    "DraftRows",
    "DraftText",
    "Drafter",
    "VerifiedOutcome",
    "verified_decode",
]

# Where a guessed token came from; acceptance is counted per kind (VerifiedOutcome.by_kind).
GRAMMAR = "grammar"  # text the grammar forces that no token could be prefilled for yet


# The text that closes a value a guess completed (``",`` before the next member, ``}``), and
# what the grammar forces after it, guessed in the same pass (see _chain).
END = "end"
# The most guessed tokens a chain over value ends holds (it is cut to the plan's rows anyway).
CHAIN_TOKENS = 32
# Where the grammar allows more than one closing text (optional arguments may follow): the
# first of the guess's (the next member's comma), guessed at its own rate.
CLOSE = "close"
# The model's own split of a drafted token (by model file and drafted token): where the model
# chose a shorter token that spells the start of a guessed or explicitly drafted one (``}}``
# where the tokenizer's draft had Qwen's fused ``}}\n``), later drafts split that token so
# (_model_split).
_SPLITS: dict[tuple[str, int], int] = {}
# A value's closing texts (``",``, ``}``…) as each model tokenizes them, by model file: asked
# at every step of every chain.
_CLOSINGS: dict[tuple[str, str], list[int]] = {}


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


@dataclass(frozen=True, slots=True)
class DraftMismatch:
    """Where an explicit draft first lost to the model's own choice."""

    index: int  # position in the run's tokens
    drafted: int
    chosen: int
    logit_gap: float


@dataclass(frozen=True, slots=True)
class VerifiedOutcome:
    """What a verified run wrote on its sequence, and when its text was complete."""

    tokens: list[int]
    text: str
    completed_at: float
    finished: bool
    error: str | None = None
    drafted: int = 0
    accepted: int = 0
    mismatch: DraftMismatch | None = None
    # Per kind of guessed token (the grammar's text past its forced tokens, the drafter's):
    # (reached, accepted). Reached: a pass read it and every guessed token before it was
    # accepted, so accepted / reached is the rate at which the next such token is accepted.
    by_kind: dict[str, tuple[int, int]] = field(default_factory=dict)
    # The last tokens written but not read into the sequence (``read_last=False``): 0 or 1.
    unread: int = 0


def verified_decode(
    engine: Engine,
    constraint: Constraint,
    *,
    seq: int = 0,
    max_tokens: int,
    pending: Sequence[int] = (),
    draft: Sequence[int] = (),
    drafter: Drafter | None = None,
    draft_rows: DraftRows = lambda base_rows, kinds: 0,
    stop: Callable[[bytes], bool] | None = None,
    watch: Callable[[bytes], None] | None = None,
    forced: bool = True,
    shape: Shape | None = None,
    read_last: bool = True,
) -> VerifiedOutcome:
    """Greedy decoding of ``seq`` under ``constraint``, drafts verified in each pass.

    ``pending`` are tokens the constraint has already consumed and the caller already chose
    (verified), which ``seq`` does not hold yet; without them the run starts from ``seq``'s
    next-token logits. ``pending`` tokens are not part of the returned ``tokens``. ``draft`` is
    an explicit proposal for the tokens that follow; ``drafter`` proposes more as the text
    grows. ``stop`` is checked on the written text after each token and ends the run there;
    ``watch`` is shown the written text after each token (the token is verified by then).
    ``forced=False`` drafts no grammar-forced tokens (the ``weave:no_forced`` ablation): they
    are then decoded like any other token, one pass each unless another draft carries them.
    ``shape`` (the plan's :meth:`~weavehost.decode.padding.DecodePlan.shape_for`) widens a
    pass with padding rows on the engine's last sequence (emptied after the pass; it must be
    free, as it is outside ``weave``'s parallel values) and has more rows compute logits where
    that is cheaper.
    ``read_last=False``: a run that ends (``stop``, the grammar's end) with a token chosen but
    not yet read leaves it unread (``unread`` on the outcome): a caller that reads it again
    with a draft after it (``weave``'s write-back after its selector) saves a pass.
    """
    tokens: list[int] = []
    text = b""
    explicit = list(draft)
    queue = list(pending)  # chosen, consumed, not yet in the KV cache
    drafted = accepted = 0
    by_kind: dict[str, list[int]] = {}
    mismatch: DraftMismatch | None = None
    completed_at = time.perf_counter()
    # Set when a pass holds only tokens the grammar forces, up to its end: the text is known
    # before that pass reads them in, as jump_forward's is once its forced run is consumed.
    known = False
    error: str | None = None
    halted = False  # stop() said so, or the constraint stopped or failed

    def take(token: int) -> None:
        nonlocal text, completed_at, halted, error
        tokens.append(token)
        text += engine.token_bytes(token)
        if not known:
            completed_at = time.perf_counter()
        if watch is not None:
            watch(text)
        if constraint.failed:
            error, halted = "constraint failed", True
        elif constraint.stopped or (stop is not None and stop(text)):
            halted = True

    while True:
        if not queue:
            if halted or len(tokens) >= max_tokens or constraint.stopped:
                break
            token = constraint.best(engine.last_logits(seq))
            if token is None:
                error = "no token allowed"
                break
            constraint.consume(token)
            queue.append(token)
            if explicit:
                if explicit[0] != token:
                    drafted_token = explicit[0]
                    explicit, differs = _follow(engine, explicit, token)
                    if differs and mismatch is None:
                        logits = engine.last_logits(seq)
                        mismatch = _mismatch(logits, len(tokens), drafted_token, token)
                    elif not differs:
                        _learn_split(engine, drafted_token, token)
                else:
                    explicit.pop(0)
            take(token)
        if halted and not read_last:
            break  # the chosen tokens stay unread: the caller reads them
        proposal: list[int] = []
        kinds: list[str] = []  # of the guessed tokens at the end of the proposal
        from_explicit = bool(explicit)
        if not halted:
            room = max(0, max_tokens - len(tokens))
            explicit = _split_where_allowed(engine, constraint, explicit)
            proposal, kinds = _proposal(
                engine, constraint, explicit, drafter, text, room, len(queue), draft_rows, forced
            )
        guessed_from = len(proposal) - len(kinds)  # proposal[guessed_from:] are guesses
        # The mask before each drafted token, computed once and used again to verify it; a
        # drafted token the mask alone allows needs no logits on the row before it.
        masks, stops = constraint.walk(proposal)
        certain = only_allowed(masks, proposal)
        if proposal and stops and all(certain):
            known, completed_at = True, time.perf_counter()
        before = len(queue) - 1  # proposal[i] is verified by the logits after row before + i
        wanted = [False] * (len(queue) + len(proposal))
        wanted[-1] = True  # the next token's
        for index, sure in enumerate(certain):
            wanted[before + index] = wanted[before + index] or not sure
        rows = [Row(token, (seq,), logits=wanted[i]) for i, token in enumerate(queue)] + [
            Row(token, (seq,), logits=wanted[len(queue) + i], draft=True)
            for i, token in enumerate(proposal)
        ]
        start = engine.seq_len(seq)
        out = iter(run_shaped(engine, rows, shape))
        # The logits after each row that asked for them, by the row's place in the pass.
        after = {i: next(out) for i in range(len(rows)) if wanted[i]}
        queue = []
        drafted += len(proposal)
        kept = 0
        refused = False  # the model chose another token than a drafted one
        for index, token in enumerate(proposal):
            if certain[index]:
                choice: int | None = token
            else:
                mask = masks[index] if index < len(masks) else None
                choice = constraint.best(after[before + index], mask)
            if choice != token:
                refused = True
                if index >= guessed_from and choice is not None:
                    _learn_split(engine, token, choice)
                if choice is None:
                    error = "no token allowed"
                    halted = True
                else:
                    if from_explicit:
                        explicit, differs = _follow(engine, explicit[index:], choice)
                        if differs and mismatch is None:
                            logits = after[before + index]
                            mismatch = _mismatch(logits, len(tokens), token, choice)
                        elif not differs:
                            _learn_split(engine, token, choice)
                    constraint.consume(choice)
                    queue.append(choice)
                    take(choice)
                break
            constraint.consume(token)
            kept += 1
            take(token)
            if halted:
                break
        if kept < len(proposal):
            # Only the verified rows stay; the first rejected one and all after it go. A run
            # stopped inside certain tokens read no logits after its last kept row: the
            # sequence then has no next-token logits (the caller reads its last token again).
            engine.drop(seq, start + before + 1 + kept, next_logits=after.get(before + kept))
        if from_explicit and kept == len(proposal):
            explicit = explicit[kept:]
        accepted += kept
        _count_kinds(by_kind, kinds, max(0, kept - guessed_from), rejected=refused)
        engine.count_accepted(kept)
        if halted and not queue:
            break
    finished = error is None and (constraint.stopped or constraint.accepting)
    if error is None and not finished and not halted:
        error = f"the call did not finish within {max_tokens} tokens"
    return VerifiedOutcome(
        tokens,
        text.decode("utf-8", errors="replace"),
        completed_at,
        finished,
        error,
        drafted,
        accepted,
        mismatch,
        {kind: (reached, hits) for kind, (reached, hits) in by_kind.items()},
        len(queue),
    )


def _proposal(
    engine: Engine,
    constraint: Constraint,
    explicit: list[int],
    drafter: Drafter | None,
    text: bytes,
    room: int,
    pending: int,
    draft_rows: DraftRows,
    forced: bool = True,
) -> tuple[list[int], list[str]]:
    """The draft for the next pass and the kind of each guessed token at its end: the rest of
    the explicit draft (whole, no guesses), else the forced tokens, then guesses — the text
    the grammar forces past them (its first token may fuse with what follows, so it is not
    forced) and the drafter's text after it, tokenized together — as many as ``draft_rows``
    allows beside the pending and forced rows; only what the grammar accepts from here, at
    most ``room``."""
    if explicit:
        proposal = explicit[:room]
        return proposal[: constraint.valid_prefix(proposal)], []
    proposal = constraint.forced()[:room] if forced else []
    written = text + b"".join(engine.token_bytes(t) for t in proposal)
    lead = b""  # forced text no token could be prefilled for (never a special token's)
    if forced:
        forced_text, _ = constraint.forced_text()
        if forced_text.startswith(written[len(text) :]):
            lead = _whole_characters(forced_text[len(written) - len(text) :])
    guess = drafter(written + lead) if drafter is not None else None
    candidates, kinds = _guesses(engine, lead, guess)
    if forced and drafter is not None and guess is not None and guess.ends:
        more, more_kinds = _chain(
            engine,
            constraint,
            drafter,
            proposal + candidates,
            written + lead + guess.text.encode(),
            guess.ends,
        )
        candidates += more
        kinds += more_kinds
    cap = min(draft_rows(pending + len(proposal), kinds), room - len(proposal)) if kinds else 0
    forced_rows = len(proposal)
    proposal += candidates[: max(0, cap)]
    valid = constraint.valid_prefix(proposal)
    return proposal[:valid], kinds[: max(0, valid - forced_rows)]


def _chain(
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
            closings = [(end, _closing_tokens(engine, end)) for end in ends]
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
            segment, segment_kinds = _tokens_of(engine, parts)
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


def _model_split(engine: Engine, tokens: list[int]) -> list[int]:
    """``tokens`` (the tokenizer's split of a guess) with each token the model was seen to
    write as a shorter token and the rest (:func:`_learn_split`) split that way."""
    model = str(getattr(engine, "path", ""))
    out: list[int] = []
    for token in tokens:
        first = _SPLITS.get((model, token))
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


def _split_where_allowed(engine: Engine, constraint: Constraint, tokens: list[int]) -> list[int]:
    """``tokens`` (an explicit draft from the constraint's state) with each token the model
    was seen to write split (:func:`_learn_split`) split so where the mask there allows the
    shorter token: where the grammar forces the fused one (``",`` after a tool's name, where
    the model writes ``"`` ``,`` after a value), it stays whole. Nothing is consumed."""
    model = str(getattr(engine, "path", ""))
    if not any((model, t) in _SPLITS for t in tokens):
        return tokens
    out: list[int] = []
    consumed = 0
    try:
        for index, token in enumerate(tokens):
            pieces = _model_split(engine, [token])
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


def _learn_split(engine: Engine, guessed: int, chosen: int) -> None:
    """Remember how the model split a guessed token's text: ``chosen`` spells its start (the
    model writes the rest after it), or, the other way round, the model wrote whole what an
    earlier split had cut (the split is forgotten)."""
    model = str(getattr(engine, "path", ""))
    guessed_text, chosen_text = engine.token_bytes(guessed), engine.token_bytes(chosen)
    if len(chosen_text) < len(guessed_text) and guessed_text.startswith(chosen_text):
        _SPLITS[(model, guessed)] = chosen
    elif len(chosen_text) > len(guessed_text) and chosen_text.startswith(guessed_text):
        _SPLITS.pop((model, chosen), None)


def _closing_tokens(engine: Engine, text: str) -> list[int]:
    """``text`` (a value's closing text) as the engine's tokenizer splits it, tokenized once."""
    model = str(getattr(engine, "path", ""))
    if not model:  # no model file to key by (a test's stand-in): tokenize each time
        return engine.tokenize(text)
    key = (model, text)
    tokens = _CLOSINGS.get(key)
    if tokens is None:
        tokens = _CLOSINGS[key] = engine.tokenize(text)
    return tokens


def _allows(constraint: Constraint, tokens: list[int]) -> bool:
    """Whether the grammar accepts ``tokens`` next."""
    return bool(tokens) and constraint.valid_prefix(tokens) == len(tokens)


def _guesses(engine: Engine, lead: bytes, guess: DraftText | None) -> tuple[list[int], list[str]]:
    """``lead`` (the grammar's text) and the drafter's ``guess`` as tokens, tokenized together
    so the split is the tokenizer's, each with its kind: a token that begins inside ``lead``
    is the grammar's."""
    parts = [(lead, GRAMMAR)]
    if guess is not None:
        parts.append((guess.text.encode(), guess.kind))
    return _tokens_of(engine, parts)


def _tokens_of(engine: Engine, parts: Sequence[tuple[bytes, str]]) -> tuple[list[int], list[str]]:
    """``parts`` (whole-character texts, each with its kind) as tokens, tokenized together so
    the split is the tokenizer's (or the model's own, :func:`_model_split`), each token with
    the kind of the part it begins in."""
    text = b"".join(piece for piece, _ in parts)
    if not text:
        return [], []
    tokens = _model_split(engine, engine.tokenize(text.decode("utf-8")))
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


def _count_kinds(
    by_kind: dict[str, list[int]], kinds: Sequence[str], kept: int, *, rejected: bool
) -> None:
    """Count a pass's guessed tokens by kind: the first ``kept`` accepted, the next one reached
    and rejected (when the pass rejected one), the rest never reached."""
    for index, kind in enumerate(kinds):
        if index > kept or (index == kept and not rejected):
            break
        counts = by_kind.setdefault(kind, [0, 0])
        counts[0] += 1
        counts[1] += index < kept


def _follow(engine: Engine, explicit: list[int], chosen: int) -> tuple[list[int], bool]:
    """The explicit draft after the model chose ``chosen`` where it had ``explicit[0]``, and
    whether that is a real difference. When ``chosen`` spells the start of the draft's text
    (the same text split another way, ``"`` where the draft had ``",``), the rest of the text
    stays the draft, tokenized afresh; otherwise the draft is given up."""
    rest = b"".join(engine.token_bytes(t) for t in explicit)
    piece = engine.token_bytes(chosen)
    if not rest.startswith(piece):
        return [], True
    try:
        tail = rest[len(piece) :].decode("utf-8")
    except UnicodeDecodeError:
        return [], False
    return (engine.tokenize(tail) if tail else []), False


def _mismatch(logits: np.ndarray, index: int, drafted: int, chosen: int) -> DraftMismatch:
    return DraftMismatch(index, drafted, chosen, float(logits[chosen] - logits[drafted]))
