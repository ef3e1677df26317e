"""The persistent prompt-prefix cache on the real embedded SmolLM2: hit, miss, off, corruption,
eviction and keys.

What "exactly" means here: a miss prefills the stable prefix and then the rest of the prompt,
and a hit restores the prefix and prefills the same rest in the same pass, so their next-token
logits are compared bitwise. A run without the cache prefills the whole prompt in one pass of
another shape, whose kernels round differently (measured here: logits up to 0.62 apart on a
range of ~30, as any prompt longer than n_batch is split anyway): its greedy tokens must agree.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import pytest

from weavehost import Host
from weavehost.agent.model import EngineModel, SyncReport
from weavehost.agent.prompt_cache import PromptCache, stable_prefix
from weavehost.config import HostConfig, PromptCacheConfig, parse_config
from weavehost.decode import ToolSchema, get_strategy
from weavehost.engine import Engine
from weavehost.formats import detect_format
from weavehost.gguf import read_metadata

# Every test but the config's runs the model: those through the embedded_model_path fixture
# are marked by it, the host's by hand.

ROOT = Path(__file__).resolve().parents[1]
WEATHER = str(ROOT / "tools" / "weather.py")
QUESTION = "What is the weather in Paris?"
N_CTX = 2048
GREEDY_TOKENS = 8
BOUND_S = 120  # one weavehost run step on a busy 2-core machine
TOOLS = [
    ToolSchema(
        "get_current_weather",
        "Get the current weather in a city.",
        {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. 'Berlin'."},
                "units": {"type": "string", "enum": ["metric", "imperial"]},
            },
            "required": ["city"],
        },
    )
]
CONVERSATION = [{"role": "user", "content": QUESTION}]


def open_engine(
    path: Path, n_ctx: int = N_CTX, flash_attn: bool = True, kv_cache: str = "f16"
) -> Any:
    # One thread: short passes stay fast when other work shares the two CPUs.
    return Engine.open(path, n_ctx=n_ctx, n_threads=1, flash_attn=flash_attn, kv_cache=kv_cache)


@pytest.fixture(scope="module")
def first(embedded_model_path: Path) -> Iterator[Engine]:
    with open_engine(embedded_model_path) as engine:
        yield engine


@pytest.fixture(scope="module")
def second(embedded_model_path: Path) -> Iterator[Engine]:
    """Another engine on the same file, as a new process would have: nothing resident."""
    with open_engine(embedded_model_path) as engine:
        yield engine


@pytest.fixture
def cache(tmp_path: Path) -> PromptCache:
    return PromptCache(tmp_path / "prompts")


def model_on(engine: Engine, cache: PromptCache | None) -> EngineModel:
    engine.clear()
    metadata = read_metadata(engine.path, full_arrays=("tokenizer.ggml.tokens",))
    fmt = detect_format(metadata).format
    return EngineModel(
        engine,
        fmt,
        get_strategy("weave"),
        chat_template=metadata.chat_template,
        prompt_cache=cache,
    )


def sync_and_decode(model: EngineModel) -> tuple[SyncReport, np.ndarray, list[int]]:
    """Sync the conversation, then greedy tokens straight from the engine."""
    report = model.sync(CONVERSATION, TOOLS)
    engine = model.engine
    logits = engine.last_logits(0)
    first_logits, tokens = logits, []
    for _ in range(GREEDY_TOKENS):
        token = int(logits.argmax())
        tokens.append(token)
        logits = engine.decode_one(0, token)
    engine.drop(0, report.total)
    return report, first_logits, tokens


def prefix_of(model: EngineModel) -> tuple[list[int], int]:
    """The conversation's tokens and how many of them are its stable prefix."""
    tokens = model.render(CONVERSATION, TOOLS)
    return tokens, stable_prefix(CONVERSATION, tokens, lambda view: model.render(view, TOOLS))


def the_only_file(cache: PromptCache) -> Path:
    files = list(cache.directory.glob("*.kv"))
    assert len(files) == 1
    return files[0]


# --------------------------------------------------------------------------- hit, miss, off


def test_a_new_engine_restores_the_prefix_prefills_only_the_rest_and_decodes_exactly_what_a_cold_run_decodes(
    first: Engine, second: Engine, cache: PromptCache
) -> None:
    cold, cold_logits, cold_tokens = sync_and_decode(model_on(first, None))
    missed, miss_logits, miss_tokens = sync_and_decode(model_on(first, cache))
    hit, hit_logits, hit_tokens = sync_and_decode(model_on(second, cache))

    assert cold.prompt_cache == "off" and cold.reused == 0
    assert missed.prompt_cache == "miss" and missed.reused == 0
    assert missed.prefilled == missed.total
    assert hit.prompt_cache == "hit" and hit.total == cold.total
    # The prefix is the system prompt and the tool; only the question's turn is prefilled.
    assert 0 < hit.prefilled < hit.total / 4
    assert hit.reused + hit.prefilled == hit.total
    assert np.array_equal(hit_logits, miss_logits)  # the same passes after the same prefix
    assert hit_tokens == miss_tokens == cold_tokens
    assert int(hit_logits.argmax()) == int(cold_logits.argmax())


def test_the_restored_prefix_is_exactly_the_tokens_before_the_first_user_message(
    second: Engine, cache: PromptCache
) -> None:
    model = model_on(second, cache)
    tokens, stable = prefix_of(model)
    question = second.tokenize(QUESTION)
    assert tokens[stable : stable + len(question)] == question
    report = model.sync(CONVERSATION, TOOLS)
    assert report.prompt_cache == "miss"
    saved = json.loads(the_only_file(cache).read_bytes().split(b"\n")[1])
    assert saved["tokens"] == tokens[:stable]


def test_a_resident_conversation_is_not_looked_up_again(first: Engine, cache: PromptCache) -> None:
    model = model_on(first, cache)
    assert model.sync(CONVERSATION, TOOLS).prompt_cache == "miss"
    longer = [*CONVERSATION, {"role": "assistant", "content": "Let me check."}]
    again = model.sync(longer, TOOLS)
    assert again.prompt_cache == "off"  # resident: the KV cache already holds the prefix
    assert again.reused > 0 and again.prefilled < again.total


def test_another_question_with_the_same_tools_hits_the_same_prefix(
    first: Engine, second: Engine, cache: PromptCache
) -> None:
    model_on(first, cache).sync(CONVERSATION, TOOLS)
    other = [{"role": "user", "content": "Is it raining in Oslo today?"}]
    report = model_on(second, cache).sync(other, TOOLS)
    assert report.prompt_cache == "hit"
    assert len(list(cache.directory.glob("*.kv"))) == 1


# --------------------------------------------------------------------------- never trusted


def truncate(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def flip_a_state_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-1000] ^= 0xFF  # inside the K/V rows: llama.cpp itself would load it unnoticed
    path.write_bytes(bytes(data))


def flip_a_header_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[20] ^= 0x01
    path.write_bytes(bytes(data))


def other_tokens(path: Path) -> None:
    """A whole, self-consistent file (its checksum matches) of other tokens at this key."""
    magic, header, state = path.read_bytes().split(b"\n", 2)
    meta = json.loads(header)
    meta["tokens"][-1] = (meta["tokens"][-1] + 1) % 1000
    path.write_bytes(magic + b"\n" + json.dumps(meta).encode() + b"\n" + state)


def another_build(path: Path) -> None:
    """A whole file saved by another build of this llama-cpp-python version (its llama.cpp
    compiled with llamafile's sgemm, whose wide passes sum in another order)."""
    magic, header, state = path.read_bytes().split(b"\n", 2)
    meta = json.loads(header)
    meta["identity"]["build"] += " LLAMAFILE = 1 |"
    path.write_bytes(magic + b"\n" + json.dumps(meta).encode() + b"\n" + state)


def unrecorded_build(path: Path) -> None:
    """A whole file saved before the build was recorded: which build saved it is unknown."""
    magic, header, state = path.read_bytes().split(b"\n", 2)
    meta = json.loads(header)
    del meta["identity"]["build"]
    path.write_bytes(magic + b"\n" + json.dumps(meta).encode() + b"\n" + state)


def empty(path: Path) -> None:
    path.write_bytes(b"")


def deeply_nested_header(path: Path) -> None:
    """A header json.loads cannot walk without running out of stack."""
    magic = path.read_bytes().split(b"\n", 1)[0]
    path.write_bytes(magic + b"\n" + b"[" * 100_000 + b"\n")


@pytest.mark.parametrize(
    "damage",
    [
        truncate,
        flip_a_state_byte,
        flip_a_header_byte,
        other_tokens,
        another_build,
        unrecorded_build,
        empty,
        deeply_nested_header,
    ],
    ids=[
        "truncated",
        "flipped-state-byte",
        "flipped-header-byte",
        "other-tokens",
        "another-build",
        "unrecorded-build",
        "empty",
        "nested-header",
    ],
)
def test_a_damaged_file_is_a_miss_whose_sync_equals_a_clean_one_and_is_rewritten(
    first: Engine, second: Engine, cache: PromptCache, damage: Any
) -> None:
    clean, clean_logits, clean_tokens = sync_and_decode(model_on(first, cache))
    path = the_only_file(cache)
    damage(path)

    missed, logits, tokens = sync_and_decode(model_on(second, cache))
    assert missed.prompt_cache == "miss"
    assert np.array_equal(logits, clean_logits) and tokens == clean_tokens
    # The miss saved the prefix again: the next new process hits.
    assert model_on(first, cache).sync(CONVERSATION, TOOLS).prompt_cache == "hit"
    assert the_only_file(cache) == path


def test_a_file_from_another_context_size_model_file_attention_kernel_or_cache_type_is_a_miss(
    first: Engine, cache: PromptCache, embedded_model_path: Path, tmp_path: Path
) -> None:
    model_on(first, cache).sync(CONVERSATION, TOOLS)
    saved = the_only_file(cache)
    copy = tmp_path / "same-weights-other-file.gguf"
    try:
        os.link(embedded_model_path, copy)
    except OSError:  # another file system
        shutil.copyfile(embedded_model_path, copy)
    # Flash attention off: llama.cpp lays the V cache out transposed; q8_0 keys (and values):
    # another layout.
    others = [(embedded_model_path, N_CTX // 2, True, "f16"), (copy, N_CTX, True, "f16"),
              (embedded_model_path, N_CTX, False, "f16"), (embedded_model_path, N_CTX, True, "q8_0"),
              (embedded_model_path, N_CTX, True, "q8_0-k")]  # fmt: skip
    for path, n_ctx, flash_attn, kv_cache in others:
        with open_engine(path, n_ctx, flash_attn, kv_cache) as other:
            model = model_on(other, cache)
            tokens, stable = prefix_of(model)
            # The file is looked up by its own key, and even at another engine's key it is
            # refused: the identity inside it is checked.
            shutil.copyfile(saved, cache.path_for(other, tokens[:stable]))
            assert other.load_sequence(0, cache.path_for(other, tokens[:stable])) is None
            assert other.seq_len(0) == 0
            assert model.sync(CONVERSATION, TOOLS).prompt_cache == "miss"


def test_a_loaded_sequence_has_its_length_and_no_next_token_logits(
    first: Engine, tmp_path: Path
) -> None:
    first.clear()
    tokens = first.tokenize("<|im_start|>system\nYou are helpful.<|im_end|>\n", special=True)
    first.prefill(0, tokens)
    path = tmp_path / "prefix.kv"
    first.save_sequence(0, path, tokens)
    first.clear()
    assert first.load_sequence(0, path, tokens=tokens) == tokens
    assert first.seq_len(0) == len(tokens) and first.kv_span(0) == (0, len(tokens) - 1)
    assert not first.has_next_logits(0)
    assert first.load_sequence(0, path, tokens=tokens[:-1]) is None
    assert first.seq_len(0) == 0 and first.kv_span(0) == (-1, -1)


# --------------------------------------------------------------------------- the size cap


def saved_prefix(engine: Engine, cache: PromptCache, text: str) -> Path:
    engine.clear()
    tokens = engine.tokenize(text, special=True)
    engine.prefill(0, tokens, logits_last=False)
    assert cache.save(engine, 0, tokens)
    return cache.path_for(engine, tokens)


def test_past_the_cap_the_least_recently_used_file_goes_first(
    first: Engine, tmp_path: Path
) -> None:
    unlimited = PromptCache(tmp_path / "prompts", max_bytes=1 << 40)
    a = saved_prefix(first, unlimited, "<|im_start|>system\nYou are A.<|im_end|>\n")
    b = saved_prefix(first, unlimited, "<|im_start|>system\nYou are B.<|im_end|>\n")
    size = max(a.stat().st_size, b.stat().st_size)
    os.utime(a, (1_000, 1_000))  # A saved first, B after it ...
    os.utime(b, (2_000, 2_000))
    capped = PromptCache(unlimited.directory, max_bytes=int(2.5 * size))
    tokens_a = first.tokenize("<|im_start|>system\nYou are A.<|im_end|>\n", special=True)
    assert capped.restore(first, 0, tokens_a)  # ... but A was used since: B is the oldest now
    c = saved_prefix(first, capped, "<|im_start|>system\nYou are C.<|im_end|>\n")
    assert a.exists() and c.exists() and not b.exists()
    assert sum(p.stat().st_size for p in capped.directory.glob("*.kv")) <= capped.max_bytes


def test_a_state_larger_than_the_cap_is_never_written(
    first: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tiny = PromptCache(tmp_path / "prompts", max_bytes=1024)
    first.clear()
    tokens = first.tokenize("<|im_start|>system\nYou are D.<|im_end|>\n", special=True)
    first.prefill(0, tokens, logits_last=False)
    written: list[Path] = []
    monkeypatch.setattr(first, "save_sequence", lambda seq, path, tokens: written.append(path))
    assert not tiny.save(first, 0, tokens)
    assert written == [] and not tiny.directory.exists()  # sized first, not written and deleted


def test_the_engine_says_the_size_of_a_saved_sequence_before_writing_it(
    first: Engine, tmp_path: Path
) -> None:
    first.clear()
    tokens = first.tokenize("<|im_start|>system\nYou are E.<|im_end|>\n", special=True)
    first.prefill(0, tokens, logits_last=False)
    expected = first.saved_size(0, tokens)
    path = tmp_path / "e.kv"
    assert first.save_sequence(0, path, tokens) == expected == path.stat().st_size


# --------------------------------------------------------------------------- the host


def timings_of(events: list[Any]) -> dict[str, Any]:
    return next(e.data for e in events if e.type == "timings")


async def run_once(**options: Any) -> dict[str, Any]:
    async with Host(servers=[WEATHER], trust=["weather"], max_steps=1, tool_choice="required",
                    n_ctx=N_CTX, threads=1, **options) as host:  # fmt: skip
        with anyio.fail_after(BOUND_S):
            return timings_of([e async for e in host.run(QUESTION)])


@pytest.mark.model
@pytest.mark.anyio
async def test_weavehost_run_misses_then_hits_and_no_prompt_cache_turns_it_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path))
    cold = await run_once()
    warm = await run_once()
    off = await run_once(prompt_cache=False)
    assert (cold["prompt_cache"], warm["prompt_cache"], off["prompt_cache"]) == (
        "miss",
        "hit",
        "off",
    )
    assert warm["reused_tokens"] > 0 and off["reused_tokens"] == cold["reused_tokens"] == 0
    assert warm["prefilled_tokens"] + warm["reused_tokens"] == cold["prefilled_tokens"]
    assert len(list((tmp_path / "prompts").glob("*.kv"))) == 1


def test_the_config_turns_the_cache_off_and_sets_its_cap() -> None:
    config = parse_config({"weavehost": {"promptCache": {"enabled": False, "maxBytes": 10}}})
    assert config.prompt_cache == PromptCacheConfig(enabled=False, max_bytes=10)
    assert Host(config).prompt_cache is False
    assert Host(config, prompt_cache=True).prompt_cache is True
    assert Host(HostConfig()).prompt_cache is True
    assert Host(HostConfig(), prompt_cache=False).prompt_cache is False
    assert PromptCache.from_config(config.prompt_cache) is None
