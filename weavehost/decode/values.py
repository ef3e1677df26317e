"""The skeleton prefill and the parallel value decoder of ``weave``.

Stage: skeleton + parallel values. Input: the engine with sequence 0 holding the prompt and the
call text up to some point inside the head, and one :class:`ValueTask` per required argument.
Guarantees:

- **One skeleton pass.** Each value sequence is forked from sequence 0 (shared cells) and, in a
  single pass, the tokens its constraint forces (the rest of the head plus its own key, as if it
  were the first argument) are read: tokens shared by every sequence once, with all of them as
  owners (sequence 0 included); the rest per sequence.
- **No fused token is split.** The forced tokens are llguidance's canonical fast-forward tokens,
  which stop before any character that could fuse with the value (``": "`` ends at ``":``); the
  value sequence's first decoded token carries the rest (``␣"`` or ``␣-``).
- **Values advance together.** Each pass holds the next token of every unfinished sequence (plus
  tokens its constraint then forces inside the value), padded to the plan's width with rows on a
  scratch sequence that is emptied afterwards. k values of lengths L1..Lk take max(Li) - 1 value
  passes, not the sum.
- **A value ends where its type ends**; a token that carries the end fused with the next
  separator (``5,``, ``"}``) is accepted and cut at the value's end. The token that completes a
  value is never fed (its KV would be dropped anyway).
- A sequence that cannot continue (nothing allowed, or too long) is a failed state with a reason,
  not an exception; the others finish.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from weavehost.decode.constraint import Constraint
from weavehost.decode.padding import DecodePlan, run_shaped
from weavehost.engine import Engine, Row
from weavehost.formats.base import ModelFormat

__all__ = ["ValueTask", "decode_values", "prefill_skeleton"]


@dataclass(slots=True)
class ValueTask:
    """One required value: its key, its sequence, its constraint, and the state of its decoding.

    ``lead`` is the fixed text the constraint starts with. ``forced`` are the tokens read in
    the skeleton pass; they may stop inside the lead (the sequence then writes the rest itself,
    fused with the value's first characters) or run into the value (an enum's opening quote).
    ``written`` is everything the sequence decoded after them.
    """

    key: str
    seq: int
    constraint: Constraint
    lead: str
    forced: list[int] = field(default_factory=list)
    forced_text: bytes = b""
    written: bytearray = field(default_factory=bytearray)
    tokens: list[int] = field(default_factory=list)
    # The decoded tokens that were read into the sequence's KV (all but a value's last).
    fed: list[int] = field(default_factory=list)
    value: str | None = None
    error: str | None = None

    @property
    def running(self) -> bool:
        return self.value is None and self.error is None

    def try_finish(self, fmt: ModelFormat) -> bool:
        """Set ``value`` if the written text now holds a whole value (cut at its end)."""
        data = self.forced_text + bytes(self.written)
        lead = self.lead.encode("utf-8")
        if not data.startswith(lead):
            return False
        try:
            text = data[len(lead) :].decode("utf-8")
        except UnicodeDecodeError:
            return False  # a multi-byte character is still being written
        end = fmt.value_end(text)
        if end is None:
            return False
        self.value = text[:end].lstrip(" ")
        return True


def _common_prefix(lists: list[list[int]]) -> list[int]:
    if not lists:
        return []
    shortest = min(len(x) for x in lists)
    n = 0
    while n < shortest and all(x[n] == lists[0][n] for x in lists):
        n += 1
    return lists[0][:n]


def prefill_skeleton(
    engine: Engine, tasks: list[ValueTask], unread: Sequence[int] = ()
) -> list[int]:
    """Fork a sequence per task from sequence 0 and read every task's forced tokens in one pass.

    A task may run on sequence 0 itself (the first value: its KV then needs no write-back).
    ``unread``: tokens already chosen that sequence 0 has not read yet (the selector's deciding
    token); they are read first in the same pass, shared by every task. Returns the forced
    tokens shared by all tasks, which sequence 0 now holds in any case.
    """
    for task in tasks:
        task.forced = task.constraint.forced()
        for token in task.forced:
            task.constraint.consume(token)
        task.forced_text = b"".join(engine.token_bytes(t) for t in task.forced)
        if task.seq != 0:
            engine.fork(0, task.seq)
    shared = _common_prefix([task.forced for task in tasks])
    rows: list[Row] = []
    owners = (0, *(task.seq for task in tasks if task.seq != 0))
    common = [*unread, *shared]
    for index, token in enumerate(common):
        last = index == len(common) - 1
        needs_logits = last and any(len(task.forced) == len(shared) for task in tasks)
        rows.append(Row(token, owners, logits=needs_logits, forced=True))
    for task in tasks:
        own = task.forced[len(shared) :]
        for index, token in enumerate(own):
            rows.append(Row(token, (task.seq,), logits=index == len(own) - 1, forced=True))
    engine.run_pass(rows)
    return shared


def decode_values(
    engine: Engine,
    fmt: ModelFormat,
    tasks: list[ValueTask],
    *,
    plan: DecodePlan,
    scratch_seq: int,
    max_tokens: int,
) -> None:
    """Decode every task's value, all unfinished ones advancing in one pass per step."""
    while True:
        rows: list[Row] = []
        for task in tasks:
            if not task.running:
                continue
            token = task.constraint.best(engine.last_logits(task.seq))
            if token is None or not task.constraint.consume(token):
                task.error = f"no value of the allowed type could continue for {task.key!r}"
                continue
            task.tokens.append(token)
            task.written += engine.token_bytes(token)
            if task.try_finish(fmt):
                continue
            forced = task.constraint.forced()
            for extra in forced:
                task.constraint.consume(extra)
                task.written += engine.token_bytes(extra)
            task.tokens.extend(forced)
            if forced and task.try_finish(fmt):
                continue
            if len(task.tokens) >= max_tokens:
                tail = bytes(task.written[-60:]).decode("utf-8", "replace")
                task.error = (
                    f"the value of {task.key!r} did not end within {max_tokens} tokens (…{tail!r})"
                )
                continue
            task.fed.append(token)
            task.fed.extend(forced)
            rows.append(Row(token, (task.seq,), logits=not forced))
            rows.extend(
                Row(extra, (task.seq,), logits=i == len(forced) - 1, forced=True)
                for i, extra in enumerate(forced)
            )
        if not rows:
            return
        run_shaped(engine, rows, plan.shape_for, scratch=scratch_seq)
