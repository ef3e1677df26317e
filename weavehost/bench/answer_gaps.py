"""Where a drafted answer parts from its undrafted one, and how close the choice there was.

Stage: benchmark scoring (``weavehost bench-agent --answer-drafts both``). Drafting is meant to
be lossless, so a drafted answer that differs from the same task's undrafted answer needs a
reason. The bench runs its local model with each free token's top-two gap recorded (the chosen
token's masked logit over the best other's, :mod:`weavehost.decode.choice`), which each step's
``timings`` carries (``free_token_ids``, ``free_margins``, and ``free_stop`` with
``free_stop_margin`` where the text stopped at a choice: an end of turn, a call's trigger).
Pure functions over judged turns and records:

- :func:`step_choices`: a step's every choice in the order made, each with its gap.
- :func:`first_difference`: for two turns whose answers differ, the text around the first
  character that differs, and where the two runs of the turn first chose apart
  (:func:`first_parting`: walking every step of the turn, each step's every choice in the
  order made, text taken back included, so a parting before the answer, in a call's text
  judged and taken back or in an earlier step, is found where it happened): its step and
  index, both tokens, both gaps, and whether it is a ``near_tie``: the undrafted gap there
  below :data:`NEAR_TIE_LOGITS`, so a drafted pass's logits (computed in a batch of several
  rows, in another order of sums) may rank the two tokens the other way. Where the runs part
  at something no choice records (a step whose prompt differs, in size or in its tokens'
  digest, while every choice before it was the same: a call the strategy wrote, a tool's
  result such as a clock's seconds), ``unrecorded`` and
  ``near_tie`` unknown. ``None`` where the answers are the same.
- :func:`difference_counts`: per drafted variant, how many turns differ, how many of those
  are near-ties and how many part where no choice was recorded (``summary.json``'s
  ``answer_differences``, ``answer_differences_near_tie``, ``answer_differences_unrecorded``).
  A turn after one that differed counts as its cause does: it was told another conversation.
- :class:`DraftPairs`: the order ``results.jsonl`` is written in. A drafted record is held
  until the same task's undrafted one has run (at most the rest of that task's variants), then
  written with its turns' differences (``answer_differences``); every other record is written
  as soon as it is known.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = [
    "CONTEXT_CHARS",
    "NEAR_TIE_LOGITS",
    "DraftPairs",
    "difference_counts",
    "first_difference",
    "first_parting",
    "step_choices",
    "setting_of",
    "undrafted_records",
]

# A first difference is a near-tie where the undrafted run's top-two gap there is below this
# (in logits). A drafted pass reads 8 rows at once, and its sums round otherwise than a one-row
# pass's: on SmolLM2-135M Q4_1 (bench-agent, first 15 tasks, docs/agent.md) the gap of the same
# choice drafted and undrafted moved by a median 0.07, 0.36 at the 99th percentile and 0.49 at
# the 99.9th (above 0.5 once in 1,119 choices), so a flip below half a logit is what that
# rounding does; a gap above it is a preference that drafting must not overturn.
NEAR_TIE_LOGITS = 0.5
# The characters of each answer shown around the first one that differs.
CONTEXT_CHARS = 40

Choice = tuple[int | str, float | None]  # a token id (or "<end>", "<call>") and its gap
Setting = tuple[Any, Any, Any, Any]  # strategy, cache, guidance, task id


def step_choices(timing: Mapping[str, Any]) -> list[Choice] | None:
    """Every choice a step's free text made, in the order made: its log where it made more
    than it kept (``free_log_ids``: text taken back, a trigger's JSON judged and rolled back),
    else its kept tokens and its stopping choice; ``[]`` for a step with no free text (a call
    forced), ``None`` for one that wrote text and recorded nothing."""
    if "free_log_ids" in timing:
        return list(zip(timing["free_log_ids"], timing["free_log_margins"], strict=True))
    if "free_margins" not in timing:
        return None if timing.get("free_tokens") else []
    choices: list[Choice] = list(zip(timing["free_token_ids"], timing["free_margins"], strict=True))
    if "free_stop" in timing:
        choices.append((f"<{timing['free_stop']}>", timing.get("free_stop_margin")))
    return choices


def first_parting(
    drafted: Mapping[str, Any], undrafted: Mapping[str, Any], *, threshold: float = NEAR_TIE_LOGITS
) -> dict[str, Any]:
    """Where two runs of one turn first chose apart, walking their steps in order: the step,
    the choice's index among that step's choices (:func:`step_choices`), both tokens and gaps
    and ``near_tie`` (the undrafted gap below ``threshold``). Where a step's prompt differs
    (its size, or its tokens' ``prompt_digest``) while every choice before it was the same,
    they parted at what no choice records (a call the strategy wrote, a tool's result, such as
    a clock's seconds): ``unrecorded``, the tie unknown, as where a step recorded nothing or no
    choice differs."""
    found: dict[str, Any] = {
        "step": None,
        "choice": None,
        "drafted_token": None,
        "undrafted_token": None,
        "drafted_gap": None,
        "undrafted_gap": None,
        "near_tie": None,
        "unrecorded": False,
    }
    steps = zip(drafted.get("timings") or (), undrafted.get("timings") or (), strict=False)
    for mine, theirs in steps:
        found["step"] = theirs.get("step")
        shown = ("prompt_tokens", "prompt_digest")
        if any(mine.get(key) != theirs.get(key) for key in shown):
            return {**found, "unrecorded": True}
        ours, base = step_choices(mine), step_choices(theirs)
        if ours is None or base is None:
            return found
        at = next((i for i, (a, b) in enumerate(zip(ours, base, strict=False)) if a[0] != b[0]),
                  min(len(ours), len(base)))  # fmt: skip
        if at == len(ours) == len(base):
            continue  # the same choices: on to the next step
        if at < len(ours):
            found["drafted_token"], found["drafted_gap"] = ours[at]
        if at < len(base):
            found["undrafted_token"], found["undrafted_gap"] = base[at]
        gap = found["undrafted_gap"]
        return {**found, "choice": at, "near_tie": gap is not None and gap < threshold}
    return {**found, "step": None}


def first_difference(
    drafted: Mapping[str, Any], undrafted: Mapping[str, Any], *, threshold: float = NEAR_TIE_LOGITS
) -> dict[str, Any] | None:
    """Where two judged turns' answers part (``None`` where they are the same text): the first
    character that differs (``char``), the common text before it and each answer's text from
    there (:data:`CONTEXT_CHARS` each), and where the two runs first chose apart
    (:func:`first_parting`: ``step``, ``choice``, both tokens and gaps, ``near_tie``,
    ``unrecorded``)."""
    text, base = drafted.get("answer") or "", undrafted.get("answer") or ""
    if text == base:
        return None
    char = len(os.path.commonprefix([text, base]))
    return {
        "char": char,
        "before": text[max(0, char - CONTEXT_CHARS) : char],
        "drafted_text": text[char : char + CONTEXT_CHARS],
        "undrafted_text": base[char : char + CONTEXT_CHARS],
        **first_parting(drafted, undrafted, threshold=threshold),
    }


def setting_of(record: Mapping[str, Any]) -> Setting:
    """A record's strategy, cache, guidance and task: what a drafted record is compared by."""
    return record.get("strategy"), record.get("prompt_cache"), record.get("guidance"), record["id"]


def undrafted_records(records: Iterable[Mapping[str, Any]]) -> dict[Setting, Mapping[str, Any]]:
    """Each drafts-off record by strategy, cache, guidance and task: what drafts must equal."""
    return {setting_of(r): r for r in records if r.get("answer_drafts") == "off"}


def turn_differences(
    drafted: Mapping[str, Any], undrafted: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Each turn of a drafted record whose answer differs from the undrafted record's same
    turn: its :func:`first_difference`, with the turn's index (``turn``).

    A later turn reads the earlier answers, so once one turn differs every later one is told
    another conversation: its difference is that turn's consequence, not a choice of its own.
    It carries ``after_turn`` (the first turn that differed) and that turn's ``near_tie`` and
    ``unrecorded``."""
    found: list[dict[str, Any]] = []
    turns = zip(drafted.get("turns") or [], undrafted.get("turns") or [], strict=False)
    for index, (mine, theirs) in enumerate(turns):
        difference = first_difference(mine, theirs)
        if difference is None:
            continue
        if found:
            cause = found[0]
            inherited = {"near_tie": cause["near_tie"], "unrecorded": cause.get("unrecorded")}
            difference = {**difference, "after_turn": cause["turn"], **inherited}
        found.append({"turn": index, **difference})
    return found


def difference_counts(
    records: Sequence[Mapping[str, Any]], undrafted: Mapping[Setting, Mapping[str, Any]]
) -> tuple[int | None, int | None, int | None]:
    """A drafted variant's turns whose answer differs from drafts off, how many of those are
    near-ties and how many part where no choice was recorded (``unrecorded``);
    ``(None, None, None)`` for a variant that is not drafted or has nothing to compare with
    (as ``answer_same_text``)."""
    differ = near = unrecorded = 0
    compared = False
    for record in records:
        if record.get("answer_drafts") != "on":
            return None, None, None
        base = undrafted.get(setting_of(record))
        if base is None:
            continue
        compared = True
        for difference in turn_differences(record, base):
            differ += 1
            near += bool(difference["near_tie"])
            unrecorded += bool(difference.get("unrecorded"))
    return (differ, near, unrecorded) if compared else (None, None, None)


class DraftPairs:
    """The records of a run in the order they can be written: a drafted record waits for the
    same task's undrafted record (when the run has that variant), then goes out after it with
    ``answer_differences`` (:func:`turn_differences`)."""

    def __init__(self, undrafted: Iterable[tuple[Any, Any, Any]]) -> None:
        self.undrafted = set(undrafted)  # the settings the run has a drafts-off variant of
        self.waiting: dict[Setting, Mapping[str, Any]] = {}  # drafted, partner not run yet
        self.ran: dict[Setting, Mapping[str, Any]] = {}  # undrafted, partner not run yet

    def ready(self, record: Mapping[str, Any]) -> list[Mapping[str, Any]]:
        """The records that can be written now that ``record`` is known, in order."""
        key = setting_of(record)
        drafts = record.get("answer_drafts")
        if drafts == "on" and key[:3] in self.undrafted:
            base = self.ran.pop(key, None)
            if base is None:
                self.waiting[key] = record
                return []
            return [_annotated(record, base)]
        if drafts == "off":
            waiting = self.waiting.pop(key, None)
            if waiting is None:
                self.ran[key] = record
                return [record]
            return [record, _annotated(waiting, record)]
        return [record]

    def rest(self) -> list[Mapping[str, Any]]:
        """What still waits (a partner that never ran), as it is."""
        rest, self.waiting, self.ran = list(self.waiting.values()), {}, {}
        return rest


def _annotated(drafted: Mapping[str, Any], undrafted: Mapping[str, Any]) -> dict[str, Any]:
    return {**drafted, "answer_differences": turn_differences(drafted, undrafted)}
