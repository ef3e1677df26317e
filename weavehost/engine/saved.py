"""Saved sequences: the file a sequence's KV state is kept in between processes.

Stage: engine (used by :meth:`Engine.save_sequence <weavehost.engine.Engine.save_sequence>` and
``load_sequence``; the prompt-prefix cache of the agent decides what to save and where).

A file is one line ``weavehost-kv 1``, one line of JSON (the :class:`StateIdentity` it was saved
for, the tokens the sequence holds, the state's size and SHA-256) and then the state as llama.cpp
serialised it (``llama_state_seq_get_data``). Guarantees:

- :func:`write_saved` is atomic: a unique temporary file in the same directory, then one rename,
  so a reader sees the old file or the whole new one, also when two processes save at once.
- :func:`read_saved` trusts nothing it has not checked: the format line, the header, the
  identity, the tokens asked for, the size and the checksum must all agree before the state is
  returned; otherwise it returns why not. llama.cpp copies a state's bytes into the KV cache
  unchecked, so a flipped byte must be caught here. (The checksum guards against corruption,
  not against someone who may write the user's cache directory.)
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

__all__ = ["SavedState", "StateIdentity", "read_saved", "saved_size", "write_saved"]

MAGIC = b"weavehost-kv 1\n"
# A header holds at most n_ctx token ids of a few digits each, and a short identity.
_HEADER_BYTES_PER_TOKEN = 16
_HEADER_SLACK = 4096


@dataclass(frozen=True, slots=True)
class StateIdentity:
    """What a saved KV state is valid for: this model file (path, size, modification time, as
    it was when the engine opened it), this context size, this version of llama-cpp-python and
    this build of it (``build``: what its llama.cpp was compiled with,
    :func:`~weavehost.engine.native.build_signature`; a header without one is another build's,
    from before it was recorded), this attention kernel (with flash attention off, llama.cpp
    lays the V cache out transposed) and this cache type (a header without one was saved from
    an f16 cache)."""

    model: str
    model_bytes: int
    model_mtime_ns: int
    n_ctx: int
    llama_cpp: str
    flash_attn: bool
    kv_cache: str = "f16"
    build: str = ""


@dataclass(frozen=True, slots=True)
class SavedState:
    """A checked saved sequence (``problem`` is ``None``), or why a file must not be used."""

    problem: str | None
    tokens: tuple[int, ...] = ()
    state: bytearray | None = None


def _head(identity: StateIdentity, tokens: Sequence[int], size: int, digest: str) -> bytes:
    """The format line and the header line of a saved sequence."""
    header = {"identity": asdict(identity), "tokens": list(tokens), "bytes": size, "sha256": digest}
    return MAGIC + json.dumps(header, separators=(",", ":")).encode() + b"\n"


def saved_size(identity: StateIdentity, tokens: Sequence[int], state_bytes: int) -> int:
    """The size of the file :func:`write_saved` writes for a state of ``state_bytes`` bytes,
    known before the state is read (a SHA-256 is always 64 hex digits)."""
    return len(_head(identity, tokens, state_bytes, "0" * 64)) + state_bytes


def write_saved(path: Path, identity: StateIdentity, tokens: Sequence[int], state: bytes) -> int:
    """Write a saved sequence atomically; return the file's size. ``OSError`` propagates."""
    head = _head(identity, tokens, len(state), hashlib.sha256(state).hexdigest())
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temporary, "wb") as file:
            file.write(head)
            file.write(state)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return len(head) + len(state)


def read_saved(path: Path, identity: StateIdentity, tokens: Sequence[int] | None) -> SavedState:
    """The saved sequence at ``path`` if it was saved for ``identity``, holds ``tokens`` (when
    given) and its state is whole; otherwise a :class:`SavedState` naming the problem."""
    try:
        with open(path, "rb") as file:
            if file.readline(len(MAGIC)) != MAGIC:
                return SavedState("not a saved sequence of this format")
            line = file.readline(_HEADER_BYTES_PER_TOKEN * identity.n_ctx + _HEADER_SLACK)
            header = json.loads(line)
            saved = tuple(int(t) for t in header["tokens"])
            size, digest = int(header["bytes"]), str(header["sha256"])
            found = StateIdentity(**header["identity"])
            if os.fstat(file.fileno()).st_size - file.tell() != size:
                return SavedState("its size does not match its header (truncated?)")
            state = bytearray(size)
            file.readinto(state)
    except FileNotFoundError:
        return SavedState("no such file")
    # RecursionError: a header of deeply nested JSON (a damaged or hostile file).
    except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
        return SavedState(f"unreadable ({type(exc).__name__}: {exc})")
    if found != identity:
        return SavedState(
            "saved for another model file, context size, llama.cpp build or cache type"
        )
    if tokens is not None and saved != tuple(tokens):
        return SavedState("it holds other tokens")
    if not 0 < len(saved) <= identity.n_ctx:
        return SavedState(f"{len(saved)} tokens cannot be a sequence of this context")
    if hashlib.sha256(state).hexdigest() != digest:
        return SavedState("its checksum does not match (corrupt)")
    return SavedState(None, saved, state)
