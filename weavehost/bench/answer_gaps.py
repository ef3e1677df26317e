"""Where a drafted answer parts from its undrafted one, and how close the choice there was.

Stage: benchmark scoring (``weavehost bench-agent --answer-drafts both``). Drafting is meant to
be lossless, so a drafted answer that differs from the same task's undrafted answer needs a
reason. The bench runs its local model with each free token's top-two gap recorded (the chosen
token's masked logit over the best other's, :mod:`weavehost.decode.choice`), which each step's
``timings`` carries (``free_token_ids``, ``free_margins``, and ``free_stop`` with
``free_stop_margin`` where the text stopped at a choice: an end of turn, a call's trigger).
Pure functions over judged turns and records:

- :func:`answer_choices`: a turn's answer as the choices that wrote it (the steps after its
  last tool result, each token and then the stopping choice), each with its gap.
- :func:`first_difference`: for two turns whose answers differ, the first choice where they
  part (its index, both tokens, both gaps), the text around the first character that differs,
  and whether it is a ``near_tie``: the undrafted gap there below :data:`NEAR_TIE_LOGITS`, so a
  drafted pass's logits (computed in a batch of several rows, in another order of sums) may
  rank the two tokens the other way. ``None`` where the answers are the same.
- :func:`difference_counts`: per drafted variant, how many turns differ and how many of those
  are near-ties (``summary.json``'s ``answer_differences`` and
  ``answer_differences_near_tie``). A turn after one that differed counts as its cause does:
  it was told another conversation.
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
    "answer_choices",
    "difference_counts",
    "first_difference",
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


def answer_choices(turn: Mapping[str, Any]) -> list[Choice] | None:
    """The choices that wrote a judged turn's answer (its ``answer_steps``' recorded tokens,
    each step's stopping choice after them), each with its top-two gap (``None``: unopposed);
    ``None`` where no step of the answer recorded them, or one wrote text and recorded none."""
    steps = set(turn.get("answer_steps") or ())
    choices: list[Choice] = []
    recorded = False
    for timing in turn.get("timings") or []:
        if timing.get("step") not in steps:
            continue
        if "free_margins" not in timing:
            if timing.get("free_tokens"):
                return None
            continue
        recorded = True
        choices += zip(timing["free_token_ids"], timing["free_margins"], strict=True)
        if "free_stop" in timing:
            choices.append((f"<{timing['free_stop']}>", timing.get("free_stop_margin")))
    return choices if recorded else None


def first_difference(
    drafted: Mapping[str, Any], undrafted: Mapping[str, Any], *, threshold: float = NEAR_TIE_LOGITS
) -> dict[str, Any] | None:
    """Where two judged turns' answers part (``None`` where they are the same text): the first
    character that differs (``char``), the common text before it and each answer's text from
    there (:data:`CONTEXT_CHARS` each), the first choice that differs (``choice``: its index in
    :func:`answer_choices`; both tokens; both gaps, ``None`` where a side has no choice there or
    none was recorded) and ``near_tie`` (the undrafted gap below ``threshold``; ``None``
    where it is not known)."""
    text, base = drafted.get("answer") or "", undrafted.get("answer") or ""
    if text == base:
        return None
    char = len(os.path.commonprefix([text, base]))
    found: dict[str, Any] = {
        "char": char,
        "before": text[max(0, char - CONTEXT_CHARS) : char],
        "drafted_text": text[char : char + CONTEXT_CHARS],
        "undrafted_text": base[char : char + CONTEXT_CHARS],
        "choice": None,
        "drafted_token": None,
        "undrafted_token": None,
        "drafted_gap": None,
        "undrafted_gap": None,
        "near_tie": None,
    }
    mine, theirs = answer_choices(drafted), answer_choices(undrafted)
    if mine is None or theirs is None:
        return found
    at = next(
        (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a[0] != b[0]),
        min(len(mine), len(theirs)),
    )
    if at < len(mine):
        found["drafted_token"], found["drafted_gap"] = mine[at]
    if at < len(theirs):
        found["undrafted_token"], found["undrafted_gap"] = theirs[at]
    gap = found["undrafted_gap"]
    found["choice"] = at
    found["near_tie"] = gap is not None and gap < threshold
    return found


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
    It carries ``after_turn`` (the first turn that differed) and that turn's ``near_tie``."""
    found: list[dict[str, Any]] = []
    turns = zip(drafted.get("turns") or [], undrafted.get("turns") or [], strict=False)
    for index, (mine, theirs) in enumerate(turns):
        difference = first_difference(mine, theirs)
        if difference is None:
            continue
        if found:
            cause = found[0]
            difference = {**difference, "after_turn": cause["turn"], "near_tie": cause["near_tie"]}
        found.append({"turn": index, **difference})
    return found


def difference_counts(
    records: Sequence[Mapping[str, Any]], undrafted: Mapping[Setting, Mapping[str, Any]]
) -> tuple[int | None, int | None]:
    """A drafted variant's turns whose answer differs from drafts off, and how many of those
    are near-ties; ``(None, None)`` for a variant that is not drafted or has nothing to compare
    with (as ``answer_same_text``)."""
    differ = near = 0
    compared = False
    for record in records:
        if record.get("answer_drafts") != "on":
            return None, None
        base = undrafted.get(setting_of(record))
        if base is None:
            continue
        compared = True
        for difference in turn_differences(record, base):
            differ += 1
            near += bool(difference["near_tie"])
    return (differ, near) if compared else (None, None)


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
