"""Model formats: one module per family, listed in :data:`FORMATS`, detected from GGUF metadata.

Detection reads only metadata (architecture, chat template, vocabulary), in this order, and says
which clue decided it; a user's choice (``--format`` or ``format`` in config) always wins:

1. the vocabulary has ``<start_function_call>``                       -> ``functiongemma``
2. the chat template writes ``<tool_call>`` (Qwen2.5, Qwen3, Hermes)  -> ``qwen``
3. the vocabulary has ``<|start_header_id|>`` (Llama 3.x)             -> ``llama3``
4. the model is SmolLM2 (basename or ``smollm`` pre-tokenizer)        -> ``smollm2``
5. a ChatML template (``<|im_start|>``) with no tool syntax           -> ``qwen`` (Hermes prompt)
"""

from __future__ import annotations

from dataclasses import dataclass

from weavehost.errors import UnknownFormatError
from weavehost.formats.base import CallLayout, ModelFormat, Segment, ToolCall, tool_to_openai
from weavehost.formats.functiongemma import FUNCTIONGEMMA
from weavehost.formats.llama3 import LLAMA3
from weavehost.formats.qwen import QWEN
from weavehost.formats.smollm2 import SMOLLM2
from weavehost.gguf import GGUFMetadata

__all__ = [
    "FORMATS",
    "CallLayout",
    "Detection",
    "ModelFormat",
    "Segment",
    "ToolCall",
    "detect_format",
    "get_format",
    "tool_to_openai",
]

FORMATS: dict[str, ModelFormat] = {
    "qwen": QWEN,
    "llama3": LLAMA3,
    "smollm2": SMOLLM2,
    "functiongemma": FUNCTIONGEMMA,
}
# Other spellings users reach for.
_ALIASES = {
    "hermes": "qwen",
    "qwen3": "qwen",
    "qwen2.5": "qwen",
    "llama3-json": "llama3",
    "smollm2-list": "smollm2",
    "gemma": "functiongemma",
}


@dataclass(frozen=True, slots=True)
class Detection:
    """The chosen format and the clue (or the user's choice) that decided it."""

    format: ModelFormat
    reason: str


def get_format(name: str) -> ModelFormat:
    key = _ALIASES.get(name.lower(), name.lower())
    try:
        return FORMATS[key]
    except KeyError:
        known = ", ".join(sorted(FORMATS))
        raise UnknownFormatError(f"unknown model format {name!r}; known formats: {known}") from None


def detect_format(metadata: GGUFMetadata, override: str | None = None) -> Detection:
    """Pick the format for a model from its metadata (read with the token list in full)."""
    if override:
        return Detection(get_format(override), f"chosen by the user ({override!r})")
    tokens = set(metadata.tokens)
    template = metadata.chat_template or ""
    if "<start_function_call>" in tokens:
        return Detection(FUNCTIONGEMMA, "the vocabulary has <start_function_call>")
    if "<tool_call>" in template:
        return Detection(QWEN, "the chat template writes <tool_call>")
    if "<|start_header_id|>" in tokens:
        return Detection(LLAMA3, "the vocabulary has Llama 3 header tokens")
    basename = str(metadata.get("general.basename", "")).lower()
    if "smollm" in basename or metadata.get("tokenizer.ggml.pre") == "smollm":
        return Detection(SMOLLM2, "the model is SmolLM2 (GGUF basename/pre-tokenizer)")
    if "<|im_start|>" in template or "<|im_start|>" in tokens:
        return Detection(QWEN, "a ChatML model with no tool syntax: using the Hermes prompt")
    raise UnknownFormatError(
        f"cannot tell the tool-call format of {metadata.path.name} from its metadata; "
        f"pass --format with one of: {', '.join(sorted(FORMATS))}"
    )
