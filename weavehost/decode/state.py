"""What the decoder learns and caches about one opened model, held in one object.

Stage: decoding (under every strategy and the reply driver). A :class:`DecodeState` belongs to
one opened model, keyed by its :attr:`~weavehost.engine.Engine.identity`, and to whoever opened
it (:func:`weavehost.decode.calibration.open_calibrated`: the host, the bench runner); a
strategy is made for a state (:data:`weavehost.decode.STRATEGIES` holds factories), so nothing
one model teaches the decoder reaches another model, another engine or another test.

It holds:

- the decode plan per thread count (:meth:`plan`: read once per count, from the stored
  calibration for the kernel the engine was opened with), and each plan without padding; where
  the calibration measured passes after many held tokens, the plan for as many tokens as the
  conversation holds, by :data:`HELD_STEP` (every row of a pass reads them all);
- the constraint factory (llguidance's view of the vocabulary, built once);
- each strategy's acceptance rates of guessed tokens (:class:`DraftAcceptance`, by strategy),
  and the pricing of drafted free text with its acceptance over the model's replies
  (:class:`~weavehost.decode.answer_drafts.DraftPricing`, per thread count);
- the model's own splits of drafted tokens and the value closings as it tokenizes them
  (:mod:`~weavehost.decode.proposals`);
- how it spells a call's closer (:mod:`~weavehost.decode.several`), and its vocabulary by bytes
  (:class:`~weavehost.decode.call_tokens.SpellingIndex`), from which openers and closers are
  spelled;
- the tokens it wrote after each token and pair in its drafted replies
  (:class:`~weavehost.decode.followers.Followers`).

Every cache is bounded (the ``*_CAP`` constants below): past its bound the entry used least
recently goes. The bounds are far above what a model's calls reach (a split per token the
model writes in two, a closing per value end, a spelling per opener), so within them the
decoder's calls and passes are as if nothing were ever forgotten.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from weavehost.decode.answer_drafts import DraftPricing
from weavehost.decode.bounded import Bounded
from weavehost.decode.call_tokens import SpellingIndex
from weavehost.decode.constraint import ConstraintFactory
from weavehost.decode.followers import Followers
from weavehost.decode.padding import NO_PLAN, DecodePlan
from weavehost.decode.proposals import CLOSE, EDGE, END, GRAMMAR
from weavehost.errors import ConfigError

if TYPE_CHECKING:
    from weavehost.engine import Engine
    from weavehost.engine.cost_table import CostTable
    from weavehost.engine.saved import StateIdentity

__all__ = [
    "ACCEPTANCE_CAP",
    "CLOSINGS_CAP",
    "DEFAULT_PRIOR",
    "DRAFT_PRIORS",
    "HELD_PLANS_CAP",
    "HELD_STEP",
    "PLANS_CAP",
    "SPELLINGS_CAP",
    "SPLITS_CAP",
    "Bounded",
    "DecodeState",
    "DraftAcceptance",
    "PlanSource",
]

logger = logging.getLogger(__name__)

# Thread counts whose plan is kept (a phone backs off through a few).
PLANS_CAP = 8
# The plan is made again for every this many tokens sequence 0 holds (where the table knows
# what held tokens cost): a pass after 1,200 held tokens and one after 1,400 cost within 2% of
# each other (Qwen2.5-Coder-0.5B, 4 rows, session 58).
HELD_STEP = 256
# Plans kept for held lengths (thread counts, padding or not, and a 4,096-token context's steps).
HELD_PLANS_CAP = 64
# Strategies whose acceptance rates are kept (weave and its ablations are nine).
ACCEPTANCE_CAP = 32
# The model's own splits of drafted tokens (one per token it was seen to write in two).
SPLITS_CAP = 4096
# Value closings (``",``, ``}``…) as the model tokenizes them.
CLOSINGS_CAP = 256
# Closers as the model spells them (one per closer text a call ended with).
SPELLINGS_CAP = 64

# The acceptance assumed for each kind of guessed token before any was seen (rate, and how
# many reached tokens it weighs; see DraftAcceptance): measured on the first 40 BFCL
# simple_python cases with Qwen2.5-Coder-0.5B Q4_0 and SmolLM2-135M (docs/decoder.md, "Guesses
# and their rates"): the grammar's text 50/51 and 171/178, a value's start from the request
# 83/92 and 187/210; a number's rest 18/18, held at 0.9 for so few. A string's rest, drafted to
# the end of its name (drafts.py): 31/33 and 125/144 on the first 40 simple_python and 40
# multiple cases and multiple_89. Each rate is the lower of the two models'. A loop's next turn
# ("repeat"): 370 of 371 on the two calls of those cases that looped (Qwen), held at 0.95 (a
# loop that ends costs one rejected token).
DRAFT_PRIORS: dict[str, tuple[float, int]] = {
    GRAMMAR: (0.96, 50),
    # The grammar's text's last token where nothing is guessed after it: 72/106 (Qwen), 58/111
    # (SmolLM2) on the first 40 simple_python and multiple cases and the first 48 Android ones,
    # where the grammar's other guessed tokens were 427/437 and 789/798. But it depends on the
    # tools: 25/27 (Qwen) on simple_python (` "` before a string), 27/55 on Android (` ` before
    # a boolean, ` {` before optional arguments). A kind the plan does not send is never
    # measured, and at 0.52 weave lost 0.4 passes a call on held-out bench-200 cases; so it
    # starts at the grammar's rate, weighing 10 tokens, and each model learns its own.
    EDGE: (0.96, 10),
    # A value's closing text where the grammar allows one (117/143 Qwen, 190/258 SmolLM2, with
    # the model's own split of Qwen's fused `}}\n` learned), and the next member's comma where
    # optional arguments may follow (48/77, 46/116): 81 tuning cases, every guess sent.
    END: (0.74, 50),
    CLOSE: (0.40, 50),
    # A string not begun guessed as the request's first name not yet written, per reached
    # token: 50/66 (Qwen), 73/116 (SmolLM2).
    "name": (0.63, 50),
    "start": (0.89, 50),
    "string": (0.87, 50),
    # A phrase's rest, drafted to the end of its clause (drafts.py): 41/44 (Qwen), 24/30
    # (SmolLM2) on the first 48 Android and 40 simple_python and multiple cases.
    "phrase": (0.80, 50),
    "number": (0.90, 50),
    "repeat": (0.95, 50),
    # A call's closer spelled again in the model's own tokens (``call_tokens.SpellingPricing``),
    # drafted whole: 10/16 reached tokens from an earlier spelling's tail, 9/14 from the
    # tokenizer's split (Qwen, seven agent requests over the weather and files servers).
    "tail": (0.63, 50),
    "plain": (0.64, 50),
}
# Of a kind with no prior (none today).
DEFAULT_PRIOR = (0.5, 50)

# The plan a state reads for a thread count (the opener's: the stored calibration).
PlanSource = Callable[[int], DecodePlan]


class DraftAcceptance:
    """How often each kind of guessed token was accepted when a pass reached it, with a prior
    per kind (:data:`DRAFT_PRIORS`) so a few calls do not swing it. The plan sizes each pass's
    guesses from these rates (:meth:`DecodePlan.draft_length`)."""

    def __init__(self, priors: dict[str, tuple[float, int]] | None = None) -> None:
        self._priors = DRAFT_PRIORS if priors is None else priors
        self._counts: dict[str, list[float]] = {}

    def rate(self, kind: str) -> float:
        reached, accepted = self._counts.get(kind) or self._prior(kind)
        return accepted / reached

    def reached(self, kind: str) -> int:
        """Tokens of ``kind`` that passes reached (the prior not counted)."""
        counts = self._counts.get(kind)
        return 0 if counts is None else round(counts[0] - self._prior(kind)[0])

    def add(self, by_kind: dict[str, tuple[int, int]]) -> None:
        """Add a run's (reached, accepted) per kind."""
        for kind, (reached, accepted) in by_kind.items():
            counts = self._counts.setdefault(kind, self._prior(kind))
            counts[0] += reached
            counts[1] += accepted

    def _prior(self, kind: str) -> list[float]:
        rate, weight = self._priors.get(kind, DEFAULT_PRIOR)
        return [float(weight), rate * weight]


class DecodeState:
    """Everything the decoder learns or caches about one opened model: see the module
    docstring. ``identity``: the model it serves (``None``: the first engine it is shown,
    :meth:`serve`); ``plans``: the plan for a thread count (default: :data:`NO_PLAN`).

    Its caches are filled from the one thread that decodes (the model lock orders a model's
    steps); :meth:`serve` and :meth:`constraints` take a lock of their own, since a strategy
    prepares a state from the thread that opens the model."""

    def __init__(
        self, identity: StateIdentity | None = None, *, plans: PlanSource | None = None
    ) -> None:
        self.identity = identity
        self._plans_from = plans
        self._lock = threading.Lock()
        # By thread count and whether passes are padded.
        self._plans: Bounded[tuple[int, bool], DecodePlan] = Bounded(2 * PLANS_CAP)
        # By thread count, padding, and held tokens in steps of HELD_STEP.
        self._held_plans: Bounded[tuple[int, bool, int], DecodePlan] = Bounded(HELD_PLANS_CAP)
        self._constraints: ConstraintFactory | None = None
        self._acceptance: Bounded[str, DraftAcceptance] = Bounded(ACCEPTANCE_CAP)
        self._answer_pricing: Bounded[int, DraftPricing] = Bounded(PLANS_CAP)
        self.splits: Bounded[int, int] = Bounded(SPLITS_CAP)
        self.closings: Bounded[str, list[int]] = Bounded(CLOSINGS_CAP)
        self.closer_spellings: Bounded[bytes, list[int]] = Bounded(SPELLINGS_CAP)
        self._spelling_index: SpellingIndex | None = None
        # The tokens the model wrote after each token and pair (its replies' free text).
        self.followers = Followers()

    def serve(self, engine: Engine) -> DecodeState:
        """This state, checked to be ``engine``'s (a state without an identity takes the first
        engine's): what one model learned never steers another."""
        with self._lock:
            if self.identity is None:
                self.identity = engine.identity
        if engine.identity != self.identity:
            raise ConfigError(
                f"this decode state belongs to another opened model than the engine of "
                f"{engine.identity.model}: open each model with its own state"
            )
        return self

    def plan(self, engine: Engine, *, padding: bool = True) -> DecodePlan:
        """The plan for ``engine`` at its current thread count, read once per count;
        ``padding=False``: that plan with no pass padded (the ``weave:no_padding`` ablation),
        made once per count too. Where its table knows what held tokens cost
        (:meth:`CostTable.at_held <weavehost.engine.cost_table.CostTable.at_held>`), the plan
        made from it at the middle of the :data:`HELD_STEP` that sequence 0's length is in,
        made once per step."""
        plan = self._base_plan(engine, padding)
        table = plan.table
        if table is None or not table.knows_held:
            return plan
        step = engine.seq_len(0) // HELD_STEP
        key = (engine.n_threads, padding, step)
        held = self._held_plans.get(key)
        if held is None:
            at = table.at_held(step * HELD_STEP + HELD_STEP // 2)
            source = f"{plan.source}, at {step * HELD_STEP}-{(step + 1) * HELD_STEP} held tokens"
            held = DecodePlan.from_table(at, source=source, padding=plan.pads)
            self._held_plans[key] = held
        return held

    def table(self, engine: Engine) -> CostTable | None:
        """The cost table ``engine``'s plans are made from at its current thread count, as
        calibrated (what held tokens cost included); ``None`` without one."""
        return self._base_plan(engine, True).table

    def _base_plan(self, engine: Engine, padding: bool) -> DecodePlan:
        key = (engine.n_threads, padding)
        plan = self._plans.get(key)
        if plan is None:
            if not padding:
                plan = self._base_plan(engine, True).without_padding()
            elif self._plans_from is not None:
                plan = self._plans_from(engine.n_threads)
            else:
                plan = NO_PLAN
            self._plans[key] = plan
        return plan

    def constraints(self, engine: Engine) -> ConstraintFactory:
        """The constraint factory of the model (built once: reading the vocabulary takes
        ~0.3 s)."""
        self.serve(engine)
        with self._lock:
            if self._constraints is None:
                self._constraints = ConstraintFactory(engine)
            return self._constraints

    def answer_pricing(self, engine: Engine) -> DraftPricing:
        """How many drafted tokens a pass of free text carries on this model at the engine's
        thread count: that count's plan (:meth:`plan`, for the tokens held now), and the
        acceptance measured over its replies."""
        found = self._answer_pricing.get(engine.n_threads)
        if found is None:
            found = self._answer_pricing[engine.n_threads] = DraftPricing(self.plan(engine))
        else:
            found.plan = self.plan(engine)
        return found

    def spelling_index(self, engine: Engine) -> SpellingIndex:
        """The model's tokens by their bytes, for spelling a closer where none of the model's
        best tokens spells on: built on first need."""
        self.serve(engine)
        if self._spelling_index is None:
            self._spelling_index = SpellingIndex.of(engine)
        return self._spelling_index

    def acceptance(self, strategy: str) -> DraftAcceptance:
        """The acceptance rates ``strategy`` (by name) has seen on this model."""
        found = self._acceptance.get(strategy)
        if found is None:
            found = self._acceptance[strategy] = DraftAcceptance()
        return found
