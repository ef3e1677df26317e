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

``tool_latency_s`` is the time until the call whose result will be used could start: the
provisional call when the final call equals it, otherwise the final call.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from weavehost.decode.base import CallRequest, CallResult, ToolSchema
from weavehost.decode.constraint import constraints_for
from weavehost.decode.guided import JumpForwardStrategy, guided_decode
from weavehost.decode.padding import PaddingPlan, load_plan
from weavehost.decode.values import ValueTask, decode_values, prefill_skeleton
from weavehost.engine import Engine
from weavehost.errors import ConstraintError, FormatError
from weavehost.formats.base import ModelFormat, ToolCall

__all__ = ["VALUE_TOKEN_CAP", "WeaveStrategy", "tokenize_call_text"]

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

    def plan_for(self, engine: Engine) -> PaddingPlan:
        return self._plan if self._plan is not None else load_plan(engine)

    def run(self, request: CallRequest) -> CallResult:
        engine, fmt = request.engine, request.format
        factory = constraints_for(engine)  # built once per engine, not part of a call's cost
        before = engine.stats.snapshot()
        prompt_len = engine.seq_len(0)
        prompt_logits = engine.last_logits(0)
        started = time.perf_counter()
        phases: dict[str, float] = {}
        clock = started

        def lap(name: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            phases[name] = now - clock
            clock = now

        def roll_back() -> None:
            """Back to the prompt alone: a failed call leaves no trace in the conversation."""
            for task_seq in range(1, engine.n_seq_max):
                if engine.seq_len(task_seq):
                    engine.drop(task_seq, 0)
            engine.drop(0, prompt_len, next_logits=prompt_logits)

        def failed(error: str, text: str = "") -> CallResult:
            roll_back()
            elapsed = time.perf_counter() - started
            return CallResult(
                self.name,
                [],
                None,
                text,
                engine.stats.since(before),
                elapsed,
                elapsed,
                phases,
                error,
                [],
            )

        def fall_back(reason: str) -> CallResult:
            """The call decoded again by jump_forward with the whole call in view (which
            itself falls back to post-validation for a schema it cannot constrain)."""
            logger.info("weave falls back to jump_forward: %s", reason)
            roll_back()
            fallback = JumpForwardStrategy().run(request)
            elapsed = time.perf_counter() - started
            phases["fallback"] = fallback.final_latency_s
            return CallResult(
                self.name, fallback.calls, None, fallback.text, engine.stats.since(before),
                elapsed, elapsed, phases, fallback.error, fallback.tokens,
            )  # fmt: skip

        grammars = factory.grammars(fmt)
        # 1. Selector.
        try:
            selected = self._select(engine, fmt, request, grammars, factory)
        except ConstraintError as exc:
            return fall_back(str(exc))
        if isinstance(selected, str):
            return failed(selected)
        tool, head_written, head_tokens = selected
        lap("select")
        head = fmt.layout.head_for(tool.name)
        head_rest = head[len(head_written) :]
        required = list(tool.required)
        schema = tool.parameters
        props = schema.get("properties", {})
        if len(required) + 1 > engine.n_seq_max:
            return fall_back(f"{len(required)} required arguments, n_seq_max={engine.n_seq_max}")

        # 2. Skeleton prefill, 3. parallel values.
        try:
            tasks = []
            for index, key in enumerate(required):
                lead = head_rest + fmt.layout.prefix_for(key, first=True)
                constraint = factory.new(grammars.value(lead, props[key]))
                # The first value runs on sequence 0 itself, the others on forks.
                tasks.append(ValueTask(key=key, seq=index, constraint=constraint, lead=lead))
        except ConstraintError as exc:
            return fall_back(str(exc))
        shared: list[int] = []
        if tasks:
            shared = prefill_skeleton(engine, tasks)
            lap("skeleton")
            decode_values(
                engine,
                fmt,
                tasks,
                plan=self.plan_for(engine),
                scratch_seq=engine.n_seq_max - 1,
                max_tokens=min(request.max_tokens, VALUE_TOKEN_CAP),
            )
            lap("values")
            broken = [str(task.error) for task in tasks if task.error]
            if broken:
                # A value that cannot be decoded alone (too long, or a model that rambles
                # without the other values in view) is decoded again with the whole call in
                # view: the same call jump_forward would write, at its cost plus what was spent.
                return fall_back("; ".join(broken))

        # 4. Provisional call.
        pairs: list[tuple[str, bool]] = []
        for index, task in enumerate(tasks):
            pairs.append((fmt.layout.prefix_for(task.key, first=index == 0), True))
            pairs.append((str(task.value), False))
        required_text = head + "".join(text for text, _ in pairs)
        try:
            provisional = _single_call(fmt, required_text + fmt.layout.tail)
        except FormatError as exc:
            return failed(f"the assembled call does not parse: {exc}", required_text)
        provisional_at = time.perf_counter()
        if request.on_provisional is not None:
            request.on_provisional(provisional)
        lap("provisional")

        # 5. Write-back: drop the other value sequences, keep what sequence 0 already holds of
        # the call (its head and the first value, but the value's last token), and prefill the
        # rest of the assembled text on it in one pass.
        for task in tasks:
            if task.seq != 0:
                engine.drop(task.seq, 0)
        held = head_tokens + shared
        if tasks and tasks[0].seq == 0:
            held = head_tokens + tasks[0].forced + tasks[0].fed
        held = _keep_consistent(engine, held, required_text)
        held_chars = len(engine.detokenize(held))
        parts = _drop_prefix([(head, True), *pairs], held_chars)
        has_optional = bool(tool.optional)
        if not has_optional:
            parts.append((fmt.layout.tail, True))
        writeback = tokenize_call_text(engine, parts)
        lead = ""
        if has_optional:
            held, writeback, lead = _hold_back_last_token(engine, held, writeback, required_text)
        if writeback:
            engine.prefill(0, writeback, logits_last=has_optional)
        call_tokens = held + writeback
        lap("writeback")

        # 6. Optional arguments, 7. final call.
        final_text = required_text
        final_at = provisional_at
        if has_optional:
            try:
                rest = guided_decode(
                    engine,
                    factory.new(grammars.optional(schema, lead=lead)),
                    jump_forward=True,
                    max_tokens=request.max_tokens,
                )
            except ConstraintError as exc:
                return fall_back(str(exc))
            call_tokens += rest.tokens
            final_text = required_text[: len(required_text) - len(lead)] + rest.text
            final_at = rest.completed_at
            lap("optional")
            if rest.error:
                return failed(rest.error, final_text)
        else:
            final_text = required_text + fmt.layout.tail
        try:
            final = _single_call(fmt, final_text)
        except FormatError as exc:
            return failed(f"the final call does not parse: {exc}", final_text)
        used_at = provisional_at if final == provisional else final_at
        result = CallResult(
            strategy=self.name,
            calls=[final],
            provisional=provisional,
            text=final_text,
            stats=engine.stats.since(before),
            tool_latency_s=used_at - started,
            final_latency_s=final_at - started,
            phases=phases,
            tokens=call_tokens,
        )
        return result

    def _select(self, engine, fmt, request, grammars, factory):
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
