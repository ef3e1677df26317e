"""The stock peers ``llama_cpp_python`` and ``llama_cpp_python_lookup``: what a user of
llama-cpp-python would do today.

Stage: benchmark (a baseline outside our engine). A ``llama_cpp.Llama`` on the same GGUF, with
the same threads, context size and batch size as the engine, writes the call with
``create_completion(prompt=<the same prompt tokens>, grammar=<GBNF of the whole call>,
temperature=0)``. It is built as well as the stock API allows, so the comparison is honest:

- **The grammar** is llama-cpp-python's own JSON-Schema-to-GBNF conversion (the converter behind
  ``LlamaGrammar.from_json_schema``) of the call object ``{"name": const, "arguments": <tool
  parameters>}`` (``"parameters"`` for llama3), ``anyOf`` over the offered tools, with a root rule
  that wraps it in the format's fixed text (``"<tool_call>\\n" call "\\n</tool_call>"`` for
  qwen, ``"<tool_call>[" call "]</tool_call>"`` for smollm2, the bare object for llama3). The
  grammar thus forces the opener from the first token, as the bench forces it for our
  strategies. FunctionGemma's call is not JSON, so this peer does not run on it (the result
  says so in ``error``).
- **The prompt** is rendered by the same :class:`ModelFormat` and tokenized segment by segment
  exactly like the engine does, then read with ``Llama.eval`` and timed apart
  (``prompt_prefill_s``). ``create_completion`` finds the whole prompt cached and samples at
  once, so its time is the time of generating the call.
- **Latency** ``tool_latency_s`` = ``final_latency_s`` = the wall time of ``create_completion``
  (which includes llama.cpp parsing the GBNF when it builds the sampler). Converting the schema
  to GBNF text is pure Python done once per case before it and reported as
  ``phases["grammar_build"]``.
- **Forward passes** are counted exactly: llama-cpp-python evaluates each generated token in a
  pass of its own (the end-of-generation token is sampled, never evaluated), so passes =
  decoded tokens = ``Llama.n_tokens`` after the call minus the prompt length. The prompt's own
  passes (``ceil(prompt / n_batch)``) are not the call's work and are not counted, as for our
  strategies.

``llama_cpp_python_lookup`` is the same peer (same file, threads, context, batch size, prompt,
grammar and greedy settings) with llama-cpp-python's own speculative decoding:
``Llama(draft_model=LlamaPromptLookupDecoding(num_pred_tokens=LOOKUP_DRAFT_TOKENS))``. Each pass
evaluates the last sampled token and up to that many tokens drafted by prompt lookup (the
continuation of the latest 2- or 1-gram's earliest match in the prompt and call so far); the
sampler, grammar included, then samples at each drafted row, keeps a draft while it equals the
token sampled before it, and drops the KV cache after the first one that does not.
llama-cpp-python 0.3.x needs ``logits_all=True`` for it (its ``scores`` buffer is sized by that
flag, while a draft model turns on logits for every row), so this peer is a ``Llama`` of its
own, keeping logits for every row: ``n_ctx x n_vocab`` floats of memory (2.5 GB for Qwen at
n_ctx 4096), and its prompt prefill computes the output layer for every prompt token (a slower
``prompt_prefill_s``, reported apart).

Its passes are counted exactly, not estimated: ``Llama.eval`` is wrapped on the instance while
``create_completion`` runs, and every ``llama_decode`` it makes is a pass (one per ``n_batch``
rows; a pass here has at most ``1 + LOOKUP_DRAFT_TOKENS`` rows), its rows counted in
``pass_rows``. ``decoded_tokens`` are all rows evaluated (drafted rows count as decoded, as in
:class:`EngineStats`), ``drafted_tokens`` the rows that were drafts (every row of a pass but its
first, the token sampled last), ``accepted_tokens`` the drafts equal to the token then sampled at
their position, which stay in the call. For a call that ended by itself, passes + accepted
drafts = the call's tokens.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from weavehost.decode import CaseOutcome
from weavehost.decode.base import CallResult, ToolSchema, read_calls
from weavehost.engine import Engine, EngineStats
from weavehost.engine.native import DEFAULT_KV_CACHE, REBUILD, amx_in_build, kv_ggml_types
from weavehost.errors import (
    BenchError,
    ConstraintError,
    ContextOverflowError,
    FormatError,
    ModelLoadError,
)
from weavehost.formats.base import ModelFormat, ToolCall, tool_to_openai

__all__ = [
    "LOOKUP_DRAFT_TOKENS",
    "LOOKUP_PEER_NAME",
    "PEER_NAME",
    "PEER_NAMES",
    "CallFrame",
    "LlamaCppPythonPeer",
    "call_frame",
    "call_grammar",
]

PEER_NAME = "llama_cpp_python"
LOOKUP_PEER_NAME = "llama_cpp_python_lookup"
PEER_NAMES = (PEER_NAME, LOOKUP_PEER_NAME)
# Tokens drafted per pass by prompt lookup (llama-cpp-python's default, 10, suits GPUs, where a
# wider pass is almost free). On the 2-vCPU bench machine a pass is compute-bound: ``weavehost
# calibrate`` measured 13.7, 26.5, 31.8, 33.3 and 48.7 ms for 1 to 5 rows, so a pass of 1 + 3
# rows costs 2.4 single passes and pays off from 1.4 kept drafts a pass, while each row beyond
# costs about half a single pass more. Chosen from that table, not tuned on the bench cases.
LOOKUP_DRAFT_TOKENS = 3
_PROBE_NAME = "weavehost_probe"


def refuse_stock_amx(peer: str) -> None:
    """A :class:`BenchError` where ``peer``, a stock stack over this llama-cpp-python (``Llama``,
    ``llama_cpp.server``), would load the AMX kernels the engine leaves out
    (:func:`~weavehost.engine.native.amx_in_build`): it could crash the run, and it would not run
    the engine it is compared with."""
    if amx_in_build():
        raise BenchError(
            f"{peer} would load llama.cpp's AMX kernels, which crash on some machines and which "
            "weavehost's engine leaves out; rebuild llama-cpp-python without them to compare: "
            f"{REBUILD}"
        )


@dataclass(frozen=True, slots=True)
class CallFrame:
    """A JSON format's call as ``prefix + {"name": ..., arguments_key: {...}} + suffix``."""

    prefix: str
    suffix: str
    arguments_key: str


def call_frame(fmt: ModelFormat) -> CallFrame:
    """Read the fixed text around the call object off the format's own rendering of a call.

    Raises :class:`FormatError` for a format whose call is not one JSON object.
    """
    rendered = fmt.render_call(ToolCall(_PROBE_NAME, {}))
    start = rendered.find('{"name"')
    if start < 0:
        raise FormatError(f"the {fmt.name} format does not write its calls as JSON objects")
    try:
        obj, end = json.JSONDecoder().raw_decode(rendered, start)
    except json.JSONDecodeError as exc:
        raise FormatError(f"the {fmt.name} format's call is not one JSON object") from exc
    keys = [k for k in obj if k != "name"] if isinstance(obj, dict) else []
    if obj.get("name") != _PROBE_NAME or len(keys) != 1:
        raise FormatError(f"the {fmt.name} format's call object is not {{name, arguments}}")
    # The closer of llama3 is <|eot_id|>, an end-of-generation token the grammar cannot write;
    # the model ends there by itself once the grammar is complete.
    suffix = rendered[end:]
    return CallFrame(prefix=rendered[:start], suffix=suffix, arguments_key=keys[0])


def call_schema(tools: Sequence[ToolSchema], arguments_key: str) -> dict[str, Any]:
    """The JSON schema of one call to any of ``tools``."""
    alternatives = [
        {
            "type": "object",
            "properties": {"name": {"const": tool.name}, arguments_key: dict(tool.parameters)},
            "required": ["name", arguments_key],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    return alternatives[0] if len(alternatives) == 1 else {"anyOf": alternatives}


def call_grammar(fmt: ModelFormat, tools: Sequence[ToolSchema]) -> str:
    """GBNF for the whole call text of ``fmt``: the format's frame around the call's JSON."""
    from llama_cpp.llama_grammar import SchemaConverter

    frame = call_frame(fmt)
    converter = SchemaConverter(prop_order={}, allow_fetch=False, dotall=False, raw_pattern=False)
    try:
        schema = converter.resolve_refs(call_schema(tools, frame.arguments_key), "tools")
        call_rule = converter.visit(schema, "call")
    except Exception as exc:  # the converter raises bare exceptions for schemas it cannot read
        raise ConstraintError(f"llama-cpp-python cannot convert the tool schemas: {exc}") from exc
    parts = [converter._format_literal(frame.prefix)] if frame.prefix else []
    parts.append(call_rule)
    if frame.suffix:
        parts.append(converter._format_literal(frame.suffix))
    return converter.format_grammar() + "\nroot ::= " + " ".join(parts) + "\n"


class LlamaCppPythonPeer:
    """A stock ``llama_cpp.Llama`` writing calls under a grammar; open with :meth:`open`
    (``lookup=True``: the ``llama_cpp_python_lookup`` peer, with prompt-lookup drafts)."""

    def __init__(self, llama: Any, n_batch: int, *, lookup: bool = False) -> None:
        self._llama = llama
        self.n_batch = n_batch
        self.lookup = lookup
        self.name = LOOKUP_PEER_NAME if lookup else PEER_NAME

    @classmethod
    @contextlib.contextmanager
    def open(
        cls,
        path: str | Path,
        *,
        n_ctx: int,
        n_threads: int,
        n_batch: int = 512,
        lookup: bool = False,
        flash_attn: bool = True,
        kv_cache: str = DEFAULT_KV_CACHE,
    ) -> Iterator[LlamaCppPythonPeer]:
        """Load ``path`` as llama-cpp-python's ``Llama``; it is closed when the block ends.
        ``flash_attn`` and ``kv_cache``: as the engine it is compared with was opened."""
        import llama_cpp

        refuse_stock_amx("the stock llama-cpp-python peer")
        type_k, type_v = kv_ggml_types(kv_cache)
        if lookup:
            from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

            drafting: dict[str, Any] = {
                "draft_model": LlamaPromptLookupDecoding(num_pred_tokens=LOOKUP_DRAFT_TOKENS),
                "logits_all": True,
            }
        else:
            drafting = {"logits_all": False}
        try:
            llama = llama_cpp.Llama(
                model_path=str(path),
                n_gpu_layers=0,
                n_ctx=n_ctx,
                n_batch=n_batch,
                n_ubatch=n_batch,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                flash_attn=flash_attn,
                type_k=type_k,
                type_v=type_v,
                verbose=False,
                **drafting,
            )
        except ValueError as exc:  # llama-cpp-python's way of saying "could not load"
            raise ModelLoadError(f"llama-cpp-python could not load {path}: {exc}") from exc
        try:
            yield cls(llama, n_batch, lookup=lookup)
        finally:
            llama.close()

    @classmethod
    def beside(
        cls, engine: Engine, *, n_ctx: int, lookup: bool = False
    ) -> contextlib.AbstractContextManager[LlamaCppPythonPeer]:
        """A peer opened as ``engine`` (the calibrated engine it is compared with,
        :func:`~weavehost.decode.calibration.open_calibrated`): the same model file, threads,
        batch, attention kernel and KV cache type, so a peer never chooses a kernel of its own."""
        return cls.open(
            engine.path,
            n_ctx=n_ctx,
            n_threads=engine.n_threads,
            n_batch=engine.n_batch,
            lookup=lookup,
            flash_attn=engine.flash_attn,
            kv_cache=engine.identity.kv_cache,
        )

    @property
    def flash_attn(self) -> bool:
        """Whether its context runs llama.cpp's flash-attention kernel."""
        import llama_cpp

        enabled = llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
        return bool(self._llama.context_params.flash_attn_type == enabled)

    @property
    def kv_cells(self) -> int:
        """Tokens in this peer's KV cache now: its one sequence, the last prompt and the tokens
        its call evaluated."""
        return int(self._llama.n_tokens)

    def tokenize(self, segments: Sequence[Any]) -> list[int]:
        """The prompt tokens: special tokens parsed only in the format's own segments."""
        tokens: list[int] = []
        for segment in segments:
            tokens.extend(
                self._llama.tokenize(
                    segment.text.encode("utf-8"), add_bos=False, special=segment.special
                )
            )
        return tokens

    def run_case(
        self,
        fmt: ModelFormat,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[ToolSchema],
        *,
        chat_template: str | None = None,
        max_tokens: int = 256,
    ) -> CaseOutcome:
        """Prefill the prompt on an empty cache, then let ``create_completion`` write the call."""
        from llama_cpp import LlamaGrammar

        llama = self._llama
        offered = [tool_to_openai(t.name, t.description, t.parameters) for t in tools]
        prompt = self.tokenize(fmt.render_prompt(messages, offered, chat_template=chat_template))
        if len(prompt) + 1 >= llama.n_ctx():
            raise ContextOverflowError(
                f"the prompt has {len(prompt)} tokens, more than the context size of "
                f"{llama.n_ctx()} allows; raise --ctx"
            )
        try:
            started = time.perf_counter()
            gbnf = call_grammar(fmt, tools)
            grammar = LlamaGrammar.from_string(gbnf, verbose=False)
            grammar_s = time.perf_counter() - started
        except FormatError as exc:
            return self._failed(prompt, str(exc))

        llama.reset()
        started = time.perf_counter()
        llama.eval(prompt)
        prefill_s = time.perf_counter() - started

        budget = max(1, min(max_tokens, llama.n_ctx() - len(prompt) - 1))
        counting = _CountedCompletion(llama) if self.lookup else contextlib.nullcontext(None)
        started = time.perf_counter()
        try:
            with counting as counted:
                completion = llama.create_completion(
                    prompt=prompt,
                    grammar=grammar,
                    temperature=0.0,
                    repeat_penalty=1.0,
                    max_tokens=budget,
                )
        except ValueError as exc:
            raise ContextOverflowError(f"llama-cpp-python refused the prompt: {exc}") from exc
        elapsed = time.perf_counter() - started

        choice = completion["choices"][0]
        if counted is None:
            generated = [int(t) for t in llama.input_ids[len(prompt) : llama.n_tokens]]
            passes = len(generated)
            stats = EngineStats(
                passes=passes,
                decode_passes=passes,
                decoded_tokens=passes,
                decode_s=elapsed,
                width_counts={1: passes} if passes else {},
            )
        else:
            generated = counted.generated()
            stats = counted.stats(generated, elapsed, self.n_batch)
        # Detokenize with special tokens kept (create_completion's text drops control tokens).
        text = llama.detokenize(generated, special=True).decode("utf-8", errors="replace")
        calls: list[ToolCall] = []
        error: str | None = None
        if choice.get("finish_reason") == "length":
            error = f"the call was cut at max_tokens={budget}"
        else:
            calls, error = read_calls(fmt, text, "the peer")
        result = CallResult(
            strategy=self.name,
            calls=calls,
            provisional=None,
            text=text,
            stats=stats,
            tool_latency_s=elapsed,
            final_latency_s=elapsed,
            phases={"grammar_build": grammar_s, "completion": elapsed},
            error=error,
        )
        return CaseOutcome(result=result, prompt_tokens=len(prompt), prompt_prefill_s=prefill_s)

    def _failed(self, prompt: Sequence[int], error: str) -> CaseOutcome:
        result = CallResult(
            strategy=self.name,
            calls=[],
            provisional=None,
            text="",
            stats=EngineStats(),
            tool_latency_s=0.0,
            final_latency_s=0.0,
            error=error,
        )
        return CaseOutcome(result=result, prompt_tokens=len(prompt), prompt_prefill_s=0.0)


class _CountedCompletion:
    """What a speculative ``create_completion`` did, read off the ``Llama`` instance: every
    batch it evaluated (``Llama.eval`` wrapped) and every token it sampled (``Llama.generate``
    wrapped; ``create_completion`` only iterates it, never sends to it). Both wrappers are
    instance attributes, removed when the block ends."""

    def __init__(self, llama: Any) -> None:
        self._llama = llama
        self.batches: list[list[int]] = []
        self.sampled: list[int] = []

    def __enter__(self) -> _CountedCompletion:
        llama = self._llama
        evaluate, generate = llama.eval, llama.generate

        def counted_eval(tokens: Sequence[int]) -> None:
            if len(tokens):
                self.batches.append([int(t) for t in tokens])
            evaluate(tokens)

        def counted_generate(*args: Any, **kwargs: Any) -> Iterator[int]:
            for token in generate(*args, **kwargs):
                self.sampled.append(int(token))
                yield token

        llama.eval, llama.generate = counted_eval, counted_generate
        return self

    def __exit__(self, *exc: object) -> None:
        del self._llama.eval, self._llama.generate

    def generated(self) -> list[int]:
        """The call's tokens: those sampled, less the end-of-generation token that ended it."""
        import llama_cpp

        tokens = list(self.sampled)
        vocab = self._llama._model.vocab
        if tokens and llama_cpp.llama_vocab_is_eog(vocab, tokens[-1]):
            tokens.pop()
        return tokens

    def stats(self, generated: Sequence[int], elapsed: float, n_batch: int) -> EngineStats:
        """Passes, rows, drafts and kept drafts of the completion (see the module docstring)."""
        pass_rows: dict[int, int] = {}
        for batch in self.batches:  # Llama.eval makes one llama_decode per n_batch rows
            for start in range(0, len(batch), n_batch):
                width = len(batch[start : start + n_batch])
                pass_rows[width] = pass_rows.get(width, 0) + 1
        passes = sum(pass_rows.values())
        rows = sum(len(batch) for batch in self.batches)
        # A batch is the token sampled last, then drafts; a draft is kept while it equals the
        # token sampled at its position.
        accepted = at = 0
        for batch in self.batches:
            at += 1
            for draft in batch[1:]:
                if at >= len(generated) or generated[at] != draft:
                    break
                accepted += 1
                at += 1
        return EngineStats(
            passes=passes,
            decode_passes=passes,
            decoded_tokens=rows,
            drafted_tokens=rows - len(self.batches),
            accepted_tokens=accepted,
            decode_s=elapsed,
            width_counts=dict(pass_rows),
            pass_rows=pass_rows,
        )
