"""The benchmark asset fetcher, without the network: subsets and idempotence."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from weavehost.bench import assets
from weavehost.bench.assets import BFCL_FILES, ensure_assets, ensure_bfcl, write_subset
from weavehost.errors import BenchError

DATA = Path(__file__).parent / "data"


def ids(path: Path) -> list[str]:
    return [json.loads(line)["id"] for line in path.read_text().splitlines() if line.strip()]


def test_a_subset_takes_the_first_cases_of_each_file_with_their_answers(tmp_path):
    cases, answers = DATA / "bfcl_sample.jsonl", DATA / "bfcl_sample_answers.jsonl"
    out_cases, out_answers = tmp_path / "s.jsonl", tmp_path / "a.jsonl"
    write_subset([(cases, answers), (cases, answers)], 2, out_cases, out_answers)
    expected = ["simple_python_0", "simple_python_1"] * 2
    assert ids(out_cases) == expected
    assert ids(out_answers) == expected


def test_a_subset_with_a_missing_answer_is_refused(tmp_path):
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"id": "simple_python_0", "ground_truth": []}) + "\n")
    with pytest.raises(BenchError, match="simple_python_1"):
        write_subset([(DATA / "bfcl_sample.jsonl", answers)], 2, tmp_path / "s", tmp_path / "a")


def test_bfcl_files_already_in_the_cache_are_not_downloaded_again(tmp_path, monkeypatch):
    def no_network(spec, dest):
        raise AssertionError(f"downloaded {spec}")

    monkeypatch.setattr(assets, "_pip_download", no_network)
    for name in BFCL_FILES:
        for path in (tmp_path / "bfcl" / name, tmp_path / "bfcl" / "possible_answer" / name):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("{}\n")
    cases, answers = ensure_bfcl(tmp_path)
    assert sorted(cases) == sorted(BFCL_FILES)
    assert all(p.is_file() for p in [*cases.values(), *answers.values()])


def test_weavehost_cache_moves_both_the_benchmark_assets_and_the_calibrations(
    tmp_path, monkeypatch
):
    from weavehost.decode.calibration import plan_path

    def no_network(spec, dest):
        raise AssertionError(f"downloaded {spec}")

    monkeypatch.setattr(assets, "_pip_download", no_network)
    cache = tmp_path / "moved"
    monkeypatch.setenv("WEAVEHOST_CACHE", str(cache))
    for name in BFCL_FILES:
        answers = cache / "bfcl" / "possible_answer" / name
        answers.parent.mkdir(parents=True, exist_ok=True)
        (cache / "bfcl" / name).write_text((DATA / "bfcl_sample.jsonl").read_text())
        answers.write_text((DATA / "bfcl_sample_answers.jsonl").read_text())

    assert assets.main(["--no-model"]) == 0  # no --cache: the default follows WEAVEHOST_CACHE
    assert (cache / "assets.json").is_file() and (cache / "bench-200.jsonl").is_file()
    assert ensure_assets(model=False).cache == cache
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    assert plan_path(model, 2).is_relative_to(cache / "calibration")


def test_xdg_cache_home_moves_the_cache_when_weavehost_cache_is_unset(tmp_path, monkeypatch):
    from weavehost.paths import cache_dir

    monkeypatch.delenv("WEAVEHOST_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "weavehost"
