"""The llguidance bridge: compiled grammars as running token constraints on one vocabulary.

Stage: constraint running (under every constrained strategy). We use llguidance, a well-kept
Rust constraint engine whose Python matcher computes a token mask in ~45 µs for the embedded
model's 49k-token vocabulary (0.6% of a 7 ms serial pass; see ``docs/decoder.md``), rather than
a hand-written matcher. Grammars come from :mod:`weavehost.decode.grammar`.

Guarantees:

- :func:`constraints_for` builds one :class:`ConstraintFactory` per engine (reading the
  vocabulary takes ~0.3 s); compiled grammars are cached and each :meth:`ConstraintFactory.new`
  is a fresh copy.
- llguidance tokenizes through llama.cpp's own function, reached only through the engine
  (:meth:`~weavehost.engine.Engine.native_tokenizer`).
- A grammar llguidance refuses, or one over :data:`~weavehost.decode.grammar.MAX_GRAMMAR_BYTES`,
  raises :class:`ConstraintError`; a compile slower than
  :data:`~weavehost.decode.grammar.MAX_COMPILE_S` is logged.
"""

from __future__ import annotations

import logging
import time
import weakref
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import llguidance
import numpy as np

from weavehost.decode.grammar import LIMITS, MAX_COMPILE_S, MAX_GRAMMAR_BYTES, GrammarBuilder
from weavehost.errors import ConstraintError
from weavehost.formats.base import ModelFormat

if TYPE_CHECKING:
    from weavehost.engine import Engine

logger = logging.getLogger(__name__)

__all__ = ["Constraint", "ConstraintFactory", "constraints_for"]


@dataclass(slots=True)
class Constraint:
    """One running matcher: mask logits, consume tokens, ask for forced tokens."""

    matcher: llguidance.LLMatcher
    n_vocab: int

    def allowed(self) -> np.ndarray:
        """A boolean array over the vocabulary: which tokens may come next."""
        raw = np.frombuffer(self.matcher.compute_bitmask(), dtype=np.uint8)
        return np.unpackbits(raw, bitorder="little")[: self.n_vocab].astype(bool)

    def best(self, logits: np.ndarray) -> int | None:
        """The allowed token with the highest logit (greedy), or None if nothing is allowed."""
        mask = self.allowed()
        if not mask.any():
            return None
        return int(np.where(mask, logits[: self.n_vocab], -np.inf).argmax())

    def consume(self, token: int) -> bool:
        return bool(self.matcher.consume_token(token))

    def forced(self) -> list[int]:
        """Tokens the grammar forces next (safe to prefill: none can fuse with what follows)."""
        return list(self.matcher.compute_ff_tokens())

    @property
    def accepting(self) -> bool:
        return bool(self.matcher.is_accepting())

    @property
    def stopped(self) -> bool:
        return bool(self.matcher.is_stopped())

    @property
    def failed(self) -> bool:
        return bool(self.matcher.is_error())


def _lltokenizer(engine: Engine) -> llguidance.LLTokenizer:
    """llguidance's view of the engine's vocabulary: every token's bytes, with the tokens that
    only special parsing reaches marked by a 0xFF prefix (llguidance's convention), and
    llama.cpp's own tokenize function for the text it must split."""
    specials = engine.special_texts
    tokens = []
    for token in range(engine.n_vocab):
        piece = engine.token_bytes(token)
        if piece.decode("utf-8", errors="replace") in specials or (engine.is_control(token)):
            piece = b"\xff" + piece
        tokens.append(piece)
    native = engine.native_tokenizer()
    return llguidance.LLTokenizer.from_llamacpp(  # type: ignore[attr-defined]
        tokens=tokens,
        vocab_ptr=native.vocab,
        tokenize_fptr=native.tokenize_fn,
        eos_token=engine.eos_token,
        slices=None,
    )


class ConstraintFactory:
    """Builds constraints for one engine's vocabulary; compiled grammars are cached."""

    def __init__(self, engine: Engine) -> None:
        self.n_vocab = engine.n_vocab
        self.specials = engine.special_texts
        self._tokenizer = _lltokenizer(engine)
        self._compiled = lru_cache(maxsize=512)(self._compile)

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
        return Constraint(self._compiled(lark).deep_copy(), self.n_vocab)


_FACTORIES: weakref.WeakKeyDictionary[Engine, ConstraintFactory] = weakref.WeakKeyDictionary()


def constraints_for(engine: Engine) -> ConstraintFactory:
    """The constraint factory of ``engine`` (built once: reading the vocabulary takes ~0.3 s)."""
    factory = _FACTORIES.get(engine)
    if factory is None:
        factory = _FACTORIES[engine] = ConstraintFactory(engine)
    return factory
