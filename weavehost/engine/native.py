"""The llama.cpp boundary: loading, contexts, batches and the log, through llama-cpp-python.

Stage: engine (lowest layer). Every call weavehost makes into llama.cpp is made here (the stock
llama-cpp-python peer of the benchmark is the one other user of ``llama_cpp``, on purpose: it is
what a user would write); the rest of the engine works with Python values through
:class:`NativeContext`.
Guarantees:

- :func:`open_native` is a context manager that owns the model, the context and one reusable
  batch, and frees them in reverse order through an ``ExitStack`` (never in ``__del__``).
- :class:`NativeContext` holds no lock of its own: the engine serialises every call on it.
- llama.cpp's own log goes to the ``weavehost.engine.llama_cpp`` logger at DEBUG (errors at
  INFO), so it is silent unless the user asks for verbose output.
- A failed load or context creation raises :class:`ModelLoadError` naming the file.
- A model loads without llama.cpp's AMX kernels where the build has them
  (:func:`amx_in_build`): they crash on some machines, and the user is told once how to rebuild
  (:data:`REBUILD`, the README's build).
- :func:`exact_wide_passes` says, for a cache, a kernel and this build, whether a pass of several
  rows computes each row as a one-row pass does (drafted text is then undrafted text).
- A pass is stopped from another thread through an :class:`AbortFlag`, which llama.cpp reads
  between graph nodes without entering Python (a Python abort callback is called at every node,
  ~800 a pass for Qwen 0.5B, and took the GIL each time: a serial pass cost 20.5 ms against
  14.5 ms without it).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np

from weavehost.errors import EngineError, ModelLoadError

__all__ = [
    "DEFAULT_KV_CACHE",
    "KV_CACHE_TYPES",
    "LLAMA_CPP_VERSION",
    "BUILD_CMAKE_ARGS",
    "BUILD_FACTS",
    "REBUILD",
    "AbortFlag",
    "NativeContext",
    "amx_in_build",
    "build_facts",
    "build_signature",
    "built_as_installed",
    "NativeTokenizer",
    "exact_wide_passes",
    "kv_element_bytes",
    "kv_ggml_types",
    "llamafile_in_build",
    "needs_flash_attn",
    "open_native",
    "quantize",
    "route_llama_log",
]

# A saved sequence state is in llama.cpp's own layout: it is only read back by the same build.
LLAMA_CPP_VERSION = str(llama_cpp.__version__)

# The K and V caches' types, by the name users give the pair: (K, V) as llama.cpp's
# ``--cache-type-k/-v`` name them. The first is the default. ``q8_0-k`` (q8_0 keys, f16
# values) keeps a pass's numbers the same whatever its width: with f16 keys and values, a one-row
# pass over 512 or more cells splits the cache across threads (flash attention's split-KV path)
# and sums in another order than a pass of several rows, so drafted and undrafted text part at
# near-ties; with quantized keys every row is computed as a one-row pass computes it, and the
# keys take half the memory, at the speed of f16 on the CPU (docs/engine.md, "Drafted and
# undrafted passes, bit for bit"). ``f16`` is llama.cpp's default; ``q8_0`` takes half the
# memory. A quantized V cache needs flash attention.
KV_CACHE_TYPES: dict[str, tuple[str, str]] = {
    "q8_0-k": ("q8_0", "f16"),
    "f16": ("f16", "f16"),
    "q8_0": ("q8_0", "q8_0"),
}
DEFAULT_KV_CACHE = next(iter(KV_CACHE_TYPES))
# Each element type: ggml's number for it, and the bytes an element takes (q8_0: blocks of 32
# in 34 bytes).
_ELEMENT_TYPES = {
    "f16": (llama_cpp.GGML_TYPE_F16, 2.0),
    "q8_0": (llama_cpp.GGML_TYPE_Q8_0, 34 / 32),
}


def kv_ggml_types(kv_cache: str) -> tuple[int, int]:
    """ggml's numbers for the K and V types of a ``kv_cache`` cache (llama.cpp's
    ``type_k``/``type_v``)."""
    k, v = KV_CACHE_TYPES[kv_cache]
    return _ELEMENT_TYPES[k][0], _ELEMENT_TYPES[v][0]


def kv_element_bytes(kv_cache: str) -> tuple[float, float]:
    """The bytes a K and a V element take in a ``kv_cache`` cache."""
    k, v = KV_CACHE_TYPES[kv_cache]
    return _ELEMENT_TYPES[k][1], _ELEMENT_TYPES[v][1]


def needs_flash_attn(kv_cache: str) -> bool:
    """Whether a ``kv_cache`` cache opens only with flash attention: a quantized V cache
    (llama.cpp's rule). Quantized keys alone open either way (:func:`exact_wide_passes` says
    which way keeps a pass's numbers the same whatever its width)."""
    return KV_CACHE_TYPES[kv_cache][1] != "f16"


def exact_wide_passes(kv_cache: str, flash_attn: bool) -> bool:
    """Whether a pass of several rows over a ``kv_cache`` cache computes every row as a one-row
    pass computes it, bit for bit, with the ``flash_attn`` kernel in this build (drafted text
    is then the undrafted text; ``docs/engine.md``):

    - with flash attention on, where the keys are quantized: with f16 K and V, llama.cpp takes
      one-row passes past 512 cells down its split-KV path, whose sums part from a wide pass's
      at near-ties;
    - with it off, where the build has no llamafile sgemm (:func:`llamafile_in_build`), whatever
      the cache: that kernel multiplies the K·Q and V products of passes of two rows or more,
      and ggml's own dot products those of one row, in another order."""
    if flash_attn:
        return KV_CACHE_TYPES[kv_cache][0] != "f16"
    return not llamafile_in_build()


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

# The CMake flags the README's install builds llama-cpp-python with (`.ci/run` too; a shell
# script and a README cannot import them, so tests/test_engine_build.py checks that both quote
# them, and fails an install without them):
#
# - Without llama.cpp's AMX kernels. They are built in where the compiler reports AMX-INT8
#   (``-march=native`` on a Xeon of Sapphire Rapids or later) and then take every weight they
#   can. On some such machines the first pass crashes the process in ``ggml_backend_amx_mul_mat``
#   (llama.cpp issue #20824, closed unfixed; dspy dropped its AMX build for the same crash). Seen
#   here on a 2-vCPU Xeon VM: every model, every pass, with or without weavehost. Where the build
#   has them, models load without llama.cpp's extra buffer types, AMX and the repacked x86 kernels
#   alike (the only switch llama.cpp has): no crash, wider passes slower (engine pass costs on
#   that VM, not a bench ratio: Qwen2.5-Coder-0.5B Q4_0, 8 rows 79 against 67 ms with repacking;
#   docs/engine.md).
# - Without llamafile's sgemm, which takes a pass of two rows or more (never one) for f32, f16,
#   bf16 and q8_0/q4_0/q5_0/iq4_nl weights that are not repacked, and, with flash attention off,
#   the K·Q and V products: a wide pass's rows then part from one-row passes' at near-ties, so
#   drafted text does (:func:`exact_wide_passes`). Without it, those go through ggml's own dot
#   products, a row alike at any width (docs/engine.md, "llamafile's sgemm: left out").
BUILD_CMAKE_ARGS = (
    "-DCMAKE_C_FLAGS=-U__AMX_INT8__ -DCMAKE_CXX_FLAGS=-U__AMX_INT8__ -DGGML_LLAMAFILE=OFF"
)
REBUILD = (
    f'CMAKE_ARGS="{BUILD_CMAKE_ARGS}" '
    "pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python"
)
_amx_told = threading.Event()


def _system_info() -> str:
    return llama_cpp.llama_print_system_info().decode("utf-8", "replace")


def build_signature() -> str:
    """What this llama-cpp-python's llama.cpp was compiled with, as its system info lists it
    (``CPU : SSE3 = 1 | … | LLAMAFILE = 1 | …``): two builds of one version that differ here
    can compute a pass's rows otherwise (the AMX kernels, llamafile's sgemm, another SIMD
    level), so state one saved is not state the other would compute."""
    return " ".join(_system_info().split())


def amx_in_build() -> bool:
    """Whether this llama-cpp-python's llama.cpp was compiled with its AMX kernels (its
    system info says ``AMX_INT8 = 1``; a compile-time fact, whatever the CPU)."""
    return "AMX_INT8 = 1" in _system_info()


def llamafile_in_build() -> bool:
    """Whether this llama-cpp-python's llama.cpp was compiled with llamafile's sgemm (its
    system info says ``LLAMAFILE = 1``; llama.cpp's default, left out by the README's build)."""
    return "LLAMAFILE = 1" in _system_info()


# What a build runs wide passes with, by the name a calibration records it under, and what
# each names: repacked weights unless it has llama.cpp's AMX kernels (without them wide passes
# are about a fifth dearer), and llamafile's sgemm (without it about a quarter dearer at 16 rows
# with flash attention off, and exact).
BUILD_FACTS = {"extra_buffers": "llama.cpp's repacked weights", "llamafile": "llamafile's sgemm"}


def build_facts() -> dict[str, bool]:
    """This build's :data:`BUILD_FACTS`."""
    return {"extra_buffers": not amx_in_build(), "llamafile": llamafile_in_build()}


def built_as_installed() -> bool:
    """Whether this llama-cpp-python was built as the README's install builds it
    (:data:`BUILD_CMAKE_ARGS`): no AMX kernels, no llamafile sgemm."""
    return not (amx_in_build() or llamafile_in_build())


def _without_amx(model_params: llama_cpp.llama_model_params) -> None:
    """Load without llama.cpp's extra buffer types where the build has AMX kernels, saying once
    per process why and how to rebuild."""
    if not amx_in_build():
        return
    model_params.use_extra_bufts = False
    if not _amx_told.is_set():
        _amx_told.set()
        logging.getLogger(__name__).warning(
            "this llama-cpp-python was built with llama.cpp's AMX kernels, which crash on some "
            "machines (llama.cpp issue #20824): models load without them and without llama.cpp's "
            "repacked weights, so wide passes are slower; to rebuild without them: %s",
            REBUILD,
        )


def route_llama_log() -> None:
    """Initialise the llama.cpp backend once per process and send its log to ``logging``."""
    global _initialised
    with _init_lock:
        if _initialised:
            return
        llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        _initialised = True


@dataclass(frozen=True, slots=True)
class NativeTokenizer:
    """What a library needs to tokenize with llama.cpp directly: the vocabulary handle and the
    address of the C ``llama_tokenize`` function."""

    vocab: llama_cpp.llama_vocab_p
    tokenize_fn: int


@dataclass(frozen=True, slots=True)
class BatchRow:
    """One token of a batch, placed: its position, the sequences it joins, whether its logits
    are kept."""

    token: int
    pos: int
    seqs: tuple[int, ...]
    logits: bool


class NativeContext:
    """A loaded model, its context and one reusable batch; valid only inside :func:`open_native`.

    Plain Python in and out: token ids, bytes, positions, copies of logits.
    """

    def __init__(
        self,
        model: llama_cpp.llama_model_p,
        context: llama_cpp.llama_context_p,
        batch: llama_cpp.llama_batch,
        *,
        batch_capacity: int,
        n_seq_max: int,
        abort: AbortFlag | None,
    ) -> None:
        self._model, self._context, self._batch = model, context, batch
        self._vocab = llama_cpp.llama_model_get_vocab(model)
        self._memory = llama_cpp.llama_get_memory(context)
        self._abort = abort  # its buffer kept alive as long as the context reads it
        self.batch_capacity = batch_capacity
        self.n_seq_max = n_seq_max
        self.n_ctx = int(llama_cpp.llama_n_ctx(context))
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))

    # -- vocabulary ------------------------------------------------------------------------------

    def is_end_of_generation(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def is_control(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_control(self._vocab, token))

    def is_special(self, token: int) -> bool:
        """A control token or a user-defined one (``<tool_call>``): reachable only by special
        parsing."""
        attr = llama_cpp.llama_vocab_get_attr(self._vocab, token)
        special = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
        return bool(attr & special)

    @property
    def eos_token(self) -> int:
        return int(llama_cpp.llama_vocab_eos(self._vocab))

    def tokenize(self, data: bytes, *, add_bos: bool, special: bool) -> list[int] | None:
        """Tokens of ``data``, or ``None`` if llama.cpp would not tokenize it."""
        capacity = len(data) + 8
        for _ in range(2):
            buffer = (llama_cpp.llama_token * capacity)()
            count = llama_cpp.llama_tokenize(
                self._vocab, data, len(data), buffer, capacity, add_bos, special
            )
            if count >= 0:
                return list(buffer[:count])
            capacity = -count
        return None

    def piece(self, token: int) -> bytes:
        """The bytes a token stands for (special tokens as their text)."""
        buffer = ctypes.create_string_buffer(64)
        n = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, 64, 0, True)
        if n < 0:
            buffer = ctypes.create_string_buffer(-n)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buffer, -n, 0, True)
        return buffer.raw[:n]

    def tokenizer(self) -> NativeTokenizer:
        address = ctypes.cast(llama_cpp.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
        if not address:
            raise ModelLoadError("llama.cpp's llama_tokenize could not be found in its library")
        return NativeTokenizer(vocab=self._vocab, tokenize_fn=int(address))

    # -- KV memory -------------------------------------------------------------------------------

    def seq_span(self, seq: int) -> tuple[int, int]:
        """The smallest and largest position held for ``seq`` ((-1, -1) if none)."""
        return (
            int(llama_cpp.llama_memory_seq_pos_min(self._memory, seq)),
            int(llama_cpp.llama_memory_seq_pos_max(self._memory, seq)),
        )

    def seq_remove(self, seq: int, start: int = -1, end: int = -1) -> bool:
        return bool(llama_cpp.llama_memory_seq_rm(self._memory, seq, start, end))

    def seq_copy(self, src: int, dst: int) -> None:
        llama_cpp.llama_memory_seq_cp(self._memory, src, dst, -1, -1)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self._memory, True)

    # -- sequence state (the prompt-prefix cache) -------------------------------------------------

    def seq_state_size(self, seq: int) -> int:
        """The bytes :meth:`seq_state` would return (``llama_state_seq_get_size``), without
        copying the state."""
        return int(llama_cpp.llama_state_seq_get_size(self._context, seq))

    def seq_state(self, seq: int) -> bytes:
        """The KV state of ``seq`` as llama.cpp serialises it (``llama_state_seq_get_data``):
        its cells' positions and their K and V rows, in llama.cpp's own layout."""
        size = int(llama_cpp.llama_state_seq_get_size(self._context, seq))
        buffer = (ctypes.c_uint8 * size)()
        written = int(llama_cpp.llama_state_seq_get_data(self._context, buffer, size, seq))
        return bytes(memoryview(buffer)[:written])

    def set_seq_state(self, seq: int, data: bytearray) -> bool:
        """Load a state from :meth:`seq_state` into ``seq`` (``llama_state_seq_set_data``).
        False when llama.cpp refused it (another layout, no room); ``seq`` is then empty. The
        bytes are handed over without a copy, hence a ``bytearray``."""
        buffer = (ctypes.c_uint8 * len(data)).from_buffer(data)
        return int(llama_cpp.llama_state_seq_set_data(self._context, buffer, len(data), seq)) > 0

    # -- passes ----------------------------------------------------------------------------------

    def set_threads(self, n_threads: int) -> None:
        llama_cpp.llama_set_n_threads(self._context, n_threads, n_threads)

    @property
    def threads(self) -> int:
        """The threads llama.cpp decodes with now."""
        return int(llama_cpp.llama_n_threads(self._context))

    def load_batch(self, rows: Sequence[BatchRow]) -> None:
        """Fill the reusable batch with ``rows`` (at most ``batch_capacity`` of them)."""
        batch = self._batch
        for i, row in enumerate(rows):
            batch.token[i] = row.token
            batch.pos[i] = row.pos
            batch.n_seq_id[i] = len(row.seqs)
            for j, seq in enumerate(row.seqs):
                batch.seq_id[i][j] = seq
            batch.logits[i] = 1 if row.logits else 0
        batch.n_tokens = len(rows)

    def decode(self) -> int:
        """One ``llama_decode`` of the loaded batch; its return code (0 on success)."""
        return int(llama_cpp.llama_decode(self._context, self._batch))

    def logits(self, index: int) -> np.ndarray:
        """A copy of the logits of row ``index`` of the last decode."""
        return np.ctypeslib.as_array(
            llama_cpp.llama_get_logits_ith(self._context, index), shape=(self.n_vocab,)
        ).copy()


def _c_strlen() -> object:
    """The C library's ``strlen``, already loaded in every CPython process."""
    try:
        return ctypes.CDLL(None).strlen
    except (OSError, AttributeError):  # Windows: no process-wide symbol table
        return ctypes.cdll.msvcrt.strlen


class AbortFlag:
    """A flag another thread sets to stop the running pass, read by llama.cpp in C.

    llama.cpp asks its abort callback ``bool (*)(void * data)`` after every graph node. The
    callback here is the C library's ``strlen`` and its data a two-byte buffer: the length of
    the string there is 1 (stop) or 0 (go on), so the question is answered without the GIL or
    any Python. Setting or clearing is one byte written; the pass sees it at its next node."""

    _strlen = None

    def __init__(self) -> None:
        self._buffer = ctypes.create_string_buffer(2)  # b"\0\0": go on
        if AbortFlag._strlen is None:
            AbortFlag._strlen = _c_strlen()
        self.callback = ctypes.cast(AbortFlag._strlen, llama_cpp.ggml_abort_callback)
        self.data = ctypes.cast(self._buffer, ctypes.c_void_p)

    def set(self) -> None:
        self._buffer[0] = b"\x01"

    def clear(self) -> None:
        self._buffer[0] = b"\x00"

    def is_set(self) -> bool:
        return self._buffer[0] != b"\x00"


@contextlib.contextmanager
def open_native(
    path: Path,
    *,
    n_ctx: int,
    n_batch: int,
    n_seq_max: int,
    n_threads: int,
    flash_attn: bool,
    kv_cache: str = DEFAULT_KV_CACHE,
    abort: AbortFlag | None = None,
) -> Iterator[NativeContext]:
    """Load ``path`` and create a context with a unified KV cache shared by ``n_seq_max`` seqs.

    ``kv_cache``: the types of the K and V cache, a key of :data:`KV_CACHE_TYPES`; a quantized
    V cache needs flash attention (:func:`needs_flash_attn`). Another name, or a quantized V
    cache without flash attention, is an :class:`EngineError` before anything loads.

    ``flash_attn``: llama.cpp's flash-attention kernel, on or off (never its ``auto``, which
    turns it on for the CPU).

    ``abort``: set from any thread, it stops the running pass at its next graph node.
    """
    if kv_cache not in KV_CACHE_TYPES:
        raise EngineError(
            f"unknown KV cache type {kv_cache!r}; expected one of {', '.join(KV_CACHE_TYPES)}"
        )
    if needs_flash_attn(kv_cache) and not flash_attn:
        raise EngineError(f"a {kv_cache} KV cache needs flash attention (llama.cpp's rule)")
    route_llama_log()
    with contextlib.ExitStack() as stack:
        model_params = llama_cpp.llama_model_default_params()
        model_params.n_gpu_layers = 0
        _without_amx(model_params)
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
        params.type_k, params.type_v = kv_ggml_types(kv_cache)
        params.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED
            if flash_attn
            else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        params.no_perf = True
        if abort is not None:
            params.abort_callback = abort.callback
            params.abort_callback_data = abort.data
        context = llama_cpp.llama_init_from_model(model, params)
        if not context:
            raise ModelLoadError(
                f"llama.cpp could not create a context of {n_ctx} tokens for {path} "
                "(out of memory? try a smaller --ctx)"
            )
        stack.callback(llama_cpp.llama_free, context)

        batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq_max)
        stack.callback(llama_cpp.llama_batch_free, batch)

        yield NativeContext(
            model,
            context,
            batch,
            batch_capacity=n_batch,
            n_seq_max=n_seq_max,
            abort=abort,
        )


def quantize(source: Path, target: Path, ftype: int, *, allow_requantize: bool) -> int:
    """Write ``source`` quantized to llama.cpp's file type ``ftype`` into ``target``; llama.cpp's
    return code (0 on success). ``allow_requantize``: the source's weights are quantized already.
    """
    route_llama_log()  # llama.cpp logs a line per tensor; keep it in `logging`, silent
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = allow_requantize
    params.nthread = os.cpu_count() or 1
    return int(
        llama_cpp.llama_model_quantize(
            str(source).encode(), str(target).encode(), ctypes.byref(params)
        )
    )
