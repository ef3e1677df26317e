"""``serial``: the model writes the call freely, one token a pass; the format parses it.

The paper's "No Grammar" row. Greedy, no constraint: decoding stops at an end-of-generation
token, once the format's closer has been written, or after ``max_tokens``. When the request is
``forced``, the format's opener (``<tool_call>``) is prefilled first, so the model writes a
call rather than prose, with nothing else constrained.
"""

from __future__ import annotations

import time

from weavehost.decode.base import CallRequest, CallResult, read_calls

__all__ = ["SerialStrategy"]


class SerialStrategy:
    name = "serial"

    def run(self, request: CallRequest) -> CallResult:
        engine, fmt = request.engine, request.format
        before = engine.stats.snapshot()
        started = time.perf_counter()
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
        elapsed = time.perf_counter() - started
        decoded = text.decode("utf-8", errors="replace")
        calls, error = read_calls(fmt, decoded)
        return CallResult(
            strategy=self.name,
            calls=calls,
            provisional=None,
            text=decoded,
            stats=engine.stats.since(before),
            tool_latency_s=elapsed,
            final_latency_s=elapsed,
            phases={"decode": elapsed},
            error=error,
            tokens=tokens,
        )
