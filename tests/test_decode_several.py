"""The decoder's one driver of several calls: the decision's grammar, the budget, run_case.

The decision after a call is the model's own greedy choice among what the format allows
there (``SeveralCalls.after_call``); the reply never takes more than its budget; run_case
(``weavehost bench``) gets every call of the reply in one result.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.schemas import CURRENT_WEATHER
from weavehost.agent.model import EngineModel
from weavehost.decode import CallRequest, get_strategy, run_case, write_calls
from weavehost.decode.several import DECISION_TOKENS
from weavehost.formats import FORMATS, tool_to_openai
from weavehost.formats.several import render_calls

SMOLLM2, QWEN = FORMATS["smollm2"], FORMATS["qwen"]

# A turn that showed SmolLM2-135M a two-call list, then a question of the same shape: it
# writes two calls (Paris, Berlin).
TWO_CITY_HISTORY = [
    {"role": "user", "content": "Weather in Oslo and in Rome?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"name": CURRENT_WEATHER.name, "arguments": {"city": "Oslo"}},
        {"name": CURRENT_WEATHER.name, "arguments": {"city": "Rome"}}]},
    {"role": "tool", "content": "Oslo: sunny"},
    {"role": "tool", "content": "Rome: sunny"},
    {"role": "assistant", "content": "Sunny in both."},
    {"role": "user", "content": "Weather in Paris and in Berlin?"},
]  # fmt: skip


@pytest.mark.parametrize(
    ("written", "state"),
    [
        (b"", "open"),
        (b"\n", "open"),
        (b"\n<tool", "open"),
        (b"\n<tool_call>", "more"),
        (b"<tool_call>\n{", "more"),
        (b"The weather", "no"),
        (b"\n```", "no"),
    ],
)
def test_after_a_qwen_call_only_whitespace_and_another_opener_are_written(written, state):
    assert QWEN.several.after_call(written) == state


@pytest.mark.parametrize(
    ("written", "state"),
    [(b"}", "open"), (b"},", "more"), (b"}, {", "more"), (b"}]", "end"),
     (b"}]</tool_call>", "end"), (b"}}", "no")],
)  # fmt: skip
def test_after_a_smollm2_call_the_list_goes_on_or_is_closed(written, state):
    assert SMOLLM2.several.after_call(written) == state


def test_run_case_returns_every_call_of_the_reply_in_one_result_with_the_work_and_times_of_all(
    fresh_engine,
):
    outcome = run_case(fresh_engine, SMOLLM2, "constrained", TWO_CITY_HISTORY, [CURRENT_WEATHER])
    result, parts = outcome.result, outcome.per_call
    assert [c.arguments["city"] for c in result.calls] == ["Paris", "Berlin"]
    assert [len(p.calls) for p in parts] == [1, 1]
    # The whole reply: what sequence 0 holds after the prompt, one closed list.
    assert fresh_engine.seq_len(0) == outcome.prompt_tokens + len(result.tokens)
    assert (
        result.text == render_calls(SMOLLM2, result.calls) == fresh_engine.detokenize(result.tokens)
    )
    assert result.stats.decoded_tokens >= sum(p.stats.decoded_tokens for p in parts)
    assert result.tool_latency_s == parts[0].tool_latency_s
    assert result.final_latency_s >= parts[0].final_latency_s + parts[1].final_latency_s
    assert result.error is None


@pytest.mark.parametrize("strategy", ["weave", "constrained"])
def test_a_call_begun_by_a_json_trigger_is_held_again_in_the_format_s_layout_so_more_may_follow(
    fresh_engine, strategy
):
    # SmolLM2 writes its bare list trigger, [{"name", as one closed list of one call; the
    # driver holds that call again as the format opens a reply's list, and the model goes on.
    bare_list = next(t for t in SMOLLM2.triggers if t.layout is not None)
    request, prompt = _prefilled(fresh_engine)
    reply = write_calls(request, get_strategy(strategy), first=bare_list)
    assert [c.arguments["city"] for c in reply.calls] == ["Paris", "Berlin"]
    assert len(reply.decisions) == 2 and reply.decisions[0].more
    # Sequence 0 holds the reply as the format renders a reply's calls, not as the trigger began.
    assert fresh_engine.seq_len(0) == len(prompt) + len(reply.tokens)
    assert reply.text == render_calls(SMOLLM2, reply.calls) == fresh_engine.detokenize(reply.tokens)
    assert not reply.text.startswith(bare_list.text)
    # One call asked for: it stays in the trigger's layout, as the model began it.
    request, prompt = _prefilled(fresh_engine)
    alone = write_calls(request, get_strategy(strategy), first=bare_list, max_calls=1)
    assert [c.arguments["city"] for c in alone.calls] == ["Paris"]
    assert alone.text.startswith(bare_list.text) and not alone.decisions


def test_a_first_call_made_earlier_in_the_turn_is_kept_and_ends_the_reply(fresh_engine):
    request, prompt = _prefilled(fresh_engine)
    both = write_calls(request, get_strategy("constrained"))
    assert len(both.calls) == 2
    request, prompt = _prefilled(fresh_engine)
    reply = write_calls(request, get_strategy("constrained"), made={both.calls[0].canonical()})
    assert reply.calls == both.calls[:1] and not reply.decisions
    assert reply.text == render_calls(SMOLLM2, reply.calls)
    assert fresh_engine.seq_len(0) == len(prompt) + len(reply.tokens)


def _prefilled(engine) -> tuple[CallRequest, list[int]]:
    """SmolLM2's prompt for the two-city turn prefilled on an empty cache, and a request for
    the reply's calls."""
    engine.clear()
    offered = [tool_to_openai(t.name, t.description, t.parameters) for t in [CURRENT_WEATHER]]
    prompt = engine.tokenize_segments(
        SMOLLM2.render_prompt(TWO_CITY_HISTORY, offered, chat_template=None)
    )
    engine.prefill(0, prompt)
    request = CallRequest(engine=engine, format=SMOLLM2, tools=[CURRENT_WEATHER],
                          max_tokens=64, forced=True)  # fmt: skip
    return request, prompt


def test_a_reply_never_takes_more_than_its_budget_where_the_decision_and_close_would_not_fit(
    fresh_engine,
):
    model = EngineModel(fresh_engine, SMOLLM2, get_strategy("weave"))
    close = len(fresh_engine.tokenize(SMOLLM2.several.close, special=True))

    def reply(budget: int) -> tuple[list, list[int]]:
        model.sync(TWO_CITY_HISTORY, [CURRENT_WEATHER])
        model.free_decode(lambda _text: None, 0)
        start = len(model.held)
        results = model.write_calls([CURRENT_WEATHER], lambda *_: None, 64, budget=budget)
        assert fresh_engine.seq_len(0) == len(model.held)
        return results, model.held[start:]

    results, full = reply(512)
    assert len(results) == 2
    first = len(results[0].tokens)
    # Room for the first call and its close only; for a decision too; one token short of all.
    for budget in (first + close + 1, first + close + DECISION_TOKENS + 1, len(full) - 1):
        results, held = reply(budget)
        assert len(held) <= budget, budget
        assert results[0].calls
        assert fresh_engine.detokenize(held).endswith("}]</tool_call>")


@pytest.mark.model
def test_the_closer_is_spelled_in_the_models_own_tokens_in_one_pass_once_the_spelling_is_known(
    qwen_gguf,
):
    from weavehost.decode.call_tokens import SpellingIndex, _spell, plain_tokens
    from weavehost.engine import Engine

    closer = b"</tool_call>"
    with Engine.open(qwen_gguf, n_ctx=512, n_threads=2) as engine:
        index = SpellingIndex.of(engine)
        head = engine.tokenize('<tool_call>\n{"name": "get_weather", "arguments": {}}\n')
        engine.prefill(0, head[:-1], logits_last=False)

        def spell(guess: list[int]) -> tuple[list[int], int]:
            engine.drop(0, len(head) - 1)
            passes = engine.stats.passes
            tokens, text = _spell(engine, index, closer, head[-1], [guess])
            assert text.startswith(closer)
            assert engine.seq_len(0) == len(head) + len(tokens)
            assert engine.has_next_logits(0)
            return tokens, engine.stats.passes - passes

        own, first_passes = spell([])
        # Qwen's added token is never among them: the model spells the closer in pieces.
        assert engine.tokenize(closer.decode()) not in ([t] for t in own)
        # With no spelling known the tokenizer's split of the rest is drafted after each pass:
        # fewer passes than one per token (the token before, then each), the same spelling.
        assert len(own) > 1 and first_passes < len(own) + 1
        assert spell(own) == (own, 1)
        # A wrong guess (the tokenizer's plain split) costs rows, never a different spelling.
        plain = plain_tokens(engine, closer.decode())
        assert plain != own
        assert spell(plain)[0] == own


@pytest.mark.model
def test_a_closer_after_another_value_end_is_drafted_from_the_tail_of_the_last_spelling(
    qwen_gguf,
):
    from weavehost.decode.call_tokens import SpellingIndex, _spell
    from weavehost.engine import Engine

    with Engine.open(qwen_gguf, n_ctx=512, n_threads=2) as engine:
        index = SpellingIndex.of(engine)

        def spell(text: str, target: bytes, guesses: list[list[int]]) -> tuple[list[int], int]:
            head = engine.tokenize(text)
            engine.clear()
            engine.prefill(0, head[:-1], logits_last=False)
            passes = engine.stats.passes
            tokens, _text = _spell(engine, index, target, head[-1], guesses)
            return tokens, engine.stats.passes - passes

        own, _ = spell(
            '<tool_call>\n{"name": "get_weather", "arguments": {}}\n', b"</tool_call>", []
        )
        # The last call ended with ``}}``; this one ends with a string value's ``"}}``.
        head = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris'
        unguessed, unguessed_passes = spell(head, b'"}}\n</tool_call>', [])
        guessed, guessed_passes = spell(head, b'"}}\n</tool_call>', [own])
        assert guessed == unguessed  # the same spelling, the model's own
        assert unguessed[-len(own) :] == own
        assert guessed_passes < unguessed_passes


@pytest.mark.model
def test_a_closer_is_spelled_a_token_a_pass_where_drafted_rows_cost_most_of_a_pass(qwen_gguf):
    from weavehost.bench.costs import resolve_cost_model
    from weavehost.decode.call_tokens import SpellingIndex, SpellingPricing, _spell
    from weavehost.decode.padding import DecodePlan
    from weavehost.decode.state import DraftAcceptance
    from weavehost.engine import Engine
    from weavehost.engine.calibrate import load_cost_table

    costs = Path(__file__).parent / "data" / "costs"
    dear = DecodePlan.from_table(load_cost_table(costs / "avx512-qwen2.5-coder-0.5b-q4_0-t2.json"))
    flat = DecodePlan.from_table(load_cost_table(resolve_cost_model("gpu-flat")))
    with Engine.open(qwen_gguf, n_ctx=512, n_threads=2) as engine:
        index = SpellingIndex.of(engine)
        head = engine.tokenize('<tool_call>\n{"name": "get_weather", "arguments": {}}\n')

        def _rows(engine: Engine) -> int:
            return sum(width * count for width, count in engine.stats.pass_rows.items())

        def spell(plan: DecodePlan) -> tuple[list[int], int, int]:
            engine.clear()
            engine.prefill(0, head[:-1], logits_last=False)
            passes, rows = engine.stats.passes, _rows(engine)
            pricing = SpellingPricing(plan, DraftAcceptance())
            tokens, _text = _spell(engine, index, b"</tool_call>", head[-1], [], pricing)
            passes = engine.stats.passes - passes
            return tokens, passes, _rows(engine) - rows - passes

        on_dear, dear_passes, dear_drafted = spell(dear)
        assert dear_drafted == 0  # one row a pass: the token before the closer, then each
        assert dear_passes == len(on_dear) + 1
        on_flat, flat_passes, flat_drafted = spell(flat)
        assert on_flat == on_dear
        assert flat_drafted > 0 and flat_passes < dear_passes


@pytest.mark.model
@pytest.mark.parametrize(
    "rest", [b"</tool_call>", b">", b'"}}\n</tool_call>', b"\n", b"}]</tool_call>"]
)
def test_the_spelling_index_finds_exactly_the_tokens_that_spell_on(engine, rest):
    from weavehost.decode.call_tokens import SpellingIndex, spells_on

    found = SpellingIndex.of(engine).spelling_on(rest)
    expected = [t for t in range(engine.n_vocab) if spells_on(engine, rest, t)]
    assert found.tolist() == expected
    assert expected  # each rest is spelled by some token


@pytest.mark.model
def test_a_plain_token_that_begins_with_the_byte_marking_specials_is_indexed_by_its_bytes(
    qwen_gguf,
):
    from weavehost.decode.call_tokens import SpellingIndex, spells_on
    from weavehost.engine import Engine

    # Qwen's byte-level vocabulary has a token for the byte 0xff, which the vocabulary file
    # also puts before a special token's text.
    with Engine.open(qwen_gguf, n_ctx=256, n_threads=2) as engine:
        found = SpellingIndex.of(engine).spelling_on(b"\xff")
        expected = [t for t in range(engine.n_vocab) if spells_on(engine, b"\xff", t)]
    assert found.tolist() == expected and expected
