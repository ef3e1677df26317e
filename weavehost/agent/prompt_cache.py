"""The persistent prompt-prefix cache: the KV state of a conversation's stable prefix, on disk.

Stage: agent (beside the engine-backed model, :class:`~weavehost.agent.model.EngineModel`, which
consults it when it syncs a conversation of which nothing is resident). Prefilling the system
prompt and the tool definitions is most of a one-shot ``weavehost run`` (474 tokens of the time
server's tools at ~17 ms a token on a phone-class CPU); restoring their KV state takes
milliseconds.

Guarantees:

* **The stable prefix** is the tokens before the first user message's content
  (:func:`stable_prefix`): the system prompt and the tools, wherever the format puts them. It
  is found by rendering, not by knowing a format.
* **The key** is the engine's :class:`~weavehost.engine.saved.StateIdentity` (model file, context
  size, llama.cpp build) and the exact token list; the file is named by their SHA-256. The file
  repeats both and :meth:`Engine.load_sequence <weavehost.engine.Engine.load_sequence>` checks
  them and a checksum of the state before llama.cpp reads it: a missing, truncated, corrupt or
  mismatched file is a miss, never trusted, and the save after the miss rewrites it.
* **Bounded.** After each save, files are deleted least recently used first (a hit refreshes its
  file's modification time) until they take at most ``max_bytes``; a state larger than that is
  never written: its size is asked of the engine first. Writes are atomic (a temporary file,
  then a rename).
* **Never costs a turn.** A file system that refuses a write or a delete is logged and the turn
  goes on as if the cache were off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from weavehost.config import DEFAULT_PROMPT_CACHE_BYTES, PromptCacheConfig
from weavehost.engine import Engine
from weavehost.paths import cache_dir

__all__ = [
    "PROMPT_CACHE_SUBDIR",
    "CacheStatus",
    "PromptCache",
    "common_prefix",
    "stable_prefix",
]

logger = logging.getLogger(__name__)

PROMPT_CACHE_SUBDIR = "prompts"  # under weavehost.paths.cache_dir()
SUFFIX = ".kv"
# A temporary file this old was left by a process that died while writing: delete it.
STALE_TEMPORARY_S = 3600.0
# Two user texts whose first tokens differ in any tokenizer: where their renderings part is
# where the first user message's content begins.
_SENTINELS = ("a", "b")

CacheStatus = Literal["hit", "miss", "off"]
"""``hit``: the prefix was restored from a file; ``miss``: it was prefilled (and saved);
``off``: the cache was not consulted (turned off, or the conversation was resident)."""


def stable_prefix(
    messages: Sequence[Mapping[str, Any]],
    tokens: Sequence[int],
    render: Callable[[list[dict[str, Any]]], list[int]],
) -> int:
    """How many of ``tokens`` (the rendering of ``messages``) come before the first user
    message's content: the common prefix of the conversation rendered with that content and
    with two different sentinels in its place. 0 when there is no user message."""
    first = next((i for i, m in enumerate(messages) if m.get("role") == "user"), None)
    if first is None:
        return 0
    renders = []
    for sentinel in _SENTINELS:
        # Only what comes up to the first user message matters: the later turns are not
        # rendered again.
        variant = [dict(m) for m in messages[: first + 1]]
        variant[first]["content"] = sentinel
        renders.append(render(variant))
    return min(common_prefix(renders[0], renders[1]), common_prefix(tokens, renders[0]))


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the longest common prefix of two token lists."""
    n = min(len(a), len(b))
    return next((i for i in range(n) if a[i] != b[i]), n)


@dataclass(frozen=True, slots=True)
class PromptCache:
    """Saved prefixes in ``directory``, at most ``max_bytes`` of them."""

    directory: Path
    max_bytes: int = DEFAULT_PROMPT_CACHE_BYTES

    @classmethod
    def from_config(cls, config: PromptCacheConfig) -> PromptCache | None:
        """The cache the config asks for, under the cache directory; ``None`` when it is off."""
        if not config.enabled:
            return None
        return cls(cache_dir() / PROMPT_CACHE_SUBDIR, config.max_bytes)

    def path_for(self, engine: Engine, tokens: Sequence[int]) -> Path:
        """The file of this prefix on this engine (model file, context size, llama.cpp)."""
        key = json.dumps([asdict(engine.identity), list(tokens)], separators=(",", ":"))
        return self.directory / (hashlib.sha256(key.encode()).hexdigest() + SUFFIX)

    def prefill(self, engine: Engine, seq: int, tokens: Sequence[int]) -> CacheStatus:
        """Make the empty ``seq`` hold the prefix ``tokens``: restored from its file (``hit``),
        or prefilled and then saved (``miss``). Either way ``seq`` has no next-token logits:
        the caller prefills the rest of the conversation after it."""
        if self.restore(engine, seq, tokens):
            return "hit"
        engine.prefill(seq, tokens, logits_last=False)
        self.save(engine, seq, tokens)
        return "miss"

    def restore(self, engine: Engine, seq: int, tokens: Sequence[int]) -> bool:
        """Load the saved prefix ``tokens`` into ``seq`` (emptied first); False on a miss, with
        ``seq`` empty. The sequence has no next-token logits afterwards."""
        path = self.path_for(engine, tokens)
        if engine.load_sequence(seq, path, tokens=tokens) is None:
            return False
        try:
            os.utime(path)  # the least recently used go first
        except OSError as exc:
            logger.debug("could not mark %s as used: %s", path, exc)
        return True

    def save(self, engine: Engine, seq: int, tokens: Sequence[int]) -> bool:
        """Save ``seq``, which holds exactly ``tokens``, then evict past the cap. False when it
        was not saved (its state alone is over the cap, so nothing is written; or the file
        system refused)."""
        size = engine.saved_size(seq, tokens)
        if size > self.max_bytes:
            logger.debug("prompt cache: a %d-byte state is over the %d-byte cap; not saved",
                         size, self.max_bytes)  # fmt: skip
            return False
        path = self.path_for(engine, tokens)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            engine.save_sequence(seq, path, tokens)
        except OSError as exc:
            logger.warning("prompt cache: could not save %s: %s", path, exc)
            return False
        self.evict()
        return True

    def evict(self) -> int:
        """Delete the least recently used files until the rest fit ``max_bytes`` (and stale
        temporary files); return the bytes freed."""
        files: list[tuple[float, int, Path]] = []
        freed = 0
        now = time.time()
        try:
            entries = list(os.scandir(self.directory))
        except OSError as exc:
            logger.debug("prompt cache: cannot list %s: %s", self.directory, exc)
            return 0
        for entry in entries:
            try:
                stat = entry.stat(follow_symlinks=False)
                if entry.name.endswith(".tmp") and now - stat.st_mtime > STALE_TEMPORARY_S:
                    os.unlink(entry.path)
                    freed += stat.st_size
                elif entry.name.endswith(SUFFIX) and entry.is_file(follow_symlinks=False):
                    files.append((stat.st_mtime, stat.st_size, Path(entry.path)))
            except OSError:  # deleted by another process meanwhile: nothing to count
                continue
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files):
            if total <= self.max_bytes:
                break
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                logger.warning("prompt cache: could not delete %s: %s", path, exc)
                continue
            total -= size
            freed += size
        return freed
