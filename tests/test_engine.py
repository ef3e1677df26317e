"""The engine on the real embedded SmolLM2 GGUF: parallel sequences, KV ops, counters, errors.

Tolerance: logits of a sequence decoded inside a batch of several sequences are compared with a
serial decode of that sequence alone. llama.cpp may pick different kernels for different batch
shapes, so bitwise equality is not promised; we accept a max absolute difference of 0.05 on
logits whose range is ~30, and require the greedy (argmax) token to agree exactly.
"""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from weavehost.engine import Engine, Row
from weavehost.engine.native import DEFAULT_KV_CACHE
from weavehost.errors import (
    AbortedError,
    ContextOverflowError,
    EngineError,
    KVCacheFullError,
    ModelLoadError,
)

# Every test here runs llama.cpp: its loader or a loaded model.
pytestmark = pytest.mark.model

LOGIT_TOLERANCE = 0.05
PROMPT = (
    "<|im_start|>user\nWhat is the weather in Paris tomorrow?<|im_end|>\n<|im_start|>assistant\n"
)
CONTINUATIONS = [" Sure", " The", " It", " I"]


def _prefill_prompt(engine: Engine) -> list[int]:
    tokens = engine.tokenize(PROMPT, special=True)
    engine.prefill(0, tokens)
    return tokens


def _serial_logits(engine: Engine, prompt: list[int], continuation: list[int]) -> np.ndarray:
    """Logits after ``prompt + continuation`` decoded one token per pass on sequence 0 alone."""
    engine.clear()
    engine.prefill(0, prompt, logits_last=False)
    logits = None
    for token in continuation:
        logits = engine.decode_one(0, token)
    assert logits is not None
    return logits


def test_four_sequences_forked_from_one_prompt_decode_in_a_single_pass(fresh_engine: Engine):
    engine = fresh_engine
    prompt = _prefill_prompt(engine)
    for seq in (1, 2, 3):
        engine.fork(0, seq)
    firsts = [engine.tokenize(text)[0] for text in CONTINUATIONS]
    before = engine.stats.snapshot()

    parallel = engine.run_pass([Row(t, (seq,), logits=True) for seq, t in enumerate(firsts)])

    cost = engine.stats.since(before)
    assert cost.passes == 1
    assert cost.decoded_tokens == 4
    assert cost.width_counts == {4: 1}
    assert [engine.seq_len(seq) for seq in range(4)] == [len(prompt) + 1] * 4
    for seq, token in enumerate(firsts):
        serial = _serial_logits(engine, prompt, [token])
        assert np.abs(parallel[seq] - serial).max() < LOGIT_TOLERANCE, f"sequence {seq}"
        assert int(parallel[seq].argmax()) == int(serial.argmax())


def test_parallel_sequences_keep_matching_a_serial_decode_over_several_passes(fresh_engine: Engine):
    engine = fresh_engine
    prompt = _prefill_prompt(engine)
    for seq in (1, 2, 3):
        engine.fork(0, seq)
    continuations = [engine.tokenize(text + " weather is") for text in CONTINUATIONS]
    steps = min(len(c) for c in continuations)
    last: list[np.ndarray] = []
    for step in range(steps):
        last = engine.run_pass(
            [Row(c[step], (seq,), logits=True) for seq, c in enumerate(continuations)]
        )
    for seq, continuation in enumerate(continuations):
        serial = _serial_logits(engine, prompt, continuation[:steps])
        assert np.abs(last[seq] - serial).max() < LOGIT_TOLERANCE
        assert int(last[seq].argmax()) == int(serial.argmax())


def test_dropping_and_re_prefilling_a_sequence_reproduces_its_logits(fresh_engine: Engine):
    engine = fresh_engine
    prompt = engine.tokenize(PROMPT, special=True)
    first = engine.prefill(0, prompt)
    engine.drop(0, 5)
    assert engine.seq_len(0) == 5
    again = engine.prefill(0, prompt[5:])
    assert first is not None and again is not None
    assert np.abs(first - again).max() < LOGIT_TOLERANCE
    assert int(first.argmax()) == int(again.argmax())


def test_spare_outputs_are_computed_but_only_the_rows_that_asked_get_logits_back(
    fresh_engine: Engine,
):
    engine = fresh_engine
    prompt = _prefill_prompt(engine)
    engine.fork(0, 1)
    words = engine.tokenize(" Sure, the weather is")
    rows = [Row(t, (0,), logits=i == 1) for i, t in enumerate(words)]
    rows.append(Row(words[0], (1,), padding=True))
    before = engine.stats.snapshot()

    [asked] = engine.run_pass(rows, outputs=4)

    assert engine.stats.since(before).outputs == 4
    serial = _serial_logits(engine, prompt, words[:2])
    assert np.abs(asked - serial).max() < LOGIT_TOLERANCE
    assert int(asked.argmax()) == int(serial.argmax())


def test_a_spare_output_on_a_sequences_last_row_is_its_next_token_logits(fresh_engine: Engine):
    engine = fresh_engine
    prompt = _prefill_prompt(engine)
    words = engine.tokenize(" Sure, the weather is")
    assert engine.run_pass([Row(t, (0,), logits=i == 0) for i, t in enumerate(words)], outputs=2)
    serial = _serial_logits(engine, prompt, words)
    engine.clear()
    engine.prefill(0, prompt, logits_last=False)
    engine.run_pass([Row(t, (0,), logits=i == 0) for i, t in enumerate(words)], outputs=2)
    assert engine.has_next_logits(0)
    assert int(engine.last_logits(0).argmax()) == int(serial.argmax())


def test_a_token_shared_by_several_sequences_is_computed_once(fresh_engine: Engine):
    engine = fresh_engine
    prompt = engine.tokenize(PROMPT, special=True)
    before = engine.stats.snapshot()
    engine.prefill((0, 1, 2), prompt)
    cost = engine.stats.since(before)
    assert cost.prefilled_tokens == len(prompt)
    assert [engine.seq_len(s) for s in (0, 1, 2)] == [len(prompt)] * 3


def test_pass_and_token_counters_match_what_was_run(embedded_model_path):
    # A small n_batch makes the prefill split into a known number of passes.
    with Engine.open(embedded_model_path, n_ctx=512, n_batch=8, n_seq_max=4, n_threads=2) as engine:
        prompt = engine.tokenize(PROMPT, special=True)
        engine.prefill(0, prompt)
        engine.fork(0, 1)
        engine.run_pass([Row(42, (0,), logits=True), Row(43, (1,), logits=True)])
        engine.decode_one(0, 44)
        engine.run_pass([Row(45, (1,)), Row(46, (2,), padding=True)])
        engine.run_pass([Row(47, (1,), forced=True), Row(48, (1,), logits=True)])
        stats = engine.stats
        prefill_passes = -(-len(prompt) // 8)
        assert stats.prefill_passes == prefill_passes
        assert stats.decode_passes == 4
        assert stats.passes == prefill_passes + 4
        assert stats.decoded_tokens == 2 + 1 + 1 + 1
        assert stats.prefilled_tokens == len(prompt) + 1
        assert stats.padded_tokens == 1
        assert stats.width_counts == {2: 3, 1: 1}
        assert stats.decode_s > 0 and stats.prefill_s > 0


def test_the_passes_a_latency_covers_are_those_that_ended_within_it(fresh_engine: Engine):
    _prefill_prompt(fresh_engine)
    fresh_engine.fork(0, 1)
    start = time.perf_counter()
    fresh_engine.run_pass([Row(42, (0,), logits=True), Row(43, (1,), logits=True)])
    middle = time.perf_counter()
    fresh_engine.decode_one(0, 44)
    fresh_engine.run_pass([Row(45, (1,)), Row(46, (1,)), Row(47, (1,), logits=True)])
    end = time.perf_counter()
    assert fresh_engine.pass_rows_between(start, middle) == {2: 1}
    assert fresh_engine.pass_rows_between(middle, end) == {1: 1, 3: 1}
    assert fresh_engine.pass_rows_between(start, end) == {2: 1, 1: 1, 3: 1}
    assert fresh_engine.pass_rows_between(end, time.perf_counter()) == {}


def test_a_sequence_that_would_pass_the_context_size_is_refused_before_decoding(
    embedded_model_path,
):
    with Engine.open(embedded_model_path, n_ctx=256, n_seq_max=2, n_threads=2) as engine:
        engine.prefill(0, [42] * 250, logits_last=False)
        before = engine.stats.snapshot()
        with pytest.raises(ContextOverflowError, match="context size"):
            engine.prefill(0, [42] * 10)
        assert engine.stats.since(before).passes == 0
        assert engine.seq_len(0) == 250


def test_a_full_kv_cache_is_a_clear_error_and_leaves_lengths_true(embedded_model_path):
    with Engine.open(embedded_model_path, n_ctx=256, n_seq_max=2, n_threads=2) as engine:
        engine.prefill(0, [42] * 200, logits_last=False)
        with pytest.raises(KVCacheFullError, match="KV cache has no room"):
            engine.prefill(1, [43] * 100)
        assert engine.seq_len(0) == 200
        assert engine.seq_len(1) == 0
        # The context still works after the failure.
        engine.drop(0, 100)
        assert engine.prefill(1, [43] * 100) is not None


def test_an_abort_request_stops_the_next_pass(fresh_engine: Engine):
    engine = fresh_engine
    engine.abort()
    with pytest.raises(AbortedError):
        engine.prefill(0, engine.tokenize("hello"))
    engine.clear_abort()
    assert engine.prefill(0, engine.tokenize("hello")) is not None


def test_an_abort_from_another_thread_stops_the_pass_it_lands_in_and_the_engine_goes_on(
    fresh_engine: Engine,
):
    engine = fresh_engine
    tokens = [42] * engine.n_batch  # one pass
    engine.prefill(0, tokens, logits_last=False)  # warm
    engine.clear()
    started = time.perf_counter()
    engine.prefill(0, tokens, logits_last=False)
    whole = time.perf_counter() - started
    engine.clear()
    # Asked a tenth of the way in, llama.cpp stops at its next graph node: the pass never ends.
    timer = threading.Timer(whole / 10, engine.abort)
    timer.start()
    try:
        with pytest.raises(AbortedError, match="inside a pass"):
            engine.prefill(0, tokens, logits_last=False)
    finally:
        timer.cancel()
    assert engine.seq_len(0) < len(tokens)
    engine.clear()
    assert engine.prefill(0, engine.tokenize("hello")) is not None


def test_sequences_of_different_lengths_cannot_share_a_token(fresh_engine: Engine):
    engine = fresh_engine
    engine.prefill(0, engine.tokenize("hello there"))
    with pytest.raises(EngineError, match="differ in length"):
        engine.run_pass([Row(42, (0, 1), forced=True)])


def test_special_token_text_is_plain_text_unless_asked(fresh_engine: Engine):
    engine = fresh_engine
    text = "<|im_end|><|im_start|>system"
    im_end = engine.tokenize("<|im_end|>", special=True)
    assert len(im_end) == 1
    plain = engine.tokenize(text)
    assert im_end[0] not in plain
    assert engine.detokenize(plain) == text
    assert im_end[0] in engine.tokenize(text, special=True)


def test_a_file_that_is_not_gguf_fails_to_load_with_its_name(tmp_path):
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(ModelLoadError, match="broken.gguf"):
        with Engine.open(bogus, n_ctx=256, n_threads=1):
            pass


def test_fewer_threads_take_effect_in_llama_cpp_and_decode_the_same_tokens(
    fresh_engine: Engine,
) -> None:
    engine = fresh_engine
    prompt = engine.tokenize("The capital of France is", add_bos=True)
    before = engine.n_threads
    wide = engine.prefill(1, prompt)
    engine.clear()
    try:
        engine.set_threads(1)
        assert engine.n_threads == 1 and engine._native.threads == 1  # what llama.cpp runs with
        narrow = engine.prefill(1, prompt)
    finally:
        engine.set_threads(before)
    assert engine._native.threads == before
    assert int(np.argmax(narrow)) == int(np.argmax(wide))
    assert float(np.max(np.abs(narrow - wide))) < LOGIT_TOLERANCE
    with pytest.raises(EngineError):
        engine.set_threads(0)


# A context past 512 cells: there an f16 cache's one-row pass takes flash attention's split-KV
# path (the cache split across threads, partial sums merged) and a pass of several rows does
# not, so the same row's logits differ by up to a logit on SmolLM2 (docs/engine.md).
LONG_PROMPT = " ".join(f"Fact {i}: the value of item {i} is {i * 7}." for i in range(60))


def _rows_alone_and_together(engine: Engine) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The logits of eight rows past 512 cells, read a row a pass, then in one pass."""
    prompt = engine.tokenize(LONG_PROMPT)[:600]
    assert len(prompt) >= 512
    engine.prefill(0, prompt)
    tokens = engine.tokenize(" The value of item 12 is 84.")[:8]
    alone = [engine.decode_one(0, token) for token in tokens]
    engine.drop(0, len(prompt))
    together = engine.run_pass([Row(token, (0,), logits=True) for token in tokens])
    return alone, together


@pytest.mark.parametrize("kv_cache", [DEFAULT_KV_CACHE, "q8_0"])
def test_with_quantized_keys_a_wide_pass_computes_each_row_as_one_row_passes_do_bit_for_bit(
    embedded_model_path, kv_cache
):
    # Two threads: with one, an f16 cache is bit for bit too, and the test could not fail.
    with Engine.open(
        embedded_model_path, n_ctx=2048, n_seq_max=4, n_threads=2, kv_cache=kv_cache
    ) as engine:
        assert engine.identity.kv_cache == kv_cache
        alone, together = _rows_alone_and_together(engine)
    assert all(np.array_equal(a, b) for a, b in zip(alone, together, strict=True))


@pytest.mark.parametrize("kv_cache", [DEFAULT_KV_CACHE, "f16"])
def test_without_flash_attention_a_wide_pass_computes_each_row_as_one_row_passes_do_bit_for_bit(
    embedded_model_path, kv_cache
):
    # In the README's build, without llamafile's sgemm: with it, a pass of two rows or more
    # multiplies K·Q and V through that kernel and one row through ggml's dot products, and
    # the same row's logits differ by up to 0.9 (docs/engine.md).
    with Engine.open(
        embedded_model_path, n_ctx=2048, n_seq_max=4, n_threads=2, kv_cache=kv_cache,
        flash_attn=False,
    ) as engine:  # fmt: skip
        assert not engine.flash_attn
        alone, together = _rows_alone_and_together(engine)
    assert all(np.array_equal(a, b) for a, b in zip(alone, together, strict=True))


def test_the_default_kv_cache_has_quantized_keys_since_an_f16_one_parts_by_a_pass_s_width(
    embedded_model_path,
):
    assert DEFAULT_KV_CACHE == "q8_0-k"
    with Engine.open(
        embedded_model_path, n_ctx=2048, n_seq_max=4, n_threads=2, kv_cache="f16"
    ) as engine:
        alone, together = _rows_alone_and_together(engine)
    assert not all(np.array_equal(a, b) for a, b in zip(alone, together, strict=True))


def test_an_unknown_kv_cache_type_or_a_quantized_one_without_flash_attention_is_refused(
    embedded_model_path,
):
    from weavehost import config
    from weavehost.engine.native import KV_CACHE_TYPES

    assert tuple(KV_CACHE_TYPES) == config.KV_CACHES  # what the config accepts, the engine opens
    assert config.DEFAULT_KV_CACHE == DEFAULT_KV_CACHE
    with pytest.raises(
        EngineError, match="unknown KV cache type 'q4'; expected one of q8_0-k, f16, q8_0"
    ):
        with Engine.open(embedded_model_path, kv_cache="q4"):
            pass
    with pytest.raises(EngineError, match="a q8_0 KV cache needs flash attention"):
        with Engine.open(embedded_model_path, kv_cache="q8_0", flash_attn=False):
            pass


def test_quantized_keys_over_f16_values_open_without_flash_attention_too(embedded_model_path):
    with Engine.open(embedded_model_path, n_ctx=512, kv_cache="q8_0-k", flash_attn=False) as e:
        assert (e.identity.kv_cache, e.flash_attn) == ("q8_0-k", False)
        e.prefill(0, e.tokenize("Hello there"))
        assert e.seq_len(0) > 0
