"""Draft proposal (weavehost/decode/drafts.py): plain unit tests, no model."""

from __future__ import annotations

import json

import pytest

from weavehost.decode.drafts import (
    MIN_MATCH,
    NUMBER_ENDS,
    STRING_ENDS,
    DraftSource,
)
from weavehost.formats.functiongemma import FUNCTIONGEMMA

CALL = '{"name": "get_weather", "arguments": {'


def propose(texts: list[str], written: str, **options: object) -> str:
    return DraftSource(texts).propose(written, **options)  # type: ignore[arg-type]


# Strings copied from the conversation


def test_a_city_copied_from_the_request_is_drafted_to_the_end_of_its_word() -> None:
    # A copied value is mostly a name: the draft ends with its word, not with the sentence.
    assert propose(["What's the weather in Paris today?"], CALL + '"city": "Par') == "is"


def test_a_name_goes_on_with_the_capitalised_words_that_follow_it() -> None:
    texts = ["Drive from New York City to Washington D.C. and Los Angeles."]
    assert propose(texts, '{"from": "Ne') == ""  # under min_match
    assert propose(texts, '{"from": "New') == " York City"
    assert propose(texts, '{"to": "Washin') == "gton D.C"  # a sentence's full stop ends it
    assert propose(texts, '{"to": "Los Ang') == "eles"


def test_a_path_runs_on_through_its_dots_and_a_lowercase_next_word_is_not_drafted() -> None:
    texts = ["open notes.txt and then Budget 2024.xlsx"]
    assert propose(texts, '{"path": "not') == "es.txt"
    assert propose(texts, '{"path": "notes.txt') == ""  # "and" is no name's part
    assert propose(texts, '{"path": "Budg') == "et 2024.xlsx"


def test_a_copied_phrase_goes_on_to_the_end_of_its_clause_and_ends_there() -> None:
    source = DraftSource(["Could you wake me at a quarter past seven in the morning? Thanks"])
    written = '{"label": "Wake me'
    rest = " at a quarter past seven in the morning"
    assert source.guess(written) == (rest, "phrase", STRING_ENDS)
    # Inside the clause the phrase does not end at its word.
    assert source.guess(written + " at a quart") == (
        "er past seven in the morning",
        "phrase",
        STRING_ENDS,
    )
    cut = source.guess(written, max_chars=10)
    assert cut is not None and (cut.text, cut.ends) == (rest[:10], ())
    # A name's next lowercase word is no phrase: "New York" goes on with its capitalised words.
    names = DraftSource(["Drive from New York City to Boston."])
    assert names.guess('{"from": "New Y') == ("ork City", "string", STRING_ENDS)


def test_a_draft_ends_with_its_source_text() -> None:
    texts = ["Paris", "and tomorrow?"]
    assert propose(texts, CALL + '"city": "Par') == "is"


def test_the_most_recent_occurrence_is_preferred() -> None:
    texts = ["fly me to Paris", "no, to Parma"]
    assert propose(texts, CALL + '"city": "Par') == "ma"


def test_a_longer_match_is_preferred_over_a_more_recent_one() -> None:
    texts = ["the weather in Paris", "or in Parma"]
    assert propose(texts, '{"query": "weather in Par') == "is"


def test_nothing_matching_drafts_nothing() -> None:
    assert propose(["What's the weather in Paris today?"], CALL + '"city": "Lon') == ""
    assert DraftSource([]).propose(CALL + '"city": "Par') == ""


def test_a_suffix_shorter_than_min_match_drafts_nothing() -> None:
    assert MIN_MATCH == 3
    texts = ["What's the weather in Paris today?"]
    assert propose(texts, CALL + '"city": "Pa') == ""
    assert DraftSource(texts, min_match=2).propose(CALL + '"city": "Pa') == "ris"


def test_min_match_must_be_positive() -> None:
    with pytest.raises(ValueError, match="min_match"):
        DraftSource(["x"], min_match=0)


def test_a_value_that_has_written_nothing_yet_drafts_nothing() -> None:
    texts = ["What's the weather in Paris today? 3 days"]
    assert propose(texts, CALL + '"city": "') == ""
    assert propose(texts, CALL + '"days": ') == ""
    assert propose(texts, CALL + '"days": "') == ""


def test_a_key_or_the_structure_between_values_draws_no_draft() -> None:
    texts = ["city weather in Paris today"]
    assert propose(texts, CALL + '"cit') == ""
    assert propose(texts, CALL + '"city": "Paris", "wea') == ""
    assert propose(texts, CALL + '"city": "Paris"') == ""
    assert propose(texts, CALL + '"city": "Paris", ') == ""


def test_the_match_never_reaches_back_past_the_opening_quote() -> None:
    # "in Pa" occurs in the text, but only "Pa" (under min_match) is the value's.
    texts = ["What's the weather in Paris today?"]
    assert propose(texts, '{"in": "Pa') == ""


def test_string_items_of_an_array_are_drafted() -> None:
    texts = ["compare Paris and Berlin"]
    assert propose(texts, '{"cities": ["Paris", "Ber') == "lin"


def test_a_draft_stops_before_a_quote_or_a_line_break_of_its_source() -> None:
    texts = ['Send "hello world" to Bob\nthen stop']
    assert propose(texts, '{"message": "hel') == "lo"
    # The written value's escaped quote matches the source's quote.
    assert propose(texts, '{"message": "Send \\"hello world\\" to B') == "ob"


def test_a_backslash_runs_on_and_a_begun_escape_is_completed() -> None:
    texts = ["open C:\\Users\\bob\\notes.txt please"]
    assert propose(texts, '{"path": "C:\\\\Us') == "ers\\\\bob\\\\notes.txt"
    assert propose(texts, '{"path": "C:\\\\Users\\') == "\\bob\\\\notes.txt"
    quoted = ['say "hi there" now']
    assert propose(quoted, '{"text": "say \\') == '"hi'


def test_a_begun_unicode_escape_is_completed_and_a_literal_one_is_not_taken_for_it() -> None:
    # DEL is written \u007f; a literal backslash-u in a source is written \\u.
    source = DraftSource(["a\u007fbc"], min_match=2)
    assert source.propose('{"v": "a\\') == "u007fbc"
    assert source.propose('{"v": "a\\u00') == "7fbc"
    assert DraftSource(["x\\u00y"], min_match=2).propose('{"v": "Q\\u00') == ""


def test_a_string_draft_keeps_the_value_one_well_formed_string() -> None:
    # Cut the value at every point, escapes included; whatever is drafted (min_match 1 drafts
    # often, and wrongly), the value and its draft close as one JSON string.
    text = 'a "b" c\t"d\\" e\u007f f\x00 g \u00e9\u2028 h\\u00z'
    encoded = json.dumps(text, ensure_ascii=False)[1:-1].replace("\x7f", "\\u007f")
    drafted = 0
    for cut in range(len(encoded)):
        value = encoded[:cut]
        draft = DraftSource([text], min_match=1).propose('{"v": "' + value)
        if draft:
            drafted += 1
            assert isinstance(json.loads('"' + value + draft + '"'), str), (value, draft)
    assert drafted > len(encoded) // 2


def test_a_match_at_another_point_of_an_escape_drafts_nothing() -> None:
    # The source a\"b is indexed a\\\"b: the last occurrence of the value's escaped backslash
    # \\ there is its second backslash and the first half of \", so a raw quote would follow.
    source = DraftSource(['a\\"b'], min_match=2)
    assert source.propose('{"v": "Q\\\\') == ""
    assert source.propose('{"v": "a\\\\') == ""  # aligned: the draft would begin with \"


def test_unicode_text_is_drafted_as_written() -> None:
    texts = ["Wetter in Zürich, dann 東京都"]
    assert propose(texts, '{"city": "Zür') == "ich"
    assert DraftSource(texts, min_match=2).propose('{"city": "東京') == "都"


def test_max_chars_bounds_the_draft() -> None:
    texts = ["What's the weather in Paris today?"]
    assert propose(texts, CALL + '"city": "Par', max_chars=1) == "i"
    assert propose(texts, CALL + '"city": "Par', max_chars=0) == ""


def test_in_string_says_where_the_value_is_when_the_caller_knows() -> None:
    texts = ["What's the weather in Paris today? 15 days"]
    assert propose(texts, "Par", in_string=True) == "is"
    assert propose(texts, ' "Par', in_string=True) == "is"
    assert propose(texts, ' "Par', in_string=False) == ""
    assert propose(texts, " 1", in_string=False) == "5"


# Numbers


def test_a_number_continues_with_the_digits_of_a_number_in_the_texts() -> None:
    texts = ["the forecast for 15 days, please"]
    assert propose(texts, CALL + '"days": 1') == "5"
    assert propose(["a 3.5 km walk"], '{"km": 3') == ".5"
    assert propose(["it is -12 degrees"], '{"t": -') == "12"
    assert propose(["add 15 and 17"], '{"xs": [15, 1') == "7"
    assert propose(["limit it to 1,500 rows"], '{"limit": 15') == "00"
    assert propose(["the list 1,2,3"], '{"xs": [1, 2, 3') == ""


def test_a_number_is_matched_from_its_start_only() -> None:
    assert propose(["back in 2015 or v12"], '{"days": 1') == ""
    assert propose(["the 15 days"], '{"name": "x1') == ""  # digits in a string are text


def test_the_most_recent_number_is_preferred_even_when_it_is_complete() -> None:
    assert propose(["15 days", "no, 17 days"], '{"days": 1') == "7"
    assert propose(["150 days", "no, 1 day"], '{"days": 1') == ""


# The index


def test_one_index_answers_many_proposals_on_a_long_conversation() -> None:
    filler = "lorem ipsum dolor sit amet " * 2000  # 54k characters
    source = DraftSource([filler + "to Parma", filler + "to Paris today", "42 items"])
    for _ in range(1000):
        assert source.propose(CALL + '"city": "Par') == "is"
        assert source.propose('{"n": 4') == "2"


def test_from_messages_reads_users_tools_and_earlier_calls_but_not_the_system_prompt() -> None:
    messages = [
        {"role": "system", "content": "You are helpful. Prefer Parma."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Lyon", "days": 7}},
                {"function": {"name": "f", "arguments": '{"path": "/srv/data.csv"}'}},
            ],
        },
        {"role": "tool", "content": [{"type": "text", "text": "Sunny in Marseille"}]},
    ]
    source = DraftSource.from_messages(messages)
    assert source.propose('{"city": "Par') == "is"
    assert source.propose('{"city": "Ly') == ""  # under min_match
    assert source.propose('{"city": "Lyo') == "n"
    assert source.propose('{"path": "/srv/da') == "ta.csv"
    assert source.propose('{"city": "Mars') == "eille"
    assert source.propose('{"days": ') == ""
    assert DraftSource.from_messages(messages, min_match=2).propose('{"city": "Ly') == "on"
    assert source.propose('{"text": "Che') == "cking"


# Schema drafts


# Guesses with their kind, and where a value begins


def test_a_value_not_begun_guesses_the_requests_first_number_not_yet_written() -> None:
    source = DraftSource([], request="A triangle with a base of 10 and a height of 5.")
    assert source.guess(CALL + '"base": ') == ("10", "start", NUMBER_ENDS)
    assert source.guess(CALL + '"base": 10, "height": ') == ("5", "start", NUMBER_ENDS)
    assert source.guess(CALL + '"base": 10, "height": 5, "depth": ') is None


def test_a_number_the_request_repeats_is_guessed_as_often_as_it_occurs() -> None:
    source = DraftSource([], request="Add 3 and 3, then 1,500.")
    assert source.guess(CALL + '"a": 3, "b": ') == ("3", "start", NUMBER_ENDS)
    assert source.guess(CALL + '"a": 3, "b": 3, "c": ') == ("1500", "start", NUMBER_ENDS)


def test_guesses_say_their_kind_and_a_key_or_a_begun_string_guesses_nothing() -> None:
    source = DraftSource(["Paris in 15 days"], request="Paris in 15 days")
    assert source.guess(CALL + '"city": "Par') == ("is", "string", STRING_ENDS)
    assert source.guess(CALL + '"days": 1') == ("5", "number", NUMBER_ENDS)
    assert source.guess(CALL + '"ci') is None  # a key
    # A string not begun: the request's names, but its first word begins a sentence.
    assert source.guess(CALL + '"city": "') is None
    assert source.propose(CALL + '"days": ') == ""  # propose never guesses a value's start


def test_a_guess_that_completes_a_value_says_how_the_value_may_close() -> None:
    source = DraftSource(["Paris in 15 days, then New York City"], request="Paris in 15 days")
    # The whole of a name or a number already written: an empty guess, the value ends here.
    assert source.guess(CALL + '"city": "Paris') == ("", "string", STRING_ENDS)
    assert source.guess(CALL + '"days": 15') == ("", "number", NUMBER_ENDS)
    assert source.guess(CALL + '"city": "New York City') == ("", "string", STRING_ENDS)
    # A name whose word the draft did not reach the end of does not end the value.
    assert source.guess(CALL + '"city": "New', max_chars=4) == (" Yor", "string", ())


def test_a_name_the_source_quotes_ends_at_the_quote_and_a_number_it_does_not_know_goes_on() -> None:
    source = DraftSource(['Open "notes.txt" now'], request="")
    assert source.guess(CALL + '"path": "note') == ("s.txt", "string", STRING_ENDS)
    assert source.guess(CALL + '"days": 4') is None  # no number of the texts begins with 4


def test_a_string_not_begun_guesses_the_requests_first_name_not_yet_written() -> None:
    request = "Find the fastest route from San Francisco to Los Angeles. What about Mission 1?"
    source = DraftSource([], request=request)
    assert source.guess(CALL + '"start": "') == ("San Francisco", "name", STRING_ENDS)
    after = CALL + '"start": "San Francisco", "end": "'
    assert source.guess(after) == ("Los Angeles", "name", STRING_ENDS)
    # "Find" and "What" begin sentences; "Francisco" is inside a name: none is a name.
    written = after + 'Los Angeles", "level": "'
    assert source.guess(written) == ("Mission 1", "name", STRING_ENDS)
    assert source.guess(written + 'Mission 1", "other": "') is None


def test_the_request_is_the_last_user_message() -> None:
    messages = [
        {"role": "user", "content": "Forecast for 7 days"},
        {"role": "assistant", "content": "Which city?"},
        {"role": "user", "content": "Oslo, 3 days"},
    ]
    guess = DraftSource.from_messages(messages).guess(CALL + '"days": ')
    assert guess == ("3", "start", NUMBER_ENDS)


def test_forced_text_that_ends_inside_a_character_is_guessed_up_to_its_last_whole_one() -> None:
    from weavehost.decode.proposals import _whole_characters

    assert _whole_characters(' "é'.encode()) == ' "é'.encode()
    assert _whole_characters(' "é'.encode()[:-1]) == b' "'
    assert _whole_characters(b"\xff") == b""


# A call caught in a loop


def test_a_call_that_writes_the_same_item_twice_in_a_row_is_guessed_the_next_turns() -> None:
    source = DraftSource([], request="chicken and mushrooms, 500 calories")
    looping = CALL + '"ingredients": ["chicken", "vegetables", "vegetables", '
    assert source.guess(looping, max_chars=28) == ('"vegetables", "vegetables", ', "repeat", ())


def test_a_loop_inside_a_string_is_guessed_past_the_end_of_what_was_written() -> None:
    source = DraftSource([])
    assert source.guess(CALL + '"battle": "Stalingrad, Stalingrad, Stali', max_chars=17) == (
        "ngrad, Stalingrad",
        "repeat",
        (),
    )


def test_text_seen_earlier_in_the_call_but_not_twice_in_a_row_is_not_guessed() -> None:
    source = DraftSource([])
    assert source.guess(CALL + '"items": [{"a": "x", "b": 1}, {"a": "') is None
    assert source.guess(CALL + '"tags": ["vegetables", "fruit", "vegetables", ') is None
    assert source.guess(CALL + '"x": "abcabc') is None  # shorter than REPEAT_MIN each time


def test_the_conversation_is_asked_before_the_loop_and_an_array_of_strings_takes_no_number() -> (
    None
):
    source = DraftSource(["mushrooms and vegetables"], request="2 eggs, mushrooms")
    looping = CALL + '"q": "vegetables, vegetables, veg'
    # the conversation's text first
    assert source.guess(looping) == ("etables", "string", STRING_ENDS)
    # after a string item, the next item is no number from the request
    assert source.guess(CALL + '"tags": ["eggs", ') is None
    assert source.guess(CALL + '"counts": [') == ("2", "start", NUMBER_ENDS)


GEMMA_CALL = "<start_function_call>call:get_weather{"


def test_a_functiongemma_string_is_drafted_between_its_escape_markers() -> None:
    texts = ["Weather in Paris today?"]
    source = DraftSource(texts, syntax=FUNCTIONGEMMA.value_syntax)
    ends = ("<escape>,", "<escape>}", "<escape>]")
    assert source.propose(GEMMA_CALL + "city:<escape>Par") == "is"
    assert source.guess(GEMMA_CALL + "city:<escape>Par") == ("is", "string", ends)
    assert source.guess(GEMMA_CALL + "days:3,city:<escape>") is None  # no name in no request
    named = DraftSource([], request="Weather in Paris today?", syntax=FUNCTIONGEMMA.value_syntax)
    assert named.guess(GEMMA_CALL + "city:<escape>") == ("Paris", "name", ends)
    # A JSON quote is no string in this syntax, and a closed <escape> string is no value.
    assert source.propose(GEMMA_CALL + 'city:"Par') == ""
    assert source.propose(GEMMA_CALL + "city:<escape>Paris<escape>,note:Par") == ""


def test_a_functiongemma_string_draft_is_the_text_as_it_stands_with_no_escapes() -> None:
    source = DraftSource(['say "hi\\there" now'], syntax=FUNCTIONGEMMA.value_syntax)
    assert source.propose(GEMMA_CALL + 'text:<escape>say "h') == "i\\there"  # one backslash
    assert DraftSource(['say "hi\\there" now']).propose('{"text": "say \\"h') == "i\\\\there"
