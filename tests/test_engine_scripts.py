"""The scripts of the vocabulary: which tokens an answer in the user's scripts may not write.

A table built from a small marked vocabulary (whole characters, a character split over two
tokens, special tokens), its mask for an allowed set, and the table kept on disk per model.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from weavehost.engine import scripts
from weavehost.engine.scripts import SCRIPTS, build_script_table, scripts_in, unfinished

HAN = 1 << SCRIPTS.index("Han")
CYRILLIC = 1 << SCRIPTS.index("Cyrillic")
HIRAGANA = 1 << SCRIPTS.index("Hiragana")

SORRY = "抱".encode()  # b"\xe6\x8a\xb1": split below as a lead byte, then its continuation
VOCAB = [
    b"Hello",  # 0: Latin
    b" 42.",  # 1: digits and punctuation
    "抱歉".encode(),  # 2: Han
    "，".encode(),  # 3: fullwidth comma
    "Пр".encode(),  # 4: Cyrillic
    SORRY[:1],  # 5: a lead byte whose every completion is Han
    SORRY[1:],  # 6: continuation bytes that finish a character begun before
    b"\xff<|im_end|>",  # 7: special
    "café ☀".encode(),  # 8: Latin with an accent, a symbol
    "Пр".encode()[:1],  # 9: a lead byte that completes into Cyrillic
]
TABLE = build_script_table(VOCAB)


def banned(allowed: int, before: bytes = b"") -> list[int]:
    return np.flatnonzero(TABLE.banned(allowed, before)).tolist()


def test_a_text_s_scripts_leave_out_latin_digits_punctuation_and_symbols():
    assert scripts_in("What's the time in London? 17:23, café ☀ — “ok”") == 0
    assert scripts_in("Привет, world") == CYRILLIC
    assert scripts_in("東京はいま何時？") == HAN | HIRAGANA | (
        1 << SCRIPTS.index("CJK punctuation")
    )


def test_in_an_english_conversation_every_han_token_is_banned_and_latin_never():
    assert banned(scripts_in("What's the time in London?")) == [2, 3, 4, 5, 9]


def test_a_cyrillic_tool_result_allows_cyrillic_but_han_stays_banned():
    allowed = scripts_in("What's the weather?\nМосква: снег, -3 C")
    assert banned(allowed) == [2, 3, 5]


def test_a_user_who_writes_chinese_may_be_answered_in_chinese():
    assert banned(scripts_in("现在几点，抱歉？")) == [4, 9]


def test_a_token_that_finishes_a_han_character_begun_before_is_banned_where_han_is_not_allowed():
    assert 6 not in banned(0)  # alone it writes no character
    assert 6 in banned(0, b"I " + SORRY[:1])
    assert 6 not in banned(HAN, b"I " + SORRY[:1])
    assert unfinished(b"I " + SORRY[:2]) == SORRY[:2] and unfinished(b"I " + SORRY) == b""


def test_the_mask_of_an_allowed_set_is_kept_and_never_changed_by_a_begun_character():
    first = TABLE.banned(0)
    with_begun = TABLE.banned(0, SORRY[:1])
    assert TABLE.banned(0) is first and not first[6] and with_begun[6]
    assert not first.flags.writeable


@pytest.fixture
def vocab_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path))
    return tmp_path / "vocab"


def test_the_script_table_is_built_once_per_model_kept_on_disk_and_rebuilt_when_damaged(
    engine, vocab_dir, monkeypatch
):
    first = scripts.script_table(engine)
    saved = next(vocab_dir.glob("*.scripts"))
    built = build_script_table(scripts.marked_tokens(engine))
    assert (first.whole == built.whole).all() and (first.tail == built.tail).all()
    monkeypatch.setattr(scripts, "build_script_table", None)  # read back: nothing is built
    again = scripts.script_table(engine)
    assert (again.whole == first.whole).all() and again.heads == first.heads
    monkeypatch.undo()
    monkeypatch.setenv("WEAVEHOST_CACHE", str(vocab_dir.parent))
    saved.write_bytes(saved.read_bytes()[:-3])  # truncated: never trusted
    assert (scripts.script_table(engine).tail == first.tail).all()
