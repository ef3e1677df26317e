"""Free text drafted from the conversation and verified many tokens a pass, losslessly.

The look-up and the pricing rule are pure; the writer runs on the embedded SmolLM2, whose
drafted reply must be exactly its undrafted one (text, stream, tokens, stop) in fewer passes.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, NamedTuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.schemas import CURRENT_WEATHER
from tests.test_decode_reply import BARE_LIST_HISTORY, SMOLLM2, prefilled
from weavehost.agent.model import EngineModel
from weavehost.decode import get_strategy
from weavehost.decode.answer_drafts import (
    ACCEPT_PRIORS,
    CONVERSATION,
    MAX_MATCH,
    MIN_MATCH,
    MIN_OWN_MATCH,
    OWN,
    REMEMBERED,
    START,
    SYSTEM,
    AnswerDrafts,
    DraftPricing,
    own_match,
)
from weavehost.decode.continuation import Continuation
from weavehost.decode.followers import FOLLOWERS
from weavehost.decode.padding import NO_PLAN, DecodePlan
from weavehost.decode.reply import Continued, ReplyWriter, Sampling
from weavehost.decode.restated import KEY, OPENING, RESULT, result_draft
from weavehost.engine import Engine
from weavehost.engine.calibrate import CostTable
from weavehost.engine.native import DEFAULT_KV_CACHE
from weavehost.formats import ToolCall
from weavehost.formats.base import call_texts, message_calls
from weavehost.formats.qwen import QWEN
from weavehost.gguf import read_metadata

# A machine where extra rows cost little (a phone's 4-row pass costs 1.1-1.2x one row): drafts pay.
CHEAP_ROWS = DecodePlan.from_table(
    CostTable({1: 0.010, 8: 0.011, 16: 0.012, 32: 0.014}, 0.0005, machine="cheap rows")
)
# The same, every pass as wide as its rows (no padding rows on another sequence).
CHEAP_UNPADDED = DecodePlan.from_table(CHEAP_ROWS.table, padding=False)  # type: ignore[arg-type]
# A machine where every row costs a whole pass: no draft can pay.
DEAR_ROWS = DecodePlan.from_table(
    CostTable({1: 0.010, 2: 0.020, 4: 0.040, 8: 0.080}, 0.010, machine="linear")
)
# The kind of a draft from a short match in the conversation's texts.
SHORT = DraftPricing.kind(CONVERSATION, MIN_MATCH)


def weather(city: str, conditions: str, temperature: float, humidity: int) -> list[dict[str, Any]]:
    """A conversation whose last message is a weather tool's JSON result."""
    result = {
        "city": city,
        "conditions": conditions,
        "temperature_c": temperature,
        "humidity": humidity,
    }
    return [
        {"role": "user", "content": f"What is the weather in {city}?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"name": "get_current_weather", "arguments": {"city": city}}],
        },
        {"role": "tool", "name": "get_current_weather", "content": json.dumps(result)},
    ]


WEATHER = weather("Paris", "partly cloudy", -2.9, 53)


# ------------------------------------------------------------------------------ the look-up


def test_the_longest_match_wins_and_its_most_recent_occurrence_is_drafted() -> None:
    drafts = AnswerDrafts(["the cat sat on the mat", "a dog sat on the sofa today"])
    assert drafts.propose("he sat on the") == " sofa today"  # "sat on the": the later text's
    assert drafts.propose("the cat sat") == " on the mat"  # "the cat sat": only the first's
    assert drafts.propose("the cat sat", max_chars=3) == " on"


def test_a_draft_ends_with_its_text_and_a_short_or_unknown_suffix_drafts_nothing() -> None:
    drafts = AnswerDrafts(["Buy milk", "and eggs"])
    assert drafts.propose("I will buy milk") == ""  # the text ends there: never into the next
    assert drafts.propose("Buy") == ""  # shorter than MIN_MATCH
    assert drafts.propose("nothing like it") == ""


def test_a_json_result_s_members_are_restated_so_a_key_drafts_its_value() -> None:
    drafts = AnswerDrafts.from_messages(
        [{"role": "system", "content": "Be brief. The humidity is unknown."}, *WEATHER]
    )
    assert drafts.propose("The humidity is ") == "53"  # the system prompt is not a source
    assert drafts.propose("a temperature c of ") == "-2.9"
    # The restated member ("conditions: partly cloudy") is the most recent occurrence.
    assert drafts.propose("In Paris it is partly") == " cloudy"
    assert (
        drafts.propose('"city": "Paris", "cond')
        == 'itions": "partly cloudy", "temperature_c": -2.9, "humidity": 53}'
    )


def test_a_call_the_assistant_made_is_drafted_when_the_answer_begins_it_again() -> None:
    drafts = AnswerDrafts.from_messages(WEATHER, render_calls=partial(call_texts, QWEN))
    # Qwen, after the result, begins the same call again (bare, or fenced and indented): from its
    # name on, the rest is drafted from the call it made.
    assert drafts.propose('{"name').startswith('": "get_current_weather", "arguments": {"city"')
    assert drafts.propose('```json\n{\n  "name').startswith('": "get_current_weather"')
    # A fenced copy is drafted from its fence on, its indented head too, not only from its name.
    fenced = drafts.propose("Here is the weather in Paris:\n\n```json")
    assert fenced.startswith('\n{\n  "name": "get_current_weather",\n  "arguments": {')
    assert AnswerDrafts.from_messages(WEATHER).propose('{"name') == ""  # no format: no call texts


def test_an_answer_s_first_characters_draft_the_call_it_begins_again_and_nothing_else() -> None:
    drafts = AnswerDrafts.from_messages(WEATHER, render_calls=partial(call_texts, QWEN))
    # Two characters say little, but a call made that begins with them is where Qwen goes on
    # after a result: the JSON result begins so too, later, and is not drafted there.
    assert drafts.propose('{"').startswith('name": "get_current_weather", "arguments": {"city"')
    assert drafts.propose("``").startswith('`json\n{\n  "name": "get_current_weather"')
    assert drafts.propose('{"c') == ""  # only the result begins so
    # So does a line's start after a line break: a fenced copy after a line of prose.
    fenced = drafts.propose("Here is the weather in Paris:\n\n``")
    assert fenced.startswith('`json\n{\n  "name": "get_current_weather"')
    assert (
        drafts.tokens_after(b"It is cold.\n``", DraftPricing(CHEAP_ROWS), 64, list)[1][0] == START
    )
    assert drafts.propose("Pa") == "" and drafts.propose("ame") == ""  # within texts only
    assert AnswerDrafts.from_messages(WEATHER).propose('{"') == ""  # no format: no calls
    # Such a draft is a kind of its own, priced apart from a short match anywhere in a text.
    pricing = DraftPricing(CHEAP_ROWS)
    tokens, kind, _ = drafts.tokens_after(b'{"', pricing, 64, list)
    assert tokens and kind == pricing.kind(START, 2) != pricing.kind(CONVERSATION, 2)
    _, anywhere, _ = AnswerDrafts(["a cat sat"]).tokens_after(b"a cat s", pricing, 64, list)
    assert anywhere == pricing.kind(CONVERSATION, len("a cat s"))


def test_a_message_s_calls_are_read_in_either_shape_and_a_malformed_one_is_left_out() -> None:
    message = {
        "role": "assistant",
        "tool_calls": [
            {"name": "get_current_weather", "arguments": {"city": "Oslo"}},
            {"function": {"name": "get_forecast", "arguments": '{"city": "Oslo", "days": 2}'}},
            {"function": {"name": "get_forecast", "arguments": "{not json"}},
            {"name": "", "arguments": {}},
            {"name": "list_files", "arguments": ["not", "an", "object"]},
            "not a call",
        ],
    }
    assert message_calls(message) == [
        ToolCall("get_current_weather", {"city": "Oslo"}),
        ToolCall("get_forecast", {"city": "Oslo", "days": 2}),
    ]
    assert message_calls({"role": "assistant", "content": "hi"}) == []


# ------------------------------------------------------------------------- the pricing rule


def test_without_a_cost_table_nothing_is_drafted() -> None:
    assert DraftPricing(NO_PLAN).rows(16, SHORT) == 0


def test_where_every_row_costs_a_pass_nothing_is_drafted_at_any_rate_short_of_certain() -> None:
    pricing = DraftPricing(DEAR_ROWS)
    for _ in range(1000):
        pricing.count(SHORT, False, True)
        pricing.count(SHORT, True, True)
    pricing.count(SHORT, False, False)
    assert pricing.rows(16, SHORT) == 0


def test_cheap_rows_are_drafted_at_a_good_rate_and_not_at_a_poor_one_until_measured_good() -> None:
    pricing = DraftPricing(CHEAP_ROWS)
    (first, later) = ACCEPT_PRIORS[SHORT]
    assert pricing.rates(SHORT) == (first[1] / first[0], later[1] / later[0])
    assert 1 < pricing.rows(32, SHORT) <= 32 and pricing.rows(3, SHORT) == 3  # the room bounds it
    for _ in range(200):
        pricing.count(SHORT, False, False)
    assert pricing.rows(32, SHORT) == 0  # a poor rate: nothing pays
    for _ in range(600):  # unsent drafts the text then followed (counted by the writer)
        pricing.count(SHORT, False, True)
    assert pricing.rows(32, SHORT) > 0


def test_a_draft_s_first_token_and_the_tokens_after_an_accepted_one_are_priced_apart() -> None:
    # A machine where a second row costs nearly a first and eight cost three (x86 repacked
    # kernels): a draft pays only where, once its first token is kept, the rest mostly are.
    table = CostTable({1: 0.012, 2: 0.022, 4: 0.028, 8: 0.037, 16: 0.048}, 0.0015, machine="x86")
    copying = DraftPricing(DecodePlan.from_table(table))
    guessing = DraftPricing(DecodePlan.from_table(table))
    for n in range(100):  # the same first-token rate (60%) in both
        for pricing in (copying, guessing):
            pricing.count(SHORT, False, n % 5 < 3)
        copying.count(SHORT, True, True)  # after a kept token, the next is kept: copying
        guessing.count(SHORT, True, n % 5 < 3)  # or each token a fresh guess at the same 60%
    assert copying.rows(32, SHORT) >= 7
    assert guessing.rows(32, SHORT) == 0


def test_a_longer_match_is_its_own_kind_of_draft() -> None:
    pricing = DraftPricing(CHEAP_ROWS)
    short, long = pricing.kind(CONVERSATION, MIN_MATCH), pricing.kind(CONVERSATION, 40)
    assert short != long and pricing.kind(CONVERSATION, 7) == short
    assert pricing.kind(CONVERSATION, 33) == long == pricing.kind(CONVERSATION, MAX_MATCH)
    for _ in range(200):
        pricing.count(short, False, False)
    assert pricing.rows(32, short) == 0  # short matches: poor
    assert pricing.rows(32, long) > 1  # long ones keep their own rate


def test_an_answer_s_own_earlier_text_drafts_what_followed_its_suffix_there_going_round_again(
) -> None:  # fmt: skip
    text = "The trip budget is 100.\n- The trip budget is"
    period = " 100.\n- The trip budget is"  # what followed the suffix's earlier occurrence
    assert own_match(text, max_chars=len(period)) == (period, len("The trip budget is"))
    # Past the text's end the draft goes round the loop again, as the look-up at each drafted
    # token would: SmolLM2-135M writing "os.path.join(os.path.join(" drafts a pass full.
    assert own_match(text, max_chars=60)[0] == (period * 3)[:60]
    assert own_match("x = os.path.join(os.path.join(os.")[0].startswith(
        "path.join(os.path.join(os.path.join(os.path.join(")  # fmt: skip
    assert own_match("abc, abc") == ("", 0)  # shorter than MIN_OWN_MATCH
    # A short match is a kind of its own (a list's frame: "\n- `" then a key, in backticks).
    assert own_match('\n- `city`: "Berlin"\n- `')[1] == len("\n- `") < 8
    assert own_match("no repeat in this text at all") == ("", 0)
    # The answer's own text is a kind of its own, priced apart from the conversation's.
    pricing = DraftPricing(CHEAP_ROWS)
    own, conversation = pricing.kind(OWN, 8), pricing.kind(CONVERSATION, 8)
    assert pricing.kind(OWN, MIN_OWN_MATCH) != own
    assert own != conversation != pricing.kind(REMEMBERED, 8) != own
    for _ in range(200):
        pricing.count(own, False, False)
    assert pricing.rows(32, own) == 0 and pricing.rows(32, conversation) > 1


def test_a_numbered_list_s_next_number_drafts_the_frame_of_the_item_before() -> None:
    # Qwen2.5-Coder-0.5B's lists: "2" and "2." were read a pass each, the frame undrafted.
    listed = "Here it is:\n\n1. **Function Name**: `make_phone_call`\n"
    assert own_match(listed + "2") == (". **Function Name**: `make_phone_call`", 1)
    assert own_match(listed + "2.") == (" **Function Name**: `make_phone_call`", 2)
    indented = "Forecast:\n  1. day 1: rain\n  2. day 2: fog\n  3"
    assert own_match(indented) == (". day 2: fog", 3)
    # Only the item before, as a number of its own: not "15", a phone number, nor item 1.
    assert own_match("Call:\n15. a\n2")[0] == ""
    assert own_match("Call 1357890123\n1357890123\n2") == ("", 0)
    assert own_match("Steps:\n1") == ("", 0)


PARIS = "Paris: partly cloudy, -2.9 C, humidity 53%, wind 20.8 km/h"


def text_results(*results: str) -> list[dict[str, Any]]:
    """A conversation whose weather tool returned each of ``results`` as plain text."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "How is the weather?"}]
    for result in results:
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [
                {"name": "get_current_weather", "arguments": {"city": result.split(":")[0]}}]},
            {"role": "tool", "name": "get_current_weather", "content": result},
        ]  # fmt: skip
    return messages


def test_the_prompt_s_head_is_looked_up_oldest_and_its_drafts_are_a_kind_of_their_own() -> None:
    tools = '{"name": "get_forecast", "description": "Get a daily weather forecast for a city."}'
    drafts = AnswerDrafts.from_messages(WEATHER, ["I can get a daily report"], head=[tools])
    assert drafts.match('"get_forecast", "description": "Get') == (
        " a daily weather forecast for a city.\"}", len('"get_forecast", "description": "Get'),
        SYSTEM)  # fmt: skip
    # Where a remembered answer or the conversation holds the same words, theirs is drafted.
    assert drafts.match("I can get a daily")[::2] == (" report", REMEMBERED)
    assert drafts.match("weather in Paris is ")[2] != SYSTEM
    assert AnswerDrafts.from_messages(WEATHER).match('"get_forecast", "description": "Get')[0] == ""
    pricing = DraftPricing(CHEAP_ROWS)
    assert len({pricing.kind(SYSTEM, 8), pricing.kind(REMEMBERED, 8)}) == 2


def test_a_draft_no_row_pays_for_gives_way_to_the_next_that_pays_and_is_still_measured() -> None:
    # A remembered answer holds a longer match than the conversation ("The weather in Paris
    # was" against " Paris was"): where remembered drafts are measured bad, the conversation's
    # shorter match is sent, and the remembered one is still checked, unsent.
    said = [*text_results(PARIS), {"role": "user", "content": "In Paris was cold?"}]
    drafts = AnswerDrafts.from_messages(said, ["The weather in Paris was lovely today"])
    pricing = DraftPricing(CHEAP_ROWS)
    written = b"The weather in Paris was"
    tokens, kind, passed = drafts.tokens_after(written, pricing, 64, list)
    assert kind[0] == REMEMBERED and "".join(tokens).startswith(" lovely") and passed is None
    for _ in range(400):
        pricing.count(kind, False, False)
    tokens, sent, passed = drafts.tokens_after(written, pricing, 64, list)
    assert sent[0] == CONVERSATION and "".join(tokens).startswith(" cold?")
    assert passed == (kind, " lovely today")
    # Nothing pays for any: nothing is sent, and the best is what is checked.
    for candidate in [pricing.kind(CONVERSATION, b) for b in (0, 8)] + [pricing.kind(OWN, 8)]:
        for _ in range(400):
            pricing.count(candidate, False, False)
    assert drafts.tokens_after(written, pricing, 64, list) == ([], kind, (kind, " lovely today"))
    assert [d[2] for d in drafts.drafts_at(written)] == [REMEMBERED, CONVERSATION]


def test_a_line_after_one_that_introduces_it_drafts_the_most_recent_result_from_its_start() -> None:
    # Qwen2.5-Coder-0.5B: "Here is the weather in Paris right now:\n\nParis: partly cloudy, …"
    # and "tool_response>\n…": no suffix of what it wrote says where the copy begins.
    drafts = AnswerDrafts.from_messages(text_results("Oslo: snow, -4.0 C", PARIS))
    assert drafts.draft_at(b"Here is the weather in Paris right now:\n\n") == (PARIS, 0, RESULT)
    assert drafts.draft_at(b"tool_response>\n")[::2] == (PARIS, RESULT)
    assert drafts.draft_at(b"It is cold.\n")[2] != RESULT  # a line that introduces nothing
    assert drafts.draft_at(b"Here it is:")[2] != RESULT  # not yet on the next line
    assert result_draft("Here it is:\n", []) == ("", "")  # no result, no draft


def test_an_answer_that_so_far_is_a_result_s_beginning_is_drafted_the_rest_of_that_result(
) -> None:  # fmt: skip
    # SmolLM2-135M answers "Paris: partly cloudy, …", "Madrid: fog, …", "battery at 73%": its
    # first token is too short a suffix to look up, but the whole answer so far is where a
    # result begins.
    drafts = AnswerDrafts.from_messages(text_results(PARIS, "Oslo: snow, -4.0 C", "Paris 2"))
    assert drafts.draft_at(b"O") == ("slo: snow, -4.0 C", 0, OPENING)
    assert drafts.draft_at(b" Paris:")[::2] == (PARIS[len("Paris:") :], OPENING)  # spaces before
    assert drafts.draft_at(b"Pa")[0] == "ris 2"  # the most recent result that begins so
    assert drafts.draft_at(b"Paris 2")[2] != OPENING  # nothing of that result is left
    assert drafts.draft_at(b"Lima")[2] != OPENING  # no result begins so
    assert drafts.draft_at(b"It is Paris:")[2] != OPENING  # only from the answer's start
    # Once the answer is longer than the look-up reads, its start is not known: no opening.
    long = PARIS * 10
    assert result_draft(long[:-3], [long]) == ("", "")
    assert result_draft(long[:-3], [long], whole=True) == (long[-3:], OPENING)
    # A kind of its own, priced apart from a result drafted at a line's start.
    pricing = DraftPricing(CHEAP_ROWS)
    for _ in range(200):
        pricing.count(pricing.kind(RESULT, 0), False, False)
    assert (
        pricing.rows(32, pricing.kind(RESULT, 0)) == 0 < pricing.rows(32, pricing.kind(OPENING, 0))
    )


def test_a_word_and_a_connective_draft_what_follows_the_word_in_the_most_recent_result_holding_it() -> (
    None
):
    drafts = AnswerDrafts.from_messages(text_results(PARIS, "Windows: 11\nBerlin: wind 5.3 km/h"))
    assert drafts.draft_at(b"The humidity is") == (" 53%, wind 20.8 km/h", 0, KEY)
    assert drafts.draft_at(b"2. Humidity: ")[::2] == ("53%, wind 20.8 km/h", KEY)  # any case
    # The most recent result holding "wind" as a word ("Windows" is another word), to its
    # line's end, after the separator and the key's closing backtick.
    assert drafts.draft_at(b"   - `wind`:")[::2] == (" 5.3 km/h", KEY)
    assert result_draft("The pressure is", [PARIS]) == ("", "")  # no result holds the word
    assert result_draft("The humidity", [PARIS]) == ("", "")  # no connective: not a key yet
    # A match of LONG_MATCH characters or more is drafted before what the structure says.
    assert drafts.draft_at(b"Paris: partly cloudy, -2.9 C, humidity")[::2] == (
        " 53%, wind 20.8 km/h", CONVERSATION)  # fmt: skip
    # Each is a kind of its own, priced by its own rate.
    pricing = DraftPricing(CHEAP_ROWS)
    kinds = {pricing.kind(RESULT, 0), pricing.kind(KEY, 0), pricing.kind(CONVERSATION, 0)}
    assert len(kinds) == 3
    for _ in range(200):
        pricing.count(pricing.kind(RESULT, 0), False, False)
    assert pricing.rows(32, pricing.kind(RESULT, 0)) == 0 < pricing.rows(32, pricing.kind(KEY, 0))


# ----------------------------------------------------------------------- on the real model


class Written(NamedTuple):
    free: Continued
    shown: list[str]
    held: list[int]  # the tokens held after the conversation
    drafted: int  # drafted tokens the engine read
    peak: int  # the most KV cells in use while it was written


def written(
    engine: Engine,
    messages: Sequence[Mapping[str, Any]],
    *,
    drafts: bool,
    plan: DecodePlan = CHEAP_ROWS,
    bound: int = 40,
    source: AnswerDrafts | None = None,
    writer: ReplyWriter | None = None,
    **options: Any,
) -> Written:
    """The reply to ``messages`` by ``writer`` (default: a new one). A tool is on offer (in the
    prompt) where ``offered`` names it; ``source`` drafts instead of the conversation's texts."""
    held = prefilled(engine, messages, [CURRENT_WEATHER] if options.get("offered") else [])
    start, drafted = len(held), engine.stats.drafted_tokens
    engine.reset_kv_peak()
    writer = writer or ReplyWriter(engine, SMOLLM2, plan=plan)
    shown: list[str] = []
    if source is None and drafts:
        source = AnswerDrafts.from_messages(messages)
    free = writer.continue_reply(held, bound, shown.append, drafts=source, **options)
    assert engine.seq_len(0) == len(held)  # nothing drafted and unchosen stays in the sequence
    return Written(
        free, shown, held[start:], engine.stats.drafted_tokens - drafted, engine.kv_cells_peak
    )


def same_reply(a: Written, b: Written) -> None:
    (free_a, shown_a, held_a, _, _), (free_b, shown_b, held_b, _, _) = a, b
    assert (free_a.text, free_a.stop, free_a.tokens, free_a.trigger) == (
        free_b.text,
        free_b.stop,
        free_b.tokens,
        free_b.trigger,
    )
    assert (
        held_a == held_b
        and "".join(shown_a) == "".join(shown_b) == free_a.text[: len("".join(shown_a))]
    )


def test_a_restated_result_is_written_in_fewer_passes_with_the_same_text_stream_and_tokens(
    fresh_engine,
):
    plain = written(fresh_engine, WEATHER, drafts=False)
    drafted = written(fresh_engine, WEATHER, drafts=True)
    same_reply(drafted, plain)
    assert "53" in drafted.free.text and drafted.free.stop == "end"
    assert drafted.drafted > 0 and plain.drafted == 0
    assert drafted.free.passes < plain.free.passes == plain.free.tokens


def test_what_is_shown_is_decided_a_token_at_a_time_drafted_or_not_and_sent_once_a_pass(
    fresh_engine, monkeypatch: pytest.MonkeyPatch
):
    # Where call text is cut or taken back depends on what was shown before it: drafted tokens
    # kept without a pass are shown token by token as undrafted ones are, and only their
    # sending waits for the pass.
    shown: list[str] = []
    take = Continuation.take

    def recorded(self: Continuation, token: int) -> None:
        shown.append(self.shown)
        take(self, token)

    monkeypatch.setattr(Continuation, "take", recorded)
    plain = written(fresh_engine, WEATHER, drafts=False)
    plain_shown, shown[:] = list(shown), []
    drafted = written(fresh_engine, WEATHER, drafts=True)
    same_reply(drafted, plain)
    assert shown == plain_shown and "53" in shown[-1]
    assert len(drafted.shown) <= drafted.free.passes + 1 < len(plain.shown) == plain.free.tokens


def test_an_answer_that_repeats_itself_is_drafted_from_its_own_text_with_the_same_text(
    fresh_engine,
):
    # Nothing to copy (an empty source): SmolLM2-135M, shown a list whose lines share a frame,
    # writes the next list in the same frame ("1. The task for Tuesday is to buy eggs.\n2. The
    # task for Tuesday is to ..."), whose later lines its own first line drafts.
    messages = [
        {"role": "user", "content": "Give me the list of tasks for Monday."},
        {
            "role": "assistant",
            "content": "1. The task for Monday is to buy milk.\n2. The task for Monday is to "
            "call Anna.\n3. The task for Monday is to pay rent.",
        },
        {"role": "user", "content": "Now the list of tasks for Tuesday."},
    ]
    plain = written(fresh_engine, messages, drafts=False, bound=120)
    drafted = written(fresh_engine, messages, drafts=True, bound=120, source=AnswerDrafts([]))
    same_reply(drafted, plain)
    assert drafted.free.text.count("The task for Tuesday is") >= 2
    assert drafted.drafted > 0 and drafted.free.passes < plain.free.passes == plain.free.tokens


def test_a_reply_no_text_holds_is_drafted_from_what_the_model_wrote_after_the_same_tokens(
    fresh_engine,
):
    # Nothing to copy (an empty source): the first reply takes about a pass a token (its own
    # "over the" twice aside); the same writer's second reply to the same question is drafted
    # from the tokens the model wrote after each token and pair the first time
    # (decode.followers).
    messages = [{"role": "user", "content": "Describe a quiet morning by a lake in one sentence."}]
    plain = written(fresh_engine, messages, drafts=False, bound=30)
    writer = ReplyWriter(fresh_engine, SMOLLM2, plan=CHEAP_ROWS)
    first, again = (
        written(
            fresh_engine, messages, drafts=True, bound=30, source=AnswerDrafts([]), writer=writer
        )  # fmt: skip
        for _ in range(2)
    )
    same_reply(first, plain)
    same_reply(again, plain)
    assert plain.free.passes == plain.free.tokens > 15 and first.free.passes > 15
    assert again.drafted > first.drafted and again.free.passes < first.free.passes / 2
    kind = DraftPricing.kind(FOLLOWERS, 1)
    assert writer.pricing.rates(kind) != DraftPricing(CHEAP_ROWS).rates(kind)  # measured


@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    city=st.sampled_from(["Oslo", "Lima", "New York City", "Cape Town"]),
    conditions=st.sampled_from(["light rain", "clear sky", "overcast clouds"]),
    temperature=st.integers(-15, 35).map(lambda t: t / 2),
    humidity=st.integers(10, 99),
)
def test_drafted_and_undrafted_replies_to_tool_results_are_identical(
    fresh_engine, city, conditions, temperature, humidity
):
    messages = weather(city, conditions, temperature, humidity)
    same_reply(
        written(fresh_engine, messages, drafts=True, bound=32),
        written(fresh_engine, messages, drafts=False, bound=32),
    )


def test_an_answer_that_restates_a_result_would_have_kept_its_drafts_and_novel_text_none(engine):
    result = "Paris: partly cloudy, -2.9 C, humidity 53%"
    said = [{"role": "user", "content": "Weather?"}, {"role": "tool", "content": result}]
    drafts = AnswerDrafts.from_messages(said)
    tokens = engine.tokenize("Here it is. " + result)
    kept = drafts.kept_after(tokens, engine.token_bytes, engine.tokenize)
    copies = drafts.copies_after(tokens, engine.token_bytes)
    # Once "Paris" is written, the draft is the rest of the result: every token after it kept.
    paris = next(
        i for i in range(len(tokens)) if engine.detokenize(tokens[: i + 1]).endswith("Paris")
    )
    assert kept[paris] == len(tokens) - 1 - paris > 5
    assert kept[0] == 0  # "Here" begins nothing the conversation holds
    # A copy from anywhere in the conversation is at least what the writer's draft kept.
    assert all(c >= k for c, k in zip(copies, kept, strict=True)) and copies[paris] == kept[paris]
    novel = engine.tokenize("Hello there")
    assert AnswerDrafts(["0123 4567"]).kept_after(novel, engine.token_bytes, engine.tokenize) == [
        0
    ] * len(novel)
    assert AnswerDrafts(["0123 4567"]).copies_after(novel, engine.token_bytes) == [0] * len(novel)


def test_a_machine_where_no_row_pays_drafts_nothing_and_takes_the_plain_passes(fresh_engine):
    plain = written(fresh_engine, WEATHER, drafts=False, plan=DEAR_ROWS)
    drafted = written(fresh_engine, WEATHER, drafts=True, plan=DEAR_ROWS)
    same_reply(drafted, plain)
    assert drafted.drafted == 0 and drafted.free.passes == plain.free.passes


def test_drafts_no_row_pays_for_are_still_measured_by_the_text_chosen_instead(fresh_engine):
    # On a machine where no draft pays at its prior, the reply that restates the result is
    # written one token a pass, and each draft looked up on the way is checked against the
    # tokens chosen: its kind's rate is measured, and would be drafted once it paid.
    held = prefilled(fresh_engine, WEATHER, [])
    writer = ReplyWriter(fresh_engine, SMOLLM2, plan=DEAR_ROWS)
    drafted = fresh_engine.stats.drafted_tokens
    free = writer.continue_reply(
        held, 40, lambda _: None, drafts=AnswerDrafts.from_messages(WEATHER)
    )
    assert "53" in free.text and free.passes == free.tokens
    assert fresh_engine.stats.drafted_tokens == drafted  # nothing was sent
    prior = DraftPricing(NO_PLAN)
    measured = [k for k in ACCEPT_PRIORS if writer.pricing.rates(k) != prior.rates(k)]
    assert measured, "no kind's rate moved from its prior"
    # The copy was followed: once a copied token is kept, the next mostly is too.
    assert any(writer.pricing.rates(k)[1] > prior.rates(k)[1] for k in measured)


def test_an_unsent_draft_keeps_only_the_token_a_sent_one_would_have_carried(
    fresh_engine, monkeypatch: pytest.MonkeyPatch
):
    # A token whose text only begins the draft's first token ("a" before "apple") is not the
    # token the draft would have sent: counted reached, not kept, and the draft is dropped.
    counted: list[tuple[bool, bool]] = []
    monkeypatch.setattr(
        DraftPricing, "count", lambda _self, _kind, later, kept: counted.append((later, kept))
    )
    held = prefilled(fresh_engine, WEATHER, [])
    writer = ReplyWriter(fresh_engine, SMOLLM2, plan=DEAR_ROWS)
    drafts = AnswerDrafts.from_messages(WEATHER)
    continuation = Continuation(writer, held, lambda _: None, (), True, None, drafts)
    draft = fresh_engine.tokenize("apple pie")
    shorter = fresh_engine.tokenize("a")[0]
    assert draft[0] != shorter and b"apple pie".startswith(fresh_engine.token_bytes(shorter))
    kind = (CONVERSATION, 16)
    continuation.unsent = (kind, list(draft), False)
    continuation.count_draft(shorter)
    assert counted == [(False, False)] and continuation.unsent is None
    # The draft's own first token is kept, and the next is then counted as a later one.
    continuation.unsent = (kind, list(draft), False)
    continuation.count_draft(draft[0])
    continuation.count_draft(draft[1])
    assert counted[1:] == [(False, True), (True, True)]
    assert continuation.unsent == ((kind, draft[2:], True) if draft[2:] else None)


def test_the_best_draft_passed_over_is_counted_beside_the_lesser_one_sent_in_its_place(
    fresh_engine, monkeypatch: pytest.MonkeyPatch
):
    counted: list[tuple[Any, bool, bool]] = []
    monkeypatch.setattr(
        DraftPricing, "count", lambda _self, kind, later, kept: counted.append((kind, later, kept))
    )
    held = prefilled(fresh_engine, WEATHER, [])
    writer = ReplyWriter(fresh_engine, SMOLLM2, plan=DEAR_ROWS)
    drafts = AnswerDrafts.from_messages(WEATHER)
    continuation = Continuation(writer, held, lambda _: None, (), True, None, drafts)
    sent, passed = fresh_engine.tokenize(" cold"), fresh_engine.tokenize(" lovely")
    continuation.ahead, continuation.ahead_kind = [(sent[0], None)], (CONVERSATION, 8)
    continuation.unsent = ((REMEMBERED, 16), passed, False)
    continuation.count_draft(sent[0])
    assert counted == [((CONVERSATION, 8), False, True), ((REMEMBERED, 16), False, False)]
    assert continuation.unsent is None


def test_the_prompt_s_head_is_the_system_text_and_the_tools_as_the_template_writes_them(
    fresh_engine, embedded_model_path
):
    metadata = read_metadata(embedded_model_path)
    model = EngineModel(fresh_engine, SMOLLM2, get_strategy("weave"),
                        chat_template=metadata.chat_template, guidance=True)  # fmt: skip
    asked = [{"role": "system", "content": "Answer in one line."},
             {"role": "user", "content": "Weather in Oslo?"}]  # fmt: skip
    head = model.prompt_head(asked, [CURRENT_WEATHER])
    prompt, text = fresh_engine.detokenize(model.render(asked, [CURRENT_WEATHER])), "".join(head)
    assert head and all(piece in prompt for piece in head)
    assert "Answer in one line." in text and "Get the current weather in a city." in text
    assert "Oslo" not in text and not any(s in text for s in fresh_engine.special_texts)
    drafts = AnswerDrafts.from_messages(asked, head=head)
    draft, _, source = drafts.match("I can get the current")
    assert draft.startswith(" weather in a city.") and source == SYSTEM
    assert model.prompt_head(asked, []) != head  # the tools are part of it
    # A template that refuses the marked conversation, a single message (any template error
    # is a FormatError), gives no head: nothing to draft from, the reply written as without.
    refusing = EngineModel(fresh_engine, SMOLLM2, get_strategy("weave"), chat_template=(
        "{% if messages|length < 3 %}{{ raise_exception('one message is no conversation') }}"
        "{% endif %}{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}"))  # fmt: skip
    longer = [*asked, {"role": "assistant", "content": "Sunny."},
              {"role": "user", "content": "And in Lima?"}]  # fmt: skip
    assert refusing.prompt_head(longer, [CURRENT_WEATHER]) == ()
    assert refusing.render(longer, [CURRENT_WEATHER])  # the conversation itself renders


def test_a_sampled_reply_is_never_drafted(fresh_engine):
    hot = Sampling(temperature=0.8, seed=7)
    plain = written(fresh_engine, WEATHER, drafts=False, sampling=hot)
    drafted = written(fresh_engine, WEATHER, drafts=True, sampling=hot)
    same_reply(drafted, plain)
    assert drafted.drafted == 0


def test_a_trigger_inside_drafted_text_is_caught_at_its_first_token(fresh_engine):
    # The earlier reply's call is in the conversation: the draft proposes it again, trigger and all.
    offered = {"offered": [CURRENT_WEATHER.name]}
    plain = written(fresh_engine, BARE_LIST_HISTORY, drafts=False, **offered)
    first = int(fresh_engine.last_logits(0).argmax())
    drafted = written(fresh_engine, BARE_LIST_HISTORY, drafts=True, **offered)
    same_reply(drafted, plain)
    assert drafted.drafted > 0  # the call's text was drafted
    assert (drafted.free.stop, drafted.free.tokens, drafted.held) == ("call", 0, [])
    assert int(fresh_engine.last_logits(0).argmax()) == first  # the prompt's own next token


def test_a_ban_cuts_a_drafted_run_where_it_cuts_an_undrafted_one(fresh_engine):
    # Calls not allowed: the drafted call text is banned at its first token and taken back, as
    # many times as without drafts, and the answer goes on (or is cut) at the same place.
    no_call = {"offered": [CURRENT_WEATHER.name], "allow_call": False}
    plain = written(fresh_engine, BARE_LIST_HISTORY, drafts=False, **no_call)
    drafted = written(fresh_engine, BARE_LIST_HISTORY, drafts=True, **no_call)
    same_reply(drafted, plain)
    assert drafted.drafted > 0


@pytest.mark.parametrize("refused", [False, True])
def test_a_drafted_call_is_read_no_further_than_where_the_reply_decides_on_it(
    fresh_engine, refused
):
    # The earlier reply's call is drafted again. The reply stops for it once its JSON names the
    # tool, or (the tool refused) takes it back once the name has begun: drafted rows past that
    # point would be dropped unread, so they are not read at all, and the reply is the same.
    options: dict[str, Any] = {"offered": [CURRENT_WEATHER.name]}
    if refused:
        options["refused"] = [CURRENT_WEATHER.name]
    plain = written(fresh_engine, BARE_LIST_HISTORY, drafts=False, **options)
    drafted = written(fresh_engine, BARE_LIST_HISTORY, drafts=True, **options)
    same_reply(drafted, plain)
    naming = fresh_engine.tokenize('[{"name": "get_current_weather"')
    assert 0 < drafted.drafted <= len(naming)
    assert drafted.free.stop == ("end" if refused else "call")


@pytest.mark.parametrize("bound", [9, 14])
def test_a_bound_cuts_a_drafted_run_where_it_cuts_an_undrafted_one(fresh_engine, bound):
    plain = written(fresh_engine, WEATHER, drafts=False, bound=bound, plan=CHEAP_UNPADDED)
    drafted = written(fresh_engine, WEATHER, drafts=True, bound=bound, plan=CHEAP_UNPADDED)
    same_reply(drafted, plain)
    assert (drafted.free.stop, drafted.free.tokens, len(drafted.held)) == (
        "max_tokens",
        bound,
        bound,
    )
    assert drafted.drafted > 0 and drafted.free.passes < plain.free.passes
    # No token past the bound was ever read, not even as a draft.
    assert drafted.peak <= plain.peak


def with_notes(messages: list[dict[str, Any]], lines: int = 35) -> list[dict[str, Any]]:
    """``messages`` after a system message of ``lines`` inventory notes: past 512 cells."""
    facts = "\n".join(
        f"item {i}: {i * 7} units, shelf {i % 9}, checked on day {i % 28 + 1}" for i in range(lines)
    )
    return [
        {"role": "system", "content": "Inventory notes for later questions:\n" + facts},
        *messages,
    ]


@pytest.fixture(
    scope="module",
    params=[(DEFAULT_KV_CACHE, True), ("q8_0", True), (DEFAULT_KV_CACHE, False)],
    ids=["q8_0-k", "q8_0", "q8_0-k without flash attention"],
)
def exact_engine(embedded_model_path, request) -> Any:
    """The embedded model where a wide pass computes each row as a one-row pass does
    (``native.exact_wide_passes``): quantized keys with flash attention on (the default cache,
    q8_0 keys over f16 values, and an all-q8_0 one), and the default cache with it off in the
    README's build (no llamafile sgemm); two threads, where an f16 cache's one-row passes over
    512 cells or more take another sum order than wide ones with flash attention on."""
    kv_cache, flash_attn = request.param
    with Engine.open(
        embedded_model_path,
        n_ctx=2048,
        n_seq_max=16,
        n_threads=2,
        kv_cache=kv_cache,
        flash_attn=flash_attn,
    ) as engine:
        yield engine


@pytest.mark.model
@pytest.mark.parametrize("city", ["Lima", "Rome", "Madrid"])
def test_where_wide_passes_are_exact_drafted_and_undrafted_replies_agree_in_every_logit_gap(
    exact_engine, city
):
    # Past 512 cells. With an f16 cache and flash attention on, or with it off in a build with
    # llamafile's sgemm, each drafted reply is other text (measured): its one-row passes sum
    # attention in another order than the drafted passes (docs/engine.md).
    messages = with_notes(weather(city, "light rain", 4.5, 80))
    drafted = written(exact_engine, messages, drafts=True, margins=True)
    assert exact_engine.seq_len(0) - len(drafted.held) >= 512  # the prompt alone
    plain = written(exact_engine, messages, drafts=False, margins=True)
    same_reply(drafted, plain)
    assert drafted.drafted > 0 and drafted.free.passes < plain.free.passes
    assert drafted.free.margins == plain.free.margins  # bit for bit, not near-ties that held
