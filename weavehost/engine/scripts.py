"""The writing systems of the vocabulary: per token, the scripts its text is written in.

Stage: engine (read by the decoder: the answer's script mask in :mod:`weavehost.decode.reply`).
An answer may not switch to a script that neither the user's messages nor the tool results hold
(Qwen2.5-Coder-0.5B answers "抱歉，我无法协助完成这个请求。" to an English question); the mask
bans, at each token of the answer, the tokens that would write one.

Guarantees:

* :data:`SCRIPTS` names the scripts told apart (Han, Hiragana, Katakana, Hangul, Cyrillic,
  Arabic, Devanagari, Thai, Hebrew, Greek, …), one bit each. Latin, digits, common punctuation,
  symbols and emoji belong to none: they are always allowed. :func:`scripts_in` gives a text's
  bits.
* :func:`script_table` holds, per token, the scripts of the whole characters it writes and
  those its trailing, unfinished character could still become (byte-level vocabularies split a
  character over tokens), built once per model from the marked vocabulary
  (:func:`~weavehost.engine.vocab.marked_tokens`) and kept on disk beside it. Special tokens
  write no text: they have no script.
* :meth:`ScriptTable.banned` bans a token that writes a character of a script not allowed, or
  whose unfinished character can only become one; where the text so far ends in an unfinished
  character, a token that finishes it is judged by the character it makes.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from weavehost.engine.vocab import (
    SPECIAL_MARK,
    marked_tokens,
    read_vocab_file,
    vocab_file,
    write_vocab_file,
)

if TYPE_CHECKING:
    from weavehost.engine.engine import Engine

__all__ = [
    "COMMON",
    "SCRIPTS",
    "SCRIPTS_FILE_VERSION",
    "ScriptTable",
    "build_script_table",
    "script_table",
    "scripts_in",
    "unfinished",
]

# The layout of the script tables under cache_dir()/vocab (see script_table).
SCRIPTS_FILE_VERSION = 1
# How many allowed sets' masks a table keeps (a conversation asks for one or two).
_KEPT_MASKS = 8

# Code point ranges (inclusive) of each script told apart; anything else is common to all.
_SCRIPT_RANGES: dict[str, tuple[tuple[int, int], ...]] = {
    "Han": ((0x2E80, 0x2FDF), (0x3190, 0x319F), (0x31C0, 0x31EF), (0x3200, 0x33FF),
            (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x3FFFF)),
    # Ideographic punctuation and fullwidth forms ("，", "。"): CJK text, not Latin's.
    "CJK punctuation": ((0x3000, 0x303F), (0xFE30, 0xFE4F), (0xFF00, 0xFF64)),
    "Hiragana": ((0x3040, 0x309F),),
    "Katakana": ((0x30A0, 0x30FF), (0x31F0, 0x31FF), (0xFF65, 0xFF9F)),
    "Hangul": ((0x1100, 0x11FF), (0x3130, 0x318F), (0xA960, 0xA97F), (0xAC00, 0xD7FF),
               (0xFFA0, 0xFFDC)),
    "Cyrillic": ((0x0400, 0x052F), (0x1C80, 0x1C8F), (0x2DE0, 0x2DFF), (0xA640, 0xA69F)),
    "Greek": ((0x0370, 0x03FF), (0x1F00, 0x1FFF)),
    "Armenian": ((0x0530, 0x058F),),
    "Hebrew": ((0x0590, 0x05FF), (0xFB1D, 0xFB4F)),
    "Arabic": ((0x0600, 0x06FF), (0x0750, 0x077F), (0x08A0, 0x08FF), (0xFB50, 0xFDFF),
               (0xFE70, 0xFEFF)),
    "Syriac": ((0x0700, 0x074F),),
    "Thaana": ((0x0780, 0x07BF),),
    "Devanagari": ((0x0900, 0x097F), (0xA8E0, 0xA8FF)),
    "Bengali": ((0x0980, 0x09FF),),
    "Gurmukhi": ((0x0A00, 0x0A7F),),
    "Gujarati": ((0x0A80, 0x0AFF),),
    "Oriya": ((0x0B00, 0x0B7F),),
    "Tamil": ((0x0B80, 0x0BFF),),
    "Telugu": ((0x0C00, 0x0C7F),),
    "Kannada": ((0x0C80, 0x0CFF),),
    "Malayalam": ((0x0D00, 0x0D7F),),
    "Sinhala": ((0x0D80, 0x0DFF),),
    "Thai": ((0x0E00, 0x0E7F),),
    "Lao": ((0x0E80, 0x0EFF),),
    "Tibetan": ((0x0F00, 0x0FFF),),
    "Myanmar": ((0x1000, 0x109F),),
    "Georgian": ((0x10A0, 0x10FF), (0x2D00, 0x2D2F)),
    "Ethiopic": ((0x1200, 0x139F),),
    "Khmer": ((0x1780, 0x17FF),),
    "Mongolian": ((0x1800, 0x18AF),),
}  # fmt: skip
SCRIPTS: tuple[str, ...] = tuple(_SCRIPT_RANGES)
# The bit of a character that belongs to no script told apart (Latin, digits, punctuation).
COMMON = 1 << len(SCRIPTS)

_RANGES = sorted(
    (start, end, 1 << index)
    for index, ranges in enumerate(_SCRIPT_RANGES.values())
    for start, end in ranges
)
_STARTS = [start for start, _, _ in _RANGES]


def _bit(code: int) -> int:
    """The script bit of one code point (:data:`COMMON` for none)."""
    at = bisect.bisect_right(_STARTS, code) - 1
    if at >= 0 and code <= _RANGES[at][1]:
        return _RANGES[at][2]
    return COMMON


def scripts_in(text: str) -> int:
    """The bits of the scripts ``text`` is written in (:data:`COMMON` left out)."""
    bits = 0
    for char in set(text):
        if ord(char) >= 0x370:  # below: Latin, digits and ASCII punctuation
            bits |= _bit(ord(char))
    return bits & ~COMMON


def _span_bits(low: int, high: int) -> int:
    """The bits of every code point from ``low`` to ``high``: what an unfinished character
    could still become (:data:`COMMON` if any of them belongs to no script)."""
    bits, at = 0, low
    index = max(bisect.bisect_right(_STARTS, low) - 1, 0)
    while at <= high:
        if index < len(_RANGES) and _RANGES[index][1] < at:
            index += 1
            continue
        if index < len(_RANGES) and _RANGES[index][0] <= at:
            bits |= _RANGES[index][2]
            at = _RANGES[index][1] + 1
            index += 1
        else:  # a gap up to the next range, or past the last one
            bits |= COMMON
            at = _RANGES[index][0] if index < len(_RANGES) else high + 1
    return bits


def _sequence_length(lead: int) -> int:
    """How many bytes a UTF-8 character beginning with ``lead`` takes (0: not a lead byte)."""
    if lead < 0x80:
        return 1
    if 0xC2 <= lead <= 0xDF:
        return 2
    if 0xE0 <= lead <= 0xEF:
        return 3
    if 0xF0 <= lead <= 0xF4:
        return 4
    return 0


def _is_continuation(byte: int) -> bool:
    return 0x80 <= byte <= 0xBF


def _prefix_bits(prefix: bytes) -> int:
    """What the character beginning with ``prefix`` (a lead byte and some of its continuation
    bytes, perhaps all) is or could still become."""
    size = _sequence_length(prefix[0])
    if size == 0:
        return COMMON  # not UTF-8: never a character of a script
    code = prefix[0] & (0x7F >> size if size > 1 else 0x7F)
    for byte in prefix[1:size]:
        code = (code << 6) | (byte & 0x3F)
    missing = size - min(len(prefix), size)
    low, high = code << (6 * missing), ((code + 1) << (6 * missing)) - 1
    return _span_bits(low, high)


def _token_bits(piece: bytes) -> tuple[int, int]:
    """A token's scripts: of the whole characters it writes, and (0 when it ends whole) what
    its trailing unfinished character could become. Leading continuation bytes finish a
    character begun before it: :meth:`ScriptTable.banned` judges those."""
    if piece.startswith(SPECIAL_MARK):
        return 0, 0
    whole, at = 0, 0
    while at < len(piece) and _is_continuation(piece[at]):
        at += 1
    while at < len(piece):
        size = _sequence_length(piece[at])
        if size == 0:
            at += 1
            continue
        if at + size > len(piece):
            return whole & ~COMMON, _prefix_bits(piece[at:])
        if size > 1:
            whole |= _prefix_bits(piece[at : at + size])
        at += size
    return whole & ~COMMON, 0


def unfinished(text: bytes) -> bytes:
    """The trailing bytes of ``text`` that begin a character not yet finished (``b""``)."""
    for back in range(1, min(4, len(text)) + 1):
        byte = text[-back]
        if not _is_continuation(byte):
            size = _sequence_length(byte)
            return text[-back:] if size > back else b""
    return b""


@dataclass(frozen=True, slots=True)
class ScriptTable:
    """Per token of a vocabulary: ``whole``, the script bits of the whole characters it writes;
    ``tail``, what its trailing unfinished character could become (0: none); ``heads``, the
    continuation bytes that begin a token (it finishes a character begun before it), by token."""

    whole: np.ndarray
    tail: np.ndarray
    heads: dict[int, bytes]
    # The masks of the last few allowed sets, before any unfinished character (an answer asks
    # for the same one at every token).
    _masks: dict[int, np.ndarray] = field(default_factory=dict, repr=False, compare=False)
    _begun_masks: dict[tuple[int, bytes], np.ndarray] = field(
        default_factory=dict, repr=False, compare=False
    )

    def banned(self, allowed: int, before: bytes = b"") -> np.ndarray:
        """Per token: whether it would write a script outside ``allowed`` after the text
        ``before`` (only its unfinished last character matters). Read-only."""
        out = self._masks.get(allowed)
        if out is None:
            out = (self.whole & ~np.uint64(allowed)) != 0
            out |= (self.tail != 0) & ((self.tail & np.uint64(allowed | COMMON)) == 0)
            out.flags.writeable = False
            if len(self._masks) >= _KEPT_MASKS:
                self._masks.clear()
            self._masks[allowed] = out
        begun = unfinished(before)
        if not begun:
            return out
        # After an unfinished character (at most 3 bytes): kept too, since a reply asks again at
        # every token until the character is finished.
        found = self._begun_masks.get((allowed, begun))
        if found is None:
            found = out.copy()
            for token, head in self.heads.items():
                if not _prefix_bits(begun + head) & (allowed | COMMON):
                    found[token] = True
            found.flags.writeable = False
            if len(self._begun_masks) >= _KEPT_MASKS:
                self._begun_masks.clear()
            self._begun_masks[(allowed, begun)] = found
        return found


def script_table(engine: Engine) -> ScriptTable:
    """The script table of ``engine``'s vocabulary, kept in ``cache_dir()/vocab`` under the
    same key as the marked vocabulary (with its own layout version) and read back; a missing
    or damaged file is rebuilt."""
    tokens = marked_tokens(engine)
    n = len(tokens)
    path, key = vocab_file(engine, "scripts", SCRIPTS_FILE_VERSION)
    body = read_vocab_file(path, key)
    if body is not None and len(body) == 16 * n:
        table = np.frombuffer(body, dtype="<u8").astype(np.uint64)
        return ScriptTable(whole=table[:n], tail=table[n:], heads=_heads(tokens))
    built = build_script_table(tokens)
    write_vocab_file(
        path, key, built.whole.astype("<u8").tobytes() + built.tail.astype("<u8").tobytes()
    )
    return built


def build_script_table(tokens: list[bytes]) -> ScriptTable:
    """The script table of a marked vocabulary (special tokens' bytes begin with
    :data:`~weavehost.engine.vocab.SPECIAL_MARK`)."""
    bits = [_token_bits(piece) for piece in tokens]
    whole = np.fromiter((w for w, _ in bits), dtype=np.uint64, count=len(tokens))
    tail = np.fromiter((t for _, t in bits), dtype=np.uint64, count=len(tokens))
    return ScriptTable(whole=whole, tail=tail, heads=_heads(tokens))


def _heads(tokens: list[bytes]) -> dict[int, bytes]:
    """The tokens that begin with continuation bytes, and those bytes."""
    heads = {}
    for token, piece in enumerate(tokens):
        if piece and _is_continuation(piece[0]):
            size = next((i for i, byte in enumerate(piece) if not _is_continuation(byte)),
                        len(piece))  # fmt: skip
            heads[token] = piece[:size]
    return heads
