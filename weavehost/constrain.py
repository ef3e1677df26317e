"""Token constraints for tool calls and single values, on llguidance.

Stage: constraint building (between the formats and the decoders). We use llguidance — a
well-kept Rust constraint engine whose Python matcher computes a token mask in ~45 µs for the
embedded model's 49k-token vocabulary (0.6% of a 7 ms serial pass; see ``docs/decoder.md``) —
rather than a hand-written matcher. Its "fast-forward" tokens are computed canonically: a
token is forced only when no continuation could fuse with it, which is exactly where a skeleton
may end so that no fused token is split between a key and its value.

Guarantees:

- :meth:`GrammarBuilder.call` accepts exactly the calls of one format for the offered tools: the
  format's head, a tool name among them, arguments that validate against the tool's schema
  written with the format's separators (required arguments first, then optional ones, each in
  schema order), and the format's tail.
- :meth:`GrammarBuilder.value` accepts a key prefix, one value of a sub-schema, and the first
  character of whatever may follow it (``,`` or ``}``), so a token carrying the value's end
  fused with the next separator is allowed; :func:`value_end` says where the value stops
  inside decoded text.
- :meth:`GrammarBuilder.optional` accepts the rest of a call after its required arguments: any
  subset of the optional arguments, in schema order, then the tail.
- Building a grammar for a schema llguidance rejects raises :class:`ConstraintError`; the
  grammar size and compile effort are bounded by :data:`LIMITS`.
"""

from __future__ import annotations

import ctypes
import json
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import llama_cpp
import llguidance
import numpy as np

from weavehost.errors import ConstraintError
from weavehost.formats.base import ModelFormat

if TYPE_CHECKING:
    from weavehost.engine import Engine

__all__ = [
    "Constraint",
    "ConstraintFactory",
    "GrammarBuilder",
    "constraints_for",
    "ordered_parameters",
    "value_end",
]

# Bounds on what one grammar may cost to build and run (RELIABILITY row 16).
LIMITS = llguidance.LLParserLimits(max_grammar_size=500_000, step_max_items=100_000)


def _lark_string(text: str, specials: frozenset[str] = frozenset()) -> str:
    """Lark for the fixed ``text``: string literals (JSON escaping is valid Lark escaping), with
    the model's special tokens (``<tool_call>`` in Qwen) referenced as tokens, not spelled."""
    if not text:
        return '""'
    parts: list[str] = []
    cursor = 0
    while cursor < len(text):
        hit = None
        for special in specials:
            at = text.find(special, cursor)
            if at < 0:
                continue
            if hit is None or at < hit[0] or (at == hit[0] and len(special) > len(hit[1])):
                hit = (at, special)
        if hit is None:
            parts.append(json.dumps(text[cursor:], ensure_ascii=False))
            break
        if hit[0] > cursor:
            parts.append(json.dumps(text[cursor : hit[0]], ensure_ascii=False))
        parts.append(hit[1])
        cursor = hit[0] + len(hit[1])
    return " ".join(parts)


def ordered_parameters(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The schema with required properties first, then optional ones, each in schema order.

    Every strategy writes arguments in this order, so their call texts are comparable.
    """
    schema = dict(parameters)
    props = dict(schema.get("properties") or {})
    required = [k for k in schema.get("required", []) if k in props]
    optional = [k for k in props if k not in required]
    schema["properties"] = {k: props[k] for k in [*required, *optional]}
    schema.setdefault("type", "object")
    schema["additionalProperties"] = False
    return schema


_JSON_OPTIONS = {"whitespace_flexible": False, "key_separator": ": ", "item_separator": ", "}


class GrammarBuilder:
    """Lark grammars for one format and one vocabulary's special tokens."""

    def __init__(self, fmt: ModelFormat, specials: frozenset[str] = frozenset()) -> None:
        self.fmt = fmt
        self.specials = specials

    def text(self, fixed: str) -> str:
        return _lark_string(fixed, self.specials)

    def value_rule(self, schema: Mapping[str, Any]) -> str:
        """A Lark rule body matching one value of ``schema`` as the format writes values."""
        if self.fmt.name == "functiongemma":
            return self._gemma_rule(schema)
        with_options = dict(schema)
        with_options["x-guidance"] = _JSON_OPTIONS
        return "%json " + json.dumps(with_options, ensure_ascii=False)

    def _gemma_rule(self, schema: Mapping[str, Any]) -> str:
        """FunctionGemma's value syntax: strings in <escape>, bare numbers, {k:v}, [a,b]."""
        escape = self.text("<escape>")
        string = f'{escape} /[^<]*/ {escape}'
        if "enum" in schema:
            return "(" + " | ".join(self.text(_gemma_literal(v)) for v in schema["enum"]) + ")"
        kind = schema.get("type")
        if kind == "string":
            return string
        if kind == "integer":
            return "/-?(0|[1-9][0-9]*)/"
        if kind == "number":
            return "/-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?/"
        if kind == "boolean":
            return '("true" | "false")'
        if kind == "null":
            return '"null"'
        if kind == "array":
            item = self._gemma_rule(schema.get("items") or {})
            return f'"[" ({item} ("," {item})*)? "]"'
        if kind == "object":
            props = schema.get("properties") or {}
            if not props:
                return '"{" "}"'
            pair = " | ".join(
                f"({self.text(k + ':')} {self._gemma_rule(v)})" for k, v in props.items()
            )
            return f'"{{" (({pair}) ("," ({pair}))*)? "}}"'
        any_of = schema.get("anyOf") or schema.get("oneOf")
        if any_of:
            return "(" + " | ".join(self._gemma_rule(s) for s in any_of) + ")"
        return f'({string} | /-?[0-9]+(\\.[0-9]+)?/ | "true" | "false" | "null")'

    def _pair(self, key: str, schema: Mapping[str, Any], *, first: bool) -> str:
        prefix = self.text(self.fmt.layout.prefix_for(key, first=first))
        return f"{prefix} {self.value_rule(schema)}"

    def _optional_tail(self, props: Mapping[str, Any], optional: Sequence[str]) -> str:
        """Any subset of ``optional``, in order, after at least one argument."""
        return " ".join(f"({self._pair(k, props[k], first=False)})?" for k in optional)

    def _optional_chain(self, props: Mapping[str, Any], optional: Sequence[str]) -> str:
        """A non-empty subset of ``optional`` in order; the first present one opens the list."""
        alternatives = []
        for index, key in enumerate(optional):
            rest = optional[index + 1 :]
            body = self._pair(key, props[key], first=True)
            if rest:
                body += " " + self._optional_tail(props, rest)
            alternatives.append(f"({body})")
        return " | ".join(alternatives)

    def _arguments(self, parameters: Mapping[str, Any]) -> str:
        schema = ordered_parameters(parameters)
        props: dict[str, Any] = schema["properties"]
        required = [k for k in schema.get("required", []) if k in props]
        optional = [k for k in props if k not in required]
        if not required:
            return f"({self._optional_chain(props, optional)})?" if optional else ""
        body = " ".join(self._pair(k, props[k], first=i == 0) for i, k in enumerate(required))
        if optional:
            body += " " + self._optional_tail(props, optional)
        return body

    def call(self, tools: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
        """Lark for one whole call to one of ``tools`` ((name, parameters) pairs)."""
        if not tools:
            raise ConstraintError("a call grammar needs at least one tool")
        rules, alternatives = [], []
        for index, (name, parameters) in enumerate(tools):
            head = self.text(self.fmt.layout.head_for(name))
            tail = self.text(self.fmt.layout.tail)
            rules.append(f"call_{index}: {head} {self._arguments(parameters)} {tail}")
            alternatives.append(f"call_{index}")
        return "start: " + " | ".join(alternatives) + "\n" + "\n".join(rules) + "\n"

    def value(self, lead: str, schema: Mapping[str, Any]) -> str:
        """Lark for ``lead`` (fixed text), one value of ``schema``, then one follow character."""
        layout = self.fmt.layout
        follow = sorted({layout.next_prefix[:1], layout.tail[:1]} - {""})
        ends = " | ".join(self.text(c) for c in follow)
        return f"start: {self.text(lead)} value ({ends})\nvalue: {self.value_rule(schema)}\n"

    def optional(self, parameters: Mapping[str, Any], lead: str = "") -> str:
        """Lark for ``lead`` (the last written characters, which may fuse with what follows:
        ``"`` + ``,`` is one token ``",``), then the optional arguments, then the tail."""
        schema = ordered_parameters(parameters)
        props = schema["properties"]
        required = [k for k in schema.get("required", []) if k in props]
        optional = [k for k in props if k not in required]
        start = f"start: {self.text(lead)} " if lead else "start: "
        tail = self.text(self.fmt.layout.tail)
        if not optional:
            return f"{start}{tail}\n"
        if required:
            return f"{start}{self._optional_tail(props, optional)} {tail}\n"
        return f"{start}({self._optional_chain(props, optional)})? {tail}\n"


def _gemma_literal(value: Any) -> str:
    from weavehost.formats.functiongemma import encode_gemma_value

    return encode_gemma_value(value)


_NUMBER_CONTINUES = frozenset("0123456789.eE+-")


def value_end(fmt: ModelFormat, text: str) -> int | None:
    """Where the value at the start of ``text`` ends (after leading spaces), or ``None`` if it
    may still continue. A number is complete only once a character that cannot continue it
    follows; strings, arrays, objects, booleans and null end at their own last character."""
    start = len(text) - len(text.lstrip(" "))
    body = text[start:]
    if not body:
        return None
    if fmt.name == "functiongemma":
        return _gemma_value_end(body, start)
    try:
        value, end = json.JSONDecoder().raw_decode(body)
    except json.JSONDecodeError:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if end == len(body) or body[end] in _NUMBER_CONTINUES:
            return None  # "21" or "21." may still grow
    return start + end


def _gemma_value_end(body: str, start: int) -> int | None:
    from weavehost.errors import FormatError
    from weavehost.formats.functiongemma import _ValueParser

    parser = _ValueParser(body)
    try:
        value = parser.value()
    except FormatError:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        if parser.pos == len(body) or body[parser.pos] in _NUMBER_CONTINUES:
            return None
    return start + parser.pos


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

    def forced_bytes(self) -> bytes:
        return bytes(self.matcher.compute_ff_bytes())

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
        if piece.decode("utf-8", errors="replace") in specials or (
            engine.is_control(token)
        ):
            piece = b"\xff" + piece
        tokens.append(piece)
    tokenize = ctypes.cast(llama_cpp.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
    eos = engine.eos_token
    return llguidance.LLTokenizer.from_llamacpp(  # type: ignore[attr-defined]
        tokens=tokens,
        vocab_ptr=engine.vocab_handle,
        tokenize_fptr=tokenize,
        eos_token=eos,
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
        try:
            grammar = llguidance.LLMatcher.grammar_from_lark(lark)
            matcher = llguidance.LLMatcher(self._tokenizer, grammar, limits=LIMITS)
        except Exception as exc:  # llguidance raises plain ValueError/RuntimeError
            raise ConstraintError(f"could not build a constraint: {exc}") from exc
        if matcher.is_error():
            raise ConstraintError(f"could not build a constraint: {matcher.get_error()}")
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
