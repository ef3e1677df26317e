"""The stock peer ``llama_cpp_python``: what a user of llama-cpp-python would do today.

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
from weavehost.engine import EngineStats
from weavehost.errors import (
    ConstraintError,
    ContextOverflowError,
    FormatError,
    ModelLoadError,
)
from weavehost.formats.base import ModelFormat, ToolCall, tool_to_openai

__all__ = ["PEER_NAME", "CallFrame", "LlamaCppPythonPeer", "call_frame", "call_grammar"]

PEER_NAME = "llama_cpp_python"
_PROBE_NAME = "weavehost_probe"


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
    """A stock ``llama_cpp.Llama`` writing calls under a grammar; open with :meth:`open`."""

    name = PEER_NAME

    def __init__(self, llama: Any, n_batch: int) -> None:
        self._llama = llama
        self.n_batch = n_batch

    @classmethod
    @contextlib.contextmanager
    def open(
        cls, path: str | Path, *, n_ctx: int, n_threads: int, n_batch: int = 512
    ) -> Iterator[LlamaCppPythonPeer]:
        """Load ``path`` as llama-cpp-python's ``Llama``; it is closed when the block ends."""
        import llama_cpp

        try:
            llama = llama_cpp.Llama(
                model_path=str(path),
                n_gpu_layers=0,
                n_ctx=n_ctx,
                n_batch=n_batch,
                n_ubatch=n_batch,
                n_threads=n_threads,
                n_threads_batch=n_threads,
                logits_all=False,
                verbose=False,
            )
        except ValueError as exc:  # llama-cpp-python's way of saying "could not load"
            raise ModelLoadError(f"llama-cpp-python could not load {path}: {exc}") from exc
        try:
            yield cls(llama, n_batch)
        finally:
            llama.close()

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
        started = time.perf_counter()
        try:
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

        generated = [int(t) for t in llama.input_ids[len(prompt) : llama.n_tokens]]
        choice = completion["choices"][0]
        # Detokenize with special tokens kept (create_completion's text drops control tokens).
        text = llama.detokenize(generated, special=True).decode("utf-8", errors="replace")
        passes = len(generated)
        stats = EngineStats(
            passes=passes,
            decode_passes=passes,
            decoded_tokens=passes,
            decode_s=elapsed,
            width_counts={1: passes} if passes else {},
        )
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
