"""The agent benchmark's bound on drafted answers: each answer drafted again with foresight.

Stage: benchmark scoring (``weavehost bench-agent``). A measured tokens a pass says what the
drafts did, not what drafting could do on the machine. So after each turn, its clock stopped,
the bench drafts the turn's answer again offline with a drafter that knows which drafts would
be kept (:meth:`EngineModel.answer_foresight
<weavehost.agent.model.EngineModel.answer_foresight>`, :meth:`AnswerDrafts.foreseen
<weavehost.decode.answer_drafts.AnswerDrafts.foreseen>`), priced by the plan the run decoded
with: :func:`turn_foresight` gives a judged turn's ``answer_foresight``, and
:func:`summarize_foresight` a variant's figures. They are bounds priced by a table, never
measurements (``docs/agent.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from weavehost.bench.report import geomean, ratio

if TYPE_CHECKING:
    from weavehost.host import HostSession

__all__ = ["add_foresight", "summarize_foresight", "turn_foresight"]


async def add_foresight(session: HostSession, turn: dict[str, Any]) -> None:
    """Add :func:`turn_foresight` to a judged ``turn`` of ``session`` where it has one: a model
    call (the model's tokenizer), made under the model's lock like any other, after the turn's
    clock stopped and before the next turn starts."""
    lock = session.session.lock
    async with lock:
        foresight = await lock.run(turn_foresight, session.session.model, turn)
    if foresight is not None:
        turn["answer_foresight"] = foresight


def turn_foresight(model: object, turn: Mapping[str, Any]) -> dict[str, Any] | None:
    """A judged turn's ``answer_foresight``: its answer's last step's text (the one written
    after the conversation the model last synced; its ``free_token_ids``) drafted with
    foresight by the model's plan, from the reply writer's drafts (``proposer``) and from any
    copy of the conversation (``copy``), each as ``tokens``, ``passes`` and ``seconds`` of the
    cheapest schedule, ``fewest_passes`` and ``one_row_seconds``; with ``after_result_s``,
    the turn's time after the result with the step's free text (its ``free_s``) cut by the
    share the schedule would save of its passes priced one row each, and
    ``priced_saving_s``, that saving priced (what :func:`summarize_foresight` estimates the
    ratios with). ``None`` for a remote model or a stock stack, a turn without a result,
    without recorded tokens, or a plan without a table. A model call: the caller holds the
    model lock."""
    # Imported here, as the runner imports Host: loading bench-agent loads no model code.
    from weavehost.agent.model import EngineModel

    if not isinstance(model, EngineModel) or turn.get("after_result_s") is None:
        return None
    steps = set(turn.get("answer_steps") or ())
    last = [
        t for t in turn.get("timings") or () if t.get("step") in steps and "free_token_ids" in t
    ]
    if not last:
        return None
    foresight = model.answer_foresight(last[-1]["free_token_ids"])
    if foresight is None:
        return None
    step = last[-1]
    numbers: dict[str, Any] = {}
    for name, f in (("proposer", foresight.proposer), ("copy", foresight.copy)):
        entry = numbers[name] = {
            "tokens": f.tokens,
            "passes": f.passes,
            "fewest_passes": f.fewest_passes,
            "seconds": round(f.seconds, 6),
            "one_row_seconds": round(f.one_row_seconds, 6),
        }
        # The step's free passes (text taken back included) priced one row each by the
        # plan's table, what ``--cost-model`` projects them at; the foreseen schedule of its
        # final text in their place (the text taken back counted free) saves this share,
        # applied to their wall time too (``after_result_s``: the rest, the result's prefill
        # and any other step, as it was). ``f.tokens`` > 0: the text has tokens.
        priced = step.get("free_passes", 0) * f.one_row_seconds / f.tokens
        if priced <= 0:
            continue
        saved = max(0.0, 1 - f.seconds / priced)
        entry["priced_saving_s"] = round(priced * saved, 6)
        if "free_s" in step:
            entry["after_result_s"] = round(turn["after_result_s"] - step["free_s"] * saved, 4)
    return numbers


def summarize_foresight(
    turns: Sequence[Mapping[str, Any]], *, undrafted: bool = False
) -> dict[str, float | None]:
    """The turns' ``answer_foresight`` summed: per source (the reply writer's drafts,
    ``foresight_``; any copy of the conversation, ``copy_foresight_``) ``tokens_per_pass``,
    the tokens over the fewest passes, and ``pass_time_x``, the cheapest schedule's seconds
    over one row a token's (both priced by the plan's table); ``None`` without any. For a
    variant whose answers were ``undrafted`` (one row a token, what ``pass_time_x`` scales),
    ``after_result_x`` too: the geomean of each turn's time after the result with its answer
    step re-timed so, over the geomean of the time measured: near the least
    ``geo_after_result_s`` over drafts off's that such drafts reach, though no strict bound
    (other steps after the result stay as measured; ``docs/agent.md``); and
    ``projected_after_result_x``, the same of ``projected_after_result_s``
    (``--cost-model``). ``None`` for a drafted variant."""
    numbers: dict[str, float | None] = {}
    for name, prefix in (("proposer", "foresight"), ("copy", "copy_foresight")):
        bounded = [(t, t["answer_foresight"][name]) for t in turns if t.get("answer_foresight")]
        parts = [part for _, part in bounded]
        retimed = [
            (t["after_result_s"], part["after_result_s"])
            for t, part in bounded
            if "after_result_s" in part
        ]
        projected = [
            (p, p - part["priced_saving_s"])
            for t, part in bounded
            if "priced_saving_s" in part and (p := t.get("projected_after_result_s")) is not None
        ]
        for field, pairs in (("after_result_x", retimed), ("projected_after_result_x", projected)):
            numbers[f"{prefix}_{field}"] = (
                ratio(geomean(b for _, b in pairs), geomean(a for a, _ in pairs))
                if undrafted and pairs
                else None
            )
        fewest = sum(p["fewest_passes"] for p in parts)
        one_row = sum(p["one_row_seconds"] for p in parts)
        numbers[f"{prefix}_tokens_per_pass"] = (
            sum(p["tokens"] for p in parts) / fewest if fewest else None
        )
        numbers[f"{prefix}_pass_time_x"] = (
            sum(p["seconds"] for p in parts) / one_row if one_row else None
        )
    return numbers
