"""``serial``: the model writes the call freely, one token a pass; the format parses it.

The paper's "No Grammar" row. Greedy, no constraint: decoding stops at an end-of-generation
token, once the format's closer has been written, or after ``max_tokens``. When the request is
``forced``, the format's opener (``<tool_call>``) is prefilled first, so the model writes a
call rather than prose, with nothing else constrained.
"""

from __future__ import annotations

from weavehost.decode.base import CallAttempt, CallRequest, CallResult, read_calls

__all__ = ["SerialStrategy"]


class SerialStrategy:
    name = "serial"

    def run(self, request: CallRequest) -> CallResult:
        engine, fmt = request.engine, request.format
        attempt = CallAttempt.start(self.name, engine)
        tokens: list[int] = []
        text = b""
        if request.forced:
            tokens = engine.tokenize(fmt.layout.opener, special=True)
            text = fmt.layout.opener.encode()
            engine.prefill(0, tokens)
        logits = engine.last_logits(0)
        closer = fmt.layout.closer.encode()
        opened = False
        for _ in range(request.max_tokens):
            token = int(logits.argmax())
            if engine.is_end_of_generation(token):
                break
            tokens.append(token)
            text += engine.token_bytes(token)
            logits = engine.decode_one(0, token)
            opened = opened or fmt.layout.opener.encode() in text
            if opened and closer in text[text.find(fmt.layout.opener.encode()) :]:
                break
        decoded_at = attempt.lap("decode")
        decoded = text.decode("utf-8", errors="replace")
        calls, error = read_calls(fmt, decoded)
        # Not rolled back on error: what the model wrote may be a plain answer.
        return attempt.finish(
            calls=calls, text=decoded, tokens=tokens, error=error, final_at=decoded_at
        )
