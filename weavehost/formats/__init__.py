"""Model formats: one module per family, listed in :data:`FORMATS`, detected from GGUF metadata.

A format is one module: an object with the :class:`ModelFormat` members, and one line in
:data:`FORMATS`. Everything shared code needs from a format it asks the format: how a model is
detected as its own (``detect``), the names a user may give it (``aliases``), its prompt, call
layout, triggers, values, grammar and parser, the control markers the executor breaks in tool
results (the union is :func:`control_markers`), and its strings' syntax for drafts. A format
outside this package is registered the same way, ``FORMATS["toy"] = TOY`` (a test does it with
``monkeypatch.setitem``, as ``tests/test_toy_format.py``); nothing else needs to know it.

Detection reads only metadata (architecture, chat template, vocabulary) and says which clue
decided it; a user's choice (``--format`` or ``format`` in config) always wins. Every format is
asked in the order of :data:`FORMATS`; the first strong clue decides, else the first weak one.
For the shipped formats that order gives:

1. the vocabulary has ``<start_function_call>``                       -> ``functiongemma``
2. the chat template writes ``<tool_call>`` (Qwen2.5, Qwen3, Hermes)  -> ``qwen``
3. the vocabulary has ``<|start_header_id|>`` (Llama 3.x)             -> ``llama3``
4. the model is SmolLM2 (basename or ``smollm`` pre-tokenizer)        -> ``smollm2``
5. a ChatML template (``<|im_start|>``) with no tool syntax           -> ``qwen`` (weak: Hermes prompt)
"""

from __future__ import annotations

from dataclasses import dataclass

from weavehost.errors import UnknownFormatError
from weavehost.formats.base import CallLayout, ModelFormat, Segment, ToolCall, tool_to_openai
from weavehost.formats.declared import Clue, ValueSyntax
from weavehost.formats.functiongemma import FUNCTIONGEMMA
from weavehost.formats.llama3 import LLAMA3
from weavehost.formats.qwen import QWEN
from weavehost.formats.smollm2 import SMOLLM2
from weavehost.gguf import GGUFMetadata

__all__ = [
    "FORMATS",
    "CallLayout",
    "Clue",
    "Detection",
    "ModelFormat",
    "Segment",
    "ToolCall",
    "ValueSyntax",
    "control_markers",
    "detect_format",
    "get_format",
    "tool_to_openai",
]

# Every format by name, in the order detection asks them (see the module docstring).
FORMATS: dict[str, ModelFormat] = {
    "functiongemma": FUNCTIONGEMMA,
    "qwen": QWEN,
    "llama3": LLAMA3,
    "smollm2": SMOLLM2,
}


@dataclass(frozen=True, slots=True)
class Detection:
    """The chosen format and the clue (or the user's choice) that decided it."""

    format: ModelFormat
    reason: str


def get_format(name: str) -> ModelFormat:
    """The format a user named, by its name or one of its aliases (any case)."""
    key = name.lower()
    if key in FORMATS:
        return FORMATS[key]
    for fmt in FORMATS.values():
        if key in fmt.aliases:
            return fmt
    known = ", ".join(sorted(FORMATS))
    raise UnknownFormatError(f"unknown model format {name!r}; known formats: {known}")


def control_markers() -> frozenset[str]:
    """The control markers of every format in :data:`FORMATS`: what the executor breaks in a
    tool result, whichever model reads it (the host passes them to ``mcp.executor``)."""
    return frozenset().union(*(fmt.control_markers for fmt in FORMATS.values()))


def detect_format(metadata: GGUFMetadata, override: str | None = None) -> Detection:
    """Pick the format for a model from its metadata (read with the token list in full)."""
    if override:
        return Detection(get_format(override), f"chosen by the user ({override!r})")
    weak: Detection | None = None
    for fmt in FORMATS.values():
        clue = fmt.detect(metadata)
        if clue is not None and not clue.weak:
            return Detection(fmt, clue.reason)
        if clue is not None and weak is None:
            weak = Detection(fmt, clue.reason)
    if weak is not None:
        return weak
    raise UnknownFormatError(
        f"cannot tell the tool-call format of {metadata.path.name} from its metadata; "
        f"pass --format with one of: {', '.join(sorted(FORMATS))}"
    )
