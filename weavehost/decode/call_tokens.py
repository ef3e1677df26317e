"""Call text as tokens: how a call the host assembled is written into the KV cache.

Stage: decoding (shared by the strategies and the reply driver). Two rules, both about where
llama.cpp's tokenizer would otherwise put a token the model never writes:

- :func:`tokenize_call_text`: a format's special tokens (Qwen's ``<tool_call>``) are parsed only
  inside the call's fixed parts; values are plain text, and the text is tokenized in runs as
  long as possible, so no artificial boundary falls between a key and its value.
- :func:`plain_tokens`: text written in ordinary tokens only, never an added token, where the
  model spells a closer itself.
"""

from __future__ import annotations

from collections.abc import Sequence

from weavehost.engine import Engine

__all__ = ["plain_tokens", "tokenize_call_text"]


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
    """``text`` in ordinary tokens, never an added token: llama.cpp matches a user-defined added
    token (Qwen's ``<tool_call>``) wherever its text occurs, special parsing or not, so the text
    is cut before the last character of each such occurrence and each part tokenized alone (at
    a ``>``, where the tokenizer's pre-split cuts anyway)."""
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
