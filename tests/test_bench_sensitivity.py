"""The sensitivity sweep (``python -m weavehost.bench.sensitivity``), the shipped cost tables
and ``--cost-model NAME``: arguments checked before any model loads, the GPU-like flat curve and
the plan made from it, and the sweep end to end on the embedded model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from weavehost.bench.assets import file_type_name
from weavehost.bench.cli import bench
from weavehost.bench.costs import COSTS_DIR, resolve_cost_model, shipped_cost_models
from weavehost.bench.machine import cpu_flags
from weavehost.bench.sensitivity import PROG, main, parse_threads
from weavehost.decode.padding import DecodePlan
from weavehost.engine.calibrate import load_cost_table
from weavehost.errors import BenchError, ConfigError
from weavehost.gguf import read_metadata

DATA = Path(__file__).parent / "data"
CASES = str(DATA / "bfcl_sample.jsonl")
ANSWERS = str(DATA / "bfcl_sample_answers.jsonl")
AVX2 = DATA / "costs" / "avx2-qwen2.5-coder-0.5b-q4_0-t2.json"
PHONE_COPY = DATA / "costs" / "phone-oneplus12r-qwen3-1.7b-q8_0.json"


# ----------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        (["--threads", "1,0"], 2, "--threads takes whole numbers >= 1"),
        (["--threads", "two"], 2, "--threads takes whole numbers >= 1"),
        (["--quants", "q5_k"], 2, "unknown quantization 'q5_k'"),
        (["--strategies", "weave,bogus"], 2, "unknown strategy 'bogus'"),
        (["--cost-models", "gpu-flatt"], 2, "gpu-flatt: no such cost table"),
        (["--models", "/nonexistent/model.gguf"], 2, "/nonexistent/model.gguf is not a file"),
        (["--models", CASES], 3, "not a readable GGUF file"),
    ],
    ids=[
        "a zero thread count",
        "a thread count that is not a number",
        "an unknown quantization",
        "an unknown strategy",
        "an unknown cost table",
        "a model file that is not there",
        "a model file that is not GGUF",
    ],
)
def test_a_bad_argument_is_one_error_line_before_any_model_loads_and_nothing_is_written(
    extra: list[str], code: int, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    # Without the model mark, loading a model here fails the test (tests/conftest.py).
    assert main([CASES, "--out", str(out), *extra]) == code
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("Error: ")]
    assert len(errors) == 1 and message in errors[0], err
    assert "Traceback" not in err
    assert not out.exists()


def test_a_missing_case_file_fails_before_anything_runs(tmp_path: Path, capsys) -> None:
    assert main([str(tmp_path / "none.jsonl"), "--out", str(tmp_path / "out")]) == 2
    assert "none.jsonl" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_answer_file_for_other_cases_fails_before_anything_runs(tmp_path: Path, capsys) -> None:
    answers = tmp_path / "answers.jsonl"
    answers.write_text(json.dumps({"id": "other_0", "ground_truth": []}) + "\n")
    argv = [CASES, "--answers", str(answers), "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    assert "has no answer for any of the cases" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_thread_counts_are_whole_numbers_each_kept_once_in_order() -> None:
    assert parse_threads("2, 1,2") == (2, 1)
    with pytest.raises(BenchError, match="at least one"):
        parse_threads(" , ")


def test_a_quantization_not_made_yet_is_an_error_entry_and_the_command_names_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The tests' cache (WEAVEHOST_CACHE, tests/conftest.py) holds no Q8_0 file.
    out = tmp_path / "out"
    argv = [CASES, "--answers", ANSWERS, "--out", str(out), "--quants", "q8_0"]
    assert main([*argv, "--threads", "1", "--cost-models", "none", "--limit", "1"]) == 2
    err = capsys.readouterr().err
    assert "Error: 1 of 1 configurations failed (q8_0-t1)" in err
    record = json.loads((out / "sensitivity.json").read_text())
    (entry,) = record["configurations"]
    assert entry["name"] == "q8_0-t1" and entry["status"] == "error"
    assert "python -m weavehost.bench.assets --quants q4_0,q8_0" in entry["error"]
    assert entry["quant"] == "Q8_0" and entry["strategies"] is None
    assert record["cpu_flags"] == cpu_flags()
    assert record["command"].startswith(PROG) and "--quants q8_0" in record["command"]
    markdown = (out / "sensitivity.md").read_text()
    assert "**Error:** BenchError:" in markdown and "q8_0-t1" in markdown


# ----------------------------------------------------------------------------- cost tables


def test_every_shipped_table_loads_and_names_its_source() -> None:
    shipped = shipped_cost_models()
    assert {"gpu-flat", "phone-oneplus12r", "phone-pixel7"} <= set(shipped)
    for name, path in shipped.items():
        table = load_cost_table(path)
        record = json.loads(path.read_text())
        assert record["source"] and table.machine == record["machine"], name
    assert "SchemaWeaver paper" in shipped["phone-oneplus12r"].read_text()


def test_the_shipped_phone_table_prices_passes_as_the_paper_s_copy_does() -> None:
    shipped = load_cost_table(resolve_cost_model("phone-oneplus12r"))
    paper = load_cost_table(PHONE_COPY)
    assert shipped.pass_s == paper.pass_s and shipped.prefill_token_s == paper.prefill_token_s


def test_a_cost_model_is_a_file_first_then_a_shipped_name(tmp_path, monkeypatch) -> None:
    assert resolve_cost_model("gpu-flat") == COSTS_DIR / "gpu-flat.json"
    assert resolve_cost_model(AVX2) == AVX2
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpu-flat").write_text("{}")
    assert resolve_cost_model("gpu-flat") == Path("gpu-flat")  # the user's own file shadows
    with pytest.raises(ConfigError, match="no such cost table.*gpu-flat, phone-oneplus12r"):
        resolve_cost_model("phone-oneplus")


def test_the_gpu_like_table_is_flat_from_1_to_64_rows_and_says_it_is_synthetic() -> None:
    table = load_cost_table(resolve_cost_model("gpu-flat"))
    assert all(table.pass_cost(rows) == pytest.approx(0.004) for rows in range(1, 65))
    assert table.pass_cost(65) > table.pass_cost(64)  # the fill rule beyond the widest row
    assert "synthetic" in table.machine and "not a measured machine" in table.machine


def test_a_plan_made_from_the_flat_table_decodes_values_side_by_side_and_drafts() -> None:
    flat = DecodePlan.from_table(load_cost_table(resolve_cost_model("gpu-flat")))
    avx2 = DecodePlan.from_table(load_cost_table(AVX2))  # a second row costs nearly a first
    # Two values side by side yield two tokens a pass, as one sequence drafted at the default
    # acceptance does, and pay a write-back on top; three and more pay.
    assert not flat.parallel_pays(2)
    assert all(flat.parallel_pays(n) for n in range(3, 17))
    assert not any(avx2.parallel_pays(n) for n in range(2, 9))
    assert all(flat.width_for(n) == n for n in range(1, 65))  # nothing to gain by padding
    assert flat.draft_rows(1) > avx2.draft_rows(1) == 0


def test_bench_names_the_shipped_tables_and_refuses_an_unknown_one_before_loading(tmp_path):
    out = tmp_path / "o"
    result = CliRunner().invoke(bench, [CASES, "--cost-model", "gpu-flatt", "--out", str(out)])
    assert isinstance(result.exception, ConfigError)
    assert "gpu-flat, phone-oneplus12r, phone-pixel7" in str(result.exception)
    assert not out.exists()
    assert "gpu-flat" in CliRunner().invoke(bench, ["--help"]).output


# ----------------------------------------------------------------------------- end to end


@pytest.mark.model
def test_bench_projects_with_a_shipped_table_given_by_name(embedded_model_path, tmp_path):
    out = tmp_path / "o"
    argv = [CASES, "--answers", ANSWERS, "--model", str(embedded_model_path), "--limit", "1"]
    argv += ["--strategies", "weave", "--threads", "1", "--ctx", "2048", "--max-tokens", "48"]
    result = CliRunner().invoke(bench, [*argv, "--cost-model", "gpu-flat", "--out", str(out)])
    assert result.exit_code == 0, result.output
    run = json.loads((out / "run.json").read_text())
    assert run["cost_model"]["file"] == str(COSTS_DIR / "gpu-flat.json")
    projection = json.loads((out / "summary.json").read_text())["weave"]["projection"]
    assert projection["machine"].startswith("GPU-like flat curve (synthetic")
    assert projection["geo_latency_s"] > 0


@pytest.fixture(scope="module")
def sweep(embedded_model_path: Path, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("sensitivity")
    argv = [CASES, "--answers", ANSWERS, "--out", str(out), "--limit", "2"]
    argv += ["--models", str(embedded_model_path), "--quants", "q8_0", "--threads", "1,2"]
    argv += ["--strategies", "constrained,weave", "--ctx", "2048", "--max-tokens", "48"]
    argv += ["--cost-models", f"gpu-flat,{PHONE_COPY}"]
    code = main(argv)
    quant = file_type_name(read_metadata(embedded_model_path).get("general.file_type"))
    return code, out, quant.lower()


@pytest.mark.model
def test_the_sweep_runs_every_configuration_in_order_and_a_missing_one_does_not_stop_it(sweep):
    code, out, quant = sweep
    assert code == 2  # the Q8_0 file is not in the tests' cache
    record = json.loads((out / "sensitivity.json").read_text())
    names = [entry["name"] for entry in record["configurations"]]
    assert names == [
        f"{quant}-t1",
        f"{quant}-t2",
        "q8_0-t1",
        "q8_0-t2",
        "proj-gpu-flat",
        "proj-phone-oneplus12r-qwen3-1.7b-q8_0",
    ]
    status = {entry["name"]: entry["status"] for entry in record["configurations"]}
    assert [s for n, s in status.items() if n.startswith("q8_0")] == ["error", "error"]
    assert all(s == "done" for n, s in status.items() if not n.startswith("q8_0"))
    assert record["finished"] is not None


@pytest.mark.model
def test_every_configuration_records_its_cpu_flags_model_threads_and_command(sweep):
    _, out, quant = sweep
    record = json.loads((out / "sensitivity.json").read_text())
    assert record["cpu_flags"] == cpu_flags()
    for entry in record["configurations"]:
        if entry["status"] != "done":
            continue
        assert entry["cpu_flags"] == cpu_flags()
        assert entry["quant"].lower() == quant and Path(entry["model"]).is_file()
        assert entry["command"].startswith("weavehost bench ")
        assert f"--threads {entry['threads']}" in entry["command"]
        assert list(entry["strategies"]) == ["constrained", "weave"]
        for numbers in entry["strategies"].values():
            assert numbers["n"] == 2 and numbers["geo_tool_latency_s"] > 0
            assert numbers["correct_rate"] is not None
        lines = (Path(entry["out"]) / "results.jsonl").read_text().splitlines()
        assert len(lines) == 2 * 2
    threads = {e["name"]: e["threads"] for e in record["configurations"]}
    assert threads["proj-gpu-flat"] == 2  # projections: the first model at the most threads


@pytest.mark.model
def test_projections_are_labelled_as_projections_on_their_machine_and_measurements_are_not(
    sweep,
):
    _, out, _ = sweep
    record = json.loads((out / "sensitivity.json").read_text())
    markdown = (out / "sensitivity.md").read_text()
    for entry in record["configurations"]:
        projection = entry["projection"]
        if entry["kind"] == "measured":
            assert projection is None and entry["label"] == "measured on this machine"
            continue
        assert entry["status"] == "done"
        label = f"projection on {entry['machine']}, not a measurement"
        assert entry["label"] == projection["label"] == label
        assert f"## {entry['name']}: {label}" in markdown
        assert entry["weave_plan"].startswith("made from the cost table")
        for numbers in projection["strategies"].values():
            assert numbers["geo_latency_s"] > 0
        assert projection["strategies"]["constrained"]["speedup_vs_constrained"] == 1.0
    flat = next(e for e in record["configurations"] if e["name"] == "proj-gpu-flat")
    assert "synthetic" in flat["machine"]
    assert markdown.count("not a measurement") >= 2 * 2
