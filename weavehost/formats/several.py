"""Several calls in one reply: how a format writes them, as data, and how they render.

Stage: prompt rendering and call layout (read by the decoder's one driver of several calls,
:func:`weavehost.decode.several.write_calls`, which asks the model after each call whether
another follows). The decoding strategies still write one call per run; a format with
:class:`SeveralCalls` says in which layout each of a reply's calls is written, what may follow
a call (:meth:`SeveralCalls.after_call`: the decision's grammar) and what closes the reply's
calls, so that

* every call written so is read back by the format's own ``parse_calls`` (through the layout's
  ``reads_as``), and
* :func:`render_calls` renders a reply's calls as exactly the text the agent had written, so the
  next step's render of the message matches what the KV cache holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from weavehost.formats.base import (
    CallLayout,
    LayoutView,
    ModelFormat,
    ToolCall,
    Trigger,
    call_format,
)

__all__ = ["AfterCall", "SeveralCalls", "first_call_format", "render_calls"]

# What the text written after a call says (see SeveralCalls.after_call).
AfterCall = Literal["more", "end", "open", "no"]


@dataclass(frozen=True, slots=True)
class SeveralCalls:
    """How a format writes several calls in one reply, as data the agent reads.

    ``first``: the layout a call is written in when more may follow it (``None``: the format's
    own; SmolLM2's leaves the list open after the call's ``}``). ``more``: the text that, right
    after a call, means another begins (``<tool_call>``, or SmolLM2's ``,``), with the layout
    that call is written in. ``close``: written after the last call (``]</tool_call>``), so a
    reply's calls read ``first + more… + close`` and render exactly so (:func:`render_calls`).
    """

    more: Trigger
    first: CallLayout | None = None
    close: str = ""

    def after_call(self, written: bytes) -> AfterCall:
        """The decision's grammar: what ``written``, the text after a call's closer, says.

        After a call the reply goes on with ``ws* more.text …`` (another call) or ends with
        ``ws* close`` and the end of generation. ``"more"``: the opener is written; ``"end"``:
        what is written can only be ``close``; ``"open"``: it can still become either (leading
        whitespace decides nothing: Qwen writes ``\\n`` before both); ``"no"``: neither. An
        end-of-generation token is the end where only whitespace was written."""
        more, close = self.more.text.encode("utf-8"), self.close.encode("utf-8")
        rest = written.lstrip()
        if rest.startswith(more):
            return "more"
        if close and rest.startswith(close):
            return "end"
        if more.startswith(rest):
            return "open"
        return "end" if close and close.startswith(rest) else "no"


def first_call_format(fmt: ModelFormat) -> ModelFormat:
    """The format a reply's first call is written in when more may follow it."""
    several = fmt.several
    if several is None or several.first is None:
        return fmt
    return LayoutView(fmt, several.first)


def render_calls(fmt: ModelFormat, calls: Sequence[ToolCall]) -> str:
    """Several calls of one reply as the agent has them written: one after another, or, with
    :class:`SeveralCalls`, ``first`` + ``more``'s layout for each next call + ``close``."""
    several = fmt.several
    if several is None or not calls:
        return "".join(fmt.render_call(call) for call in calls)
    first = first_call_format(fmt)
    more = call_format(fmt, several.more)
    rest = "".join(more.render_call(call) for call in calls[1:])
    return first.render_call(calls[0]) + rest + several.close
