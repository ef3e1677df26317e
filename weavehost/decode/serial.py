"""``serial``: the model writes the call freely, one token a pass; the format parses it.

The paper's "No Grammar" row. Greedy, no constraint: decoding stops at an end-of-generation
token, once a call's closer has been written, or after ``max_tokens``. When the request is
``forced`` a call is opened first, so the model writes a call rather than prose: the model
itself picks how, greedily and token by token, among the texts its format reads as the start
of a call (the layout's opener and the triggers' texts: for Qwen ``<tool_call>``, a bare
``{"name"``, a fenced ```` ```json ```` block), spelled in its own tokens (a token that is a
prefix of what remains of an opener, or that holds all of it and goes on, as ``>\\n``). After
the opener nothing is constrained. Every token, the opener's too, is decoded in a pass of its
own and counted as decoded.

Why not prefill ``<tool_call>`` (what this strategy did until issue 11, and why it wrote no
call on any of the 200 bench-200 cases with Qwen2.5-Coder-0.5B while the stock peer wrote 73%
right under a grammar that forces the same opener):

- llama.cpp's tokenizer turns the text ``<tool_call>`` into the model's added token of that
  text (user-defined tokens are matched even without special parsing), and this model never
  writes that token: after the BFCL prompt its logit is -3.4 against 17.0 for ``<``. After the
  prefilled added token, a context it was not trained to continue, its argmax was ``\\n`` and
  then ``<|endoftext|>``. The peer's grammar lets the model spell the opener, and it spells it
  ``<`` ``tool`` ``_call`` ``>\\n``.
- Written that way, ``<tool_call>\\n`` is still not how this model begins a JSON call: left free
  it goes on in XML (``<name>calculate_triangle_area</name>``), which no parser reads; the peer
  gets JSON only because its grammar also forces ``{"name": "`` after the opener. Free from the
  prompt, the same model writes its call as a fenced, indented JSON block (10 of the first 10
  simple_python cases), which the qwen format reads (``FENCED_INDENTED_CALL``).

So the opener is the model's choice among the format's own, not one the bench imposes: a
no-grammar baseline at its strongest, constrained in nothing the format does not fix.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence

import numpy as np

from weavehost.decode.base import CallAttempt, CallRequest, CallResult, read_calls
from weavehost.engine import Engine
from weavehost.formats.base import ModelFormat

__all__ = ["SerialStrategy", "call_openings", "opener_tables", "spell_opener"]

# Per engine and opener: the tokens that may come next at each byte offset of the opener.
_SPELLINGS: weakref.WeakKeyDictionary[Engine, dict[bytes, list[np.ndarray]]] = (
    weakref.WeakKeyDictionary()
)


def call_openings(fmt: ModelFormat) -> dict[bytes, bytes]:
    """Each text that opens a call in ``fmt`` (its layout's opener first, then its triggers'
    texts), with the closer of the layout it opens."""
    openings = {fmt.layout.opener.encode(): fmt.layout.closer.encode()}
    for trigger in fmt.triggers:
        layout = trigger.layout or fmt.layout
        openings.setdefault(trigger.text.encode(), layout.closer.encode())
    return openings


def _spellings(engine: Engine, opener: bytes) -> list[np.ndarray]:
    """For each offset ``i`` of ``opener``, the tokens that spell on from there: their bytes
    are a prefix of ``opener[i:]`` or begin with it. End-of-generation tokens and tokens
    without bytes spell nothing. Built once per engine and opener (one vocabulary scan, about
    0.3 s for Qwen's 152k tokens)."""
    by_opener = _SPELLINGS.setdefault(engine, {})
    found = by_opener.get(opener)
    if found is not None:
        return found
    candidates: list[list[int]] = [[] for _ in opener]
    firsts = set(opener)
    for token in range(engine.n_vocab):
        piece = engine.token_bytes(token)
        if not piece or piece[0] not in firsts or engine.is_end_of_generation(token):
            continue
        for i in range(len(opener)):
            rest = opener[i:]
            if rest.startswith(piece) or piece.startswith(rest):
                candidates[i].append(token)
    found = by_opener[opener] = [np.array(c, dtype=np.int64) for c in candidates]
    return found


def opener_tables(engine: Engine, openers: Sequence[bytes]) -> dict[bytes, list[np.ndarray]]:
    """The spelling tables of ``openers`` (see :func:`spell_opener`), built once per engine."""
    return {opener: _spellings(engine, opener) for opener in openers if opener}


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


def _closed(text: bytes, openings: dict[bytes, bytes]) -> bool:
    """Whether ``text`` holds an opener and, after it, that opener's closer."""
    for opener, closer in openings.items():
        at = text.find(opener)
        if at >= 0 and closer in text[at + len(opener) :]:
            return True
    return False


class SerialStrategy:
    name = "serial"

    def prepare(self, engine: Engine) -> None:
        """Nothing: ``serial`` reads no grammar."""

    def run(self, request: CallRequest) -> CallResult:
        engine, fmt = request.engine, request.format
        openings = call_openings(fmt)
        # Built before the attempt starts: reading the vocabulary is not a call's cost.
        tables = opener_tables(engine, list(openings)) if request.forced else {}
        attempt = CallAttempt.start(self.name, engine)
        tokens: list[int] = []
        text = b""
        if request.forced:
            tokens, text = spell_opener(engine, tables)
            attempt.lap("opener")
        logits = engine.last_logits(0)
        # The opener counts against the call's budget (a reply's budget is planned from it).
        for _ in range(request.max_tokens - len(tokens)):
            if _closed(text, openings):
                break
            token = int(logits.argmax())
            if engine.is_end_of_generation(token):
                break
            tokens.append(token)
            text += engine.token_bytes(token)
            logits = engine.decode_one(0, token)
        decoded_at = attempt.lap("decode")
        decoded = text.decode("utf-8", errors="replace")
        calls, error = read_calls(fmt, decoded)
        # Not rolled back on error: what the model wrote may be a plain answer.
        return attempt.finish(
            calls=calls, text=decoded, tokens=tokens, error=error, final_at=decoded_at
        )
