"""Verified decoding on the real embedded SmolLM2: drafts change passes, never the call.

``weave`` is lossless by construction: every token it keeps is the masked argmax after the
tokens before it, as ``constrained`` decodes them one a pass. These tests inject wrong drafts
and scripted parallel values and check that the call stays ``constrained``'s, that a wrong
draft is rejected exactly where it goes wrong, and that the KV cache then holds exactly the
accepted tokens. Everything is counted, never timed.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from tests.schemas import FORECAST
from weavehost.decode import CallRequest, DecodeState, ToolSchema, get_strategy
from weavehost.decode.constraint import ConstraintFactory
from weavehost.decode.drafts import DraftSource
from weavehost.decode.padding import DecodePlan
from weavehost.decode.proposals import (
    EDGE,
    END,
    GRAMMAR,
    Drafts,
    DraftText,
    learn_split,
    model_split,
    no_rows,
)
from weavehost.decode.verify import Verifier
from weavehost.decode.weave import WeaveCall
from weavehost.formats import FORMATS, ToolCall, tool_to_openai

SMOLLM2 = FORMATS["smollm2"]
PARIS = "What's the weather in Paris for the next 3 days?"
EMAIL = ToolSchema(
    "send_email",
    "Send an email",
    {
        "type": "object",
        "properties": {"to": {"type": "string"}, "subject": {"type": "string"}},
        "required": ["to", "subject"],
    },
)
MAIL = "Send an email to alice.johnson@example.com with the subject Quarterly budget review."


def _prompt(engine, question: str, tools: list[ToolSchema]) -> list[dict]:
    engine.clear()
    messages = [{"role": "user", "content": question}]
    offered = [tool_to_openai(t.name, t.description, t.parameters) for t in tools]
    segments = SMOLLM2.render_prompt(messages, offered, chat_template=None)
    engine.prefill(0, engine.tokenize_segments(segments))
    return messages


def _constrained(engine, question: str, tools: list[ToolSchema]):
    _prompt(engine, question, tools)
    return get_strategy("constrained").run(CallRequest(engine, SMOLLM2, tools))


def _wrong_city_draft(engine):
    """``constrained``'s call for PARIS, where its city's first letters are (k), a token the
    grammar allows there that the model does not choose, and that call's tokens with it at k."""
    expected = _constrained(engine, PARIS, [FORECAST])
    tokens = expected.tokens
    k = next(i for i, t in enumerate(tokens) if b"Par" in engine.token_bytes(t))
    wrong = engine.tokenize("Berlin")[0]
    assert wrong != tokens[k]
    return expected, k, wrong, [*tokens[:k], wrong, *tokens[k + 1 :]]


def _whole_call(engine, tools: list[ToolSchema]):
    factory = ConstraintFactory(engine)
    return factory.new(factory.grammars(SMOLLM2).call([(t.name, t.parameters) for t in tools]))


def verified_decode(
    engine,
    constraint,
    *,
    max_tokens: int,
    state: DecodeState | None = None,
    draft=(),
    drafter=None,
    draft_rows=no_rows,
    forced: bool = True,
    **verifier,
):
    """One verified run, with a decode state of its own unless one is given (a test learns
    nothing from another)."""
    state = state if state is not None else DecodeState()
    drafts = Drafts(draft, drafter, draft_rows, forced)
    return Verifier(engine, constraint, state, **verifier).run(max_tokens, drafts=drafts)


def test_a_draft_wrong_at_token_k_is_rejected_at_k_and_the_call_is_unchanged(fresh_engine):
    engine = fresh_engine
    expected, k, wrong, draft = _wrong_city_draft(engine)
    _prompt(engine, PARIS, [FORECAST])
    prompt_len = engine.seq_len(0)
    outcome = verified_decode(engine, _whole_call(engine, [FORECAST]), max_tokens=256, draft=draft)
    assert outcome.error is None and outcome.finished
    assert outcome.tokens == expected.tokens
    assert outcome.mismatch is not None
    assert (outcome.mismatch.index, outcome.mismatch.drafted) == (k, wrong)
    assert outcome.mismatch.chosen == expected.tokens[k]
    assert outcome.mismatch.logit_gap > 0
    assert engine.seq_len(0) == prompt_len + len(outcome.tokens)


def test_after_partial_acceptance_the_kv_cache_holds_exactly_the_accepted_tokens(fresh_engine):
    engine = fresh_engine
    expected, k, _wrong, draft = _wrong_city_draft(engine)
    _prompt(engine, PARIS, [FORECAST])
    prompt_len = engine.seq_len(0)
    before = engine.stats.snapshot()
    # One pass reads the first token and drafts 1..k (k wrong); the model's own token at k is
    # the last one written and is read in a second pass.
    outcome = verified_decode(
        engine, _whole_call(engine, [FORECAST]), max_tokens=k + 1, draft=draft
    )
    cost = engine.stats.since(before)
    assert outcome.tokens == expected.tokens[: k + 1]
    assert (cost.passes, cost.drafted_tokens, cost.accepted_tokens) == (2, k, k - 1)
    assert engine.kv_span(0) == (0, prompt_len + k)
    assert all(engine.kv_span(seq) == (-1, -1) for seq in range(1, engine.n_seq_max))


def test_a_parallel_value_the_model_would_write_differently_is_corrected_at_write_back(
    fresh_engine,
):
    engine = fresh_engine
    expected = _constrained(engine, PARIS, [FORECAST])
    sent: list[ToolCall] = []
    _prompt(engine, PARIS, [FORECAST])
    request = CallRequest(engine, SMOLLM2, [FORECAST], on_provisional=sent.append)
    call = WeaveCall(request, plan=DecodePlan({}))
    assert call.select() is None and call.skeleton() is None and call.values() is None
    assert [task.value for task in call.tasks] == ['"Paris"', "3"]
    call.tasks[1].value = "7"  # scripted: the value sequence wrote 7 days
    assert call.provisional() is None
    assert sent == [ToolCall("get_weather", {"city": "Paris", "days": 7})]
    assert call.write_back() is None
    result = call.final()
    assert (result.calls, result.tokens) == (expected.calls, expected.tokens)
    assert result.provisional == sent[0] != result.calls[0]  # a corrected call
    assert call.verified is not None and call.verified.mismatch is not None
    assert engine.token_bytes(call.verified.mismatch.drafted) == b"7"
    assert result.tool_latency_s == result.final_latency_s  # the provisional result is void


def test_drafts_from_the_request_are_accepted_and_cut_passes_without_changing_the_call(
    fresh_engine,
):
    engine = fresh_engine
    expected = _constrained(engine, MAIL, [EMAIL])
    messages = [{"role": "user", "content": MAIL}]
    without = _serial_call(engine, messages, drafts=None)
    with_drafts = _serial_call(engine, messages, drafts=DraftSource.from_messages(messages))
    assert without.calls == with_drafts.calls == expected.calls
    assert with_drafts.stats.accepted_tokens > without.stats.accepted_tokens
    assert with_drafts.stats.passes < without.stats.passes


def _serial_call(engine, messages, *, drafts):
    """``weave`` without parallel values: everything verified on sequence 0."""
    _prompt(engine, messages[0]["content"], [EMAIL])
    request = CallRequest(engine, SMOLLM2, [EMAIL], drafts=drafts)
    return WeaveCall(request, plan=_NoParallel()).run()


class _NoParallel:
    """A plan that never decodes values side by side and drafts up to 8 rows."""

    source = "test"

    def shape_for(self, rows: int, outputs: int) -> tuple[int, int]:
        return rows, outputs

    def parallel_pays(self, n_values: int) -> bool:
        return False

    def draft_length(self, base_rows: int, accept: Sequence[float]) -> int:
        return min(8, len(accept))


def test_a_token_the_grammar_alone_allows_is_kept_without_logits_and_the_call_is_unchanged(
    fresh_engine,
):
    engine = fresh_engine
    expected = _constrained(engine, PARIS, [FORECAST])
    _prompt(engine, PARIS, [FORECAST])
    whole = _whole_call(engine, [FORECAST])
    forced = whole.forced()
    assert len(forced) > 2 and whole.certain(forced) == [True] * len(forced)
    # The model's first value token is one of several the grammar allows there.
    value_at = next(i for i, t in enumerate(expected.tokens) if b"Par" in engine.token_bytes(t))
    assert not whole.certain(expected.tokens[: value_at + 1])[value_at]

    rows_with_logits: list[int] = []
    run_pass = engine.run_pass

    def counting(rows, **options):
        rows_with_logits.append(sum(1 for row in rows if row.logits))
        return run_pass(rows, **options)

    engine.run_pass = counting
    outcome = verified_decode(engine, whole, max_tokens=256, draft=expected.tokens)
    assert outcome.tokens == expected.tokens
    # The whole call drafted in one pass: logits only before the tokens the model chooses.
    assert len(rows_with_logits) == 1
    assert rows_with_logits[0] < len(expected.tokens) - len(forced)


def _all_guesses(base_rows: int, kinds: Sequence[str]) -> int:
    return len(kinds)


def test_the_text_the_grammar_forces_past_its_forced_tokens_is_guessed_and_the_call_is_unchanged(
    fresh_engine,
):
    # After "city": the grammar forces ' "' (a string), but no token for it: ' "' may fuse
    # with the value's first letters. It is guessed, verified like any draft.
    engine = fresh_engine
    expected = _constrained(engine, PARIS, [FORECAST])
    _prompt(engine, PARIS, [FORECAST])
    before = engine.stats.snapshot()
    plain = verified_decode(engine, _whole_call(engine, [FORECAST]), max_tokens=256)
    plain_passes = engine.stats.since(before).passes
    _prompt(engine, PARIS, [FORECAST])
    before = engine.stats.snapshot()
    guessed = verified_decode(
        engine, _whole_call(engine, [FORECAST]), max_tokens=256, draft_rows=_all_guesses
    )
    assert plain.tokens == guessed.tokens == expected.tokens
    # No drafter here: each such text ends where the value's unknown text begins, so its last
    # token (' "' before Paris, ' ' before 3 at least) is an edge, guessed at its own rate.
    reached, accepted = guessed.by_kind[EDGE]
    assert reached >= 2 and accepted >= 1
    assert engine.stats.since(before).passes < plain_passes


def test_the_grammars_text_before_a_guessed_value_is_the_grammars_and_an_edge_only_alone(
    fresh_engine,
):
    # ' "' before the city fuses with a guess of it (' "Paris'): the grammar's text, at its
    # rate. Without a guess after it, the same text is an edge (the test above).
    engine = fresh_engine
    source = DraftSource.from_messages([{"role": "user", "content": PARIS}])
    outcome, _ = _counted_run(engine, PARIS, _source_drafter(source))
    assert outcome.by_kind[GRAMMAR][1] >= 1
    assert EDGE not in outcome.by_kind


def test_a_number_the_request_holds_is_guessed_where_its_value_begins(fresh_engine):
    engine = fresh_engine
    expected = _constrained(engine, PARIS, [FORECAST])
    source = DraftSource.from_messages([{"role": "user", "content": PARIS}])
    outcome, _ = _counted_run(engine, PARIS, _source_drafter(source))
    assert outcome.tokens == expected.tokens
    assert outcome.by_kind["start"][1] >= 1  # the 3 of "the next 3 days", guessed whole


def test_guesses_of_every_kind_are_counted_as_reached_only_up_to_the_first_rejected_one(
    fresh_engine,
):
    engine = fresh_engine

    def wrong(written: bytes) -> DraftText | None:  # always a wrong city, never a number
        return DraftText("Berlin is", "string") if written.endswith(b'"') else None

    outcome, _ = _counted_run(engine, PARIS, wrong)
    reached, accepted = outcome.by_kind["string"]
    # One wrong guess of several tokens, at the city's start: its first token is reached and
    # rejected; the tokens after it were never reached.
    assert (reached, accepted) == (1, 0)
    assert outcome.tokens == _constrained(engine, PARIS, [FORECAST]).tokens


def _source_drafter(source: DraftSource, *, ends: bool = True):
    """The conversation's guesses; ``ends=False`` drops where they say a value closes."""

    def drafter(written: bytes) -> DraftText | None:
        guess = source.guess(written.decode("utf-8", errors="ignore"))
        if guess is None:
            return None
        return DraftText(guess.text, guess.kind, guess.ends if ends else ())

    return drafter


def _counted_run(engine, question: str, drafter, **options):
    """A verified run of the whole FORECAST call, and the passes it took."""
    _prompt(engine, question, [FORECAST])
    before = engine.stats.snapshot()
    outcome = verified_decode(
        engine,
        _whole_call(engine, [FORECAST]),
        max_tokens=256,
        drafter=drafter,
        draft_rows=_all_guesses,
        **options,
    )
    return outcome, engine.stats.since(before)


def test_a_value_copied_whole_is_closed_and_the_next_member_guessed_in_the_same_pass(
    fresh_engine,
):
    # "Paris" ends its name: '",' and ' "days": ' (the grammar's) and the request's 3 follow
    # in the pass that guesses "Paris", then '}' after the 3.
    engine = fresh_engine
    expected = _constrained(engine, PARIS, [FORECAST])
    source = DraftSource.from_messages([{"role": "user", "content": PARIS}])
    chained, chained_stats = _counted_run(engine, PARIS, _source_drafter(source))
    single, single_stats = _counted_run(engine, PARIS, _source_drafter(source, ends=False))
    assert chained.tokens == single.tokens == expected.tokens
    reached, accepted = chained.by_kind[END]
    assert accepted >= 1
    assert chained_stats.passes < single_stats.passes


def test_a_value_guessed_to_end_where_the_model_goes_on_is_rejected_at_its_closing_text(
    fresh_engine,
):
    engine = fresh_engine
    question = "What's the weather in Kathmandu for the next 3 days?"
    expected = _constrained(engine, question, [FORECAST])
    assert expected.calls[0].arguments["city"] == "Kathmandu"

    def too_soon(written: bytes) -> DraftText | None:  # the city ends after its first token
        begun = written.rpartition(b'"city": "')[2]
        if begun and b"Kathmandu".startswith(begun) and begun != b"Kathmandu":
            return DraftText("", "string", ('",',))
        return None

    outcome, _ = _counted_run(engine, question, too_soon)
    assert outcome.tokens == expected.tokens
    reached, accepted = outcome.by_kind[END]  # once after each of the city's first tokens
    assert reached >= 1 and accepted == 0


def test_a_guess_the_grammar_refuses_leaves_the_constraint_as_it_was(fresh_engine):
    # days is an integer: a guess of 3.5 does not fit, and nothing is chained past it.
    engine = fresh_engine
    expected = _constrained(engine, PARIS, [FORECAST])

    def fraction(written: bytes) -> DraftText | None:
        return DraftText("3.5", "start", (",", "}")) if written.endswith(b'"days": ') else None

    outcome, _ = _counted_run(engine, PARIS, fraction)
    assert outcome.error is None and outcome.finished
    assert outcome.tokens == expected.tokens


def test_passes_padded_to_a_cheaper_width_use_a_scratch_sequence_and_leave_it_empty(
    fresh_engine,
):
    engine = fresh_engine
    expected = _constrained(engine, PARIS, [FORECAST])
    scratch = engine.n_seq_max - 1
    outcome, stats = _counted_run(engine, PARIS, None, shape=lambda rows, out: (max(rows, 8), out))
    assert outcome.tokens == expected.tokens
    assert min(stats.pass_rows) >= 8
    assert stats.padded_tokens > 0
    assert engine.seq_len(scratch) == 0


def test_passes_that_compute_more_logits_than_they_use_write_the_same_call(fresh_engine):
    engine = fresh_engine
    expected = _constrained(engine, PARIS, [FORECAST])
    source = DraftSource.from_messages([{"role": "user", "content": PARIS}])
    asked, asked_stats = _counted_run(engine, PARIS, _source_drafter(source))
    spared, spared_stats = _counted_run(
        engine, PARIS, _source_drafter(source), shape=lambda rows, out: (max(rows, 8), 8)
    )
    assert asked.tokens == spared.tokens == expected.tokens
    assert spared_stats.passes == asked_stats.passes
    assert spared_stats.outputs == 8 * spared_stats.passes > asked_stats.outputs
    assert engine.seq_len(engine.n_seq_max - 1) == 0


def test_a_guessed_token_the_model_wrote_split_is_split_so_until_it_writes_it_whole(engine):
    [paris] = engine.tokenize(" Paris")
    [start] = engine.tokenize(" P")
    state = DecodeState()
    # The model chose " P" where a guess had " Paris": later guesses split it that way.
    learn_split(state, engine, paris, start)
    assert model_split(state, engine, [paris]) == [start, *engine.tokenize("aris")]
    # Then it wrote " Paris" whole where a guess had " P": the split is forgotten.
    learn_split(state, engine, start, paris)
    assert model_split(state, engine, [paris]) == [paris]


def _fused(engine, tokens: Sequence[int]) -> tuple[int, int]:
    """The first place where two of ``tokens`` spell what one token of the vocabulary spells,
    and that token."""
    vocabulary = {engine.token_bytes(t): t for t in range(engine.n_vocab)}
    for i in range(len(tokens) - 1):
        fused = vocabulary.get(engine.token_bytes(tokens[i]) + engine.token_bytes(tokens[i + 1]))
        if fused is not None:
            return i, fused
    raise AssertionError("no two tokens of the call are spelled by one token")


def test_an_explicit_draft_the_model_writes_split_is_split_so_the_next_time(fresh_engine):
    engine = fresh_engine
    # SmolLM2 closes "New York" with '"' and ',' where the tokenizer writes '",'
    question = "What's the weather in New York for the next 10 days?"
    expected = _constrained(engine, question, [FORECAST])
    tokens = expected.tokens
    i, fused = _fused(engine, tokens)
    draft = [*tokens[:i], fused, *tokens[i + 2 :]]  # the same text, one token where it has two
    state = DecodeState()  # both runs on one model: the second learns from the first
    runs = []
    for _ in range(2):
        _prompt(engine, question, [FORECAST])
        before = engine.stats.snapshot()
        outcome = verified_decode(
            engine, _whole_call(engine, [FORECAST]), max_tokens=256, draft=draft, state=state
        )
        runs.append((outcome, engine.stats.since(before)))
    (first, first_cost), (second, second_cost) = runs
    assert first.tokens == second.tokens == tokens
    assert first.mismatch is None and second.mismatch is None  # another split, not a choice
    assert second_cost.passes < first_cost.passes
    assert second_cost.accepted_tokens == second_cost.drafted_tokens


def test_a_text_the_grammar_closes_by_itself_is_complete_before_the_closer_is_read(
    fresh_engine,
):
    engine = fresh_engine
    expected = _constrained(engine, PARIS, [FORECAST])
    _prompt(engine, PARIS, [FORECAST])
    outcome = verified_decode(engine, _whole_call(engine, [FORECAST]), max_tokens=256)
    assert outcome.tokens == expected.tokens and outcome.finished
    # The last pass read the chosen closing brace and the closer the grammar forces after it:
    # the text was known before it ran.
    after = engine.pass_rows_between(outcome.completed_at, time.perf_counter())
    assert sum(after.values()) == 1
    [rows] = after
    assert rows > 1


def test_a_watch_sees_the_text_the_grammar_forces_before_the_pass_that_reads_it(fresh_engine):
    # weave's provisional call watches the verified text: its closing text, forced after the
    # chosen brace, is known before the last pass reads it, and so is the call.
    engine = fresh_engine
    _prompt(engine, PARIS, [FORECAST])
    seen: list[tuple[bytes, int]] = []
    outcome = verified_decode(
        engine, _whole_call(engine, [FORECAST]), max_tokens=256,
        watch=lambda text: seen.append((text, engine.stats.passes)),
    )  # fmt: skip
    assert outcome.finished
    final = outcome.text.encode()
    first_whole = next(passes for text, passes in seen if text == final)
    assert first_whole < engine.stats.passes
    # What it was shown ahead is what the run then wrote: each text a prefix of the final one.
    assert all(final.startswith(text) for text, _ in seen)


def test_a_drafted_token_the_grammar_accepts_but_its_mask_leaves_out_is_not_taken_on_trust(
    fresh_engine,
):
    engine = fresh_engine
    expected = _constrained(engine, PARIS, [FORECAST])
    tokens = expected.tokens
    # After the tool's name the grammar forces '",' (its mask holds that token alone), yet it
    # accepts '"' then ','
    at = next(i for i, t in enumerate(tokens) if engine.token_bytes(t) == b'",')
    quote, comma = engine.tokenize('"'), engine.tokenize(",")
    draft = [*tokens[:at], *quote, *comma, *tokens[at + 1 :]]
    _prompt(engine, PARIS, [FORECAST])
    outcome = verified_decode(engine, _whole_call(engine, [FORECAST]), max_tokens=256, draft=draft)
    assert outcome.tokens == tokens
