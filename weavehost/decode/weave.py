"""``weave``: SchemaWeaver's schema-guided parallel decoding of one tool call.

Stage: decoding, in the paper's order (sections 4-5):

1. **Selector** — the whole-call constraint on sequence 0, with jump-forward, until exactly one
   offered tool's head is consistent with the text (no passes at all when one tool is offered).
2. **Skeleton prefill** — one pass: the rest of the head and every required argument's key,
   laid out as parallel sequences (:func:`~weavehost.decode.values.prefill_skeleton`).
3. **Parallel values** — one sequence per required value, batched, padded to the measured
   cheapest width (:func:`~weavehost.decode.values.decode_values`).
4. **Provisional call** — the required values spliced into the skeleton with the format's tail;
   ``on_provisional`` is called *before* write-back starts.
5. **Write-back** — the value sequences are dropped and the assembled text is prefilled on
   sequence 0 in one pass, so it then holds exactly ``prompt + call tokens`` (``call_tokens``)
   and continues as if the call had been decoded serially. Its next-token logits equal those of
   a serial prefill of the same tokens.
6. **Optional arguments** — decided after the required values, serially, on the written-back
   sequence, under a constraint that allows any subset of the optional arguments in schema
   order and then the tail; forced runs are jumped.
7. **Final call** — equal to the provisional one (its early result stands) or a corrected call.

Each stage is one method of :class:`WeaveCall`, in this order, on one call's state. A stage
that cannot go on ends the call there. A call that goes wrong (no tool settled on, a text that
does not parse, optional arguments that do not finish) fails: sequence 0 goes back to the prompt
alone, through the call's :class:`~weavehost.decode.base.CallAttempt`. A call weave cannot
decode in parallel (a constraint it cannot build, more values than sequences, a value that
cannot be decoded alone) is decoded again by ``jump_forward`` (:meth:`WeaveCall.fall_back`).

``tool_latency_s`` is the time until the call whose result will be used could start: the
provisional call when the final call equals it, otherwise the final call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from weavehost.decode.base import CallAttempt, CallRequest, CallResult, ToolSchema
from weavehost.decode.constraint import ConstraintFactory, constraints_for
from weavehost.decode.grammar import GrammarBuilder
from weavehost.decode.guided import JumpForwardStrategy, guided_decode
from weavehost.decode.padding import PaddingPlan, load_plan
from weavehost.decode.values import ValueTask, decode_values, prefill_skeleton
from weavehost.engine import Engine
from weavehost.errors import ConstraintError, FormatError
from weavehost.formats.base import ModelFormat, ToolCall

__all__ = ["VALUE_TOKEN_CAP", "WeaveCall", "WeaveStrategy", "tokenize_call_text"]

logger = logging.getLogger(__name__)

# The most tokens one value may take in parallel before the call falls back to jump_forward.
VALUE_TOKEN_CAP = 96


def tokenize_call_text(engine: Engine, parts: Sequence[tuple[str, bool]]) -> list[int]:
    """Tokens of call text given as (text, fixed) parts: the model's special tokens are parsed
    only inside fixed parts; everything else (values) is plain text, tokenized in runs as long
    as possible so no artificial token boundary appears between a key and its value."""
    specials = sorted(engine.special_texts, key=len, reverse=True)
    tokens: list[int] = []
    plain = ""
    for text, fixed in parts:
        if not fixed:
            plain += text
            continue
        cursor = 0
        while cursor < len(text):
            hits = [(text.find(s, cursor), s) for s in specials if text.find(s, cursor) >= 0]
            if not hits:
                plain += text[cursor:]
                break
            at, special = min(hits, key=lambda hit: (hit[0], -len(hit[1])))
            plain += text[cursor:at]
            if plain:
                tokens.extend(engine.tokenize(plain))
                plain = ""
            tokens.extend(engine.tokenize(special, special=True))
            cursor = at + len(special)
    if plain:
        tokens.extend(engine.tokenize(plain))
    return tokens


class WeaveStrategy:
    name = "weave"

    def __init__(self, plan: PaddingPlan | None = None) -> None:
        self._plan = plan

    def run(self, request: CallRequest) -> CallResult:
        return WeaveCall(request, plan=self._plan).run()


class WeaveCall:
    """One ``weave`` call: its state, and one method per stage of the module docstring.

    Constructing it starts the :class:`~weavehost.decode.base.CallAttempt` (sequence 0 must
    hold the prompt). The stages run in order; each reads what the earlier ones left on this
    object. A stage returns ``None`` to go on, or the call's result when the call ends there:
    failed (back to the prompt alone) or decoded again by ``jump_forward``
    (:meth:`fall_back`). :meth:`run` is the whole call.
    """

    def __init__(self, request: CallRequest, *, plan: PaddingPlan | None = None) -> None:
        self.request = request
        self.engine, self.fmt = request.engine, request.format
        # ``None``: the engine's calibrated plan, read when the values are decoded.
        self.plan = plan
        self.factory = constraints_for(self.engine)  # once per engine, not a call's cost
        self.attempt = CallAttempt.start(WeaveStrategy.name, self.engine)
        self.grammars = self.factory.grammars(self.fmt)
        # Set by select: the tool, its head, and the part of the head sequence 0 holds.
        self.tool: ToolSchema | None = None
        self.head = ""
        self.head_written = ""
        self.head_tokens: list[int] = []
        # Set by skeleton and values: one task per required value, and the skeleton tokens
        # every value sequence shares.
        self.tasks: list[ValueTask] = []
        self.shared: list[int] = []
        # Set by provisional: the call with its required values, and when it was ready.
        self.pairs: list[tuple[str, bool]] = []
        self.required_text = ""
        self.provisional_call: ToolCall | None = None
        self.provisional_at = 0.0
        # Set by write_back: the call's tokens on sequence 0, and the text the optional
        # grammar starts with (the last token, held back).
        self.call_tokens: list[int] = []
        self.lead = ""
        # Set by optional: the final text and when it was complete.
        self.final_text = ""
        self.final_at = 0.0

    def run(self) -> CallResult:
        """The seven stages in order; the first that ends the call gives its result."""
        stages = (
            self.select,
            self.skeleton,
            self.values,
            self.provisional,
            self.write_back,
            self.optional,
        )
        for stage in stages:
            ended = stage()
            if ended is not None:
                return ended
        return self.final()

    def select(self) -> CallResult | None:
        """1. Pick the tool; sequence 0 then holds the prompt and at most the tool's head.

        Fails when no tool is offered or the selector does not settle on one; falls back when
        the call grammar cannot be built."""
        try:
            selected = _select(self.engine, self.fmt, self.request, self.grammars, self.factory)
        except ConstraintError as exc:
            return self.fall_back(str(exc))
        if isinstance(selected, str):
            return self.attempt.failed(selected)
        self.tool, self.head_written, self.head_tokens = selected
        self.attempt.lap("select")
        self.head = self.fmt.layout.head_for(self.tool.name)
        return None

    def skeleton(self) -> CallResult | None:
        """2. One value task per required argument (the first on sequence 0, the others on
        forks), and the skeleton read for all of them in one pass.

        Falls back when there are more values than sequences or a value grammar cannot be
        built."""
        engine, fmt, tool = self.engine, self.fmt, self._tool()
        required = list(tool.required)
        props = tool.parameters.get("properties", {})
        if len(required) + 1 > engine.n_seq_max:
            return self.fall_back(
                f"{len(required)} required arguments, n_seq_max={engine.n_seq_max}"
            )
        head_rest = self.head[len(self.head_written) :]
        try:
            for index, key in enumerate(required):
                lead = head_rest + fmt.layout.prefix_for(key, first=True)
                constraint = self.factory.new(self.grammars.value(lead, props[key]))
                # The first value runs on sequence 0 itself, the others on forks.
                self.tasks.append(ValueTask(key=key, seq=index, constraint=constraint, lead=lead))
        except ConstraintError as exc:
            return self.fall_back(str(exc))
        if self.tasks:
            self.shared = prefill_skeleton(engine, self.tasks)
            self.attempt.lap("skeleton")
        return None

    def values(self) -> CallResult | None:
        """3. Every required value decoded in parallel, each ended where its type ends.

        Falls back when any value cannot be decoded alone."""
        if not self.tasks:
            return None
        plan = self.plan if self.plan is not None else load_plan(self.engine)
        decode_values(
            self.engine,
            self.fmt,
            self.tasks,
            plan=plan,
            scratch_seq=self.engine.n_seq_max - 1,
            max_tokens=min(self.request.max_tokens, VALUE_TOKEN_CAP),
        )
        self.attempt.lap("values")
        broken = [str(task.error) for task in self.tasks if task.error]
        if broken:
            # A value that cannot be decoded alone (too long, or a model that rambles
            # without the other values in view) is decoded again with the whole call in
            # view: the same call jump_forward would write, at its cost plus what was spent.
            return self.fall_back("; ".join(broken))
        return None

    def provisional(self) -> CallResult | None:
        """4. The required values spliced into the skeleton with the format's tail, passed to
        ``on_provisional`` before write-back starts.

        Fails when the assembled call does not parse."""
        fmt = self.fmt
        for index, task in enumerate(self.tasks):
            self.pairs.append((fmt.layout.prefix_for(task.key, first=index == 0), True))
            self.pairs.append((str(task.value), False))
        self.required_text = self.head + "".join(text for text, _ in self.pairs)
        try:
            call = _single_call(fmt, self.required_text + fmt.layout.tail)
        except FormatError as exc:
            return self.attempt.failed(
                f"the assembled call does not parse: {exc}", text=self.required_text
            )
        self.provisional_call = call
        self.provisional_at = time.perf_counter()
        if self.request.on_provisional is not None:
            self.request.on_provisional(call)
        self.attempt.lap("provisional")
        return None

    def write_back(self) -> None:
        """5. The value sequences dropped, and sequence 0 made to hold exactly the prompt and
        the call's tokens so far (``call_tokens``), with next-token logits where optional
        arguments follow.

        What sequence 0 already holds of the call (its head and the first value, but the
        value's last token) is kept; the rest of the assembled text is prefilled in one pass.
        """
        engine, fmt, tasks = self.engine, self.fmt, self.tasks
        for task in tasks:
            if task.seq != 0:
                engine.drop(task.seq, 0)
        held = self.head_tokens + self.shared
        if tasks and tasks[0].seq == 0:
            held = self.head_tokens + tasks[0].forced + tasks[0].fed
        held = _keep_consistent(engine, held, self.required_text)
        held_chars = len(engine.detokenize(held))
        parts = _drop_prefix([(self.head, True), *self.pairs], held_chars)
        has_optional = bool(self._tool().optional)
        if not has_optional:
            parts.append((fmt.layout.tail, True))
        writeback = tokenize_call_text(engine, parts)
        if has_optional:
            held, writeback, self.lead = _hold_back_last_token(
                engine, held, writeback, self.required_text
            )
        if writeback:
            engine.prefill(0, writeback, logits_last=has_optional)
        self.call_tokens = held + writeback
        self.attempt.lap("writeback")

    def optional(self) -> CallResult | None:
        """6. The optional arguments decided serially on sequence 0, then the tail, under a
        constraint that allows any subset of them in schema order (forced runs jumped).

        Fails when that call cannot finish; falls back when its grammar cannot be built."""
        tool = self._tool()
        self.final_text = self.required_text
        self.final_at = self.provisional_at
        if not tool.optional:
            self.final_text = self.required_text + self.fmt.layout.tail
            return None
        try:
            rest = guided_decode(
                self.engine,
                self.factory.new(self.grammars.optional(tool.parameters, lead=self.lead)),
                jump_forward=True,
                max_tokens=self.request.max_tokens,
            )
        except ConstraintError as exc:
            return self.fall_back(str(exc))
        self.call_tokens += rest.tokens
        kept = len(self.required_text) - len(self.lead)
        self.final_text = self.required_text[:kept] + rest.text
        self.final_at = rest.completed_at
        self.attempt.lap("optional")
        if rest.error:
            return self.attempt.failed(rest.error, text=self.final_text)
        return None

    def final(self) -> CallResult:
        """7. The final call: the provisional one when they are equal (its early result
        stands, and ``tool_latency_s`` counts to it), otherwise the corrected call.

        Fails when the final text does not parse."""
        try:
            final = _single_call(self.fmt, self.final_text)
        except FormatError as exc:
            return self.attempt.failed(
                f"the final call does not parse: {exc}", text=self.final_text
            )
        same = final == self.provisional_call
        return self.attempt.finish(
            calls=[final],
            provisional=self.provisional_call,
            text=self.final_text,
            tokens=self.call_tokens,
            final_at=self.final_at,
            tool_at=self.provisional_at if same else self.final_at,
        )

    def fall_back(self, reason: str) -> CallResult:
        """The call decoded again by jump_forward with the whole call in view (which itself
        falls back to post-validation for a schema it cannot constrain), from the prompt
        alone; the result counts what weave spent before."""
        logger.info("weave falls back to jump_forward: %s", reason)
        self.attempt.roll_back()
        fallback = JumpForwardStrategy().run(self.request)
        self.attempt.phases["fallback"] = fallback.final_latency_s
        return self.attempt.finish(
            calls=fallback.calls, text=fallback.text, tokens=fallback.tokens, error=fallback.error
        )

    def _tool(self) -> ToolSchema:
        assert self.tool is not None, "the stages run in order: select first"
        return self.tool


def _select(
    engine: Engine,
    fmt: ModelFormat,
    request: CallRequest,
    grammars: GrammarBuilder,
    factory: ConstraintFactory,
) -> tuple[ToolSchema, str, list[int]] | str:
    """Pick the tool: returns (tool, head text on seq 0, its tokens) or an error string."""
    tools: Sequence[ToolSchema] = request.tools
    if not tools:
        return "no tools are offered"
    heads = {tool.name: fmt.layout.head_for(tool.name) for tool in tools}
    if len(tools) == 1:
        return tools[0], "", []

    def consistent(text: str) -> list[str]:
        return [n for n, h in heads.items() if h.startswith(text) or text.startswith(h)]

    constraint = factory.new(grammars.call([(t.name, t.parameters) for t in tools]))
    outcome = guided_decode(
        engine,
        constraint,
        jump_forward=True,
        max_tokens=request.max_tokens,
        stop=lambda data: len(consistent(data.decode("utf-8", "replace"))) <= 1,
    )
    text = outcome.text
    names = consistent(text)
    if len(names) != 1:
        return outcome.error or "the selector did not settle on one tool"
    tool = next(t for t in tools if t.name == names[0])
    tokens = list(outcome.tokens)
    head = heads[tool.name]
    while len(text) > len(head) and tokens:
        # The deciding token ran past the head (fused with the first key): take it back.
        engine.drop(0, engine.seq_len(0) - 1)
        tokens.pop()
        text = engine.detokenize(tokens)
    return tool, text, tokens


def _hold_back_last_token(
    engine: Engine, held: list[int], writeback: list[int], text: str
) -> tuple[list[int], list[int], str]:
    """Take the call's last token back from the write-back (or from sequence 0).

    It ends the last value (a closing quote, say), and the model would fuse it with its
    decision about optional arguments (``",`` or ``"}`` are single tokens): the optional
    grammar starts with its text instead, so the model writes that token itself. Sequence 0
    must keep logits for its next token; held tokens are taken back until it has them.
    """
    back: list[int] = []
    if writeback:
        back, writeback = writeback[-1:], writeback[:-1]
    elif held:
        back = [held.pop()]
        engine.drop(0, engine.seq_len(0) - 1)
    while not writeback and held and not engine.has_next_logits(0):
        back.insert(0, held.pop())
        engine.drop(0, engine.seq_len(0) - 1)
    lead = engine.detokenize(back)
    if not back or not text.endswith(lead):
        return held, writeback + back, ""  # a split character: write it back after all
    return held, writeback, lead


def _keep_consistent(engine: Engine, held: list[int], text: str) -> list[int]:
    """The longest start of ``held`` (tokens on sequence 0 after the prompt) that spells a
    prefix of ``text`` in whole characters; sequence 0 is cut back to it."""
    keep = len(held)
    target = text.encode("utf-8")
    while keep:
        data = b"".join(engine.token_bytes(t) for t in held[:keep])
        if target.startswith(data):
            try:
                data.decode("utf-8")
                break
            except UnicodeDecodeError:
                pass
        keep -= 1
    if keep < len(held):
        engine.drop(0, engine.seq_len(0) - (len(held) - keep))
    return held[:keep]


def _drop_prefix(parts: list[tuple[str, bool]], count: int) -> list[tuple[str, bool]]:
    """The parts with their first ``count`` characters removed (already on sequence 0)."""
    out = []
    for text, fixed in parts:
        if count >= len(text):
            count -= len(text)
            continue
        out.append((text[count:], fixed))
        count = 0
    return out


def _single_call(fmt: ModelFormat, text: str) -> ToolCall:
    calls = fmt.parse_calls(text)
    if len(calls) != 1:
        raise FormatError(f"expected one call, found {len(calls)}")
    return calls[0]
