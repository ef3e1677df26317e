"""Calls that happen: a call written as a model writes it, not only as its format's opener.

Real models, real servers: the embedded SmolLM2 writes a bare ``[{"name"`` list (a trigger that
is not its layout's opener) and every strategy finishes it; Qwen2.5-Coder-0.5B, asked the time in
Tokyo with ``auto``, writes a bare ``{"name"`` object, and the call runs on a stdio time server.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

from tests.schemas import CURRENT_WEATHER
from tests.test_decode_answer_drafts import CHEAP_ROWS
from weavehost import Host
from weavehost.agent.model import EngineModel, FreeText
from weavehost.decode import STRATEGIES, CallResult, get_strategy
from weavehost.decode.calibration import open_calibrated
from weavehost.decode.call_again import BRANCH_SEQ, branch_pays
from weavehost.decode.continuation import CALL_TEXT_RETRIES, Continuation
from weavehost.engine import Engine
from weavehost.engine.vocab import no_word_start
from weavehost.formats import FORMATS, ToolCall
from weavehost.gguf import read_metadata
from weavehost.testing import Events

TIME_SERVER = Path(__file__).parent / "host_fixtures" / "time_server.py"
WEATHER_SERVER = Path(__file__).parent.parent / "tools" / "weather.py"
# Made by ``python -m weavehost.bench.assets`` (CI fetches it; the tests' own cache is empty).
# A hang guard, not a speed claim: the Tokyo turn is three steps of a 0.5B model on a busy
# 2-core machine (~80 s measured); a healthy run on a CI runner is far below.
QWEN_TURN_BOUND_S = 600
SMOL_TURN_BOUND_S = 120

# The pattern SmolLM2-135M then follows by itself: its calls as a bare list, no tags.
BARE_LIST_HISTORY = [
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "role": "assistant",
        "content": '[{"name": "get_current_weather", "arguments": {"city": "Oslo"}}]',
    },
    {"role": "user", "content": "Weather in Paris?"},
]


@pytest.mark.parametrize("strategy", sorted(STRATEGIES))
def test_a_bare_list_smollm2_writes_is_a_call_that_every_strategy_finishes_in_that_layout(
    fresh_engine, strategy
):
    model = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy(strategy))
    model.sync(BARE_LIST_HISTORY, [CURRENT_WEATHER])
    free = model.free_decode(lambda _text: None, 40)
    assert (free.call, free.text) == (True, "")
    result = model.write_call([CURRENT_WEATHER], lambda _call: None, 64)
    assert result.calls == [ToolCall("get_current_weather", {"city": "Paris"})]
    assert result.text.startswith('[{"name"')  # in the trigger's layout, not <tool_call>


def test_an_answer_that_may_not_call_takes_back_the_call_smollm2_writes_another_way_and_goes_on_in_words(
    fresh_engine,
):
    # With the list's opener banned, SmolLM2-135M writes {{"name": "get_current_weather", ...:
    # that is taken back, and a word is written where it began.
    model = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy("weave"))
    model.sync(BARE_LIST_HISTORY, [CURRENT_WEATHER])
    shown: list[str] = []
    free = model.free_decode(shown.append, 80, allow_call=False)
    assert (free.call, free.stop) == (False, "end")
    assert free.text == "".join(shown) and free.text[:1].isalnum()
    assert '"name"' not in free.text and "get_current_weather" not in free.text


def test_an_answer_that_takes_back_call_text_reads_the_word_start_table_its_model_was_given(
    fresh_engine, monkeypatch: pytest.MonkeyPatch
):
    # Built while the model opened (the host's opening does so), the table is not built again
    # in the gap before the word that follows the first take-back (~40 ms for Qwen).
    table = no_word_start(fresh_engine)
    model = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy("weave"),
                        no_word_start=table)  # fmt: skip
    monkeypatch.setattr("weavehost.decode.reply.no_word_start", _not_built_again)
    model.sync(BARE_LIST_HISTORY, [CURRENT_WEATHER])
    free = model.free_decode(lambda _text: None, 80, allow_call=False)
    assert (free.call, free.stop) == (False, "end") and free.text[:1].isalnum()
    assert '"name"' not in free.text


def _not_built_again(_engine: Engine) -> None:
    raise AssertionError("the word-start table was built during the answer")


# Qwen2.5-Coder-0.5B after a weather result: its answer is the call again, as call text.
PARIS_ANSWERED = [
    {"role": "user", "content": "What is the weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"name": "get_current_weather", "arguments": {"city": "Paris"}}]},
    {"role": "tool", "content": "Paris: partly cloudy, -2.9 C, humidity 53%, wind 20.8 km/h"},
]  # fmt: skip


# The same, asked "right now": Qwen then opens the call again after its first line.
PARIS_ANSWERED_ASKED_NOW = [
    {**PARIS_ANSWERED[0], "content": "What is the weather in Paris right now?"},
    *PARIS_ANSWERED[1:],
]


@pytest.fixture(scope="module")
def qwen_model(qwen_gguf: Path) -> Iterator[EngineModel]:
    with Engine.open(qwen_gguf, n_ctx=2048, n_seq_max=4, n_threads=2) as engine:
        yield EngineModel(engine, FORMATS["qwen"], get_strategy("weave"))


def assert_the_refused_call_again_is_taken_back(
    free: FreeText, taken: list[str], head: str, refused: tuple[str, ...]
) -> None:
    """Paris's weather call begun again (its name written after ``head``): with its tool
    refused, each text taken back began it and was taken back once the name had begun, before
    it was whole, and the answer went on from the result; without, the reply stopped for the
    call before any text."""
    if not refused:
        assert free.call and free.text == "" and not taken
        return
    assert (free.call, free.stop) == (False, "end")
    assert '"name"' not in free.text and "-2.9 C" in free.text
    naming = head + "get_current_weather"
    assert taken and all(
        naming.startswith(text) and len(head) < len(text) < len(naming) for text in taken
    ), taken


@pytest.mark.parametrize("retries", [CALL_TEXT_RETRIES, 0])
def test_qwen_s_call_text_in_an_answer_is_taken_back_for_words_until_the_retries_are_spent_then_cut(
    qwen_model: EngineModel, retries: int, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setattr("weavehost.decode.continuation.CALL_TEXT_RETRIES", retries)
    # With the opening mark banned where it was taken back only (not for the rest of the
    # answer), Qwen writes the call again another way: what the retries are for.
    monkeypatch.setattr(Continuation, "bans_everywhere", lambda _self, _opener: False)
    qwen_model.reset()
    qwen_model.sync(PARIS_ANSWERED, [CURRENT_WEATHER])
    shown: list[str] = []
    free = qwen_model.free_decode(shown.append, 120, allow_call=False)
    assert free.text == "".join(shown)
    assert '"name"' not in free.text and "{" not in free.text
    if retries:
        assert free.stop == "end" and "-2.9 C" in free.text
    else:  # cut where the call text began: what was shown stays the answer
        assert free.stop == "call_text" and "-2.9" not in free.text


def test_drafted_call_text_is_taken_back_or_cut_where_undrafted_is_and_the_text_is_sent_a_pass_at_a_time(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch
):
    # Where call text is taken back or cut depends on what was shown before it began. Qwen
    # writes a line of prose, then opens the call again (fenced, a copy of the call it made:
    # drafted many tokens a pass). Drafted or not, the same text ends the same way; drafted,
    # the text reaches the stream once a pass, the tokens a pass kept in one piece.
    monkeypatch.setattr(Continuation, "bans_everywhere", lambda _self, _opener: False)
    replies = []
    with open_calibrated(qwen_gguf, n_threads=2, n_ctx=2048, plan=CHEAP_ROWS) as opened:
        for drafts in (False, True):
            strategy = get_strategy("weave", opened.state)
            model = EngineModel(opened.engine, FORMATS["qwen"], strategy,
                                answer_drafts=drafts)  # fmt: skip
            model.sync(PARIS_ANSWERED_ASKED_NOW, [CURRENT_WEATHER])
            pieces: list[str] = []
            free = model.free_decode(pieces.append, 120, allow_call=False)
            replies.append((free, pieces))
    (plain, plain_pieces), (drafted, drafted_pieces) = replies
    assert (drafted.text, drafted.stop, drafted.token_ids) == (
        plain.text, plain.stop, plain.token_ids)  # fmt: skip
    assert "".join(drafted_pieces) == "".join(plain_pieces) == drafted.text
    assert "Paris" in drafted.text and '"name"' not in drafted.text
    assert drafted.passes < plain.passes
    assert len(drafted_pieces) <= drafted.passes + 1 < len(plain_pieces)


@pytest.mark.parametrize(
    ("conversation", "allow_call", "refused"),
    [
        (PARIS_ANSWERED, True, ("get_current_weather",)),  # bare, the answer's first token
        (PARIS_ANSWERED_ASKED_NOW, False, ()),  # fenced, after a line of prose
    ],
)
def test_the_token_chosen_where_a_call_begun_again_is_taken_back_was_read_beside_its_start_and_drafts_the_next(
    qwen_gguf: Path,
    monkeypatch: pytest.MonkeyPatch,
    conversation: list[dict],
    allow_call: bool,
    refused: tuple[str, ...],
):
    # Shown Paris's weather, Qwen begins the call it made again, and it is taken back at its
    # first token. Drafted, the token chosen there instead was read beside that first token on
    # a sequence of its own (a branch, emptied after that pass), and the token it chose next
    # is drafted after it: the same text as undrafted, in fewer passes than drafted without
    # branches.
    guesses: list[int] = []
    guess = Continuation.branch_guess

    def recorded(self: Continuation, token: int) -> int | None:
        guessed = guess(self, token)
        guesses.extend([] if guessed is None else [guessed])
        return guessed

    monkeypatch.setattr(Continuation, "branch_guess", recorded)
    replies = []
    with open_calibrated(qwen_gguf, n_threads=2, n_ctx=2048, plan=CHEAP_ROWS) as opened:
        for drafts, branches in ((False, False), (True, False), (True, True)):
            pays = branch_pays if branches else (lambda _pricing, _rows: False)
            monkeypatch.setattr("weavehost.decode.continuation.branch_pays", pays)
            strategy = get_strategy("weave", opened.state)
            model = EngineModel(opened.engine, FORMATS["qwen"], strategy,
                                answer_drafts=drafts)  # fmt: skip
            model.sync(conversation, [CURRENT_WEATHER])
            replies.append(model.free_decode(lambda _text: None, 120, allow_call, refused=refused))
            assert opened.engine.seq_len(BRANCH_SEQ) == 0
    plain, unbranched, branched = replies
    assert branched.token_ids == unbranched.token_ids == plain.token_ids
    assert branched.stop == plain.stop == "end" and "-2.9 C" in plain.text
    assert len(guesses) == 1 and guesses[0] in plain.token_ids
    assert branched.passes < unbranched.passes < plain.passes


def test_where_the_cache_has_no_cell_to_spare_no_branch_is_read_and_the_answer_is_the_same(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch
):
    guesses: list[list[int]] = []
    guess = Continuation.branch_guess

    def recorded(self: Continuation, token: int) -> int | None:
        guessed = guess(self, token)
        guesses[-1].extend([] if guessed is None else [guessed])
        return guessed

    monkeypatch.setattr(Continuation, "branch_guess", recorded)
    replies = []
    with open_calibrated(qwen_gguf, n_threads=2, n_ctx=2048, plan=CHEAP_ROWS) as opened:
        for full in (False, True):
            if full:  # every cell in use but a few: fewer than the branch's pass needs
                monkeypatch.setattr(Engine, "kv_cells", property(lambda engine: engine.n_ctx - 4))
            guesses.append([])
            strategy = get_strategy("weave", opened.state)
            model = EngineModel(opened.engine, FORMATS["qwen"], strategy, answer_drafts=True)
            model.sync(PARIS_ANSWERED, [CURRENT_WEATHER])
            refused = ("get_current_weather",)
            replies.append(model.free_decode(lambda _text: None, 120, True, refused=refused))
    (roomy, full), (read, unread) = replies, guesses
    assert full.token_ids == roomy.token_ids and "-2.9 C" in full.text
    assert read and not unread


def test_a_mark_that_began_call_text_taken_back_is_not_written_again_in_the_same_answer(
    qwen_model: EngineModel, monkeypatch: pytest.MonkeyPatch
):
    # Unbanned, Qwen opens the same call again on the answer's next line, costing the passes
    # to write it before it is taken back a second time.
    openers: list[int] = []
    take_back = Continuation.take_back

    def recorded(self: Continuation, first: int) -> None:
        openers.append(self.tokens[first])
        take_back(self, first)

    monkeypatch.setattr(Continuation, "take_back", recorded)
    qwen_model.reset()
    qwen_model.sync(PARIS_ANSWERED_ASKED_NOW, [CURRENT_WEATHER])
    free = qwen_model.free_decode(lambda _text: None, 120, allow_call=False)
    assert openers and len(openers) == len(set(openers))
    assert free.stop == "end" and "-2.9 C" in free.text


@pytest.mark.parametrize("refused", [(), ("get_current_weather",)])
def test_qwen_s_call_again_after_a_result_is_taken_back_as_soon_as_its_json_can_name_only_a_refused_tool(
    qwen_model: EngineModel, taken: list[str], refused: tuple[str, ...]
):
    # Shown Paris's weather, Qwen opens the same call again. Calls are allowed, but the caller
    # refuses this tool (it answered this turn): the call is taken back once its name has
    # begun, before the rest of the name is written (the passes that would take), with no call
    # written, and the answer goes on from the result.
    qwen_model.reset()
    qwen_model.sync(PARIS_ANSWERED, [CURRENT_WEATHER])
    free = qwen_model.free_decode(lambda _text: None, 120, allow_call=True, refused=refused)
    assert_the_refused_call_again_is_taken_back(free, taken, '{"name": "', refused)


@pytest.mark.parametrize("refused", [(), ("get_current_weather",)])
def test_smollm2_s_tagged_call_again_after_a_result_is_taken_back_once_its_name_can_be_only_a_refused_tool_s(
    fresh_engine, taken: list[str], refused: tuple[str, ...]
):
    # Shown Paris's weather "right now", the embedded SmolLM2 opens the same call again, in its
    # tags. With the tool refused (it answered this turn) the JSON after the tag is read as
    # the format's own layout would write it: taken back once its name has begun, before the
    # whole call is written and dropped, and the answer goes on from the result. Without,
    # the tag is a call at once, as always.
    model = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy("weave"))
    model.sync(PARIS_ANSWERED_ASKED_NOW, [CURRENT_WEATHER])
    free = model.free_decode(lambda _text: None, 120, allow_call=True, refused=refused)
    assert_the_refused_call_again_is_taken_back(free, taken, '<tool_call>[{"name": "', refused)


@pytest.mark.parametrize("bound", [6, 9])
def test_smollm2_s_tag_still_judged_when_its_bound_is_reached_is_a_call_as_an_unjudged_tag_is(
    fresh_engine, bound: int
):
    # The bound cuts the same tagged call again inside its JSON, its name not yet whole: the
    # tag is not left in the answer's text; the reply stops for a call there, as it did
    # before a tag's JSON was judged (the call's own budget then writes it).
    model = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy("weave"))
    model.sync(PARIS_ANSWERED_ASKED_NOW, [CURRENT_WEATHER])
    refused = ("get_current_weather",)
    free = model.free_decode(lambda _text: None, bound, allow_call=True, refused=refused)
    assert (free.call, free.text) == (True, "")


def test_smollm2_s_tag_where_no_call_may_be_made_is_taken_back_at_once_though_a_tool_is_refused(
    fresh_engine, taken: list[str]
):
    # Calls not allowed: a tag is taken back where it is written, its JSON never read on.
    model = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy("weave"))
    model.sync(PARIS_ANSWERED_ASKED_NOW, [CURRENT_WEATHER])
    refused = ("get_current_weather",)
    free = model.free_decode(lambda _text: None, 120, allow_call=False, refused=refused)
    assert free.stop == "end" and "<tool_call>" not in free.text
    assert taken and all("name" not in text for text in taken), taken


# Paris's weather asked, called, and the call failed: no tool is refused (another call may
# fix the error), but the embedded SmolLM2 writes the very same call again.
PARIS_FAILED = [
    {"role": "user", "content": "Weather in Paris?"},
    PARIS_ANSWERED[1],
    {"role": "tool", "content": "Error: the weather service did not answer in time"},
]
PARIS_CALL = ToolCall("get_current_weather", {"city": "Paris"})


@pytest.mark.parametrize("made", [(), (PARIS_CALL.canonical(),)])
def test_smollm2_s_call_again_after_an_error_is_taken_back_once_written_whole_when_the_turn_made_it(
    fresh_engine, taken: list[str], made: tuple[str, ...]
):
    # Told the turn's calls, the reply judges a call to their tool to its arguments' close:
    # the same call again, which the session would drop once written, is taken back there
    # and the answer goes on from the result. Not told, the tag is a call, and the strategy
    # writes that same call.
    model = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy("weave"))
    model.sync(PARIS_FAILED, [CURRENT_WEATHER])
    free = model.free_decode(lambda _text: None, 120, allow_call=True, made=made)
    if not made:
        assert (free.call, free.text, taken) == (True, "", [])
        written = model.write_calls([CURRENT_WEATHER], lambda _i, _c: None, 64, budget=128)
        assert [call.canonical() for r in written for call in r.calls] == [PARIS_CALL.canonical()]
        return
    assert taken == ['<tool_call>[{"name": "get_current_weather", "arguments": {"city": "Paris"}}']
    assert (free.call, free.stop) == (False, "end")
    assert "<tool_call>" not in free.text and "weather service" in free.text


def test_smollm2_s_repeat_is_judged_in_a_pass_or_two_without_drafts_and_the_reply_is_the_one_judged_a_pass_a_token(
    fresh_engine, taken: list[str], monkeypatch: pytest.MonkeyPatch
):
    # No calibration here, so no answer drafts: the rest of the call made is verified in one
    # pass once the JSON names its tool (Continuation.repeat_draft), not read a token a pass.
    model = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy("weave"))
    replies = []
    for draft in (True, False):
        if not draft:
            monkeypatch.setattr(Continuation, "repeat_draft", lambda _self: [])
        fresh_engine.clear()
        model.reset()
        model.sync(PARIS_FAILED, [CURRENT_WEATHER])
        made = (PARIS_CALL.canonical(),)
        replies.append(model.free_decode(lambda _text: None, 120, allow_call=True, made=made))
    drafted, plain = replies
    assert (drafted.text, drafted.token_ids, drafted.stop) == (
        plain.text,
        plain.token_ids,
        plain.stop,
    )
    assert taken[0] == taken[1] and taken[0].endswith('{"city": "Paris"}}')
    rest = len(fresh_engine.tokenize(', "arguments": {"city": "Paris"}'))
    assert drafted.passes <= plain.passes - rest + 2, (drafted.passes, plain.passes)


# SmolLM2-135M follows an assistant turn that says something, then calls.
TEXT_THEN_CALL_HISTORY = [
    {"role": "user", "content": "Weather in Oslo?"},
    {
        "role": "assistant",
        "content": "Let me look that up for you.\n<tool_call>\n"
        '{"name": "get_current_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
    },
    {"role": "user", "content": "Weather in Paris?"},
]


def test_a_reply_whose_call_is_not_run_goes_on_after_its_text_as_the_model_writes_where_no_call_may_be_made(
    fresh_engine,
):
    # The session drops a reply's call (a repeat) after its text was shown: the reply goes on
    # from where the call began, the text shown once, as if no call had been allowed there.
    never = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy("weave"))
    never.sync(TEXT_THEN_CALL_HISTORY, [CURRENT_WEATHER])
    expected = never.free_decode(lambda _text: None, 80, allow_call=False)
    fresh_engine.clear()
    model = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy("weave"))
    model.sync(TEXT_THEN_CALL_HISTORY, [CURRENT_WEATHER])
    shown: list[str] = []
    free = model.free_decode(shown.append, 80)
    assert free.call and free.text and expected.text.startswith(free.text)
    written = model.write_calls([CURRENT_WEATHER], lambda _i, _c: None, 64, budget=128)
    assert [call for r in written for call in r.calls] == [PARIS_CALL]
    resumed = model.resume_free(shown.append, 80 - free.tokens)
    assert resumed is not None and (resumed.text, resumed.stop) == (expected.text, expected.stop)
    assert "".join(shown) == expected.text and "<tool_call>" not in expected.text
    assert resumed.tokens == expected.tokens - free.tokens
    assert fresh_engine.seq_len(0) == len(model.held)
    assert model.resume_free(shown.append, 80) is None  # once: nothing left to go on with
    model.sync(TEXT_THEN_CALL_HISTORY, [CURRENT_WEATHER])
    assert model.free_decode(lambda _text: None, 80).call
    model.sync(TEXT_THEN_CALL_HISTORY, [CURRENT_WEATHER])
    assert model.resume_free(shown.append, 80) is None  # a sync since: nothing to go on with


def test_a_sync_reports_a_digest_of_its_prompt_that_tells_apart_two_prompts_of_one_size(
    fresh_engine,
):
    # A clock's seconds in a result change no prompt's size: bench-agent tells by the digest
    # that two runs of a turn were shown other text (bench.answer_gaps.first_parting).
    model = EngineModel(fresh_engine, FORMATS["smollm2"], get_strategy("weave"))
    other = [
        *PARIS_ANSWERED[:2],
        {**PARIS_ANSWERED[2], "content": PARIS_ANSWERED[2]["content"].replace("-2.9", "-2.8")},
    ]
    first, again = (model.sync(PARIS_ANSWERED, [CURRENT_WEATHER]) for _ in range(2))
    changed = model.sync(other, [CURRENT_WEATHER])
    assert first.total == again.total == changed.total
    assert first.digest == again.digest != changed.digest and len(first.digest) == 16


PARIS_ASKED = [{"role": "user", "content": "What is the weather in Paris?"}]


def _paris_called(qwen_model: EngineModel, qwen_gguf: Path) -> tuple[EngineModel, int, CallResult]:
    """A Qwen model with its GGUF's template after a forced call for Paris's weather: the model,
    the prompt's length, and the call's result."""
    template = read_metadata(qwen_gguf).chat_template
    model = EngineModel(qwen_model.engine, FORMATS["qwen"], get_strategy("weave"),
                        chat_template=template)  # fmt: skip
    model.reset()
    model.sync(PARIS_ASKED, [CURRENT_WEATHER])
    model.free_decode(lambda _text: None, 0)  # a forced call, as tool_choice="required" does
    prompt = len(model.held)
    [result] = model.write_calls([CURRENT_WEATHER], lambda _i, _call: None, 64, budget=512)
    assert [call.name for call in result.calls] == [CURRENT_WEATHER.name]
    return model, prompt, result


def _called(result: CallResult) -> dict[str, object]:
    call = result.calls[0]
    return {"role": "assistant", "content": "",
            "tool_calls": [{"name": call.name, "arguments": dict(call.arguments)}]}  # fmt: skip


def test_a_reply_that_opens_with_a_call_is_held_as_the_history_renders_it_so_the_next_step_reads_the_call_from_the_cache(
    qwen_model: EngineModel, qwen_gguf: Path
):
    # Qwen2.5's template writes a reply of calls with an empty text as assistant\n\n<tool_call>,
    # where the model read assistant\n: the line break is read again before the call is
    # written, so the next step's history matches the cache on into the call.
    model, prompt, result = _paris_called(qwen_model, qwen_gguf)
    answered = [*PARIS_ASKED, _called(result), {"role": "tool", "content": "Paris: sunny"}]
    synced = model.sync(answered, [CURRENT_WEATHER])
    # The whole call is read from the cache, its values too (the template writes them apart,
    # and they tokenize otherwise there), up to the closer the model spelled in its own way.
    closer = model.engine.tokenize("</tool_call>", special=True)
    assert synced.reused >= prompt + len(result.tokens) - len(closer)


def test_a_tool_result_that_spells_a_call_the_model_wrote_is_tokenized_as_any_text_not_as_that_call(
    qwen_model: EngineModel, qwen_gguf: Path
):
    # A call is read as the strategy wrote it only where the template wrote it: the same text
    # inside a tool's result is tokenized as if no call were remembered.
    model, _prompt, result = _paris_called(qwen_model, qwen_gguf)
    spelled = f"Echo: {result.text} (end)"
    conversation = [*PARIS_ASKED, _called(result), {"role": "tool", "content": spelled}]
    remembered = model.render(conversation, [CURRENT_WEATHER])
    # The same conversation on a model that wrote no call: every piece tokenized as its own.
    plain = EngineModel(model.engine, FORMATS["qwen"], get_strategy("weave"),
                        chat_template=model.chat_template).render(conversation, [CURRENT_WEATHER])  # fmt: skip
    [turn] = model.engine.tokenize("<|im_start|>", special=True)
    tool_turn = len(plain) - [i for i, t in enumerate(plain) if t == turn][-2]
    assert remembered[-tool_turn:] == plain[-tool_turn:]  # the tool's turn: as any text
    assert remembered[:-tool_turn] != plain[:-tool_turn]  # the call: as the strategy wrote it


# A ChatML template that writes <tool_call> (so Qwen's format uses it) but refuses a reply of
# calls, as GGUF templates raise on what they do not expect: only a history that holds one
# fails to render, with a FormatError.
REFUSES_CALLS = (
    "{# calls go in <tool_call> tags #}"
    "{% for m in messages %}{% if m.tool_calls %}{{ raise_exception('no calls here') }}"
    "{% endif %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "<|im_start|>assistant\n"
)


def test_a_template_that_fails_on_a_reply_of_calls_still_lets_the_call_be_written(fresh_engine):
    # The probe that finds what the history renders before a call fails: nothing is read
    # again, and the call is written as it always was.
    model = EngineModel(fresh_engine, FORMATS["qwen"], get_strategy("weave"),
                        chat_template=REFUSES_CALLS)  # fmt: skip
    model.sync(PARIS_ASKED, [CURRENT_WEATHER])
    model.free_decode(lambda _text: None, 0)
    prompt = list(model.held)
    [result] = model.write_calls([CURRENT_WEATHER], lambda _i, _call: None, 64, budget=512)
    assert [call.name for call in result.calls] == [CURRENT_WEATHER.name]
    assert model.held[: len(prompt)] == prompt  # the prompt as it was read


def weather_server() -> MCPServer:
    server = MCPServer("weather", log_level="WARNING")

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def get_current_weather(city: str) -> str:
        """Get the current weather in a city."""
        return f"{city}: sunny, 20 C"

    return server


@pytest.mark.model
@pytest.mark.anyio
async def test_a_call_begun_as_a_bare_list_runs_and_the_next_step_shows_it_in_the_canonical_form(
    embedded_model_path,
):
    async with Host(model=str(embedded_model_path), inproc={"weather": weather_server()},
                    trust=["weather"], tool_choice="auto", prompt_cache=False,
                    max_steps=2, threads=2) as host:  # fmt: skip
        session = host.session()
        session.messages.extend(BARE_LIST_HISTORY[:2])
        prompt = "Weather in Paris?"
        events = await Events.collect(session.run(prompt), timeout=SMOL_TURN_BOUND_S)
        held = host.model.engine.detokenize(host.model.held)  # type: ignore[union-attr]
    assert events.of("final_call")[0]["arguments"] == {"city": "Paris"}
    assert events.of("tool_result")[0]["text"] == "Paris: sunny, 20 C"
    # The history re-renders the call as SmolLM2's own format writes it (a second call the
    # model may add to the list follows it there).
    call = '<tool_call>[{"name": "get_current_weather", "arguments": {"city": "Paris"}}'
    assert f"Weather in Paris?<|im_end|>\n<|im_start|>assistant\n{call}" in held
    assert '\n[{"name": "get_current_weather", "arguments": {"city": "Paris"}}' not in held


@pytest.mark.model
@pytest.mark.anyio
async def test_a_host_builds_the_word_start_table_while_its_model_opens_and_not_in_a_turn(
    embedded_model_path, monkeypatch: pytest.MonkeyPatch
):
    built_in: list[str] = []

    def recorded(engine: Engine):
        built_in.append(threading.current_thread().name)
        return no_word_start(engine)

    monkeypatch.setattr("weavehost.engine.vocab.no_word_start", recorded)
    monkeypatch.setattr("weavehost.decode.reply.no_word_start", recorded)
    async with Host(model=str(embedded_model_path), inproc={"weather": weather_server()},
                    trust=["weather"], tool_choice="auto", prompt_cache=False,
                    max_steps=2, threads=2) as host:  # fmt: skip
        session = host.session()
        session.messages.extend(BARE_LIST_HISTORY[:2])
        events = await Events.collect(session.run("Weather in Paris?"), timeout=SMOL_TURN_BOUND_S)
    assert events.of("done")
    assert len(built_in) == 1 and built_in[0].startswith("weavehost-load")


@pytest.mark.model
@pytest.mark.anyio
async def test_qwen_asked_the_time_in_tokyo_with_auto_runs_get_current_time_and_answers_with_the_time(
    qwen_gguf: Path,
):
    events = await _qwen_turn(qwen_gguf, TIME_SERVER, "What time is it in Tokyo right now?")
    calls = events.of("final_call")
    assert calls and (calls[0]["name"], calls[0]["arguments"]) == (
        "get_current_time",
        {"timezone": "Asia/Tokyo"},
    )
    result = events.of("tool_result")[0]
    assert result["status"] == "ok"
    clock = json.loads(result["text"])["datetime"][11:16]  # HH:MM in Tokyo
    answer = _answer_after_the_last_result(events)
    assert clock in answer
    assert "<tool_call>" not in answer and '"name"' not in answer and '"arguments"' not in answer
    assert events.of("done")[0]["stop"] == "answer"


@pytest.mark.model
@pytest.mark.anyio
async def test_qwen_that_repeats_its_call_instead_of_answering_answers_in_words_with_the_result(
    qwen_gguf: Path,
):
    # Qwen2.5-Coder-0.5B calls again after the result; the repeat is not run, and in the answer
    # that follows it first ends at once, then writes the call as bare JSON: each is taken back
    # and a word written in its place, so the answer carries the result.
    events = await _qwen_turn(qwen_gguf, WEATHER_SERVER, "What's the current weather in Berlin?")
    assert [e["text"] for e in events.of("tool_result")] == [
        "Berlin: thunderstorms, 7.0 C, humidity 52%, wind 4.7 km/h"
    ]
    answer = _answer_after_the_last_result(events)
    assert "7.0 C" in answer
    assert '"name"' not in answer and "{" not in answer
    assert not [n for n in events.of("notice") if "cut" in n["text"]]
    assert events.of("done")[0]["stop"] == "answer"


def _answer_after_the_last_result(events: Events) -> str:
    last_result = max(i for i, e in enumerate(events) if e.type == "tool_result")
    return "".join(e["text"] for e in events[last_result:] if e.type == "text")


async def _qwen_turn(qwen_gguf: Path, server: Path, prompt: str) -> Events:
    """Every event of one turn on Qwen with ``auto``, the one trusted stdio ``server``."""
    async with Host(servers=[str(server)], trust=[server.stem], model=str(qwen_gguf),
                    tool_choice="auto", prompt_cache=False, threads=2) as host:  # fmt: skip
        return await Events.collect(host.run(prompt), timeout=QWEN_TURN_BOUND_S)
