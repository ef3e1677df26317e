"""Reading a GGUF file's metadata without loading its weights.

Stage: before the engine (model choice, format detection, ``weavehost models``). Guarantees:
:func:`read_metadata` reads only the header and the key/value section, so it works on a file
that holds nothing else (or only the first chunk of a split model), never allocates tensor
memory, and raises :class:`ModelLoadError` naming the file for anything that is not GGUF.

Layout (GGUF v2/v3, little-endian): magic ``GGUF``, ``uint32`` version, ``uint64`` tensor
count, ``uint64`` key/value count, then per pair a string key, a ``uint32`` type tag and the
value. Strings are a ``uint64`` byte length and UTF-8 bytes; arrays are an element type tag,
a ``uint64`` count and the elements.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from weavehost.errors import ModelLoadError

__all__ = ["GGUFMetadata", "read_metadata"]

_MAGIC = b"GGUF"
# Arrays longer than this are summarised (length only) unless their key is asked for in full.
_ARRAY_SUMMARY_LIMIT = 64
# A key/value count or string longer than these means a corrupt file, not a real model.
_MAX_KV_COUNT = 1_000_000
_MAX_STRING_BYTES = 64 * 1024 * 1024

_SCALARS: dict[int, str] = {
    0: "<B",  # uint8
    1: "<b",  # int8
    2: "<H",  # uint16
    3: "<h",  # int16
    4: "<I",  # uint32
    5: "<i",  # int32
    6: "<f",  # float32
    7: "<?",  # bool
    10: "<Q",  # uint64
    11: "<q",  # int64
    12: "<d",  # float64
}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True, slots=True)
class GGUFMetadata:
    """The key/value metadata of a GGUF file.

    ``values`` maps each key to its value; a long array that was not asked for in full is
    stored as ``ArraySummary``. ``version`` and ``tensor_count`` come from the header.
    """

    path: Path
    version: int
    tensor_count: int
    values: dict[str, Any] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def architecture(self) -> str:
        return str(self.values.get("general.architecture", "unknown"))

    @property
    def name(self) -> str:
        return str(self.values.get("general.name", self.path.stem))

    @property
    def chat_template(self) -> str | None:
        template = self.values.get("tokenizer.chat_template")
        return template if isinstance(template, str) else None

    @property
    def context_length(self) -> int | None:
        value = self.values.get(f"{self.architecture}.context_length")
        return int(value) if isinstance(value, int) else None

    @property
    def tokens(self) -> list[str]:
        """The vocabulary (only present when read with ``full_arrays`` naming it)."""
        tokens = self.values.get("tokenizer.ggml.tokens")
        return tokens if isinstance(tokens, list) else []


@dataclass(frozen=True, slots=True)
class ArraySummary:
    """A long array that was skipped: its element type tag and length."""

    element_type: int
    length: int


class _Reader:
    def __init__(self, stream: BinaryIO, path: Path) -> None:
        self._stream = stream
        self._path = path

    def _fail(self, problem: str) -> ModelLoadError:
        return ModelLoadError(f"{self._path} is not a readable GGUF file: {problem}")

    def exact(self, size: int) -> bytes:
        data = self._stream.read(size)
        if len(data) != size:
            raise self._fail("it ends inside the metadata section")
        return data

    def scalar(self, tag: int) -> Any:
        fmt = _SCALARS[tag]
        return struct.unpack(fmt, self.exact(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        length = self.scalar(10)
        if length > _MAX_STRING_BYTES:
            raise self._fail(f"a string claims {length} bytes")
        return self.exact(length).decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        length = self.scalar(10)
        if length > _MAX_STRING_BYTES:
            raise self._fail(f"a string claims {length} bytes")
        self._stream.seek(length, os.SEEK_CUR)

    def value(self, tag: int, keep_whole: bool) -> Any:
        if tag in _SCALARS:
            return self.scalar(tag)
        if tag == _STRING:
            return self.string()
        if tag == _ARRAY:
            element_type = self.scalar(4)
            length = self.scalar(10)
            if keep_whole or length <= _ARRAY_SUMMARY_LIMIT:
                return [self.value(element_type, keep_whole) for _ in range(length)]
            self.skip_array(element_type, length)
            return ArraySummary(element_type, length)
        raise self._fail(f"unknown value type {tag}")

    def skip_array(self, element_type: int, length: int) -> None:
        if element_type in _SCALARS:
            self._stream.seek(struct.calcsize(_SCALARS[element_type]) * length, os.SEEK_CUR)
        elif element_type == _STRING:
            for _ in range(length):
                self.skip_string()
        else:
            for _ in range(length):
                self.value(element_type, keep_whole=False)


def read_metadata(
    path: str | os.PathLike[str], *, full_arrays: tuple[str, ...] = ()
) -> GGUFMetadata:
    """Read the metadata of the GGUF at ``path``; arrays named in ``full_arrays`` are kept whole."""
    file_path = Path(path)
    try:
        stream = file_path.open("rb")
    except OSError as exc:
        raise ModelLoadError(f"cannot open model file {file_path}: {exc.strerror}") from exc
    with stream:
        reader = _Reader(stream, file_path)
        if reader.exact(4) != _MAGIC:
            raise reader._fail("it does not start with the GGUF magic bytes")
        version = reader.scalar(4)
        if version not in (2, 3):
            raise reader._fail(f"GGUF version {version} is not supported (2 and 3 are)")
        tensor_count = reader.scalar(10)
        kv_count = reader.scalar(10)
        if kv_count > _MAX_KV_COUNT:
            raise reader._fail(f"it claims {kv_count} metadata keys")
        values: dict[str, Any] = {}
        for _ in range(kv_count):
            key = reader.string()
            tag = reader.scalar(4)
            values[key] = reader.value(tag, keep_whole=key in full_arrays)
    return GGUFMetadata(path=file_path, version=version, tensor_count=tensor_count, values=values)
