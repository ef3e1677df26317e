"""Which model server: one rule (``resolve_remote``) for the host, ``weavehost models`` and
``bench-agent``; a ``--model`` wins over the config, and its URL is read as the config's is."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.remote_fake_server import FakeOpenAI
from weavehost import Host
from weavehost.cli import main
from weavehost.config import HostConfig
from weavehost.config_model import RemoteModelConfig, resolve_remote
from weavehost.errors import ConfigError

REFUSED = "http://127.0.0.1:9/v1"  # the discard port: nothing answers there


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with FakeOpenAI() as server:
        yield server


def remote_config(tmp_path: Path, url: str = REFUSED, **settings: object) -> str:
    path = tmp_path / "host.json"
    model = {"url": url, "retries": 0, **settings}
    path.write_text(json.dumps({"weavehost": {"model": model}}))
    return str(path)


def test_a_local_model_flag_wins_over_a_remote_server_in_the_config() -> None:
    configured = RemoteModelConfig(url=REFUSED)
    assert resolve_remote("models/tiny.gguf", configured) is None
    host = Host(HostConfig(remote=configured), model="models/tiny.gguf")
    assert host.remote is None and host.model_path == "models/tiny.gguf"


def test_bench_agent_loads_a_local_model_flag_even_when_the_config_names_a_remote_server(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "missing.gguf"
    result = CliRunner().invoke(main, ["bench-agent", "--model", str(missing), "--config",
                                       remote_config(tmp_path), "--out", str(tmp_path / "out")])  # fmt: skip
    assert result.exit_code != 0
    assert "missing.gguf" in result.output and "127.0.0.1:9" not in result.output


def test_a_model_flag_url_has_its_environment_variables_expanded_and_keeps_the_configs_headers(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fake: FakeOpenAI
) -> None:
    port = fake.url.split(":")[2].split("/")[0]
    monkeypatch.setenv("LLM_PORT", port)
    monkeypatch.setenv("LLM_KEY", "s3cret")
    config = remote_config(tmp_path, headers={"Authorization": "Bearer ${LLM_KEY}"}, name="big")
    flag = "http://127.0.0.1:${LLM_PORT}/v1"
    result = CliRunner().invoke(main, ["models", "--config", config, "--model", flag])
    assert result.exit_code == 0, result.output
    assert f"url:          {fake.url}" in result.output and "name:         big" in result.output
    assert fake.requests[0][3]["authorization"] == "Bearer s3cret"
    assert Host(HostConfig(), model=flag).remote == RemoteModelConfig(url=fake.url)


def test_a_model_flag_url_naming_an_unset_variable_is_a_config_error_naming_the_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LLM_UNSET", raising=False)
    with pytest.raises(ConfigError, match=r"--model: environment variable 'LLM_UNSET' is not set"):
        resolve_remote("http://${LLM_UNSET}/v1", None)


def test_the_configs_server_is_used_when_no_model_flag_is_given(
    tmp_path: Path, fake: FakeOpenAI
) -> None:
    configured = RemoteModelConfig(url=fake.url, name="big")
    assert resolve_remote(None, configured) is configured
    result = CliRunner().invoke(main, ["models", "--config", remote_config(tmp_path, fake.url)])
    assert result.exit_code == 0, result.output
    assert f"url:          {fake.url}" in result.output
