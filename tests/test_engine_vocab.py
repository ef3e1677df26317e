"""The engine's marked vocabulary (llguidance's view of it), kept on disk per model file: read
back exactly, and never trusted when damaged or made for another model."""

from __future__ import annotations

from pathlib import Path

import pytest

from weavehost.engine import vocab


@pytest.fixture
def vocab_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path))
    return tmp_path / "vocab"


def built(engine) -> list[bytes]:
    specials = engine.special_texts
    marked = []
    for token in range(engine.n_vocab):
        piece = engine.token_bytes(token)
        if piece.decode("utf-8", errors="replace") in specials or engine.is_control(token):
            piece = b"\xff" + piece
        marked.append(piece)
    return marked


def test_the_marked_vocabulary_is_saved_once_and_read_back_exactly(engine, vocab_dir, monkeypatch):
    first = vocab.marked_tokens(engine)
    assert first == built(engine)
    (saved,) = vocab_dir.iterdir()
    monkeypatch.setattr(engine, "token_bytes", None)  # a read from the file needs no engine call
    assert vocab.marked_tokens(engine) == first
    assert list(vocab_dir.iterdir()) == [saved]


def test_a_damaged_vocabulary_file_is_rebuilt_and_never_trusted(engine, vocab_dir):
    good = vocab.marked_tokens(engine)
    (saved,) = vocab_dir.iterdir()
    data = bytearray(saved.read_bytes())
    data[-5] ^= 0x01  # one flipped bit in a token's bytes
    saved.write_bytes(bytes(data))
    assert vocab.marked_tokens(engine) == good
    saved.write_bytes(saved.read_bytes()[:100])  # truncated
    assert vocab.marked_tokens(engine) == good
    assert saved.read_bytes() != data  # rewritten whole


def test_a_file_saved_for_another_model_is_not_read(engine, vocab_dir, tmp_path):
    vocab.marked_tokens(engine)
    (saved,) = vocab_dir.iterdir()
    _, key = vocab.vocab_file(engine, "bin", vocab.VOCAB_FILE_VERSION)
    assert vocab.read_vocab_file(saved, key) is not None
    assert vocab.read_vocab_file(saved, "another model") is None
    assert vocab.read_vocab_file(tmp_path / "absent.bin", key) is None
