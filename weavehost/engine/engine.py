"""The engine: one llama.cpp context with parallel KV sequences, counted passes and a tokenizer.

Stage: engine. Every decoding strategy runs on this class, so they compare fairly. Guarantees:

- **Positions are the engine's business.** Each sequence's length is tracked here; a token is
  placed at its sequence's next position. A token may belong to several sequences at once (a
  shared prefix), which requires them to be equally long.
- **One pass is one ``llama_decode``.** :meth:`Engine.run_pass` builds one batch from rows (token,
  sequences, want-logits) and returns the logits of the rows that asked, in row order.
  :meth:`Engine.prefill` may split a long token list into several passes of ``n_batch``.
- **Every pass is counted and timed** in :attr:`Engine.stats` (passes, decoded, prefilled and
  padding tokens, seconds), the numbers every strategy reports. The last
  :data:`PASS_TIMELINE` passes are also kept with the instant each ended
  (:meth:`Engine.pass_rows_between`), so the passes a latency covers can be told apart from
  those after it.
- **Forks share KV cells.** :meth:`Engine.fork` copies a sequence's cells by reference
  (``llama_memory_seq_cp``) in a unified cache; :meth:`Engine.drop` removes cells from a position.
  :attr:`Engine.kv_cells` counts the cells in use (a shared prefix once, each sequence's own
  rows apart) as llama.cpp does, without asking it, and :attr:`Engine.kv_cells_peak` the most
  at once since :meth:`Engine.reset_kv_peak` (:class:`~weavehost.engine.passes.KvCells`).
- **Failures are errors, not crashes:** a sequence that would pass ``n_ctx`` raises
  :class:`ContextOverflowError` before decoding; no KV slot raises :class:`KVCacheFullError`; an
  abort raises :class:`AbortedError`; the sequence lengths stay true to the KV cache afterwards.
- **Special tokens are parsed only where asked** (``special=True``); user text and tool output
  are tokenized as plain text, so no control token (``<|im_end|>``, ``<|im_start|>``…) can
  appear in them. One exception is llama.cpp's, not ours: a *user-defined* added token (Qwen's
  ``<tool_call>``, ``</tool_call>``) is matched wherever its text occurs, ``special`` or not;
  :func:`weavehost.decode.call_tokens.plain_tokens` writes such text in ordinary tokens.
- **A saved sequence is checked before llama.cpp reads it.** :meth:`Engine.save_sequence`
  writes a sequence's KV state with its tokens and the engine's :attr:`Engine.identity` (model
  file, context size, llama.cpp build), atomically (:mod:`weavehost.engine.saved`).
  :meth:`Engine.load_sequence` hands the state to llama.cpp only when all of it checks out;
  otherwise (missing, truncated, flipped bytes, other tokens or model) it returns ``None`` and
  the sequence is empty. A loaded sequence has its length and no next-token logits.
- One lock serialises all native calls, so two threads cannot enter the context at once.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from weavehost.engine.native import (
    DEFAULT_KV_CACHE,
    LLAMA_CPP_VERSION,
    AbortFlag,
    BatchRow,
    NativeContext,
    NativeTokenizer,
    build_signature,
    open_native,
)
from weavehost.engine.passes import EngineStats, KvCells, Row
from weavehost.engine.saved import StateIdentity, read_saved, saved_size, write_saved
from weavehost.engine.segment import Segment
from weavehost.errors import (
    AbortedError,
    ContextOverflowError,
    DecodeFailedError,
    EngineError,
    KVCacheFullError,
)

__all__ = [
    "DEFAULT_N_CTX",
    "DEFAULT_N_SEQ_MAX",
    "PASS_TIMELINE",
    "Engine",
    "NativeTokenizer",
    "StateIdentity",
    "default_threads",
]

logger = logging.getLogger(__name__)

DEFAULT_N_CTX = 4096
DEFAULT_N_BATCH = 512
# Parallel value sequences of the widest BFCL call plus padding, with room to spare.
DEFAULT_N_SEQ_MAX = 16
# The most recent passes kept with the instant each ended (Engine.pass_rows_between): more than
# a reply of calls takes (8 calls of 256 tokens, one pass each).
PASS_TIMELINE = 4096


def _spare_outputs(rows: Sequence[Row], outputs: int) -> frozenset[int]:
    """The rows (indexes) to compute logits for beside those that ask, so that ``outputs`` rows
    do: padding rows first, then the last rows that do not ask."""
    missing = outputs - sum(1 for row in rows if row.logits)
    if missing <= 0:
        return frozenset()
    free = [i for i, row in enumerate(rows) if not row.logits]
    order = [i for i in reversed(free) if rows[i].padding] + [
        i for i in reversed(free) if not rows[i].padding
    ]
    return frozenset(order[:missing])


def default_threads() -> int:
    """The CPUs this process may run on (llama.cpp gains nothing from more threads than that)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class Engine:
    """A loaded model and one context; create with :meth:`Engine.open`."""

    def __init__(
        self,
        native: NativeContext,
        path: Path,
        n_threads: int,
        abort: AbortFlag,
        *,
        flash_attn: bool,
        kv_cache: str = DEFAULT_KV_CACHE,
    ) -> None:
        self._native = native
        self.path = path
        self.n_threads = n_threads
        self.stats = EngineStats()
        # (perf_counter when the pass ended, its rows) for the last PASS_TIMELINE passes.
        self._timeline: deque[tuple[float, int]] = deque(maxlen=PASS_TIMELINE)
        self._lengths: dict[int, int] = {}
        # Which cells each sequence holds, kept alongside the lengths: the cells in use.
        self._kv = KvCells()
        self._lock = threading.RLock()
        self._abort = abort
        self._pieces: dict[int, bytes] = {}
        # Logits predicting each sequence's next token, when its last row asked for them.
        self._next_logits: dict[int, np.ndarray] = {}
        self._eog = frozenset(t for t in range(self.n_vocab) if native.is_end_of_generation(t))
        stat = path.stat()
        self.identity = StateIdentity(
            model=str(path.resolve()),
            model_bytes=stat.st_size,
            model_mtime_ns=stat.st_mtime_ns,
            n_ctx=native.n_ctx,
            llama_cpp=LLAMA_CPP_VERSION,
            flash_attn=flash_attn,
            kv_cache=kv_cache,
            build=build_signature(),
        )

    # -- lifetime -------------------------------------------------------------------------------

    @classmethod
    @contextlib.contextmanager
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_batch: int = DEFAULT_N_BATCH,
        n_seq_max: int = DEFAULT_N_SEQ_MAX,
        n_threads: int | None = None,
        flash_attn: bool = True,
        kv_cache: str = DEFAULT_KV_CACHE,
    ) -> Iterator[Engine]:
        """Load the GGUF at ``path``; the model and context are freed when the block ends.

        ``flash_attn``: llama.cpp's flash-attention kernel, on unless asked (what llama.cpp
        chooses for the CPU). Which is faster depends on the CPU (``docs/engine.md``, "Flash
        attention"): ``weavehost calibrate`` times both, and the openers above the engine open
        the model as it was calibrated (``decode.calibration.open_calibrated``).
        ``kv_cache``: the K and V cache's type (``open_native``'s rules)."""
        threads = n_threads or default_threads()
        abort = AbortFlag()
        with open_native(
            Path(path),
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_seq_max=n_seq_max,
            n_threads=threads,
            flash_attn=flash_attn,
            kv_cache=kv_cache,
            abort=abort,
        ) as native:
            yield cls(native, Path(path), threads, abort, flash_attn=flash_attn, kv_cache=kv_cache)

    # -- facts ----------------------------------------------------------------------------------

    @property
    def flash_attn(self) -> bool:
        """Whether the context runs llama.cpp's flash-attention kernel."""
        return self.identity.flash_attn

    @property
    def n_ctx(self) -> int:
        return self._native.n_ctx

    @property
    def n_vocab(self) -> int:
        return self._native.n_vocab

    @property
    def n_seq_max(self) -> int:
        return self._native.n_seq_max

    @property
    def n_batch(self) -> int:
        return self._native.batch_capacity

    def is_end_of_generation(self, token: int) -> bool:
        return token in self._eog

    @property
    def end_of_generation_tokens(self) -> frozenset[int]:
        return self._eog

    def is_control(self, token: int) -> bool:
        return self._native.is_control(token)

    @property
    def eos_token(self) -> int:
        return self._native.eos_token

    def native_tokenizer(self) -> NativeTokenizer:
        """The raw vocabulary handle and llama.cpp's C tokenize function, for a constraint
        library that tokenizes through llama.cpp itself (llguidance). Valid while the engine is
        open; nothing else above the engine touches llama.cpp."""
        return self._native.tokenizer()

    @functools.cached_property
    def special_texts(self) -> frozenset[str]:
        """Texts of the tokens that are only reachable as special tokens (control tokens, and
        user-defined ones written like ``<tool_call>``)."""
        out = set()
        for token in range(self.n_vocab):
            if self._native.is_special(token):
                text = self.token_bytes(token).decode("utf-8", errors="replace")
                if text.startswith("<") and text.endswith(">") and len(text) > 2:
                    out.add(text)
        return frozenset(out)

    # -- tokenizer ------------------------------------------------------------------------------

    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]:
        """Tokens of ``text``; special-token text is parsed only with ``special=True``."""
        data = text.encode("utf-8")
        with self._lock:
            tokens = self._native.tokenize(data, add_bos=add_bos, special=special)
        if tokens is not None:
            return tokens
        raise EngineError(f"could not tokenize a text of {len(data)} bytes")

    def tokenize_segments(self, segments: Iterable[Segment], *, add_bos: bool = False) -> list[int]:
        """Tokens of a rendered prompt: special parsing only in the format's own segments."""
        tokens: list[int] = []
        for index, segment in enumerate(segments):
            tokens.extend(
                self.tokenize(segment.text, special=segment.special, add_bos=add_bos and index == 0)
            )
        return tokens

    def token_bytes(self, token: int) -> bytes:
        """The bytes a token stands for (special tokens as their text)."""
        piece = self._pieces.get(token)
        if piece is None:
            with self._lock:
                piece = self._native.piece(token)
            self._pieces[token] = piece
        return piece

    def detokenize(self, tokens: Iterable[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    # -- sequences ------------------------------------------------------------------------------

    def seq_len(self, seq: int) -> int:
        """How many tokens sequence ``seq`` holds (its next position)."""
        return self._lengths.get(seq, 0)

    def _check_seq(self, seq: int) -> None:
        if not 0 <= seq < self.n_seq_max:
            raise EngineError(f"sequence id {seq} is outside 0..{self.n_seq_max - 1}")

    @property
    def kv_cells(self) -> int:
        """KV cells in use now: every position of every sequence, a cell shared by forks or by
        one row of several sequences counted once (llama.cpp's unified cache holds it once)."""
        with self._lock:
            return self._kv.in_use

    @property
    def kv_cells_peak(self) -> int:
        """The most KV cells in use at once since :meth:`reset_kv_peak` (or the engine opened)."""
        with self._lock:
            return self._kv.peak

    def reset_kv_peak(self) -> None:
        """Start :attr:`kv_cells_peak` again from the cells in use now (before a call)."""
        with self._lock:
            self._kv.reset_peak()

    def kv_span(self, seq: int) -> tuple[int, int]:
        """The smallest and largest position llama.cpp holds for ``seq`` ((-1, -1) if empty)."""
        with self._lock:
            return self._native.seq_span(seq)

    def fork(self, src: int, dst: int) -> None:
        """Make ``dst`` a copy of ``src`` (shared KV cells; nothing is recomputed)."""
        self._check_seq(src)
        self._check_seq(dst)
        with self._lock:
            self._native.seq_remove(dst)
            self._native.seq_copy(src, dst)
            self._kv.copy(src, dst)
            self._lengths[dst] = self.seq_len(src)
            if src in self._next_logits:
                self._next_logits[dst] = self._next_logits[src]
            else:
                self._next_logits.pop(dst, None)

    def drop(self, seq: int, from_pos: int = 0, *, next_logits: np.ndarray | None = None) -> None:
        """Remove sequence ``seq``'s tokens from position ``from_pos`` on.

        ``next_logits``: the logits that predicted the token at ``from_pos``, if the caller kept
        them (rolling back to a point it saw); they become the sequence's next-token logits.
        """
        self._check_seq(seq)
        from_pos = max(0, min(from_pos, self.seq_len(seq)))
        with self._lock:
            if not self._native.seq_remove(seq, from_pos):
                raise EngineError(f"llama.cpp could not remove sequence {seq} from {from_pos}")
            if from_pos < self.seq_len(seq):
                self._next_logits.pop(seq, None)
            self._lengths[seq] = from_pos
            self._kv.truncate(seq, from_pos)
            if next_logits is not None:
                self._next_logits[seq] = next_logits

    def clear(self) -> None:
        """Empty the whole KV cache."""
        with self._lock:
            self._native.clear()
            self._lengths.clear()
            self._kv.clear()
            self._next_logits.clear()

    # -- saved sequences ------------------------------------------------------------------------

    def saved_size(self, seq: int, tokens: Sequence[int]) -> int:
        """The size of the file :meth:`save_sequence` would write for ``seq``, which holds
        ``tokens``, measured without copying its state (so a caller with a cap need not write
        a file only to delete it)."""
        self._check_seq(seq)
        with self._lock:
            state_bytes = self._native.seq_state_size(seq)
        return saved_size(self.identity, tokens, state_bytes)

    def save_sequence(self, seq: int, path: Path, tokens: Sequence[int]) -> int:
        """Write sequence ``seq``'s KV state, which holds ``tokens``, to ``path`` atomically;
        return the file's size. An ``OSError`` of the file system is the caller's to handle."""
        self._check_seq(seq)
        if len(tokens) != self.seq_len(seq):
            raise EngineError(
                f"sequence {seq} holds {self.seq_len(seq)} tokens, not the {len(tokens)} given"
            )
        with self._lock:
            state = self._native.seq_state(seq)
        return write_saved(path, self.identity, tokens, state)

    def load_sequence(
        self, seq: int, path: Path, *, tokens: Sequence[int] | None = None
    ) -> list[int] | None:
        """Restore the sequence saved at ``path`` into ``seq``; return its tokens, or ``None``
        (and ``seq`` empty) when the file is missing, corrupt, saved for another
        :attr:`identity`, holds other ``tokens`` than asked for, or llama.cpp refuses it.
        The sequence has no next-token logits afterwards: prefill something to get them."""
        self._check_seq(seq)
        saved = read_saved(path, self.identity, tokens)
        problem = saved.problem
        with self._lock:
            self._native.seq_remove(seq)
            self._lengths[seq] = 0
            self._kv.truncate(seq, 0)
            self._next_logits.pop(seq, None)
            if problem is None and not self._native.set_seq_state(seq, saved.state):
                problem = "llama.cpp refused the state"
            if problem is None and self._native.seq_span(seq) != (0, len(saved.tokens) - 1):
                problem = f"the restored cells are not positions 0..{len(saved.tokens) - 1}"
            if problem is not None:
                self._native.seq_remove(seq)
                logger.info("saved sequence %s not used: %s", path, problem)
                return None
            self._lengths[seq] = len(saved.tokens)
            self._kv.resize(seq, len(saved.tokens))
        return list(saved.tokens)

    # -- passes ---------------------------------------------------------------------------------

    def abort(self) -> None:
        """Ask a running pass to stop (from another thread, e.g. on Ctrl-C)."""
        self._abort.set()

    def clear_abort(self) -> None:
        self._abort.clear()

    def set_threads(self, n_threads: int) -> None:
        """Threads for the passes from now on (decode and batch alike), e.g. fewer while a
        phone is hot; the KV cache and everything else stay as they are."""
        if n_threads < 1:
            raise EngineError(f"a context needs at least one thread, got {n_threads}")
        with self._lock:
            self._native.set_threads(n_threads)
            self.n_threads = n_threads

    def run_pass(self, rows: Sequence[Row], *, outputs: int = 0) -> list[np.ndarray]:
        """Run one ``llama_decode`` over ``rows``; return the logits of rows that asked.

        ``outputs`` above the rows that ask makes llama.cpp compute logits for that many rows
        (a cheaper shape for its kernels: ``DecodePlan.shape_for``): padding rows first, then
        the last rows that did not ask. Those logits are not returned, but a sequence whose
        last row (other than a padding row) got them has them as its next-token logits (they
        are exactly that).

        A pass whose rows are all forced (or padding) counts as a prefill pass; a pass with at
        least one generated token counts as a decode pass, and its width (rows, padding
        included) is recorded.
        """
        if not rows:
            return []
        spare = _spare_outputs(rows, outputs)
        if len(rows) > self.n_batch:
            raise EngineError(f"a pass of {len(rows)} tokens exceeds n_batch={self.n_batch}")
        # The whole pass (lengths, the shared batch, the decode, the counters) is one critical
        # section: two threads decoding other sequences must not interleave here.
        with self._lock:
            if self._abort.is_set():
                raise AbortedError("decoding was stopped")
            lengths = dict(self._lengths)
            positions: list[int] = []
            for row in rows:
                if not row.seqs:
                    raise EngineError("a row must belong to at least one sequence")
                for seq in row.seqs:
                    self._check_seq(seq)
                pos = lengths.get(row.seqs[0], 0)
                if any(lengths.get(seq, 0) != pos for seq in row.seqs[1:]):
                    raise EngineError(
                        f"sequences {row.seqs} differ in length; they cannot share a token"
                    )
                if pos >= self.n_ctx:
                    raise ContextOverflowError(
                        f"sequence {row.seqs[0]} would hold {pos + 1} tokens, more than the "
                        f"context size of {self.n_ctx}; shorten the conversation or raise --ctx"
                    )
                positions.append(pos)
                for seq in row.seqs:
                    lengths[seq] = pos + 1

            self._native.load_batch(
                [
                    BatchRow(row.token, pos, row.seqs, row.logits or i in spare)
                    for i, (row, pos) in enumerate(zip(rows, positions, strict=True))
                ]
            )
            wanted = [i for i, row in enumerate(rows) if row.logits or i in spare]

            started = time.perf_counter()
            code = self._native.decode()
            elapsed = time.perf_counter() - started
            if code != 0:
                self._resync(rows)
                self._raise_for(code, len(rows))
            self._lengths = lengths
            for row in rows:
                self._kv.add(row.seqs)
            asked = {i: self._native.logits(i) for i in wanted if i not in spare}
            last_row = {seq: i for i, row in enumerate(rows) for seq in row.seqs}
            for seq, i in last_row.items():
                # A spare output is copied out only where it is a sequence's next-token
                # logits (not on a padding row: its sequence is emptied after the pass).
                if i in asked:
                    self._next_logits[seq] = asked[i]
                elif i in spare and not rows[i].padding:
                    self._next_logits[seq] = self._native.logits(i)
                else:
                    self._next_logits.pop(seq, None)
            self._count(rows, elapsed, len(wanted))
        return list(asked.values())

    def count_accepted(self, n_tokens: int) -> None:
        """Record that ``n_tokens`` drafted rows were verified and kept (see :class:`Row`)."""
        with self._lock:
            self.stats.accepted_tokens += n_tokens

    def has_next_logits(self, seq: int) -> bool:
        """Whether :meth:`last_logits` has logits for ``seq``'s next token."""
        return seq in self._next_logits

    def last_logits(self, seq: int) -> np.ndarray:
        """The logits predicting ``seq``'s next token, from the pass that added its last token."""
        try:
            return self._next_logits[seq]
        except KeyError:
            raise EngineError(
                f"sequence {seq} has no logits for its next token (its last token was read "
                "without them, or it was changed since)"
            ) from None

    def pass_rows_between(self, start: float, end: float) -> dict[int, int]:
        """The passes that ended after ``start`` and by ``end`` (``time.perf_counter``
        instants), counted by their rows as :attr:`EngineStats.pass_rows` counts them: the
        work a latency measured from ``start`` to ``end`` covers. Only the last
        :data:`PASS_TIMELINE` passes are known."""
        counts: dict[int, int] = {}
        with self._lock:
            for ended, rows in reversed(self._timeline):  # newest first: stop at ``start``
                if ended <= start:
                    break
                if ended <= end:
                    counts[rows] = counts.get(rows, 0) + 1
        return counts

    def _count(self, rows: Sequence[Row], elapsed: float, outputs: int) -> None:
        self._timeline.append((time.perf_counter(), len(rows)))
        stats = self.stats
        stats.outputs += outputs
        padding = sum(1 for row in rows if row.padding)
        forced = sum(1 for row in rows if row.forced and not row.padding)
        decoded = len(rows) - padding - forced
        stats.passes += 1
        stats.pass_rows[len(rows)] = stats.pass_rows.get(len(rows), 0) + 1
        shape = (len(rows), outputs)
        stats.pass_shapes[shape] = stats.pass_shapes.get(shape, 0) + 1
        stats.drafted_tokens += sum(1 for row in rows if row.draft and not row.padding)
        stats.padded_tokens += padding
        stats.prefilled_tokens += forced
        stats.decoded_tokens += decoded
        if decoded:
            stats.decode_passes += 1
            stats.decode_s += elapsed
            stats.width_counts[len(rows)] = stats.width_counts.get(len(rows), 0) + 1
        else:
            stats.prefill_passes += 1
            stats.prefill_s += elapsed

    def _resync(self, rows: Sequence[Row]) -> None:
        """After a failed or aborted decode, read the true sequence lengths back from llama.cpp."""
        for seq in {seq for row in rows for seq in row.seqs}:
            self._lengths[seq] = self._native.seq_span(seq)[1] + 1
            self._kv.resize(seq, self._lengths[seq])

    def _raise_for(self, code: int, n_tokens: int) -> None:
        if code == 1:
            raise KVCacheFullError(
                f"the KV cache has no room for a batch of {n_tokens} tokens "
                f"(context size {self.n_ctx}); shorten the conversation or raise --ctx"
            )
        if code == 2:
            self._abort.clear()
            raise AbortedError("decoding was stopped inside a pass")
        raise DecodeFailedError(f"llama_decode failed with code {code} on {n_tokens} tokens")

    def prefill(
        self, seq: int | Sequence[int], tokens: Sequence[int], *, logits_last: bool = True
    ) -> np.ndarray | None:
        """Read ``tokens`` into ``seq`` (or several equally long sequences) in as few passes as
        ``n_batch`` allows; return the last token's logits if ``logits_last``."""
        seqs = (seq,) if isinstance(seq, int) else tuple(seq)
        if not tokens:
            return None
        for seq_id in seqs:
            if self.seq_len(seq_id) + len(tokens) > self.n_ctx:
                raise ContextOverflowError(
                    f"reading {len(tokens)} tokens into sequence {seq_id} (holding "
                    f"{self.seq_len(seq_id)}) would pass the context size of {self.n_ctx}"
                )
        result: np.ndarray | None = None
        for start in range(0, len(tokens), self.n_batch):
            chunk = tokens[start : start + self.n_batch]
            last_chunk = start + self.n_batch >= len(tokens)
            rows = [
                Row(t, seqs, logits=logits_last and last_chunk and i == len(chunk) - 1, forced=True)
                for i, t in enumerate(chunk)
            ]
            out = self.run_pass(rows)
            if out:
                result = out[-1]
        return result

    def decode_one(self, seq: int, token: int) -> np.ndarray:
        """A serial pass: one token on one sequence; return its logits."""
        return self.run_pass([Row(token, (seq,), logits=True)])[0]
