"""Peak resident memory of this process while a piece of work runs, of the whole run, and
what one KV-cache cell of a model costs.

Stage: benchmark (measurement). Guarantees and limits:

- :class:`PeakRss` samples ``/proc/self/statm`` (resident pages × page size) from a thread every
  :data:`RSS_SAMPLE_INTERVAL_S` while its block runs, and once on entry and once on exit, so a
  peak that holds until the end of the block is always seen; a peak shorter than the interval
  between two samples may be missed. llama.cpp releases the GIL while it decodes, so the
  sampler runs during passes too. One read costs some microseconds: well under 1% of a CPU.
- It measures **the process**, not one model: everything resident at the time counts (both
  models when the stock peer is loaded next to the engine, Python, the tokenizer tables).
  Where ``/proc`` does not exist the peak is ``None``.
- :func:`max_rss_bytes` is the kernel's high-water mark of the whole process
  (``getrusage``'s ``ru_maxrss``), from its start. The kernel syncs its page counters lazily,
  so it may trail a ``statm`` sample: by a few pages here, by 55 MB on the CI machine. The
  sampled peak is the figure to read; this one is the whole run's, for context.
- :func:`kv_bytes_per_cell` is arithmetic on the GGUF's metadata (layers, heads, head sizes)
  and the cache's K and V types: what one cell holds, not what was allocated. llama.cpp
  allocates the whole cache (``n_ctx`` cells) when the context is made, so cells in use never
  show in the RSS; they are counted by the engine (:attr:`Engine.kv_cells_peak`) instead.
"""

from __future__ import annotations

import os
import resource
import sys
import threading
from pathlib import Path
from types import TracebackType

from weavehost.engine.native import kv_element_bytes
from weavehost.gguf import GGUFMetadata

__all__ = [
    "RSS_SAMPLE_INTERVAL_S",
    "PeakRss",
    "kv_bytes_per_cell",
    "max_rss_bytes",
    "rss_bytes",
]

# Time between two samples: short next to a call (tens of ms and more), cheap to read.
RSS_SAMPLE_INTERVAL_S = 0.005
# The sampler stops within one read of being told; this only bounds the join if it did not.
SAMPLER_JOIN_BOUND_S = 1.0
_STATM = Path("/proc/self/statm")


def rss_bytes() -> int | None:
    """This process's resident set size now, or ``None`` where ``/proc`` does not say."""
    try:
        resident_pages = int(_STATM.read_text(encoding="ascii").split()[1])
    except (OSError, IndexError, ValueError):
        return None
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def max_rss_bytes() -> int:
    """The process's peak resident set size since it started (``ru_maxrss``), in bytes."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # KiB on Linux, bytes on macOS


class PeakRss:
    """``with PeakRss() as rss: ...`` then ``rss.peak``: the most bytes resident meanwhile."""

    def __init__(self, interval_s: float = RSS_SAMPLE_INTERVAL_S) -> None:
        self.interval_s = interval_s
        self.peak: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample_until_stopped, daemon=True)

    def _sample(self) -> None:
        now = rss_bytes()
        if now is not None and (self.peak is None or now > self.peak):
            self.peak = now

    def _sample_until_stopped(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample()

    def __enter__(self) -> PeakRss:
        self._sample()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join(SAMPLER_JOIN_BOUND_S)
        self._sample()


def kv_bytes_per_cell(metadata: GGUFMetadata, kv_cache: str) -> int | None:
    """The bytes one KV-cache cell (one token of one position) holds for this model in a
    ``kv_cache`` cache (the engine and the stock peers run the same type):
    ``n_layer x (n_embd_k_gqa x K bytes + n_embd_v_gqa x V bytes)``, where ``n_embd_k_gqa`` is
    the key size per head (``attention.key_length``, else ``n_embd / n_head``) times
    ``n_head_kv``, and the same for values. ``None`` when the metadata does not say (a key
    missing, or heads that differ per layer)."""
    arch = metadata.architecture

    def number(key: str) -> int | None:
        value = metadata.get(f"{arch}.{key}")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    n_layer, n_embd = number("block_count"), number("embedding_length")
    n_head = number("attention.head_count")
    n_head_kv = number("attention.head_count_kv") or n_head
    if not (n_layer and n_embd and n_head and n_head_kv):
        return None
    key_length = number("attention.key_length") or n_embd // n_head
    value_length = number("attention.value_length") or n_embd // n_head
    k_bytes, v_bytes = kv_element_bytes(kv_cache)
    return round(n_layer * n_head_kv * (key_length * k_bytes + value_length * v_bytes))
