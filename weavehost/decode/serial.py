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

from weavehost.decode.base import (
    CallAttempt,
    CallRequest,
    CallResult,
    StatefulStrategy,
    read_calls,
)
from weavehost.decode.call_tokens import opener_tables, spell_opener
from weavehost.engine import Engine
from weavehost.formats.base import ModelFormat

__all__ = ["SerialStrategy", "call_openings"]


def call_openings(fmt: ModelFormat) -> dict[bytes, bytes]:
    """Each text that opens a call in ``fmt`` (its layout's opener first, then its triggers'
    texts), with the closer of the layout it opens."""
    openings = {fmt.layout.opener.encode(): fmt.layout.closer.encode()}
    for trigger in fmt.triggers:
        layout = trigger.layout or fmt.layout
        openings.setdefault(trigger.text.encode(), layout.closer.encode())
    return openings


def _closed(text: bytes, openings: dict[bytes, bytes]) -> bool:
    """Whether ``text`` holds an opener and, after it, that opener's closer."""
    for opener, closer in openings.items():
        at = text.find(opener)
        if at >= 0 and closer in text[at + len(opener) :]:
            return True
    return False


class SerialStrategy(StatefulStrategy):
    name = "serial"

    def prepare(self, engine: Engine) -> None:
        """Nothing: ``serial`` reads no grammar."""

    def run(self, request: CallRequest) -> CallResult:
        engine, fmt = request.engine, request.format
        openings = call_openings(fmt)
        # Built before the attempt starts: reading the vocabulary is not a call's cost.
        tables = (
            opener_tables(self.state_for(engine), engine, list(openings)) if request.forced else {}
        )
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
