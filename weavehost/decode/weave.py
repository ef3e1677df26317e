"""``weave``: SchemaWeaver's schema-guided parallel decoding, verified to be lossless.

Stage: decoding, in the paper's order (sections 4-5), with every token verified:

1. **Selector** — the whole-call constraint on sequence 0, verified decoding
   (:class:`~weavehost.decode.verify.Verifier`: the grammar's forced runs are drafts
   checked in the same pass), until exactly one offered tool's head is consistent with the
   text (no passes at all when one tool is offered).
2. **Skeleton prefill** — one pass: the rest of the head and every required argument's key,
   laid out as parallel sequences (:func:`~weavehost.decode.values.prefill_skeleton`). Only
   when the plan says parallel values pay on this machine
   (:meth:`~weavehost.decode.padding.DecodePlan.parallel_pays`); otherwise stages 2-4 are
   skipped and the values are drafted serially in stage 5.
3. **Parallel values** — one sequence per required value, batched, padded to the measured
   cheapest width (:func:`~weavehost.decode.values.decode_values`).
4. **Provisional call** — the required values spliced into the skeleton with the format's tail;
   ``on_provisional`` is called *before* write-back starts.
5. **Write-back, verified** — the value sequences are dropped, and the assembled call is read
   onto sequence 0 as one explicit draft, every row with logits, under the same whole-call
   constraint the selector used: each token is kept only if it is the masked argmax after the
   tokens before it. From the first token that is not, and after the required values (the
   optional arguments, the tail), greedy constrained decoding goes on with forced runs and
   guesses (the grammar's text, values from the conversation) verified many per pass. So the
   final call is the call greedy token-by-token ``constrained`` decoding writes (lossless), up
   to floating-point near-ties between passes of different widths; ``mismatch`` on the result
   says where a parallel value lost, with the logit gap.
6. **Final call** — equal to the provisional one (its early result stands) or a corrected call.

Each stage is one method of :class:`WeaveCall`, in this order, on one call's state. A stage
that cannot go on ends the call there. A call that goes wrong (no tool settled on, a final text
that does not parse or does not finish) fails: sequence 0 goes back to the prompt alone,
through the call's :class:`~weavehost.decode.base.CallAttempt`; a failure after the
provisional call keeps it on the result (``provisional``) where write-back verified it
whole, for a caller that runs it. When
the values cannot be decoded in parallel (more values than sequences, a value grammar that
cannot be built, a value that cannot be decoded alone), stage 5 runs without their draft:
still lossless, only slower.
A call grammar that cannot be built at all is decoded by ``jump_forward``'s loose fallback
(:meth:`WeaveCall.fall_back`).

``tool_latency_s`` is the time until the call whose result will be used could start: the
provisional call when the final call equals it, otherwise the final call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, fields

from weavehost.decode.base import (
    CallAttempt,
    CallRequest,
    CallResult,
    StatefulStrategy,
    ToolSchema,
)
from weavehost.decode.calibration import decode_state
from weavehost.decode.call_tokens import tokenize_call_text
from weavehost.decode.constraint import Constraint
from weavehost.decode.guided import JumpForwardStrategy
from weavehost.decode.padding import DecodePlan, Shape
from weavehost.decode.proposals import Drafter, DraftRows, Drafts, DraftText, no_rows
from weavehost.decode.state import DecodeState
from weavehost.decode.values import ValueTask, decode_values, prefill_skeleton
from weavehost.decode.verify import VerifiedOutcome, Verifier
from weavehost.engine import Engine
from weavehost.errors import ConstraintError, FormatError
from weavehost.formats.base import ModelFormat, ToolCall

__all__ = [
    "VALUE_TOKEN_CAP",
    "ABLATIONS",
    "WeaveCall",
    "WeaveOptions",
    "WeaveStrategy",
]

logger = logging.getLogger(__name__)

# The most tokens one value may take in parallel before it is decoded serially instead.
VALUE_TOKEN_CAP = 96


@dataclass(frozen=True, slots=True)
class WeaveOptions:
    """Which of ``weave``'s components are on. Each one turned off is an ablation, a strategy
    of its own (``weave:no_drafts``, …; :data:`ABLATIONS`), so ``weavehost bench`` measures
    each component's share of the speedup in the same run as the whole. Every variant is still
    verified, so still lossless; only its speed changes.

    - ``selector``: the tool is settled as soon as one head is consistent with the text, and the
      rest of the head comes with the skeleton; off: the whole head is decoded first.
    - ``forced``: the tokens the grammar alone allows are drafted and read many per pass; off:
      one pass per token where no other draft is pending, as ``constrained`` decodes.
    - ``drafts``: guesses from the conversation (a value's start, a string's or number's rest:
      :meth:`~weavehost.decode.drafts.DraftSource.guess`); off: none.
    - ``padding``: passes padded to the cheapest measured width; off: every pass as wide as its
      rows.
    - ``provisional``: the provisional call (``on_provisional``, and ``tool_latency_s`` counted to
      it when the final call equals it); off: the tool starts on the final call.
    - ``values``: ``"plan"`` (side by side when the decode plan says it pays), ``"serial"``
      (always drafted on sequence 0) or ``"parallel"`` (always side by side).
    """

    selector: bool = True
    forced: bool = True
    drafts: bool = True
    padding: bool = True
    provisional: bool = True
    values: str = "plan"

    def __post_init__(self) -> None:
        if self.values not in ("plan", "serial", "parallel"):
            raise ValueError(f"values is plan, serial or parallel, not {self.values!r}")

    @property
    def name(self) -> str:
        """``weave`` for the whole, ``weave:no_x+serial_values`` for a variant."""
        off = [
            f"no_{f.name}" for f in fields(self) if f.name != "values" and not getattr(self, f.name)
        ]
        if self.values != "plan":
            off.append(f"{self.values}_values")
        return "weave:" + "+".join(off) if off else "weave"


# The ablations ``weavehost bench`` offers by name: one component off each.
ABLATIONS: dict[str, WeaveOptions] = {
    options.name: options
    for options in (
        WeaveOptions(selector=False),
        WeaveOptions(forced=False),
        WeaveOptions(drafts=False),
        WeaveOptions(padding=False),
        WeaveOptions(provisional=False),
        WeaveOptions(values="serial"),
        WeaveOptions(values="parallel"),
    )
}


class WeaveStrategy(StatefulStrategy):
    """``weave`` with its :class:`WeaveOptions` (all on by default) for one model's
    :class:`~weavehost.decode.state.DecodeState` (its acceptance rates, splits, constraint
    factory and plan), and, optionally, a fixed decode plan (``None``: the state's plan for
    the engine's thread count)."""

    def __init__(
        self,
        state: DecodeState | None = None,
        plan: DecodePlan | None = None,
        options: WeaveOptions | None = None,
    ) -> None:
        super().__init__(state)
        self._plan = plan
        self.options = options if options is not None else WeaveOptions()
        self.name = self.options.name
        self._unpadded: DecodePlan | None = None  # the fixed plan without padding, made once

    def with_plan(self, plan: DecodePlan) -> WeaveStrategy:
        """The same variant on the same state with a fixed decode plan (``bench
        --cost-model``)."""
        return WeaveStrategy(self._state, plan=plan, options=self.options)

    def run(self, request: CallRequest) -> CallResult:
        state = self.state_for(request.engine)
        plan = self._plan_for(state, request.engine)
        return WeaveCall(request, state=state, plan=plan, options=self.options).run()

    def _plan_for(self, state: DecodeState, engine: Engine) -> DecodePlan:
        padding = self.options.padding
        if self._plan is None:
            return state.plan(engine, padding=padding)
        if padding:
            return self._plan
        if self._unpadded is None:
            self._unpadded = self._plan.without_padding()
        return self._unpadded


class WeaveCall:
    """One ``weave`` call: its state, and one method per stage of the module docstring.

    Constructing it starts the :class:`~weavehost.decode.base.CallAttempt` (sequence 0 must
    hold the prompt). The stages run in order; each reads what the earlier ones left on this
    object. A stage returns ``None`` to go on, or the call's result when the call ends there.
    :meth:`run` is the whole call.
    """

    def __init__(
        self,
        request: CallRequest,
        *,
        state: DecodeState | None = None,
        plan: DecodePlan | None = None,
        options: WeaveOptions | None = None,
    ) -> None:
        self.request = request
        self.options = options if options is not None else WeaveOptions()
        self.engine, self.fmt = request.engine, request.format
        # ``None``: a state of its own, as a strategy without one makes.
        self.state = (state if state is not None else decode_state(self.engine)).serve(self.engine)
        self.acceptance = self.state.acceptance(self.options.name)
        # ``None``: the state's plan (the engine's calibrated plan, or the neutral one).
        self.plan = plan if plan is not None else self.state.plan(self.engine)
        self.factory = self.state.constraints(self.engine)  # once per model, not a call's cost
        self.attempt = CallAttempt.start(self.options.name, self.engine, self.factory.clock)
        self.grammars = self.factory.grammars(self.fmt)
        # Set by select: the tool, its head, the part of the head sequence 0 holds, and the
        # whole-call constraint having consumed exactly that part.
        self.tool: ToolSchema | None = None
        self.whole: Constraint | None = None
        self.head = ""
        self.head_written = ""
        self.head_tokens: list[int] = []
        # Set by skeleton and values: one task per required value, and the skeleton tokens
        # every value sequence shares. Empty when the values are not decoded in parallel.
        self.tasks: list[ValueTask] = []
        self.shared: list[int] = []
        # Set by provisional: the call with its required values, and when it was ready.
        self.pairs: list[tuple[str, bool]] = []
        self.provisional_call: ToolCall | None = None
        # The provisional call's text after the head, as write-back drafts it ("": none).
        self.provisional_text = ""
        self.provisional_at = 0.0
        # Set by write_back: the call's tokens on sequence 0, the final text, when it was
        # complete, and what verifying the draft found.
        self.call_tokens: list[int] = []
        self.final_text = ""
        self.final_at = 0.0
        self.verified: VerifiedOutcome | None = None
        self._watched = 0  # bytes of the verified text _watch has looked at

    def run(self) -> CallResult:
        """The stages in order; the first that ends the call gives its result."""
        stages = (self.select, self.skeleton, self.values, self.provisional, self.write_back)
        for stage in stages:
            ended = stage()
            if ended is not None:
                return ended
        return self.final()

    def select(self) -> CallResult | None:
        """1. Pick the tool; sequence 0 then holds the prompt and at most the tool's head.

        Fails when no tool is offered or the selector does not settle on one; falls back when
        the call grammar cannot be built."""
        tools = self.request.tools
        if not tools:
            return self.attempt.failed("no tools are offered")
        try:
            self.whole = self.factory.new(
                self.grammars.call([(t.name, t.parameters) for t in tools])
            )
        except ConstraintError as exc:
            return self.fall_back(str(exc))
        with self.attempt.selecting():  # the account's selector_s
            selected = _select(
                self.state,
                self.engine,
                self.fmt,
                self.request,
                self.whole,
                self._drafter(),
                draft_rows=self._draft_rows,
                settle_early=self.options.selector,
                forced=self.options.forced,
                shape=self.plan.shape_for,
            )
        if isinstance(selected, str):
            return self.attempt.failed(selected)
        self.tool, self.head_written, self.head_tokens = selected
        self.attempt.lap("select")
        self.head = self.fmt.layout.head_for(self.tool.name)
        return None

    def skeleton(self) -> CallResult | None:
        """2. One value task per required argument (the first on sequence 0, the others on
        forks), and the skeleton read for all of them in one pass — when the plan says
        parallel values pay here, there are sequences enough, and every value grammar builds;
        otherwise no tasks (stage 5 drafts the values serially)."""
        engine, fmt, tool = self.engine, self.fmt, self._tool()
        required = list(tool.required)
        props = tool.parameters.get("properties", {})
        if not required or not self._parallel(len(required)):
            return None
        if len(required) + 1 > engine.n_seq_max:
            logger.info(
                "weave drafts serially: %d values, n_seq_max=%d", len(required), engine.n_seq_max
            )
            return None
        head_rest = self.head[len(self.head_written) :]
        tasks = []
        try:
            for index, key in enumerate(required):
                lead = head_rest + fmt.layout.prefix_for(key, first=True)
                constraint = self.factory.new(self.grammars.value(lead, props[key]))
                # The first value runs on sequence 0 itself, the others on forks.
                tasks.append(ValueTask(key=key, seq=index, constraint=constraint, lead=lead))
        except ConstraintError as exc:
            logger.info("weave drafts serially: %s", exc)
            return None
        self.tasks = tasks
        unread = self.head_tokens[-1:] if self._head_unread() else []
        self.shared = prefill_skeleton(engine, self.tasks, unread)
        self.attempt.lap("skeleton")
        return None

    def values(self) -> CallResult | None:
        """3. Every required value decoded in parallel, each ended where its type ends.

        When any value cannot be decoded alone, none is used as a draft."""
        if not self.tasks:
            return None
        decode_values(
            self.engine,
            self.fmt,
            self.tasks,
            plan=self.plan,
            scratch_seq=self.engine.n_seq_max - 1,
            max_tokens=min(self.request.max_tokens, VALUE_TOKEN_CAP),
        )
        self.attempt.lap("values")
        broken = [str(task.error) for task in self.tasks if task.error]
        if broken:
            # A value that cannot be decoded alone (too long, or a model that rambles without
            # the other values in view) is decoded with the whole call in view in stage 5.
            logger.info("weave drafts serially: %s", "; ".join(broken))
            self._drop_value_sequences()
            self.tasks = []
        return None

    def provisional(self) -> CallResult | None:
        """4. The required values spliced into the skeleton with the format's tail, passed to
        ``on_provisional`` before write-back starts (when the assembled call parses)."""
        fmt = self.fmt
        if not self.tasks:
            return None
        for index, task in enumerate(self.tasks):
            self.pairs.append((fmt.layout.prefix_for(task.key, first=index == 0), True))
            self.pairs.append((str(task.value), False))
        required_text = self.head + "".join(text for text, _ in self.pairs)
        try:
            call = _single_call(fmt, required_text + fmt.layout.tail)
        except FormatError as exc:
            logger.info("no provisional call: the assembled call does not parse: %s", exc)
            return None
        if not self.options.provisional:
            return None
        self.provisional_call = call
        self.provisional_at = time.perf_counter()
        if self.request.on_provisional is not None:
            self.request.on_provisional(call)
        self.attempt.lap("provisional")
        return None

    def write_back(self) -> CallResult | None:
        """5. The value sequences dropped and sequence 0 cut back to the head; the assembled
        call read back as a draft and verified, and the call finished by verified decoding
        under the whole-call constraint (see the module docstring).

        Fails when the call cannot finish."""
        engine, fmt = self.engine, self.fmt
        whole = self._whole()
        self._drop_value_sequences()
        # Sequence 0 back to the prompt and the head's tokens, all but the last: that one is
        # read again first, with logits, so the draft's first token can be verified.
        pending: list[int] = []
        base = self.attempt.prompt_len + len(self.head_tokens)
        if self.head_tokens:
            pending = [self.head_tokens[-1]]
            engine.drop(0, base - 1)
        else:
            engine.drop(0, base, next_logits=self.attempt.prompt_logits)
        draft: list[int] = []
        if self.pairs:
            parts = [(self.head[len(self.head_written) :], True), *self.pairs]
            if not self._tool().optional:
                parts.append((fmt.layout.tail, True))
            draft = tokenize_call_text(engine, parts)
            self.provisional_text = "".join(text for text, _ in parts)
        verifier = Verifier(
            engine,
            whole,
            self.state,
            shape=self.plan.shape_for,
            watch=self._watch if self._watches() else None,
        )
        drafts = Drafts(draft, self._drafter(), self._draft_rows, self.options.forced)
        outcome = verifier.run(
            max(1, self.request.max_tokens - len(self.head_tokens)), pending=pending, drafts=drafts
        )
        self.verified = outcome
        self.acceptance.add(outcome.by_kind)
        self.call_tokens = self.head_tokens + outcome.tokens
        self.final_text = self.head_written + outcome.text
        self.final_at = outcome.completed_at
        self.attempt.lap("writeback")
        if outcome.error or not outcome.finished:
            error = outcome.error or "the call did not finish"
            return self.attempt.failed(
                error, text=self.final_text, provisional=self._verified_provisional()
            )
        return None

    def _verified_provisional(self) -> ToolCall | None:
        """For a failed result: the provisional call where the verified text holds it whole
        (every required value as greedy decoding writes it), else ``None`` (a value lost to
        the argmax: the model did not write that call)."""
        outcome = self.verified
        if outcome is None or not outcome.text.startswith(self.provisional_text):
            return None
        return self.provisional_call

    def final(self) -> CallResult:
        """6. The final call: the provisional one when they are equal (its early result
        stands, and ``tool_latency_s`` counts to it), otherwise the corrected call.

        Fails when the final text does not parse."""
        try:
            final = _single_call(self.fmt, self.final_text)
        except FormatError as exc:
            return self.attempt.failed(
                f"the final call does not parse: {exc}",
                text=self.final_text,
                provisional=self._verified_provisional(),
            )
        same = self.provisional_call is not None and final == self.provisional_call
        return self.attempt.finish(
            calls=[final],
            provisional=self.provisional_call,
            text=self.final_text,
            tokens=self.call_tokens,
            final_at=self.final_at,
            tool_at=self.provisional_at if same else self.final_at,
        )

    def fall_back(self, reason: str) -> CallResult:
        """The call decoded by jump_forward (which falls back to a loosened grammar and
        post-validation for a schema it cannot constrain), from the prompt alone; the result
        counts what weave spent before."""
        logger.info("weave falls back to jump_forward: %s", reason)
        self.attempt.roll_back()
        fallback = JumpForwardStrategy(self.state).run(self.request)
        self.attempt.phases["fallback"] = fallback.final_latency_s
        return self.attempt.finish(
            calls=fallback.calls, text=fallback.text, tokens=fallback.tokens, error=fallback.error
        )

    def _watch(self, written: bytes) -> None:
        """Without parallel values: the provisional call as soon as the verified text holds
        every required value and the model moves on (a ``,`` or ``}`` after a value, alone or
        fused in a token), before it decides the optional arguments."""
        tool = self._tool()
        while self.provisional_call is None and self._watched < len(written):
            at, self._watched = self._watched, self._watched + 1
            if written[at : at + 1] not in (b",", b"}"):
                continue
            text = self.head_written + written[:at].decode("utf-8", errors="replace")
            try:
                call = _single_call(self.fmt, text + self.fmt.layout.tail)
            except FormatError:
                continue
            if call.name == tool.name and set(tool.required) <= set(call.arguments):
                self.provisional_call = call
                self.provisional_at = time.perf_counter()
                if self.request.on_provisional is not None:
                    self.request.on_provisional(call)

    def _head_unread(self) -> bool:
        """Whether sequence 0 has yet to read the head's last token (the selector leaves the
        token that settled the tool for the next pass to read with what follows it)."""
        return self.engine.seq_len(0) < self.attempt.prompt_len + len(self.head_tokens)

    def _parallel(self, n_values: int) -> bool:
        """Whether ``n_values`` required values are decoded side by side (stage 2)."""
        if self.options.values != "plan":
            return n_values >= 1 and self.options.values == "parallel"
        return self.plan.parallel_pays(n_values)

    def _watches(self) -> bool:
        """Whether write-back looks for the provisional call in the verified text: when no
        provisional call was made from parallel values and optional arguments follow."""
        return (
            self.options.provisional
            and self.provisional_call is None
            and bool(self._tool().optional)
        )

    def _drafter(self) -> Drafter | None:
        """Guesses from the conversation (:meth:`DraftSource.guess`) for text written after
        the head."""
        source = self.request.drafts
        if source is None or not self.options.drafts:
            return None

        def propose(written: bytes) -> DraftText | None:
            text = (self.head_written.encode() + written).decode("utf-8", errors="ignore")
            guess = source.guess(text)
            return DraftText(*guess) if guess is not None else None

        return propose

    def _draft_rows(self, base_rows: int, kinds: Sequence[str]) -> int:
        """How many guessed tokens of these kinds a pass of ``base_rows`` rows carries."""
        rates = [self.acceptance.rate(kind) for kind in kinds]
        return self.plan.draft_length(base_rows, rates)

    def _drop_value_sequences(self) -> None:
        for task in self.tasks:
            if task.seq != 0 and self.engine.seq_len(task.seq):
                self.engine.drop(task.seq, 0)

    def _tool(self) -> ToolSchema:
        assert self.tool is not None, "the stages run in order: select first"
        return self.tool

    def _whole(self) -> Constraint:
        assert self.whole is not None, "the stages run in order: select first"
        return self.whole


def _select(
    state: DecodeState,
    engine: Engine,
    fmt: ModelFormat,
    request: CallRequest,
    whole: Constraint,
    drafter: Drafter | None,
    *,
    draft_rows: DraftRows | None = None,
    settle_early: bool = True,
    forced: bool = True,
    shape: Shape | None = None,
) -> tuple[ToolSchema, str, list[int]] | str:
    """Pick the tool: returns (tool, head text on seq 0, its tokens) or an error string.

    With ``settle_early`` it stops as soon as one head is consistent with the text (no passes
    at all when one tool is offered); without, it decodes the whole head. ``shape``: the
    plan's shape of a pass (:meth:`DecodePlan.shape_for`).
    ``whole`` ends having consumed exactly the returned tokens."""
    tools: Sequence[ToolSchema] = request.tools
    heads = {tool.name: fmt.layout.head_for(tool.name) for tool in tools}
    if len(tools) == 1 and settle_early:
        return tools[0], "", []

    def consistent(text: str) -> list[str]:
        return [n for n, h in heads.items() if h.startswith(text) or text.startswith(h)]

    def settled(data: bytes) -> bool:
        text = data.decode("utf-8", "replace")
        names = consistent(text)
        if settle_early or len(names) != 1:
            return len(names) <= 1
        return len(text) >= len(heads[names[0]])

    verifier = Verifier(engine, whole, state, shape=shape, stop=settled, read_last=False)
    drafts = Drafts(drafter=drafter, rows=draft_rows or no_rows, forced=forced)
    outcome = verifier.run(request.max_tokens, drafts=drafts)
    text = outcome.text
    names = consistent(text)
    if len(names) != 1:  # the call fails; its attempt takes sequence 0 back to the prompt
        return outcome.error or "the selector did not settle on one tool"
    tool = next(t for t in tools if t.name == names[0])
    tokens = list(outcome.tokens)
    unread = outcome.unread  # the deciding token: write-back reads it with its draft
    head = heads[tool.name]
    while len(text) > len(head) and tokens:
        # The deciding token ran past the head (fused with the first key): take it back.
        if unread:
            unread -= 1
        else:
            engine.drop(0, engine.seq_len(0) - 1)
        whole.rollback(1)
        tokens.pop()
        text = engine.detokenize(tokens)
    return tool, text, tokens


def _single_call(fmt: ModelFormat, text: str) -> ToolCall:
    calls = fmt.parse_calls(text)
    if len(calls) != 1:
        raise FormatError(f"expected one call, found {len(calls)}")
    return calls[0]
