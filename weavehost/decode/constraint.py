"""The llguidance bridge: compiled grammars as running token constraints on one vocabulary.

Stage: constraint running (under every constrained strategy). We use llguidance, a well-kept
Rust constraint engine whose Python matcher computes a token mask in ~45 µs for the embedded
model's 49k-token vocabulary (0.6% of a 7 ms serial pass; see ``docs/decoder.md``), rather than
a hand-written matcher. Grammars come from :mod:`weavehost.decode.grammar`.

Guarantees:

- One :class:`ConstraintFactory` per opened model (reading the vocabulary takes ~0.3 s), kept
  in its :class:`~weavehost.decode.state.DecodeState`; compiled grammars are cached (at most
  :data:`COMPILED_CAP`) and each :meth:`ConstraintFactory.new` is a fresh copy.
- llguidance tokenizes through llama.cpp's own function, reached only through the engine
  (:meth:`~weavehost.engine.Engine.native_tokenizer`).
- A grammar llguidance refuses, or one over :data:`~weavehost.decode.grammar.MAX_GRAMMAR_BYTES`,
  raises :class:`ConstraintError`; a compile slower than
  :data:`~weavehost.decode.grammar.MAX_COMPILE_S` is logged.
- Every mask a factory's constraints compute (:meth:`Constraint.allowed`) is timed on the
  factory's :class:`MaskClock` (two ``perf_counter`` reads a mask): what a call's time account
  reports as ``mask_s`` (:class:`~weavehost.decode.base.CallAttempt`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import llguidance
import numpy as np

from weavehost.decode.grammar import LIMITS, MAX_COMPILE_S, MAX_GRAMMAR_BYTES, GrammarBuilder
from weavehost.engine.vocab import SPECIAL_MARK, marked_tokens
from weavehost.errors import ConstraintError
from weavehost.formats.base import ModelFormat

if TYPE_CHECKING:
    from weavehost.engine import Engine

logger = logging.getLogger(__name__)

__all__ = [
    "Constraint",
    "ConstraintFactory",
    "MaskClock",
    "only_allowed",
]

# Compiled grammars a factory keeps (the call grammar of each tool set, each value's).
COMPILED_CAP = 512


class MaskClock:
    """The seconds spent computing masks (:meth:`Constraint.allowed`: llguidance's bitmask and
    its unpacking to one bool per token) with one factory's constraints, and how many masks.
    It only grows: a call's share is the difference of two readings."""

    __slots__ = ("masks", "seconds")

    def __init__(self) -> None:
        self.seconds = 0.0
        self.masks = 0


@dataclass(slots=True)
class Constraint:
    """One running matcher: mask logits, consume tokens, ask for forced tokens. ``clock``: where
    the time of its masks is added (its factory's)."""

    matcher: llguidance.LLMatcher
    n_vocab: int
    clock: MaskClock | None = None

    def allowed(self) -> np.ndarray:
        """A boolean array over the vocabulary: which tokens may come next."""
        started = time.perf_counter()
        raw = np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8)
        mask = np.unpackbits(raw, bitorder="little")[: self.n_vocab].astype(bool)
        clock = self.clock
        if clock is not None:
            clock.seconds += time.perf_counter() - started
            clock.masks += 1
        return mask

    def best(self, logits: np.ndarray, mask: np.ndarray | None = None) -> int | None:
        """The allowed token with the highest logit (greedy), or None if nothing is allowed.
        ``mask``: :meth:`allowed` of the current state, when the caller has it already."""
        mask = self.allowed() if mask is None else mask
        if not mask.any():
            return None
        return int(np.where(mask, logits[: self.n_vocab], -np.inf).argmax())

    def masks_along(self, tokens: Sequence[int]) -> list[np.ndarray]:
        """:meth:`allowed` before each of ``tokens`` in turn, as far as the grammar accepts
        them (nothing is consumed). A mask with one token set means that token is the masked
        argmax of any logits there: no logits need be read for it. The grammar may accept a
        token its mask leaves out (``"`` where the mask allows only the canonical ``",`` of
        forced text): that token is never the masked argmax."""
        return self.walk(tokens)[0]

    def walk(self, tokens: Sequence[int]) -> tuple[list[np.ndarray], bool]:
        """:meth:`masks_along` ``tokens``, and whether the grammar stops after all of them (a
        text that ends there). Nothing is consumed."""
        out: list[np.ndarray] = []
        stops = False
        try:
            for token in tokens:
                mask = self.allowed()
                if not self.matcher.consume_token(token):
                    break
                out.append(mask)
            stops = len(out) == len(tokens) and self.stopped
        finally:
            self.rollback(len(out))
        return out, stops

    def certain(self, tokens: Sequence[int]) -> list[bool]:
        """For each of ``tokens``: whether it is the only token the mask allows at its place
        (see :meth:`masks_along`); ``False`` past what the grammar accepts."""
        return only_allowed(self.masks_along(tokens), tokens)

    def consume(self, token: int) -> bool:
        return bool(self.matcher.consume_token(token))

    def forced(self) -> list[int]:
        """Tokens the grammar forces next (safe to prefill: none can fuse with what follows)."""
        return list(self.matcher.compute_ff_tokens())

    def forced_bytes(self) -> bytes:
        """The text the grammar forces next, as bytes: the forced tokens' and, past them, text
        no token can be prefilled for yet (``": "`` before a string value ends in ``"``, which
        the value's first token may fuse with)."""
        return bytes(self.matcher.compute_ff_bytes())

    def forced_text(self) -> tuple[bytes, bool]:
        """:meth:`forced_bytes` up to the first special token it holds (Qwen's ``</tool_call>``,
        which no text stands for), and whether one follows there."""
        forced = self.forced_bytes()
        cut = forced.find(SPECIAL_MARK)
        return (forced, False) if cut < 0 else (forced[:cut], True)

    def valid_prefix(self, tokens: list[int]) -> int:
        """How many of ``tokens``, from the start, the grammar would accept now (nothing is
        consumed)."""
        if not tokens:
            return 0
        return int(self.matcher.validate_tokens(tokens))

    def rollback(self, n_tokens: int) -> None:
        """Take back the last ``n_tokens`` consumed tokens."""
        if n_tokens:
            self.matcher.rollback(n_tokens)

    @property
    def accepting(self) -> bool:
        return bool(self.matcher.is_accepting())

    @property
    def stopped(self) -> bool:
        return bool(self.matcher.is_stopped())

    @property
    def failed(self) -> bool:
        return bool(self.matcher.is_error())


def only_allowed(masks: Sequence[np.ndarray], tokens: Sequence[int]) -> list[bool]:
    """For each of ``tokens``: whether its mask (``masks``, as :meth:`Constraint.masks_along`
    gives them, possibly fewer) allows it and nothing else; ``False`` where no mask is given."""
    sure = [bool(m[t]) and int(m.sum()) == 1 for m, t in zip(masks, tokens, strict=False)]
    return sure + [False] * (len(tokens) - len(sure))


def _lltokenizer(engine: Engine) -> llguidance.LLTokenizer:
    """llguidance's view of the engine's vocabulary: every token's bytes, with the tokens that
    only special parsing reaches marked by a 0xFF prefix (llguidance's convention), and
    llama.cpp's own tokenize function for the text it must split. The marked token list is the
    engine's, kept on disk per model file (:func:`~weavehost.engine.vocab.marked_tokens`)."""
    native = engine.native_tokenizer()
    return llguidance.LLTokenizer.from_llamacpp(  # type: ignore[attr-defined]
        tokens=marked_tokens(engine),
        vocab_ptr=native.vocab,
        tokenize_fptr=native.tokenize_fn,
        eos_token=engine.eos_token,
        slices=None,
    )


class ConstraintFactory:
    """Builds constraints for one engine's vocabulary; compiled grammars are cached. ``clock``:
    the time of every mask its constraints compute."""

    def __init__(self, engine: Engine) -> None:
        self.clock = MaskClock()
        self.n_vocab = engine.n_vocab
        self.specials = engine.special_texts
        self._tokenizer = _lltokenizer(engine)
        self._compiled = lru_cache(maxsize=COMPILED_CAP)(self._compile)

    def grammars(self, fmt: ModelFormat) -> GrammarBuilder:
        return GrammarBuilder(fmt, self.specials)

    def _compile(self, lark: str) -> llguidance.LLMatcher:
        if len(lark.encode("utf-8")) > MAX_GRAMMAR_BYTES:
            raise ConstraintError(f"the grammar is over the {MAX_GRAMMAR_BYTES}-byte cap")
        started = time.perf_counter()
        try:
            grammar = llguidance.LLMatcher.grammar_from_lark(lark)
            matcher = llguidance.LLMatcher(self._tokenizer, grammar, limits=LIMITS)
        except Exception as exc:  # llguidance raises plain ValueError/RuntimeError
            raise ConstraintError(f"could not build a constraint: {exc}") from exc
        if matcher.is_error():
            raise ConstraintError(f"could not build a constraint: {matcher.get_error()}")
        elapsed = time.perf_counter() - started
        if elapsed > MAX_COMPILE_S:
            logger.warning(
                "a %d-byte grammar took %.2f s to compile (cap %.1f s)",
                len(lark),
                elapsed,
                MAX_COMPILE_S,
            )
        return matcher

    def new(self, lark: str) -> Constraint:
        """A fresh matcher at the start of ``lark`` (a copy of the cached compiled one)."""
        return Constraint(self._compiled(lark).deep_copy(), self.n_vocab, self.clock)
