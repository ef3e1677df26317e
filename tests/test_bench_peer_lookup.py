"""The stock peer with llama-cpp-python's prompt-lookup drafts, ``llama_cpp_python_lookup``:
accepted by ``weavehost bench``, and counting its passes, drafts and kept drafts honestly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from weavehost.bench.cases import load_cases
from weavehost.bench.cli import bench
from weavehost.bench.peer import (
    LOOKUP_DRAFT_TOKENS,
    LOOKUP_PEER_NAME,
    PEER_NAME,
    PEER_NAMES,
    LlamaCppPythonPeer,
    _CountedCompletion,
)
from weavehost.bench.runner import DEFAULT_STRATEGIES, known_strategies, parse_strategies
from weavehost.decode import STRATEGIES
from weavehost.errors import BenchError
from weavehost.formats import FORMATS

DATA = Path(__file__).parent / "data"
SMOLLM2 = FORMATS["smollm2"]
CASES = 3


def test_the_lookup_peer_is_a_known_strategy_and_runs_by_default():
    assert PEER_NAMES == (PEER_NAME, LOOKUP_PEER_NAME) == ("llama_cpp_python", LOOKUP_PEER_NAME)
    assert LOOKUP_PEER_NAME == "llama_cpp_python_lookup"
    assert known_strategies() == [*STRATEGIES, *PEER_NAMES]
    whole_decoders = [name for name in STRATEGIES if ":" not in name]
    assert DEFAULT_STRATEGIES == (*whole_decoders, *PEER_NAMES)
    assert parse_strategies("llama_cpp_python_lookup") == (LOOKUP_PEER_NAME,)


def test_bench_accepts_the_lookup_peer_on_its_command_line(tmp_path):
    # An answer file that matches no case stops the run after the strategies were parsed and
    # before any model loads.
    answers = tmp_path / "a.jsonl"
    answers.write_text(json.dumps({"id": "other", "ground_truth": []}) + "\n")
    result = CliRunner().invoke(
        bench,
        [
            str(DATA / "bfcl_sample.jsonl"),
            "--answers",
            str(answers),
            "--strategies",
            "llama_cpp_python_lookup",
            "--out",
            str(tmp_path / "o"),
        ],
    )
    assert isinstance(result.exception, BenchError)
    assert "strateg" not in str(result.exception)
    assert "answer" in str(result.exception)


@pytest.fixture(scope="module")
def peer_runs(embedded_model_path: Path):
    """The first cases under the plain peer and the lookup peer, same settings."""
    cases = load_cases(DATA / "bfcl_sample.jsonl", limit=CASES)
    runs: dict[str, list] = {}
    for lookup in (False, True):
        with LlamaCppPythonPeer.open(
            embedded_model_path, n_ctx=2048, n_threads=2, lookup=lookup
        ) as peer:
            runs[peer.name] = [
                peer.run_case(SMOLLM2, case.messages, case.tools, max_tokens=96).result
                for case in cases
            ]
    return runs


@pytest.mark.model
@pytest.mark.parametrize("flash_attn", [False, True])
def test_the_peer_runs_the_attention_kernel_of_the_engine_it_is_compared_with(
    embedded_model_path: Path, flash_attn: bool
):
    with LlamaCppPythonPeer.open(
        embedded_model_path, n_ctx=512, n_threads=1, flash_attn=flash_attn
    ) as peer:
        assert peer.flash_attn is flash_attn


@pytest.mark.model
def test_a_peer_opened_beside_a_calibrated_engine_takes_its_kernel_and_batch(
    embedded_model_path: Path,
):
    from weavehost.engine import Engine

    with (
        Engine.open(embedded_model_path, n_ctx=512, n_threads=1, flash_attn=False) as engine,
        LlamaCppPythonPeer.beside(engine, n_ctx=512) as peer,
    ):
        assert peer.flash_attn is False
        assert peer.n_batch == engine.n_batch


@pytest.mark.model
def test_a_peer_opened_beside_an_engine_with_a_q8_0_kv_cache_takes_that_cache(
    embedded_model_path: Path,
):
    import llama_cpp

    from weavehost.engine import Engine

    with (
        Engine.open(embedded_model_path, n_ctx=512, n_threads=1, kv_cache="q8_0") as engine,
        LlamaCppPythonPeer.beside(engine, n_ctx=512) as peer,
    ):
        params = peer._llama.context_params
        assert params.type_k == params.type_v == llama_cpp.GGML_TYPE_Q8_0


@pytest.mark.model
def test_a_peer_opened_beside_an_engine_with_the_default_cache_has_its_q8_0_keys_and_f16_values(
    embedded_model_path: Path,
):
    import llama_cpp

    from weavehost.engine import Engine

    with (
        Engine.open(embedded_model_path, n_ctx=512, n_threads=1) as engine,
        LlamaCppPythonPeer.beside(engine, n_ctx=512) as peer,
    ):
        params = peer._llama.context_params
        assert (params.type_k, params.type_v) == (llama_cpp.GGML_TYPE_Q8_0, llama_cpp.GGML_TYPE_F16)


def test_kept_drafts_are_the_leading_drafts_equal_to_the_tokens_sampled_there():
    counted = _CountedCompletion(llama=None)
    # Pass 1: sampled 1, drafts 2 3 9 (2 and 3 kept); pass 2: sampled 4, draft 5 (kept); pass 3:
    # sampled 6, drafts 9 9 (none kept); the call is 1 2 3 4 5 6 7, 7 sampled after pass 3.
    counted.batches = [[1, 2, 3, 9], [4, 5], [6, 9, 9]]
    stats = counted.stats([1, 2, 3, 4, 5, 6, 7], elapsed=1.0, n_batch=512)
    assert (stats.passes, stats.decoded_tokens, stats.drafted_tokens) == (3, 9, 6)
    assert stats.accepted_tokens == 3
    assert stats.pass_rows == stats.width_counts == {4: 1, 2: 1, 3: 1}
    # A batch wider than n_batch is several llama_decode calls.
    assert counted.stats([1, 2, 3, 4, 5, 6, 7], elapsed=1.0, n_batch=2).passes == 5


def test_the_lookup_peer_writes_a_call_under_the_same_grammar(peer_runs):
    for plain, lookup in zip(peer_runs[PEER_NAME], peer_runs[LOOKUP_PEER_NAME], strict=True):
        assert lookup.strategy == LOOKUP_PEER_NAME
        assert lookup.error is None and len(lookup.calls) == 1
        assert lookup.text.startswith("<tool_call>[{") and lookup.text.endswith("}]</tool_call>")
        # Not always the plain peer's text: llama.cpp's logits for a row of a 4-row pass differ
        # from a 1-row pass by ~0.1, enough to flip a near tie (' ' vs ' [' on case 3).
        assert lookup.calls[0].name == plain.calls[0].name


def test_the_lookup_peer_counts_each_llama_decode_and_every_drafted_and_kept_token(peer_runs):
    drafted = accepted = 0
    for plain, lookup in zip(peer_runs[PEER_NAME], peer_runs[LOOKUP_PEER_NAME], strict=True):
        stats = lookup.stats
        assert stats.passes == stats.decode_passes == sum(stats.pass_rows.values()) >= 1
        assert max(stats.pass_rows) <= 1 + LOOKUP_DRAFT_TOKENS
        rows = sum(width * n for width, n in stats.pass_rows.items())
        assert stats.decoded_tokens == rows == stats.passes + stats.drafted_tokens
        assert stats.prefilled_tokens == 0
        assert 0 <= stats.accepted_tokens <= stats.drafted_tokens
        if lookup.text == plain.text:
            # The plain peer evaluates each token of the call in a pass of its own; the lookup
            # peer each either as the first row of a pass or as a kept draft.
            assert plain.stats.passes == stats.passes + stats.accepted_tokens
        drafted += stats.drafted_tokens
        accepted += stats.accepted_tokens
    print(f"lookup peer on {CASES} cases: {drafted} drafted, {accepted} kept")
    assert accepted > 0  # the name and keys are copied from the tools in the prompt


def test_bench_runs_the_lookup_peer_with_its_drafts_on_its_result_line(
    embedded_model_path: Path, tmp_path: Path
):
    out = tmp_path / "run"
    result = CliRunner().invoke(
        bench,
        [
            str(DATA / "bfcl_sample.jsonl"),
            "--answers",
            str(DATA / "bfcl_sample_answers.jsonl"),
            "--model",
            str(embedded_model_path),
            "--strategies",
            LOOKUP_PEER_NAME,
            "--limit",
            "1",
            "--threads",
            "1",
            "--ctx",
            "2048",
            "--max-tokens",
            "48",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    [line] = [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]
    assert line["strategy"] == LOOKUP_PEER_NAME and len(line["calls"]) == 1
    assert line["decoded_tokens"] == line["forward_passes"] + line["drafted_tokens"]
    assert 0 <= line["accepted_tokens"] <= line["drafted_tokens"]
