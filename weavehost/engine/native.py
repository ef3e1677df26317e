"""The llama.cpp boundary: loading, contexts, batches and the log, through llama-cpp-python.

Stage: engine (lowest layer). Everything that touches ``llama_cpp`` handles lives here, so the
rest of the engine works with Python values. Guarantees:

- :func:`open_native` is a context manager that owns the model, the context and one reusable
  batch, and frees them in reverse order through an ``ExitStack`` (never in ``__del__``).
- llama.cpp's own log goes to the ``weavehost.engine.llama_cpp`` logger at DEBUG (errors at
  INFO), so it is silent unless the user asks for verbose output.
- A failed load or context creation raises :class:`ModelLoadError` naming the file.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import llama_cpp

from weavehost.errors import ModelLoadError

__all__ = ["NativeHandles", "open_native", "route_llama_log", "tokenize_function_address"]

_llama_log = logging.getLogger("weavehost.engine.llama_cpp")

# ggml_log_level: 0 none, 1 debug, 2 info, 3 warn, 4 error, 5 continuation of the previous line.
_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.DEBUG, 3: logging.DEBUG, 4: logging.INFO}
_log_state = {"level": logging.DEBUG}


@llama_cpp.llama_log_callback
def _log_callback(level: int, text: bytes, _user_data: ctypes.c_void_p) -> None:
    if level != 5:
        _log_state["level"] = _LEVELS.get(level, logging.DEBUG)
    message = text.decode("utf-8", errors="replace").rstrip("\n")
    if message:
        _llama_log.log(_log_state["level"], "%s", message)


_init_lock = threading.Lock()
_initialised = False


def route_llama_log() -> None:
    """Initialise the llama.cpp backend once per process and send its log to ``logging``."""
    global _initialised
    with _init_lock:
        if _initialised:
            return
        llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        _initialised = True


@dataclass(slots=True)
class NativeHandles:
    """Raw handles owned by :func:`open_native`; valid only inside its ``with`` block."""

    model: llama_cpp.llama_model_p
    context: llama_cpp.llama_context_p
    vocab: llama_cpp.llama_vocab_p
    memory: llama_cpp.llama_memory_t
    batch: llama_cpp.llama_batch
    batch_capacity: int
    n_ctx: int
    n_vocab: int
    n_seq_max: int


@contextlib.contextmanager
def open_native(
    path: Path,
    *,
    n_ctx: int,
    n_batch: int,
    n_seq_max: int,
    n_threads: int,
    abort_callback: ctypes._CFuncPtr | None = None,
) -> Iterator[NativeHandles]:
    """Load ``path`` and create a context with a unified KV cache shared by ``n_seq_max`` seqs."""
    route_llama_log()
    with contextlib.ExitStack() as stack:
        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = 0
        model = llama_cpp.llama_model_load_from_file(str(path).encode("utf-8"), model_params)
        if not model:
            raise ModelLoadError(
                f"llama.cpp could not load {path} (is it a complete GGUF file of a supported "
                "architecture? run with -vv to see llama.cpp's log)"
            )
        stack.callback(llama_cpp.llama_model_free, model)

        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_seq_max = n_seq_max
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        # One KV buffer for all sequences: parallel value sequences share the prompt's cells
        # and the context size is not split per sequence.
        params.kv_unified = True
        params.no_perf = True
        if abort_callback is not None:
            params.abort_callback = abort_callback
        context = llama_cpp.llama_init_from_model(model, params)
        if not context:
            raise ModelLoadError(
                f"llama.cpp could not create a context of {n_ctx} tokens for {path} "
                "(out of memory? try a smaller --ctx)"
            )
        stack.callback(llama_cpp.llama_free, context)

        batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq_max)
        stack.callback(llama_cpp.llama_batch_free, batch)

        vocab = llama_cpp.llama_model_get_vocab(model)
        yield NativeHandles(
            model=model,
            context=context,
            vocab=vocab,
            memory=llama_cpp.llama_get_memory(context),
            batch=batch,
            batch_capacity=n_batch,
            n_ctx=llama_cpp.llama_n_ctx(context),
            n_vocab=llama_cpp.llama_vocab_n_tokens(vocab),
            n_seq_max=n_seq_max,
        )


def tokenize_function_address() -> int:
    """The address of llama.cpp's C ``llama_tokenize``, for a library that tokenizes through it
    directly (llguidance's ``LLTokenizer.from_llamacpp``)."""
    address = ctypes.cast(llama_cpp.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
    if not address:
        raise ModelLoadError("llama.cpp's llama_tokenize could not be found in its library")
    return int(address)
