"""The model's vocabulary as one table: every token's bytes, special ones marked.

Stage: engine (read by the decoder: llguidance's view of the vocabulary in
:mod:`weavehost.decode.constraint`, the word-start rule of a reply in
:mod:`weavehost.decode.reply`).

Guarantees: :func:`marked_tokens` holds one entry per token, its bytes, with the tokens that only
special parsing reaches (special and control ones) marked by a leading :data:`SPECIAL_MARK`
(llguidance's convention). The table depends only on the model file and the llama.cpp build, so
it is kept on disk under ``cache_dir()/vocab`` and read back only when its key, size and
checksum all match; a file system that refuses the write costs only the cache.
:func:`no_word_start` derives from it which tokens cannot begin a word (a reply's word-start rule).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from weavehost.paths import cache_dir

if TYPE_CHECKING:
    from weavehost.engine.engine import Engine

logger = logging.getLogger(__name__)

__all__ = [
    "SPECIAL_MARK",
    "VOCAB_FILE_VERSION",
    "marked_tokens",
    "no_word_start",
    "read_vocab_file",
    "vocab_file",
    "write_vocab_file",
]

# The layout of the vocabulary files under cache_dir()/vocab (see marked_tokens).
VOCAB_FILE_VERSION = 2
# How a special token's bytes are marked (in the table, and by llguidance in the text it
# forces): a leading byte no UTF-8 text holds.
SPECIAL_MARK = b"\xff"


def marked_tokens(engine: Engine) -> list[bytes]:
    """Every token's bytes, special and control ones marked with a leading ``b"\\xff"`` (a byte
    no UTF-8 text holds), for llguidance and for anything else that reads the whole vocabulary
    (a reply's word-start mask, the scripts of :mod:`weavehost.engine.scripts`). Reading them
    from llama.cpp one by one takes ~0.5 s for Qwen's 151,936 tokens, in every process; they
    depend only on the model file and the llama.cpp build, so they are kept in
    ``cache_dir()/vocab`` under a key of both (the engine's
    :attr:`~weavehost.engine.Engine.identity` without the context size) and read back in
    milliseconds. A missing, damaged or other-model file is rebuilt; a file system that
    refuses the write costs only the cache."""
    path, key = vocab_file(engine, "bin", VOCAB_FILE_VERSION)
    tokens = _parse_vocab(read_vocab_file(path, key), engine.n_vocab)
    if tokens is not None:
        return tokens
    specials = engine.special_texts
    tokens = []
    for token in range(engine.n_vocab):
        piece = engine.token_bytes(token)
        if piece.decode("utf-8", errors="replace") in specials or (engine.is_control(token)):
            piece = SPECIAL_MARK + piece
        tokens.append(piece)
    ends = np.cumsum([0, *map(len, tokens)], dtype=np.int64).astype("<u4")
    write_vocab_file(path, key, ends.tobytes() + b"".join(tokens))
    return tokens


def no_word_start(engine: Engine) -> np.ndarray:
    """Per token of the vocabulary: whether it cannot begin a word of an answer — its text,
    after leading whitespace, is empty or begins with neither a letter, a digit nor a
    non-ASCII character (so ``{``, ``(``, ``"``, ``<``, a line break alone), or it is a
    special, control or end-of-generation token (the reply writer's word-start rule)."""
    out = np.fromiter(map(_begins_no_word, marked_tokens(engine)), dtype=bool, count=engine.n_vocab)
    out[list(engine.end_of_generation_tokens)] = True
    return out


def _begins_no_word(piece: bytes) -> bool:
    first = piece.lstrip()[:1]
    return not first or first == SPECIAL_MARK or not (first.isalnum() or first >= b"\x80")


def vocab_file(engine: Engine, suffix: str, version: int) -> tuple[Path, str]:
    """Where a table of ``engine``'s vocabulary is kept (``suffix``: which table) and the key
    it is kept under: the model file, the llama.cpp build, the vocabulary's size and the
    table's layout ``version``."""
    identity = engine.identity
    key = json.dumps(
        [version, identity.model, identity.model_bytes, identity.model_mtime_ns,
         identity.llama_cpp, engine.n_vocab],
    )  # fmt: skip
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return cache_dir() / "vocab" / f"{digest}.{suffix}", key


def read_vocab_file(path: Path, key: str) -> bytes | None:
    """The body saved at ``path`` under ``key``, or ``None`` (absent, damaged, other key)."""
    try:
        head, _, body = path.read_bytes().partition(b"\n")
        header = json.loads(head)
        if header.get("key") != key or hashlib.sha256(body).hexdigest() != header.get("sha256"):
            return None
    except (OSError, ValueError, AttributeError):
        return None
    return body


def write_vocab_file(path: Path, key: str, body: bytes) -> None:
    """Save ``body`` under ``key`` atomically (a unique temporary file renamed into place); a
    file system that refuses the write is logged, and costs only the cache."""
    header = {"key": key, "sha256": hashlib.sha256(body).hexdigest()}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    except OSError as exc:
        logger.info("could not keep a vocabulary table in %s: %s", path, exc)
        return
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(json.dumps(header).encode() + b"\n" + body)
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        logger.info("could not keep a vocabulary table in %s: %s", path, exc)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _parse_vocab(body: bytes | None, n_vocab: int) -> list[bytes] | None:
    """The token list in a saved body (``n_vocab + 1`` little-endian ends, then the bytes), or
    ``None`` where it does not hold one."""
    if body is None:
        return None
    try:
        ends = np.frombuffer(body, dtype="<u4", count=n_vocab + 1).astype(np.int64)
    except ValueError:
        return None
    blob = body[4 * (n_vocab + 1) :]
    if ends[0] != 0 or ends[-1] != len(blob) or (np.diff(ends) < 0).any():
        return None
    bounds = ends.tolist()
    return [blob[start:end] for start, end in zip(bounds[:-1], bounds[1:], strict=True)]
