"""What a reply's free text reports (:class:`Continued`), why it stopped (:data:`Stop`), and
where its text is streamed (:data:`TextSink`).

Stage: decoding (data only; made by :class:`~weavehost.decode.continuation.Continuation`, read
by the agent's model seam).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from weavehost.formats.base import Trigger

__all__ = ["Continued", "Stop", "TextSink"]

TextSink = Callable[[str], None]
# Why free text stopped: an end-of-generation token, a trigger (a call follows), the bound, a
# stop sequence, or call text where calls are not allowed (cut where it began).
Stop = Literal["end", "call", "max_tokens", "stop_sequence", "call_text"]


@dataclass(frozen=True, slots=True)
class Continued:
    """What :meth:`~weavehost.decode.reply.ReplyWriter.continue_reply` did: the free text
    written (all of it streamed), why it stopped, how many tokens it chose (what the bound
    counts, a token cut at a stop sequence or at call text included) and, when a call follows,
    the trigger it began with."""

    text: str
    stop: Stop
    tokens: int = 0
    trigger: Trigger | None = None
    passes: int = 0  # the engine's passes while it was written (drafted ones read many tokens)
    seconds: float = 0.0  # the wall time it took to write, its passes and all between them
    # The tokens chosen (those ``tokens`` counts); where asked (Margins), their gaps and the stop's.
    token_ids: tuple[int, ...] = ()
    margins: tuple[float, ...] | None = None
    stop_margin: float | None = None
    # Where asked, every choice in the order made (token, gap), text taken back included.
    choices: tuple[tuple[int, float], ...] = ()

    @property
    def call(self) -> bool:
        return self.stop == "call"
