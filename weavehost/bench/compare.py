"""Each strategy's call against ``constrained``'s on the same case: same call, or where it parted.

Stage: benchmark (after every strategy of a case ran, before the case's lines are written).
Guarantees:

- **Calls are compared as parsed calls**: tool names and arguments equal as JSON values (key
  order aside), call by call in order (:func:`same_calls`). ``same_as_constrained`` is
  ``True``/``False`` when ``constrained`` ran on the case and the strategy wrote a call,
  ``None`` otherwise; for ``constrained`` itself it is ``True`` when it wrote a call.
- **Tokens only locate a mismatch.** At a mismatch (``same_as_constrained`` false) the first
  call token that differs from ``constrained``'s (:func:`first_difference`) is the position;
  a token list that ends first has ``None`` for its token there. Two strategies may tokenize
  the same text differently, so equal calls are never judged by their tokens.
- **The logit gap** is ``logits[constrained_token] - logits[token]`` after prompt + the common
  prefix, as the model gives them, on the bench's own engine (:func:`logit_gaps`), run after
  the timed calls so no latency includes it. A gap under :data:`NEAR_TIE_LOGIT_GAP` (either
  sign) is a near-tie: the two choices were almost equally likely, a float-level coin toss
  rather than a different decision.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import Any

from weavehost.bench.cases import BenchCase
from weavehost.engine import Engine
from weavehost.errors import AbortedError, WeavehostError
from weavehost.formats.base import ModelFormat, tool_to_openai

__all__ = [
    "BASELINE",
    "NEAR_TIE_LOGIT_GAP",
    "Mismatch",
    "compare_case",
    "compare_with_baseline",
    "first_difference",
    "is_near_tie",
    "logit_gaps",
    "prompt_tokens",
    "same_calls",
]

# What every strategy's call is compared with.
BASELINE = "constrained"
# Below this many logits apart the two tokens were a near-tie (|gap|, natural-log units).
NEAR_TIE_LOGIT_GAP = 0.5


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Where a strategy's call tokens first part from the baseline's, and what each chose."""

    strategy: str
    position: int
    token: int | None
    baseline_token: int | None
    logit_gap: float | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "token": self.token,
            "constrained_token": self.baseline_token,
            "logit_gap": self.logit_gap,
        }


def same_calls(calls: Sequence[Mapping[str, Any]], other: Sequence[Mapping[str, Any]]) -> bool:
    """Whether two lists of result-line calls (``{"name", "arguments"}``) are the same calls:
    equal as JSON values, so ``1``, ``1.0`` and ``true`` are three different arguments."""
    return _canonical(calls) == _canonical(other)


def _canonical(calls: Sequence[Mapping[str, Any]]) -> list[str]:
    return [
        json.dumps([c.get("name"), c.get("arguments")], sort_keys=True, default=str) for c in calls
    ]


def first_difference(tokens: Sequence[int], baseline: Sequence[int]) -> int | None:
    """The first index where the two token lists differ (the shorter one's end if one is a
    prefix of the other); ``None`` when they are equal."""
    for index, (a, b) in enumerate(zip(tokens, baseline, strict=False)):
        if a != b:
            return index
    return None if len(tokens) == len(baseline) else min(len(tokens), len(baseline))


def is_near_tie(gap: float | None) -> bool:
    return gap is not None and abs(gap) < NEAR_TIE_LOGIT_GAP


def compare_with_baseline(
    records: MutableMapping[str, dict[str, Any]],
    tokens: Mapping[str, Sequence[int]],
    baseline: str,
) -> list[Mismatch]:
    """Set ``same_as_constrained`` (and ``mismatch`` where it is false) on each of one case's
    ``records`` (by strategy); return the mismatches whose logit gap is still to be measured.

    Without a ``baseline`` record every strategy's flag is ``None``. A mismatch is located only
    when both token lists are known (a strategy that reports no tokens gets ``mismatch: null``).
    """
    reference = records.get(baseline)
    wanted: list[Mismatch] = []
    for strategy, record in records.items():
        record["same_as_constrained"] = None
        record["mismatch"] = None
        if reference is None or not record["calls"]:
            continue
        if strategy == baseline:
            record["same_as_constrained"] = True
            continue
        same = same_calls(record["calls"], reference["calls"])
        record["same_as_constrained"] = same
        mine, theirs = list(tokens.get(strategy, ())), list(tokens.get(baseline, ()))
        position = None if same or not mine or not theirs else first_difference(mine, theirs)
        if position is None:
            continue
        mismatch = Mismatch(
            strategy,
            position,
            mine[position] if position < len(mine) else None,
            theirs[position] if position < len(theirs) else None,
        )
        record["mismatch"] = mismatch.as_json()
        wanted.append(mismatch)
    return wanted


def logit_gaps(
    engine: Engine,
    prompt: Sequence[int],
    mismatches: Sequence[Mismatch],
    baseline_tokens: Sequence[int],
) -> list[Mismatch]:
    """Each mismatch with its ``logit_gap`` measured on ``engine`` after prompt + the common
    prefix (the baseline's tokens before the position); a gap that cannot be measured (a token
    list ended there, a prompt past the context) stays ``None``. Leaves the KV cache empty."""
    measurable = [m for m in mismatches if m.token is not None and m.baseline_token is not None]
    if not measurable:
        return list(mismatches)
    gaps: dict[int, float] = {}
    try:
        engine.clear()
        prompt_logits = engine.prefill(0, prompt)
        for index, mismatch in enumerate(mismatches):
            if mismatch.token is None or mismatch.baseline_token is None:
                continue
            prefix = list(baseline_tokens[: mismatch.position])
            logits = engine.prefill(0, prefix) if prefix else prompt_logits
            if logits is not None:
                gaps[index] = float(logits[mismatch.baseline_token] - logits[mismatch.token])
            engine.drop(0, len(prompt), next_logits=prompt_logits)
    except AbortedError:
        raise
    except WeavehostError:  # a diagnosis, not a result: what was measured is kept
        pass
    finally:
        engine.clear()
    return [
        Mismatch(m.strategy, m.position, m.token, m.baseline_token, gaps.get(i))
        for i, m in enumerate(mismatches)
    ]


def prompt_tokens(
    engine: Engine, fmt: ModelFormat, case: BenchCase, chat_template: str | None
) -> list[int]:
    """The case's prompt as every strategy reads it (rendered and tokenized as ``run_case``)."""
    offered = [tool_to_openai(t.name, t.description, t.parameters) for t in case.tools]
    segments = fmt.render_prompt(case.messages, offered, chat_template=chat_template)
    return engine.tokenize_segments(segments)


def compare_case(
    engine: Engine,
    fmt: ModelFormat,
    case: BenchCase,
    records: MutableMapping[str, dict[str, Any]],
    tokens: Mapping[str, Sequence[int]],
    chat_template: str | None,
) -> None:
    """Mark one case's records (by strategy) against :data:`BASELINE`'s call, and measure each
    mismatch's logit gap on ``engine``: call it after the case's timed calls."""
    mismatches = compare_with_baseline(records, tokens, BASELINE)
    if not mismatches:
        return
    prompt = prompt_tokens(engine, fmt, case, chat_template)
    for mismatch in logit_gaps(engine, prompt, mismatches, tokens[BASELINE]):
        records[mismatch.strategy]["mismatch"] = mismatch.as_json()
