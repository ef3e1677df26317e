"""The host's guidance and the answer's script guard (issue 30, items 1 and 2).

Guidance: a short system text per format, as data, written after the user's own system prompt
(or the model's default one), only where tools are on offer; switchable in the config, on the
command line, on the host and per bench-agent variant; and the prompt cache keys on it.
The script guard: on the real Qwen2.5-Coder-0.5B, an answer after a good time result switches to
Chinese ("抱歉，我无法协助完成这个请求。"); guarded, it stays in the user's scripts.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.schemas import CURRENT_WEATHER
from weavehost.agent.model import EngineModel, allowed_scripts
from weavehost.agent.prompt_cache import PromptCache, stable_prefix
from weavehost.bench.agent import plan_variants
from weavehost.cli import main
from weavehost.config import HostConfig, load_config, merge_flags
from weavehost.decode import get_strategy
from weavehost.decode.base import ToolSchema
from weavehost.engine import Engine
from weavehost.engine.scripts import SCRIPTS, scripts_in
from weavehost.errors import BenchError, ConfigError
from weavehost.formats import FORMATS, tool_to_openai
from weavehost.gguf import read_metadata

WEATHER = [tool_to_openai(t.name, t.description, t.parameters) for t in [CURRENT_WEATHER]]
ASKED = [{"role": "user", "content": "Weather in Oslo?"}]
HAN = 1 << SCRIPTS.index("Han")


def text(fmt: str, messages: list[dict], tools: list[dict] = WEATHER, **kw: object) -> str:
    segments = FORMATS[fmt].render_prompt(messages, tools, chat_template=None, **kw)
    return "".join(s.text for s in segments)


@pytest.mark.parametrize("fmt", sorted({f.name for f in FORMATS.values()}))
def test_every_format_declares_guidance_and_writes_it_only_when_asked_and_tools_are_offered(fmt):
    guidance = FORMATS[fmt].prompt.guidance
    assert "language the user writes in" in guidance
    assert guidance in text(fmt, ASKED, guidance=True)
    assert guidance not in text(fmt, ASKED)
    assert guidance not in text(fmt, ASKED, tools=[], guidance=True)


def test_qwen_s_guidance_follows_the_model_s_default_system_text_and_the_user_s_comes_first():
    guidance = FORMATS["qwen"].prompt.guidance
    plain = text("qwen", ASKED, guidance=True)
    assert "You are a helpful assistant.\n\n" + guidance in plain
    own = text("qwen", [{"role": "system", "content": "Be brief."}, *ASKED], guidance=True)
    assert "<|im_start|>system\nBe brief.\n\n" + guidance + "\n\n# Tools" in own
    assert "You are a helpful assistant." not in own


def test_smollm2_s_guidance_follows_its_tool_definitions_after_the_user_s_system_prompt():
    guided = text("smollm2", [{"role": "system", "content": "Be brief."}, *ASKED], guidance=True)
    assert (
        guided.index("Be brief.")
        < guided.index("</tools>")
        < guided.index(FORMATS["smollm2"].prompt.guidance)
    )


def test_guidance_is_off_and_the_script_guard_on_unless_the_config_or_a_flag_says_otherwise(
    tmp_path,
):
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"weavehost": {"guidance": "on", "scriptGuard": False}}))
    config = load_config(path)
    assert (config.guidance, config.script_guard) == (True, False)
    assert merge_flags(config, guidance=False).guidance is False
    assert merge_flags(config).script_guard is False
    assert (HostConfig().guidance, HostConfig().script_guard) == (False, True)


@pytest.mark.parametrize("value", ["maybe", 1, None])
def test_a_bad_guidance_value_in_the_config_is_an_error_naming_the_key(tmp_path, value):
    path = tmp_path / "host.json"
    path.write_text(json.dumps({"weavehost": {"guidance": value}}))
    with pytest.raises(ConfigError, match='weavehost.guidance: expected "on" or "off"'):
        load_config(path)


def test_a_bad_guidance_flag_is_a_usage_error_naming_the_choices():
    result = CliRunner().invoke(main, ["run", "--guidance", "maybe", "hi"])
    assert result.exit_code == 2 and "'on', 'off'" in result.output


def test_bench_agent_runs_guidance_on_and_off_as_variants_labelled_by_it():
    labels = [v.label for v in plan_variants(["weave"], "on", "on", "both")]
    assert labels == [
        "weave cache=on drafts=on guidance=on",
        "weave cache=on drafts=on guidance=off",
    ]
    assert [v.guidance for v in plan_variants(["weave"], "on", "on")] == [None]  # the default
    with pytest.raises(BenchError, match="--guidance: expected one of on, off, both"):
        plan_variants(["weave"], "on", "on", "sometimes")


def test_the_scripts_allowed_are_the_user_s_and_the_tool_results_not_the_assistant_s():
    messages = [
        {"role": "user", "content": "Weather in Moscow?"},
        {"role": "assistant", "content": "天气"},
        {"role": "tool", "content": "Москва: снег"},
    ]
    assert allowed_scripts(messages) == scripts_in("Москва")


# ---------------------------------------------------------------- the real Qwen2.5-Coder-0.5B

TIME = ToolSchema(
    "get_current_time",
    "Get the current time in a time zone.",
    {
        "type": "object",
        "properties": {
            "timezone": {"type": "string", "description": "IANA time zone name, e.g. Europe/Paris."}
        },
        "required": ["timezone"],
    },
)


# A correct call and a good result, then an answer that may not call again (the call was
# repeated): unguarded, Qwen 0.5B answers "抱歉，我无法协助完成这个请求。".
def time_answered(question: str, zone: str, clock: str) -> list[dict[str, object]]:
    """A time question, Qwen's call and the time server's result: the answer comes next."""
    result = {"timezone": zone, "datetime": clock, "is_dst": False}
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": "", "tool_calls": [
            {"name": "get_current_time", "arguments": {"timezone": zone}}]},
        {"role": "tool", "content": json.dumps(result)},
    ]  # fmt: skip


# After these, guided Qwen2.5-Coder-0.5B Q4_0 answers some in Chinese ("抱歉，我无法协助完成这个
# 请求。"): London on an AVX-512 EPYC; Paris, Sydney and Madrid on an AVX2 one, where London is
# answered with its JSON. Which of them switch moves with the machine's sums (near-ties).
TIME_ANSWERED = [
    time_answered(
        "What's the time in London right now?", "Europe/London", "2026-12-01T17:23:00+00:00"
    ),
    time_answered(
        "What's the time in Paris right now?", "Europe/Paris", "2026-12-01T18:23:00+01:00"
    ),
    time_answered("Tell me the time in Sydney.", "Australia/Sydney", "2026-12-02T04:23:00+11:00"),
    time_answered(
        "What's the time in Madrid right now?", "Europe/Madrid", "2026-12-01T18:23:00+01:00"
    ),
]


@pytest.fixture(scope="module")
def qwen(qwen_gguf: Path) -> Iterator[tuple[Engine, str | None]]:
    with Engine.open(qwen_gguf, n_ctx=2048, n_seq_max=2, n_threads=2) as engine:
        yield engine, read_metadata(qwen_gguf).chat_template


def qwen_model(qwen: tuple[Engine, str | None], **kw: bool) -> EngineModel:
    engine, template = qwen
    engine.clear()
    return EngineModel(engine, FORMATS["qwen"], get_strategy("weave"), chat_template=template, **kw)


def test_on_the_real_qwen_guidance_follows_its_own_system_text_and_is_absent_when_off(qwen):
    engine, _ = qwen
    guidance = FORMATS["qwen"].prompt.guidance
    guided = engine.detokenize(qwen_model(qwen, guidance=True).render(ASKED, [CURRENT_WEATHER]))
    plain = engine.detokenize(qwen_model(qwen).render(ASKED, [CURRENT_WEATHER]))
    assert (
        "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.\n\n" + guidance
        in guided
    )
    assert guidance not in plain and "You are Qwen" in plain
    system = [{"role": "system", "content": "Answer in one line."}, *ASKED]
    own = engine.detokenize(qwen_model(qwen, guidance=True).render(system, [CURRENT_WEATHER]))
    assert own.index("Answer in one line.") < own.index(guidance) and "You are Qwen" not in own


def test_on_the_real_qwen_the_prompt_cache_keys_on_the_guided_prefix(qwen, tmp_path):
    engine, _ = qwen
    cache = PromptCache(tmp_path)
    paths = []
    for guided in (True, False):
        model = qwen_model(qwen, guidance=guided)
        tokens = model.render(ASKED, [CURRENT_WEATHER])
        stable = stable_prefix(ASKED, tokens, lambda view: model.render(view, [CURRENT_WEATHER]))  # noqa: B023
        paths.append(cache.path_for(engine, tokens[:stable]))
    assert paths[0] != paths[1]


def test_on_the_real_qwen_an_unguarded_answer_switches_to_chinese_and_a_guarded_one_keeps_the_user_s_scripts(
    qwen,
):
    switched = []
    for conversation in TIME_ANSWERED:
        answers = {}
        for guarded in (False, True):
            model = qwen_model(qwen, guidance=True, script_guard=guarded)
            model.sync(conversation, [TIME])
            shown: list[str] = []
            free = model.free_decode(shown.append, 24, allow_call=False)
            assert free.text == "".join(shown)
            answers[guarded] = free.text
        assert answers[True].strip() and scripts_in(answers[True]) == 0, answers[True]
        if scripts_in(answers[False]) & HAN:
            switched.append(conversation[0]["content"])
    assert switched, "no unguarded answer switched to Chinese: the test shows the guard nothing"


@pytest.mark.parametrize(
    ("flags", "expected"),
    [([], (None, None)), (["--guidance", "off", "--script-guard", "on"], (False, True))],
)
def test_run_s_guidance_and_script_guard_flags_reach_the_host(monkeypatch, flags, expected):
    seen: dict[str, object] = {}

    class RecordingHost:
        def __init__(self, *_args: object, **kwargs: object) -> None:
            seen.update(kwargs)
            raise ConfigError("recorded")

    monkeypatch.setattr("weavehost.host.Host", RecordingHost)
    result = CliRunner().invoke(main, ["run", "--server", "echo hi", *flags, "hello"])
    assert "recorded" in result.output, result.output
    assert (seen["guidance"], seen["script_guard"]) == expected
