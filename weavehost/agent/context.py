"""The context policy: what of a conversation the model sees, so that it always fits.

Stage: agent (between the session's transcript and the model's ``sync``). llama.cpp refuses a
prompt longer than its context (llama-cpp-python raises ``ValueError: Requested tokens ...
exceed context window``); weavehost counts first and never sends one.

:func:`fit_conversation` takes the whole transcript and returns the *view* the model is shown.
Its guarantees, in the order it applies them:

1. **Room.** The rendered view (with the tools on offer) takes at most ``room`` tokens, where
   ``room = n_ctx - reserve`` and the reserve is what one step may write (free text plus a
   call). Counting is done by the caller's ``measure``, the model's own tokenizer on the model's
   own template.
2. **Old turns go first, whole.** A turn is a user message and everything after it up to the
   next user message. Turns are dropped oldest first; the system message and the current turn
   are never dropped. When dropping is needed at all, it goes on until the view takes at most
   ``low_water`` of the room, so the next few turns fit without dropping again (each drop
   changes the start of the prompt, which costs one re-prefill of what is kept).
3. **Then tool output of the current turn is cut**, longest first, keeping its head and a
   marker (``[... N characters cut to fit the context ...]``); a result is cut below
   ``min_tool_chars`` (down to the marker alone) only when cutting every result to that
   minimum is not enough.
4. **Otherwise a clear error.** When the current user message alone (with the system prompt and
   tools) cannot fit, :class:`~weavehost.errors.ContextOverflowError` says how many tokens it
   takes and how many the context holds.

The transcript itself is never changed: the user's data stays whole; only the view is cut.
The view's start (``start``) and its cuts are remembered by the caller and passed back in, so
the view of later steps extends the view of earlier ones and the KV cache keeps its prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from weavehost.errors import ContextOverflowError

__all__ = [
    "CUT_MARKER",
    "DEFAULT_LOW_WATER",
    "DEFAULT_MIN_TOOL_CHARS",
    "ContextView",
    "fit_conversation",
    "turn_starts",
    "view_notes",
]

DEFAULT_LOW_WATER = 0.6  # after dropping turns, the view takes at most this share of the room
DEFAULT_MIN_TOOL_CHARS = 200  # a tool result is never cut shorter than this
CUT_MARKER = "\n[... {n} characters cut to fit the context ...]"

Message = Mapping[str, Any]
Measure = Callable[[Sequence[Message]], int]


@dataclass(frozen=True, slots=True)
class ContextView:
    """What the model is shown: ``messages`` (system message, then the transcript from index
    ``start`` on, with ``cuts`` applied), its size in tokens, and what was left out."""

    messages: list[dict[str, Any]]
    tokens: int
    start: int  # index into the transcript of the first message shown after the system one
    cuts: Mapping[int, int] = field(default_factory=dict)  # transcript index -> chars kept
    dropped_turns: int = 0  # turns dropped by this call (not before)
    cut_now: tuple[int, ...] = ()  # transcript indices cut (or cut further) by this call


def view_notes(view: ContextView, transcript: Sequence[Message], n_ctx: int) -> list[str]:
    """What the user is told of ``view``: the turns it no longer shows, and each tool result it
    cut now."""
    notes = []
    if view.dropped_turns:
        notes.append(f"the conversation outgrew the {n_ctx}-token context: the "
                     f"{view.dropped_turns} oldest turn(s) are no longer shown to the "
                     "model")  # fmt: skip
    for index in view.cut_now:
        full = len(str(transcript[index].get("content", "")))
        notes.append(f"a tool result of {full} characters was cut to {view.cuts[index]} to fit "
                     f"the {n_ctx}-token context")  # fmt: skip
    return notes


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """Indices of the user messages: where each turn begins."""
    return [i for i, m in enumerate(messages) if m.get("role") == "user"]


def _cut(content: str, keep: int) -> str:
    if keep >= len(content):
        return content
    return content[:keep] + CUT_MARKER.format(n=len(content) - keep)


def _view(
    transcript: Sequence[Message], start: int, cuts: Mapping[int, int]
) -> list[dict[str, Any]]:
    head = [dict(transcript[0])] if transcript and transcript[0].get("role") == "system" else []
    first = max(start, len(head))
    shown = []
    for i in range(first, len(transcript)):
        message = dict(transcript[i])
        if i in cuts:
            message["content"] = _cut(str(message.get("content", "")), cuts[i])
        shown.append(message)
    return head + shown


def _cut_to_fit(
    transcript: Sequence[Message],
    measure: Measure,
    room: int,
    start: int,
    cuts: dict[int, int],
    index: int,
    floor: int,
) -> tuple[dict[int, int], int, bool]:
    """Cut message ``index`` to the longest head (to 16 characters) that fits in ``room``, but
    not below ``floor``; returns the cuts, the view's size and whether it cut."""
    full = len(str(transcript[index].get("content", "")))
    lo, hi = floor, min(cuts.get(index, full), full)
    if hi <= lo:
        return cuts, measure(_view(transcript, start, cuts)), False
    shortest = {**cuts, index: lo}
    if measure(_view(transcript, start, shortest)) <= room:
        while hi - lo > 16:
            mid = (lo + hi) // 2
            if measure(_view(transcript, start, {**cuts, index: mid})) <= room:
                lo = mid
            else:
                hi = mid
    cuts = {**cuts, index: lo}
    return cuts, measure(_view(transcript, start, cuts)), True


def fit_conversation(
    transcript: Sequence[Message],
    measure: Measure,
    *,
    room: int,
    start: int = 0,
    cuts: Mapping[int, int] | None = None,
    low_water: float = DEFAULT_LOW_WATER,
    min_tool_chars: int = DEFAULT_MIN_TOOL_CHARS,
) -> ContextView:
    """The view of ``transcript`` the model is shown; see the module docstring.

    ``start`` and ``cuts`` are the previous view's (a view never starts earlier or cuts less
    than before, so the cache prefix survives). Raises ContextOverflowError when even the
    current turn alone, its tool output cut away, does not fit in ``room``.
    """
    if room <= 0:
        raise ContextOverflowError("no room for a prompt: the reserve takes the whole context")
    cuts = dict(cuts or {})
    starts = turn_starts(transcript)
    current = starts[-1] if starts else len(transcript)
    head = 1 if transcript and transcript[0].get("role") == "system" else 0
    start = max(head, min(start, current))
    tokens = measure(_view(transcript, start, cuts))
    if tokens <= room:
        return ContextView(_view(transcript, start, cuts), tokens, start, cuts)

    # 2. Drop whole old turns until the view is under the low-water mark (or none is left).
    target = int(room * low_water)
    dropped = 0
    for turn in starts:
        if turn <= start:
            continue
        if tokens <= target:
            break
        start = turn
        dropped += 1
        tokens = measure(_view(transcript, start, cuts))
    cuts = {i: keep for i, keep in cuts.items() if i >= start}
    if tokens <= room:
        return ContextView(_view(transcript, start, cuts), tokens, start, cuts, dropped)

    # 3. Cut the current turn's tool output, longest first, each to what the rest leaves;
    #    to ``min_tool_chars`` first, and only when that is not enough, to the marker alone.
    cut_now: list[int] = []
    tools = [i for i in range(current, len(transcript)) if transcript[i].get("role") == "tool"]
    tools.sort(key=lambda i: -len(str(transcript[i].get("content", ""))))
    for floor in (min_tool_chars, 0):
        for index in tools:
            if tokens <= room:
                break
            cuts, tokens, cut = _cut_to_fit(transcript, measure, room, start, cuts, index, floor)
            if cut and index not in cut_now:
                cut_now.append(index)
    if tokens > room:
        raise ContextOverflowError(
            f"the current message takes {tokens} tokens with the tools on offer; the context "
            f"leaves {room} for the prompt. Shorten the message, offer fewer tools, or raise "
            "the context size (--ctx)"
        )
    return ContextView(_view(transcript, start, cuts), tokens, start, cuts, dropped, tuple(cut_now))
