"""The engine: one llama.cpp context with parallel KV sequences, counted passes and a tokenizer.

Stage: engine. Every decoding strategy runs on this class, so they compare fairly. Guarantees:

- **Positions are the engine's business.** Each sequence's length is tracked here; a token is
  placed at its sequence's next position. A token may belong to several sequences at once (a
  shared prefix), which requires them to be equally long.
- **One pass is one ``llama_decode``.** :meth:`Engine.run_pass` builds one batch from rows (token,
  sequences, want-logits) and returns the logits of the rows that asked, in row order.
  :meth:`Engine.prefill` may split a long token list into several passes of ``n_batch``.
- **Every pass is counted and timed** in :attr:`Engine.stats` (passes, decoded, prefilled and
  padding tokens, seconds), the numbers every strategy reports.
- **Forks share KV cells.** :meth:`Engine.fork` copies a sequence's cells by reference
  (``llama_memory_seq_cp``) in a unified cache; :meth:`Engine.drop` removes cells from a position.
- **Failures are errors, not crashes:** a sequence that would pass ``n_ctx`` raises
  :class:`ContextOverflowError` before decoding; no KV slot raises :class:`KVCacheFullError`; an
  abort raises :class:`AbortedError`; the sequence lengths stay true to the KV cache afterwards.
- **Special tokens are parsed only where asked** (``special=True``); user text and tool output
  are tokenized as plain text.
- One lock serialises all native calls, so two threads cannot enter the context at once.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import llama_cpp
import numpy as np

from weavehost.engine.native import NativeHandles, open_native, tokenize_function_address
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
    "Engine",
    "EngineStats",
    "NativeTokenizer",
    "Row",
    "default_threads",
]

DEFAULT_N_CTX = 4096
DEFAULT_N_BATCH = 512
# Parallel value sequences of the widest BFCL call plus padding, with room to spare.
DEFAULT_N_SEQ_MAX = 16
ggml_abort = llama_cpp.ggml_abort_callback


def default_threads() -> int:
    """The CPUs this process may run on (llama.cpp gains nothing from more threads than that)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


@dataclass(frozen=True, slots=True)
class NativeTokenizer:
    """What a library needs to tokenize with llama.cpp directly: the vocabulary handle and the
    address of the C ``llama_tokenize`` function."""

    vocab: llama_cpp.llama_vocab_p
    tokenize_fn: int


@dataclass(frozen=True, slots=True)
class Row:
    """One token of a pass: the token, the sequences it joins, whether to keep its logits.

    ``forced`` marks a token that was known before the pass (prompt, skeleton, jump-forward):
    it is counted as prefilled, not decoded. ``padding`` marks a placeholder row added only to
    reach a cheaper batch width; it is counted apart from both.
    """

    token: int
    seqs: tuple[int, ...]
    logits: bool = False
    forced: bool = False
    padding: bool = False


@dataclass(slots=True)
class EngineStats:
    """Counters of the work done on a context. Subtract two snapshots to cost one call."""

    passes: int = 0
    decode_passes: int = 0
    prefill_passes: int = 0
    decoded_tokens: int = 0
    prefilled_tokens: int = 0
    padded_tokens: int = 0
    decode_s: float = 0.0
    prefill_s: float = 0.0
    # Number of sequences in each decode pass, by width (what padding plans are made from).
    width_counts: dict[int, int] = field(default_factory=dict)

    def snapshot(self) -> EngineStats:
        return EngineStats(
            self.passes,
            self.decode_passes,
            self.prefill_passes,
            self.decoded_tokens,
            self.prefilled_tokens,
            self.padded_tokens,
            self.decode_s,
            self.prefill_s,
            dict(self.width_counts),
        )

    def since(self, earlier: EngineStats) -> EngineStats:
        widths = {
            w: n - earlier.width_counts.get(w, 0)
            for w, n in self.width_counts.items()
            if n - earlier.width_counts.get(w, 0)
        }
        return EngineStats(
            self.passes - earlier.passes,
            self.decode_passes - earlier.decode_passes,
            self.prefill_passes - earlier.prefill_passes,
            self.decoded_tokens - earlier.decoded_tokens,
            self.prefilled_tokens - earlier.prefilled_tokens,
            self.padded_tokens - earlier.padded_tokens,
            self.decode_s - earlier.decode_s,
            self.prefill_s - earlier.prefill_s,
            widths,
        )


class Engine:
    """A loaded model and one context; create with :meth:`Engine.open`."""

    def __init__(self, handles: NativeHandles, path: Path, n_threads: int) -> None:
        self._h = handles
        self.path = path
        self.n_threads = n_threads
        self.stats = EngineStats()
        self._lengths: dict[int, int] = {}
        self._lock = threading.RLock()
        self._abort = threading.Event()
        self._pieces: dict[int, bytes] = {}
        # Logits predicting each sequence's next token, when its last row asked for them.
        self._next_logits: dict[int, np.ndarray] = {}
        self._eog = frozenset(
            t for t in range(self.n_vocab) if llama_cpp.llama_vocab_is_eog(handles.vocab, t)
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
    ) -> Iterator[Engine]:
        """Load the GGUF at ``path``; the model and context are freed when the block ends."""
        threads = n_threads or default_threads()
        abort = threading.Event()

        @ggml_abort
        def on_abort(_data: ctypes.c_void_p) -> bool:
            return abort.is_set()

        with open_native(
            Path(path),
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_seq_max=n_seq_max,
            n_threads=threads,
            abort_callback=on_abort,
        ) as handles:
            engine = cls(handles, Path(path), threads)
            engine._abort = abort
            engine._abort_callback = on_abort  # keep the C callback alive with the engine
            yield engine

    # -- facts ----------------------------------------------------------------------------------

    @property
    def n_ctx(self) -> int:
        return self._h.n_ctx

    @property
    def n_vocab(self) -> int:
        return self._h.n_vocab

    @property
    def n_seq_max(self) -> int:
        return self._h.n_seq_max

    @property
    def n_batch(self) -> int:
        return self._h.batch_capacity

    def is_end_of_generation(self, token: int) -> bool:
        return token in self._eog

    def is_control(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_control(self._h.vocab, token))

    @property
    def eos_token(self) -> int:
        return int(llama_cpp.llama_vocab_eos(self._h.vocab))

    def native_tokenizer(self) -> NativeTokenizer:
        """The raw vocabulary handle and llama.cpp's C tokenize function, for a constraint
        library that tokenizes through llama.cpp itself (llguidance). Valid while the engine is
        open; nothing else above the engine touches llama.cpp."""
        return NativeTokenizer(vocab=self._h.vocab, tokenize_fn=tokenize_function_address())

    @functools.cached_property
    def special_texts(self) -> frozenset[str]:
        """Texts of the tokens that are only reachable as special tokens (control tokens, and
        user-defined ones written like ``<tool_call>``)."""
        out = set()
        for token in range(self.n_vocab):
            attr = llama_cpp.llama_vocab_get_attr(self._h.vocab, token)
            if attr & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL or (
                attr & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
            ):
                text = self.token_bytes(token).decode("utf-8", errors="replace")
                if text.startswith("<") and text.endswith(">") and len(text) > 2:
                    out.add(text)
        return frozenset(out)

    # -- tokenizer ------------------------------------------------------------------------------

    def tokenize(self, text: str, *, special: bool = False, add_bos: bool = False) -> list[int]:
        """Tokens of ``text``; special-token text is parsed only with ``special=True``."""
        data = text.encode("utf-8")
        capacity = len(data) + 8
        with self._lock:
            for _ in range(2):
                buffer = (llama_cpp.llama_token * capacity)()
                count = llama_cpp.llama_tokenize(
                    self._h.vocab, data, len(data), buffer, capacity, add_bos, special
                )
                if count >= 0:
                    return list(buffer[:count])
                capacity = -count
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
            buffer = ctypes.create_string_buffer(64)
            with self._lock:
                n = llama_cpp.llama_token_to_piece(self._h.vocab, token, buffer, 64, 0, True)
                if n < 0:
                    buffer = ctypes.create_string_buffer(-n)
                    n = llama_cpp.llama_token_to_piece(self._h.vocab, token, buffer, -n, 0, True)
            piece = buffer.raw[:n]
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

    def kv_span(self, seq: int) -> tuple[int, int]:
        """The smallest and largest position llama.cpp holds for ``seq`` ((-1, -1) if empty)."""
        with self._lock:
            return (
                llama_cpp.llama_memory_seq_pos_min(self._h.memory, seq),
                llama_cpp.llama_memory_seq_pos_max(self._h.memory, seq),
            )

    def fork(self, src: int, dst: int) -> None:
        """Make ``dst`` a copy of ``src`` (shared KV cells; nothing is recomputed)."""
        self._check_seq(src)
        self._check_seq(dst)
        with self._lock:
            llama_cpp.llama_memory_seq_rm(self._h.memory, dst, -1, -1)
            llama_cpp.llama_memory_seq_cp(self._h.memory, src, dst, -1, -1)
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
            if not llama_cpp.llama_memory_seq_rm(self._h.memory, seq, from_pos, -1):
                raise EngineError(f"llama.cpp could not remove sequence {seq} from {from_pos}")
            if from_pos < self.seq_len(seq):
                self._next_logits.pop(seq, None)
            self._lengths[seq] = from_pos
            if next_logits is not None:
                self._next_logits[seq] = next_logits

    def clear(self) -> None:
        """Empty the whole KV cache."""
        with self._lock:
            llama_cpp.llama_memory_clear(self._h.memory, True)
            self._lengths.clear()
            self._next_logits.clear()

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
            llama_cpp.llama_set_n_threads(self._h.context, n_threads, n_threads)
            self.n_threads = n_threads

    def run_pass(self, rows: Sequence[Row]) -> list[np.ndarray]:
        """Run one ``llama_decode`` over ``rows``; return the logits of rows that asked.

        A pass whose rows are all forced (or padding) counts as a prefill pass; a pass with at
        least one generated token counts as a decode pass, and its width (rows, padding
        included) is recorded.
        """
        if not rows:
            return []
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

            batch = self._h.batch
            wanted: list[int] = []
            for i, (row, pos) in enumerate(zip(rows, positions, strict=True)):
                batch.token[i] = row.token
                batch.pos[i] = pos
                batch.n_seq_id[i] = len(row.seqs)
                for j, seq in enumerate(row.seqs):
                    batch.seq_id[i][j] = seq
                batch.logits[i] = 1 if row.logits else 0
                if row.logits:
                    wanted.append(i)
            batch.n_tokens = len(rows)

            started = time.perf_counter()
            code = llama_cpp.llama_decode(self._h.context, batch)
            elapsed = time.perf_counter() - started
            if code != 0:
                self._resync(rows)
                self._raise_for(code, len(rows))
            self._lengths = lengths
            out = [
                np.ctypeslib.as_array(
                    llama_cpp.llama_get_logits_ith(self._h.context, i), shape=(self.n_vocab,)
                ).copy()
                for i in wanted
            ]
            by_row = dict(zip(wanted, out, strict=True))
            for i, row in enumerate(rows):
                for seq in row.seqs:
                    if i in by_row:
                        self._next_logits[seq] = by_row[i]
                    else:
                        self._next_logits.pop(seq, None)
            self._count(rows, elapsed)
        return out

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

    def _count(self, rows: Sequence[Row], elapsed: float) -> None:
        stats = self.stats
        padding = sum(1 for row in rows if row.padding)
        forced = sum(1 for row in rows if row.forced and not row.padding)
        decoded = len(rows) - padding - forced
        stats.passes += 1
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
            self._lengths[seq] = llama_cpp.llama_memory_seq_pos_max(self._h.memory, seq) + 1

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
