"""The model's remembered answers (weavehost.agent.answer_memory): bounded, kept on disk beside
the prompt cache, never in the way of a turn, and a source of drafts that changes how many
passes a later answer takes, never its text."""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from tests.test_decode_answer_drafts import CHEAP_ROWS, same_reply, written
from weavehost import Host
from weavehost.agent.answer_memory import MAX_ANSWERS, MAX_CHARS, AnswerMemory, own_pieces
from weavehost.decode.answer_drafts import CONVERSATION, REMEMBERED, AnswerDrafts, DraftPricing
from weavehost.testing import Events

ROOT = Path(__file__).resolve().parent.parent
SMOL_TURN_BOUND_S = 300  # a hang guard on a busy 2-core machine, not a speed claim
GREETING = [{"role": "user", "content": "Hi! Who are you?"}]


def test_an_answer_is_kept_without_what_it_copied_from_its_conversation() -> None:
    told = ["How much battery do I have left?", "battery at 73%, not charging"]
    text = "Here is the response for `get_battery_status`:\n\nbattery at 73%, not charging"
    assert own_pieces(text, told) == ["Here is the response for `get_battery_status`:\n\n"]
    told = ["What is the weather in Paris?", "Paris: partly cloudy, -2.9 C, humidity 53%"]
    text = "Sure! Paris: partly cloudy, -2.9 C. Anything else?"
    assert own_pieces(text, told) == ["Sure! ", ". Anything else?"]
    assert own_pieces("Paris: partly cloudy", told) == []  # all of it copied: nothing kept


def test_the_latest_answers_are_kept_oldest_first_each_cut_and_a_repeat_moves_to_the_end(
    tmp_path: Path,
) -> None:
    memory = AnswerMemory(tmp_path / "answers.json")
    for n in range(MAX_ANSWERS + 3):
        memory.add(f"answer {n}")
    memory.add("answer 10")  # already there: moved to the end, not kept twice
    memory.add("x" * (MAX_CHARS + 50))
    memory.add("   ")  # nothing to keep
    texts = memory.texts()
    assert len(texts) == MAX_ANSWERS and texts.count("answer 10") == 1
    assert texts[-2:] == ["answer 10", "x" * MAX_CHARS]
    assert texts[0] == "answer 4"  # the oldest ones went first
    # Another memory of the same file (the next run) reads what this one wrote.
    assert AnswerMemory(tmp_path / "answers.json").texts() == texts


@pytest.mark.parametrize(
    "content",
    [
        '{"version": 2, "answers": [["ok", 3]]}',
        '{"version": 1, "answers": ["ok"]}',
        "[1, 2]",
        '{"ver',
    ],
)
def test_a_torn_or_foreign_file_is_an_empty_memory_that_the_next_answer_writes_over(
    tmp_path: Path, content: str
) -> None:
    path = tmp_path / "answers.json"
    path.write_text(content)
    memory = AnswerMemory(path)
    assert memory.texts() == []
    memory.add("Paris: partly cloudy")
    assert json.loads(path.read_text()) == {"version": 2, "answers": [["Paris: partly cloudy"]]}


def test_a_memory_that_cannot_be_written_is_logged_and_the_answer_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    memory = AnswerMemory(blocked / "answers.json")  # its directory is a file
    with caplog.at_level(logging.WARNING, logger="weavehost.agent.answer_memory"):
        memory.add("Paris: partly cloudy")
    assert memory.texts() == ["Paris: partly cloudy"]  # kept for this run
    assert "could not write" in caplog.text


def test_a_remembered_answer_is_drafted_where_the_conversation_holds_nothing_and_the_conversation_wins_where_both_do() -> (
    None
):
    earlier = ["Here is the response for the function call `get_battery_status`: done"]
    alone = AnswerDrafts.from_messages(GREETING, earlier)
    assert alone.propose("Here is the resp") == (
        "onse for the function call `get_battery_status`: done"
    )
    conversation = [*GREETING, {"role": "assistant", "content": "Here is the response: 42"}]
    assert AnswerDrafts.from_messages(conversation, earlier).propose("Here is the resp") == (
        "onse: 42"
    )
    assert AnswerDrafts.from_messages(GREETING).propose("Here is the resp") == ""


@pytest.mark.model
def test_on_the_embedded_smollm2_an_answer_remembered_from_another_conversation_is_written_again_in_fewer_passes_with_the_same_text(
    fresh_engine,
) -> None:
    first = written(fresh_engine, GREETING, drafts=True)  # from the user's words alone
    source = AnswerDrafts.from_messages(GREETING, [first.free.text])
    again = written(fresh_engine, GREETING, drafts=True, source=source)
    same_reply(again, first)
    # (The first drafts from its own text too: rows it read, not how many it kept.)
    assert again.drafted > 0 and again.free.passes < first.free.passes


HELLO = "Hi! Who are you?"


async def greeted(model: Path, **options: object) -> tuple[str, int, int]:
    """A host over the weather server on ``model`` greeted once: its answer, and the answer's
    free tokens and passes."""
    async with Host(servers=[str(ROOT / "tools" / "weather.py")], trust=["weather"],
                    model=str(model), threads=2, n_ctx=2048, **options) as host:  # type: ignore[arg-type]  # fmt: skip
        events = await Events.collect(host.run(HELLO), timeout=SMOL_TURN_BOUND_S)
    timings = events.of("timings")[-1]
    text = "".join(e["text"] for e in events if e.type == "text")
    return text, timings["free_tokens"], timings["free_passes"]


@pytest.mark.model
@pytest.mark.anyio
async def test_a_host_drafts_its_answer_from_what_the_model_answered_in_an_earlier_host(
    embedded_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path))
    text, tokens, passes = await greeted(embedded_model_path, decode_plan=CHEAP_ROWS)
    (memory,) = (tmp_path / "prompts").glob("answers-SmolLM2*.json")
    # Kept without what it copied from the conversation (the user's words).
    assert json.loads(memory.read_text())["answers"] == [own_pieces(text.strip(), [HELLO])]
    again, tokens_again, passes_again = await greeted(embedded_model_path, decode_plan=CHEAP_ROWS)
    assert (again, tokens_again) == (text, tokens)
    assert passes_again < passes


@pytest.mark.model
@pytest.mark.anyio
async def test_a_host_whose_answers_are_not_drafted_keeps_no_answer_memory(
    embedded_model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing would read it; and in bench-agent's --answer-drafts both, the drafts-off twin of
    # a task would fill the drafts-on variant's memory with the very answer it then drafts.
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path))
    text, _tokens, _passes = await greeted(embedded_model_path, answer_drafts=False)
    assert text
    assert not list((tmp_path / "prompts").glob("answers-*.json"))


def test_a_draft_from_a_remembered_answer_is_priced_apart_at_its_own_lower_rate() -> None:
    earlier = ["Here is the response for the function call `get_battery_status`: done"]
    drafts = AnswerDrafts.from_messages(GREETING, earlier)
    pricing = DraftPricing(CHEAP_ROWS)
    written_so_far = b"Here is the response for the f"
    tokens, kind, _ = drafts.tokens_after(written_so_far, pricing, 64, lambda text: list(text))
    assert tokens and kind == pricing.kind(REMEMBERED, len(written_so_far))
    remembered, conversation = pricing.rates(kind), pricing.rates(pricing.kind(CONVERSATION, 30))
    assert remembered[0] < conversation[0] and remembered[1] < conversation[1]
    # The same words said in the conversation are a conversation draft.
    said = [*GREETING, {"role": "assistant", "content": earlier[0]}]
    _, kind, _ = AnswerDrafts.from_messages(said).tokens_after(
        written_so_far, pricing, 64, lambda text: list(text)
    )
    assert kind == pricing.kind(CONVERSATION, len(written_so_far))
