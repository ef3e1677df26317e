"""One error path for every command: bad input is one ``Error: …`` line and its documented code.

Every command (``models``, ``tools``, ``calibrate``, ``run``, ``chat``, ``bench`` and
``python -m weavehost.bench.assets``) is run with bad input that fails before any model is loaded:
a missing file, a malformed config, an unknown strategy or format, a model file that is not GGUF,
a server that will not start. The table in ``weavehost/errors.py`` is the contract; a test below
holds every class to it.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from weavehost import errors
from weavehost.bench.assets import BFCL_FILES, QWEN_GGUF
from weavehost.cli import main

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
RAW_SERVER = str(ROOT / "tests" / "host_fixtures" / "raw_server.py")  # starts in milliseconds
SUBPROCESS_BOUND_S = 60  # an interpreter start and a click parse on a busy 2-core machine


@pytest.fixture
def inputs(tmp_path: Path) -> dict[str, str]:
    """Bad (and a few good) inputs on disk, named for the ``{...}`` slots of the cases."""
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_text("this is not a GGUF file\n")
    malformed = tmp_path / "malformed.json"
    malformed.write_text('{"mcpServers": {"a": {"command": ')
    return {
        "missing": str(tmp_path / "missing.gguf"),
        "missing_cases": str(tmp_path / "missing.jsonl"),
        "not_gguf": str(not_gguf),
        "malformed": str(malformed),
        "cases": str(DATA / "bfcl_sample.jsonl"),
        "out": str(tmp_path / "out"),
        "server": RAW_SERVER,
    }


# (command line with {slots}, exit code, text the one Error: line must contain)
CASES = {
    "models with a missing model file": (["models", "--model", "{missing}"], 3, "not a file"),
    "models with a model file that is not GGUF": (["models", "--model", "{not_gguf}"], 3, "GGUF"),
    "models with an unknown format": (["models", "--format", "nope"], 2, "unknown model format 'nope'"),
    "tools with a missing config": (["tools", "--config", "{missing}"], 2, "config file not found"),
    "tools with a malformed config": (["tools", "--config", "{malformed}"], 2, "malformed.json"),
    "tools with a server that will not start": (["tools", "--server", "sh -c 'exit 4'"], 1, "failed to start"),
    "calibrate with a missing model file": (["calibrate", "--model", "{missing}"], 3, "not a file"),
    "run with a malformed config": (["run", "hi", "--config", "{malformed}"], 2, "malformed.json"),
    "run with an unknown strategy": (["run", "hi", "--server", "{server}", "--strategy", "psychic"], 2, "unknown strategy 'psychic'"),
    "run with an unknown format": (["run", "hi", "--server", "{server}", "--format", "nope"], 2, "unknown model format 'nope'"),
    "run with a model file that is not GGUF": (["run", "hi", "--server", "{server}", "--model", "{not_gguf}"], 3, "GGUF"),
    "run with a server that will not start": (["run", "hi", "--server", "sh -c 'exit 4'"], 1, "failed to start"),
    "chat with a missing config": (["chat", "--config", "{missing}"], 2, "config file not found"),
    "chat with an unknown tool choice": (["chat", "--server", "{server}", "--tool-choice", "sometimes"], 2, "'sometimes' is not one of"),
    "chat with an unknown format": (["chat", "--server", "{server}", "--format", "nope"], 2, "unknown model format 'nope'"),
    "bench with an unknown strategy": (["bench", "{cases}", "--out", "{out}", "--strategies", "nope"], 2, "unknown strategy 'nope'"),
    "bench with a missing case file": (["bench", "{missing_cases}", "--out", "{out}"], 2, "missing.jsonl"),
    "bench with an unknown format": (["bench", "{cases}", "--out", "{out}", "--format", "nope"], 2, "unknown model format 'nope'"),
    "bench with a model file that is not GGUF": (["bench", "{cases}", "--out", "{out}", "--model", "{not_gguf}"], 3, "GGUF"),
}  # fmt: skip


def assert_one_error_line(output: str, code: int, exit_code: int, message: str) -> None:
    assert "Traceback" not in output, output
    error_lines = [line for line in output.splitlines() if line.startswith("Error:")]
    assert len(error_lines) == 1, output
    assert message in error_lines[0], output
    assert exit_code == code, output


@pytest.mark.parametrize(("args", "code", "message"), list(CASES.values()), ids=list(CASES))
def test_a_command_with_bad_input_prints_one_error_line_and_exits_with_the_documented_code(
    args: list[str], code: int, message: str, inputs: dict[str, str]
) -> None:
    argv = [arg.format(**inputs) for arg in args]
    result = CliRunner().invoke(main, argv)
    assert not isinstance(result.exception, AssertionError), result.exception  # no model load
    assert_one_error_line(result.output, code, result.exit_code, message)


@pytest.mark.model  # llama.cpp is asked to load the file (and refuses it): a model load
def test_calibrate_with_a_model_file_that_is_not_gguf_prints_one_error_line_and_exits_3(
    inputs: dict[str, str],
) -> None:
    result = CliRunner().invoke(main, ["calibrate", "--model", inputs["not_gguf"]])
    assert_one_error_line(result.output, 3, result.exit_code, "could not load")


def assets(*args: str, cache: Path) -> subprocess.CompletedProcess[str]:
    """``python -m weavehost.bench.assets`` as a user runs it (its own entry point)."""
    env = {**os.environ, "WEAVEHOST_CACHE": str(cache)}
    return subprocess.run(
        [sys.executable, "-m", "weavehost.bench.assets", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=SUBPROCESS_BOUND_S,
    )  # fmt: skip


def with_bfcl_files(cache: Path) -> Path:
    """A cache that already holds the BFCL files, so nothing is downloaded."""
    for name in BFCL_FILES:
        answers = cache / "bfcl" / "possible_answer" / name
        answers.parent.mkdir(parents=True, exist_ok=True)
        (cache / "bfcl" / name).write_text((DATA / "bfcl_sample.jsonl").read_text())
        answers.write_text((DATA / "bfcl_sample_answers.jsonl").read_text())
    return cache


@pytest.mark.parametrize(
    ("args", "model_file", "code", "message"),
    [
        (["--quants", "q9_9"], None, 2, "unknown quantization 'q9_9'"),
        (["--cache", "{cache}/assets.json"], None, 2, "is a file"),
        ([], "this is not a GGUF file\n", 3, "GGUF"),
    ],
    ids=["an unknown quantization", "a cache that is a file", "a model file that is not GGUF"],
)
def test_the_assets_module_with_bad_input_prints_one_error_line_and_exits_with_the_documented_code(
    args: list[str], model_file: str | None, code: int, message: str, tmp_path: Path
) -> None:
    cache = with_bfcl_files(tmp_path / "cache")
    (cache / "assets.json").write_text("{}\n")
    if model_file is not None:
        (cache / QWEN_GGUF).write_text(model_file)
    done = assets(*(a.format(cache=cache) for a in args), cache=cache)
    assert_one_error_line(done.stderr, code, done.returncode, message)
    if code == 2:  # a usage error fails before anything is fetched or written
        assert not (cache / "bench-200.jsonl").exists()


def documented_exit_codes() -> dict[str, int]:
    """The class → exit code table drawn in ``weavehost/errors.py``'s docstring."""
    table = re.findall(r"^\s+(?:[│├└─ ]+)?(\w+Error)\s+(\d+)\b", errors.__doc__ or "", re.M)
    return {name: int(code) for name, code in table}


def test_the_error_tree_documents_the_exit_code_of_every_error_class_and_each_is_true() -> None:
    classes = {name: cls for name, cls in inspect.getmembers(errors, inspect.isclass)
               if issubclass(cls, errors.WeavehostError)}  # fmt: skip
    documented = documented_exit_codes()
    assert documented.keys() == classes.keys()
    assert {name: cls.exit_code for name, cls in classes.items()} == documented
    assert documented["ConfigError"] == documented["BenchError"] == 2
    assert documented["ModelLoadError"] == 3 and documented["AbortedError"] == 130


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "no such cost table"),
        ("{oops", "not JSON"),
        ('{"pass_ms": {"2": 10.0}, "prefill_ms_per_token": 1.0}', "one-row pass"),
    ],
    ids=["a missing file", "a file that is not JSON", "a table without a one-row pass"],
)
def test_bench_with_a_bad_cost_model_prints_one_error_line_and_exits_2_before_loading(
    content: str | None, message: str, inputs: dict[str, str], tmp_path: Path
) -> None:
    costs = tmp_path / "costs.json"
    if content is not None:
        costs.write_text(content)
    argv = ["bench", inputs["cases"], "--out", inputs["out"], "--cost-model", str(costs)]
    result = CliRunner().invoke(main, argv)
    assert not isinstance(result.exception, AssertionError), result.exception  # no model load
    assert_one_error_line(result.output, 2, result.exit_code, message)
    assert str(costs) in result.output
    assert not Path(inputs["out"]).exists()
