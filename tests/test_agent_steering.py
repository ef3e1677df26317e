"""Steering a small model to a call or an answer (issue 30, items 3 and 4; docs/agent.md,
"Steering").

* An answer that is a call written as JSON, to a tool no tool on offer is called, is written
  again as a call to a tool on offer that takes one of its arguments, once a turn:
  Qwen2.5-Coder-0.5B, asked for the trip budget written in notes.md, prints ``{"name":
  "trip_budget", "arguments": {"path": "notes.md", …}}`` where ``read_file`` is on offer.
* A tool called again in a later step after its good result is not run, and the model answers:
  Qwen2.5-Coder-0.5B sets the same alarm three times, with and without its days.

Each is tested on the scripted model (control flow) and on the real Qwen, with the steering
off (the failure it fixes) and on. The real-model turns keep the prompt cache on, as users do:
a hit's logits are bitwise a miss's (docs/agent.md, "The prompt-prefix cache") and the answers
remembered beside it only draft, losslessly, so a test's outcome does not depend on which test
ran first, and the second half of a pair starts from the first half's prefill.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

from pathlib import Path

import pytest

from tools import android
from weavehost import Host
from weavehost.agent.session import Session
from weavehost.agent.steering import call_shaped, ignores_results, invented_numbers, new_names
from weavehost.mcp.executor import StaticApprover
from weavehost.testing import Events
from weavehost.testing.model import ScriptedModel, call

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parent.parent
QWEN_TURN_BOUND_S = 600  # a hang guard on a busy 2-core machine, not a speed claim
SMOL_TURN_BOUND_S = 300


@pytest.mark.parametrize(
    ("text", "shaped"),
    [
        ('{"name": "set_wifi", "arguments": {"enabled": false}}', ("set_wifi", {"enabled"})),
        ('```json\n{\n  "name": "read_notes.md",\n  "arguments": {\n    "path": "notes.md"\n  }\n}\n```',
         ("read_notes.md", {"path"})),
        ('[{"name": "x", "parameters": {"a": 1, "b": {"c": 2}}}]', ("x", {"a", "b", "c"})),
        ('{{"name": "y", "arguments": {"z": 1', ("y", {"z"})),
        ('{"name": "w"}', ("w", set())),
        ("The wifi is off.", None),
        ('The result was {"name": "z"}.', None),
    ],
)  # fmt: skip
def test_an_answer_is_call_shaped_only_when_the_whole_of_it_is_a_call_s_json(text, shaped):
    assert call_shaped(text) == (shaped and (shaped[0], frozenset(shaped[1])))


class Recording(ScriptedModel):
    """A scripted model that records the tools each reply's calls were written with, and the
    steps that had to begin with a call (no free text allowed: ``max_tokens`` 0)."""

    def free_decode(self, on_text, max_tokens, *args, **kw):  # type: ignore[no-untyped-def]
        self.steps += 1
        if max_tokens == 0:
            self.forced_steps.append(self.steps)
        return super().free_decode(on_text, max_tokens, *args, **kw)

    def write_calls(self, tools, *args, **kw):  # type: ignore[no-untyped-def]
        self.wrote_with.append([t.name for t in tools])
        return super().write_calls(tools, *args, **kw)


async def _scripted(replies: list, prompt: str) -> tuple[Events, Recording]:
    model = Recording(replies)
    model.wrote_with, model.forced_steps, model.steps = [], [], 0
    async with Host(agent_model=model, inproc={"android": android.build_server()},
                    trust=["android"], approver=StaticApprover(True)) as host:  # fmt: skip
        events = await Events.collect(host.run(prompt), timeout=30)
    return events, model


async def test_a_call_shaped_answer_naming_no_tool_on_offer_is_written_again_as_a_call_to_a_tool_taking_its_arguments() -> (
    None
):
    replies = [
        '{"name": "set_wifi", "arguments": {"enabled": false}}',
        call("toggle_setting", setting="wifi", enabled=False),
        "Wifi is off.",
    ]
    events, model = await _scripted(replies, "Switch off the wifi.")
    assert [r["name"] for r in events.of("tool_result")] == ["toggle_setting"]
    assert model.wrote_with == [["toggle_setting"]]  # the tools that take "enabled"
    assert events.of("done")[0]["stop"] == "answer"


async def test_a_second_call_shaped_answer_in_the_turn_stands_as_the_answer() -> None:
    replies = ['{"name": "set_wifi", "arguments": {"enabled": false}}'] * 2
    events, _ = await _scripted(replies, "Switch off the wifi.")
    assert not events.of("tool_result")
    assert events.of("done")[0]["stop"] == "answer"


async def test_a_call_shaped_answer_whose_arguments_no_tool_takes_stands_as_the_answer() -> None:
    replies = ['{"name": "calculator", "arguments": {"expression": "2+2"}}']
    events, model = await _scripted(replies, "What is 2 plus 2?")
    assert not events.of("tool_result") and model.remaining == 0
    assert events.of("done")[0]["stop"] == "answer"


async def test_a_call_shaped_answer_naming_a_tool_on_offer_is_not_written_again() -> None:
    # (with calls allowed such a text would have begun a call; here it came after a repeat)
    replies = [
        call("get_battery_status"),
        call("get_battery_status"),
        '{"name": "get_battery_status"}',
    ]
    events, _ = await _scripted(replies, "Battery?")
    assert len(events.of("tool_result")) == 1
    assert events.of("done")[0]["stop"] == "answer"


@pytest.mark.parametrize(
    ("replies", "ran"),
    [
        pytest.param(
            [call("set_alarm", hour=6, minute=30), call("set_alarm", hour=6, minute=30, days=[])],
            [("set_alarm", "ok")],
            id="the same tool again after its good result is not run",
        ),
        pytest.param(
            [call("set_alarm", hour=26, minute=30), call("set_alarm", hour=6, minute=30)],
            [("set_alarm", "invalid_arguments"), ("set_alarm", "ok")],
            id="a corrected call after an error result runs",
        ),
        pytest.param(
            [call("get_current_location"), call("get_battery_status")],
            [("get_current_location", "ok"), ("get_battery_status", "ok")],
            id="another tool after a good result runs",
        ),
    ],
)
async def test_after_a_result_a_later_step_s_call_runs_unless_its_tool_already_answered(
    replies, ran
) -> None:
    events, _ = await _scripted([*replies, "Done."], "Set an alarm for 6:30, where am I, battery?")
    assert [(r["name"], r["status"]) for r in events.of("tool_result")] == ran
    assert events.of("done")[0]["stop"] == "answer"
    dropped = [n for n in events.of("notice") if "again after its good result" in n["text"]]
    assert len(dropped) == (len(replies) - len(ran))


@pytest.mark.parametrize("steered", [False, True])
async def test_after_the_turn_s_first_call_a_call_to_a_tool_the_request_does_not_mention_is_not_run(
    monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    monkeypatch.setattr(Session, "related_later_calls", steered)
    replies = [call("get_battery_status"), call("set_alarm", hour=1, minute=1), "Done."]
    events, model = await _scripted(replies, "How much battery do I have?")
    ran = [r["name"] for r in events.of("tool_result")]
    assert ran == (["get_battery_status"] if steered else ["get_battery_status", "set_alarm"])
    if steered:  # every tool that shares no word with the request, refused to the writer
        assert "set_alarm" in model.refused[1] and "get_battery_status" in model.refused[1]
        assert any("does not mention" in n["text"] for n in events.of("notice"))


@pytest.mark.parametrize("steered", [False, True])
async def test_the_step_after_a_good_result_refuses_its_tool_to_the_reply_writer(
    monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    monkeypatch.setattr(Session, "related_later_calls", False)
    monkeypatch.setattr(Session, "answer_after_result", steered)
    replies = [call("get_current_location"), call("get_battery_status"), "Zurich; 73%."]
    _, model = await _scripted(replies, "Where am I, and is it charging?")  # names no tool
    answered = [{"get_current_location"}, {"get_current_location", "get_battery_status"}]
    assert model.refused == [set(), *answered] if steered else [set()] * 3


async def last_turn(
    model: Path, *prompts: str, server: str | tuple[str, ...] = "android", **options: object
) -> Events:
    """The events of the last of ``prompts``, each a turn of one conversation on a real model
    (the Qwen GGUF, or the embedded SmolLM2's) with the tools of ``server`` (one name or
    several; every call approved)."""
    names = [server] if isinstance(server, str) else list(server)
    async with Host(servers=[str(ROOT / "tools" / f"{name}.py") for name in names], trust=names,
                    approval="always", model=str(model), threads=2,
                    n_ctx=4096, guidance=False, **options) as host:  # type: ignore[arg-type]  # fmt: skip
        session = host.session()
        for prompt in prompts[:-1]:
            await Events.collect(session.run(prompt), timeout=QWEN_TURN_BOUND_S)
        return await Events.collect(session.run(prompts[-1]), timeout=QWEN_TURN_BOUND_S)


@pytest.mark.model
@pytest.mark.parametrize("steered", [False, True])
async def test_on_the_real_qwen_the_trip_budget_prints_a_call_to_no_tool_unless_it_is_written_again(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    # Qwen prints {"name": "trip_budget", "arguments": {"path": "notes.md", ...}}. (Its
    # "Switch off the wifi." did the same until a cut catalog was offered best first.)
    monkeypatch.setattr(Session, "recall_call_shaped", steered)
    prompt = "What is the trip budget? It is written in notes.md."
    events = await last_turn(qwen_gguf, prompt, server="files")
    results = events.of("tool_result")
    if steered:  # written again as a call to a tool that takes "path"
        assert results and results[0]["name"] in {"read_file", "list_files"}, [
            e.to_json() for e in events
        ]
    else:
        answer = "".join(e["text"] for e in events if e.type == "text")
        shaped = call_shaped(answer)
        assert not results and shaped and shaped[0] not in {"read_file", "list_files"}, answer


@pytest.mark.model
@pytest.mark.parametrize("steered", [False, True])
async def test_on_the_real_qwen_an_alarm_is_set_once_its_call_again_refused_steered_and_taken_back_as_a_repeat_unsteered(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch, taken: list[str], steered: bool
) -> None:
    # Shown the result, Qwen calls set_alarm again. Its history holds the call as it wrote it
    # (since session 44: before, it wrote the repeat without its days, and a second alarm was
    # set): unsteered, the same call again, taken back once written whole (session 49: before,
    # written by the strategy and dropped as a repeat); steered, refused at its name.
    monkeypatch.setattr(Session, "answer_after_result", steered)
    events = await last_turn(qwen_gguf, "Set an alarm for 6:30 in the morning.")
    runs = [r for r in events.of("tool_result") if r["name"] == "set_alarm"]
    assert len(runs) == 1, [e.to_json() for e in events]
    assert events.of("done")[0]["stop"] == "answer"
    assert not [n for n in events.of("notice") if "repeated set_alarm" in n["text"]]
    whole = [t for t in taken if '"set_alarm"' in t and t.rstrip().endswith("}")]
    assert (not whole) if steered else whole, taken


@pytest.mark.model
async def test_on_the_real_qwen_paris_s_weather_is_answered_in_the_step_after_its_result(
    qwen_gguf: Path,
) -> None:
    # Qwen opens the same call again after the result: refused where its JSON names the tool,
    # not written whole and dropped, then taken back again in a third step.
    async with Host(servers=[str(ROOT / "tools" / "weather.py")], trust=["weather"],
                    model=str(qwen_gguf), threads=2, n_ctx=4096,
                    guidance=False) as host:  # fmt: skip
        events = await Events.collect(host.run("What is the weather in Paris right now?"),
                                      timeout=QWEN_TURN_BOUND_S)  # fmt: skip
    assert [r["name"] for r in events.of("tool_result")] == ["get_current_weather"]
    done = events.of("done")[0]
    assert (done["stop"], done["steps"]) == ("answer", 2), [e.to_json() for e in events]
    assert "-2.9 C" in "".join(e["text"] for e in events if e.type == "text")


@pytest.mark.model
async def test_on_the_embedded_smollm2_an_alarm_whose_label_runs_on_is_set_with_the_hour_it_chose() -> (
    None
):
    # SmolLM2-135M decides set_alarm {"hour": 6, "minute": 30}, then writes the label to the
    # call's token bound: the call ran as its provisional call, not failed with nothing run.
    async with Host(servers=[str(ROOT / "tools" / "android.py")], trust=["android"],
                    approval="always", model="smollm2-135m",
                    threads=2) as host:  # fmt: skip
        events = await Events.collect(host.run("Set an alarm for 6:30 in the morning."),
                                      timeout=QWEN_TURN_BOUND_S)  # fmt: skip
    runs = [(r["name"], r["arguments"]) for r in events.of("tool_result")]
    assert runs[:1] == [("set_alarm", {"hour": 6, "minute": 30})], [e.to_json() for e in events]
    assert not events.of("call_failed")


@pytest.mark.model
async def test_on_the_real_qwen_a_cut_catalog_offered_best_first_gets_call_dmitri_a_phone_call(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The android catalog is over the catalog share of a 4,096-token context, so it is cut.
    # In catalog order, set_alarm came first and Qwen 0.5B set an alarm to call Dmitri.
    monkeypatch.setattr(Session, "refuse_invented_numbers", False)  # its number is made up
    events = await last_turn(qwen_gguf, "Call Dmitri Ivanov.")
    assert any("most relevant" in n["text"] for n in events.of("notice")), "not cut"
    runs = [r["name"] for r in events.of("tool_result")]
    assert runs[:1] == ["make_phone_call"], [e.to_json() for e in events]


@pytest.mark.model
async def test_on_the_real_qwen_tool_choice_none_answers_in_a_few_sentences_with_no_call_taken_back(
    qwen_gguf: Path,
) -> None:
    # Shown the tools, Qwen 0.5B began a call, was refused it twice, and wrote a made-up
    # weather list that ran to the answer bound (491 tokens of "Rain: 0.0 mm").
    events = await last_turn(
        qwen_gguf, "What is the weather in Paris?", server="weather", tool_choice="none",
        max_answer_tokens=160,
    )  # fmt: skip
    answer = "".join(e["text"] for e in events if e.type == "text")
    assert events.of("tool_result") == [] and events.of("notice") == [], answer
    assert events.of("done")[0]["stop"] == "answer"
    assert "{" not in answer and "```" not in answer and len(answer.split()) < 100, answer


@pytest.mark.model
@pytest.mark.parametrize("steered", [False, True])
async def test_on_the_embedded_smollm2_switching_off_the_wifi_sets_no_alarm_after_it_unless_unsteered(
    monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    # After toggle_setting, in the same reply, SmolLM2-135M calls set_alarm {"hour": 1,
    # "minute": 1} and list_alarms, tools the request never mentions.
    monkeypatch.setattr(Session, "related_later_calls", steered)
    async with Host(servers=[str(ROOT / "tools" / "android.py")], trust=["android"],
                    approval="always", model="smollm2-135m",
                    threads=2) as host:  # fmt: skip
        events = await Events.collect(host.run("Switch off the wifi."), timeout=QWEN_TURN_BOUND_S)
    ran = [r["name"] for r in events.of("tool_result")]
    assert ran[:1] == ["toggle_setting"], [e.to_json() for e in events]
    assert (ran == ["toggle_setting"]) == steered, ran


@pytest.mark.parametrize(
    ("prompt", "names"),
    [
        ("And in Oslo?", ["Oslo"]),
        ("What temperature did you just tell me?", []),
        ("And in Paris?", []),  # named before
        ("Oslo. Bergen?", []),  # both open a sentence
    ],
)
def test_a_new_name_is_a_capitalised_word_that_opens_no_sentence_and_was_never_written(
    prompt, names
):
    assert new_names(prompt, "What is the weather in Paris?\nParis: partly cloudy") == names


async def _second_turn(model: ScriptedModel, prompt: str) -> Events:
    """The events of ``prompt`` asked after "Where am I?" on the scripted model."""
    async with Host(agent_model=model, inproc={"android": android.build_server()},
                    trust=["android"], approver=StaticApprover(True)) as host:  # fmt: skip
        session = host.session()
        await Events.collect(session.run("Where am I?"), timeout=30)
        return await Events.collect(session.run(prompt), timeout=30)


async def test_a_follow_up_answered_with_an_earlier_result_for_a_new_name_is_written_again_as_a_call() -> (
    None
):
    model = ScriptedModel(
        [
            call("get_current_location"),
            "You are in Zurich, Switzerland.",
            "Geneva: 47.3769 N, 8.5417 E (Zurich, CH)",
            call("get_current_location"),
            "Geneva it is.",
        ]
    )
    second = await _second_turn(model, "And is that far from Geneva?")
    assert [r["name"] for r in second.of("tool_result")] == ["get_current_location"]
    (set_aside,) = [n for n in second.of("notice") if "new name" in n["text"]]
    # A follow-up that names something new is held back until judged: the stale answer (Zurich's
    # result for Geneva) is never shown, so setting it aside is housekeeping.
    assert "".join(e["text"] for e in second.of("text")) == "Geneva it is."
    assert "set aside" in set_aside["text"] and set_aside["housekeeping"]


async def test_a_follow_up_that_names_something_new_and_is_not_stale_is_shown_whole_once_judged() -> (
    None
):
    model = ScriptedModel([call("get_current_location"), "You are in Zurich.", "About 220 km."])
    second = await _second_turn(model, "And is that far from Geneva?")
    assert [e.data for e in second.of("text")] == [{"text": "About 220 km."}]  # one event, whole
    kinds = [e.type for e in second]
    assert kinds.index("text") < kinds.index("timings") < kinds.index("done")
    assert not second.of("tool_result")
    assert not [n for n in second.of("notice") if "set aside" in n["text"]]


async def test_a_follow_up_that_restates_an_earlier_result_names_nothing_new_and_stands() -> None:
    model = ScriptedModel(
        [
            call("get_current_location"),
            "You are in Zurich.",
            "47.3769 N, 8.5417 E (Zurich, CH)",
        ]
    )
    second = await _second_turn(model, "Where did you say I am?")
    assert not second.of("tool_result") and model.remaining == 0


@pytest.mark.model
@pytest.mark.parametrize("steered", [False, True])
async def test_on_the_real_qwen_and_in_oslo_is_answered_from_paris_s_result_unless_the_step_is_written_again(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    monkeypatch.setattr(Session, "recall_stale", steered)
    second = await last_turn(
        qwen_gguf, "What's the weather in Paris?", "And in Oslo?", server="weather"
    )
    cities = [r["arguments"].get("city") for r in second.of("tool_result")]
    if steered:
        assert cities == ["Oslo"], [e.to_json() for e in second]
    else:
        assert cities == [], [e.to_json() for e in second]


@pytest.mark.model
@pytest.mark.parametrize("steered", [False, True])
async def test_on_the_real_qwen_a_follow_up_that_names_a_tool_is_a_call_unless_unsteered(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    # After the battery's result, Qwen 0.5B answered "Set the ring volume to 3." with prose
    # that reads as a result ("tool_response: set the ring volume to 3.") and set nothing.
    monkeypatch.setattr(Session, "call_named_tools", steered)
    first, then = "How much battery do I have?", "Set the ring volume to 3."
    events = await last_turn(qwen_gguf, first, then)
    ran = [(r["name"], r["status"]) for r in events.of("tool_result")]
    if steered:
        assert ran[:1] == [("set_volume", "ok")], [e.to_json() for e in events]
    else:
        assert ran == [], [e.to_json() for e in events]


async def test_under_auto_a_message_naming_a_tool_starts_with_a_call_and_one_naming_none_does_not() -> (
    None
):
    replies = [call("set_volume", stream="ring", level=3), "Done."]
    events, model = await _scripted(replies, "Set the ring volume to 3.")
    assert [r["name"] for r in events.of("tool_result")] == ["set_volume"]
    assert model.forced_steps == [1]  # the first step wrote its call with no free text
    events, model = await _scripted(["Paris."], "What is the capital of France?")
    assert not events.of("tool_result") and model.forced_steps == []


def test_a_long_number_in_a_call_s_string_values_is_invented_where_no_message_holds_its_digits() -> (
    None
):
    assert invented_numbers({"phone_number": "1234567890"}, ["Call Dmitri Ivanov."]) == [
        "1234567890"
    ]
    written = ["Call +1 (555) 010-4321, please."]  # the digits alone are compared
    assert invented_numbers({"phone_number": "15550104321"}, written) == []
    assert invented_numbers({"to": ["9876543210"], "note": {"ref": "x"}}, []) == ["9876543210"]
    # Dates, times and short numbers are no identifiers: never counted.
    assert invented_numbers({"start": "2025-05-02T10:00", "code": "55501"}, []) == []


@pytest.mark.parametrize("steered", [False, True])
async def test_a_call_with_a_number_found_nowhere_is_not_run_and_the_step_answers(
    monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    monkeypatch.setattr(Session, "refuse_invented_numbers", steered)
    replies = [
        [call("make_phone_call", phone_number="1234567890"), call("get_battery_status")],
        call("make_phone_call", phone_number="1234567890"),
        "I need Dmitri's number first.",
    ]
    events, model = await _scripted(replies[1:], "Call Dmitri Ivanov.")
    ran = [(r["name"], r["arguments"]) for r in events.of("tool_result")]
    if steered:
        assert ran == [] and model.allowed_calls == [True, False], ran
        assert any("found nowhere in the conversation" in n["text"] for n in events.of("notice"))
    else:
        assert ran == [("make_phone_call", {"phone_number": "1234567890"})], ran
    # Beside a call that runs, the made-up one is dropped alone.
    monkeypatch.setattr(Session, "related_later_calls", False)
    events, _ = await _scripted(replies[:1] + replies[2:], "Call Dmitri, how is my battery?")
    ran = [r["name"] for r in events.of("tool_result")]
    assert ran == (["get_battery_status"] if steered else ["make_phone_call", "get_battery_status"])


@pytest.mark.model
@pytest.mark.parametrize("steered", [False, True])
async def test_on_the_real_qwen_call_dmitri_dials_no_made_up_number_unless_unsteered(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    # Qwen 0.5B dials "1234567890" for "Call Dmitri Ivanov." (the contacts hold +1-555-0104).
    monkeypatch.setattr(Session, "refuse_invented_numbers", steered)
    events = await last_turn(qwen_gguf, "Call Dmitri Ivanov.")
    dialled = [
        str(r["arguments"].get("phone_number"))
        for r in events.of("tool_result")
        if r["name"] == "make_phone_call"
    ]
    looked_up = [str(r["text"]) for r in events.of("tool_result") if r["name"] != "make_phone_call"]
    shown = [*looked_up, "Call Dmitri Ivanov."]  # what the model was told before it dialled
    made_up = [n for n in dialled if invented_numbers({"n": n}, shown)]
    if steered:
        assert made_up == [], [e.to_json() for e in events]
    else:
        assert made_up, [e.to_json() for e in events]


async def test_after_a_result_a_read_only_tool_the_message_names_and_no_call_named_is_called_once() -> (
    None
):
    replies = [call("get_battery_status"), call("get_current_location"), "73%, in Zurich."]
    events, model = await _scripted(replies, "What are my battery level and my location?")
    assert [r["name"] for r in events.of("tool_result")] == [
        "get_battery_status",
        "get_current_location",
    ]
    assert model.forced_steps == [1, 2]  # the second call was the step's, not the model's pick
    assert model.wrote_with[1] == ["get_current_location"]
    # A tool the message names that acts (make_phone_call: "phone") is never called so.
    replies = [call("search_contacts", query="Bob"), "Bob: +1-555-0102."]
    events, model = await _scripted(replies, "What is Bob's phone number?")
    assert [r["name"] for r in events.of("tool_result")] == ["search_contacts"]
    assert model.forced_steps == [1]


@pytest.mark.model
@pytest.mark.parametrize("steered", [False, True])
async def test_on_the_real_qwen_rome_s_weather_and_the_battery_are_both_called_unless_unsteered(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    # Forced to begin with a call, Qwen 0.5B asked for the weather and answered from it alone.
    monkeypatch.setattr(Session, "call_named_tools", steered)
    prompt = "How is the weather in Rome, and how much battery do I have?"
    events = await last_turn(qwen_gguf, prompt, server=("weather", "android"))
    ran = {r["name"] for r in events.of("tool_result") if r["status"] == "ok"}
    both = {"get_current_weather", "get_battery_status"}
    assert (ran >= both) == steered, [e.to_json() for e in events]


@pytest.mark.parametrize("on_description", [False, True])
async def test_under_auto_a_message_sharing_a_word_with_a_tool_s_description_alone_starts_with_a_call_for_a_model_that_cannot_tell(
    on_description: bool,
) -> None:
    # "Turn on bluetooth." names no tool; toggle_setting's description says "Turn a setting on".
    model = Recording([call("toggle_setting", setting="bluetooth", enabled=True), "On."])
    model.wrote_with, model.forced_steps, model.steps = [], [], 0
    async with Host(agent_model=model, inproc={"android": android.build_server()},
                    trust=["android"], approver=StaticApprover(True)) as host:  # fmt: skip
        session = host.session()
        session.session.call_on_description = on_description
        events = await Events.collect(session.run("Turn on bluetooth."), timeout=30)
        greeting = await Events.collect(session.run("Hi! Who are you?"), timeout=30)
    assert [r["name"] for r in events.of("tool_result")] == ["toggle_setting"]
    assert model.forced_steps == ([1] if on_description else [])
    assert not greeting.of("tool_result") and model.forced_steps == ([1] if on_description else [])


@pytest.mark.model
@pytest.mark.parametrize("on_description", [False, True])
async def test_on_the_embedded_smollm2_turn_on_bluetooth_is_a_call_and_a_greeting_is_answered_unless_unsteered(
    embedded_model_path: Path, on_description: bool
) -> None:
    # Under required (the default before) SmolLM2 answered "Hi! Who are you?" with list_alarms;
    # under auto it describes toggle_setting instead of calling it ("The function
    # "toggle_setting" is a function that can be used …") for most such requests: which of
    # them it still calls unsteered moves with the machine's sums (bluetooth on an AVX2 EPYC).
    # Unsteered, its description runs on to the answer bound: 160 tokens say as much as 512.
    settings = {"Turn on bluetooth.": "bluetooth", "Turn on wifi.": "wifi"}
    async with Host(servers=[str(ROOT / "tools" / "android.py")], trust=["android"],
                    approval="always", model=str(embedded_model_path),
                    threads=2, n_ctx=4096, max_answer_tokens=160) as host:  # fmt: skip
        assert host.description["tool_choice"] == "auto"
        called = {}
        for request, setting in settings.items():
            session = host.session()
            assert session.session.call_on_description  # the embedded model, by path too
            session.session.call_on_description = on_description
            turn = await Events.collect(session.run(request), timeout=SMOL_TURN_BOUND_S)
            ran = [(r["name"], r["arguments"].get("setting")) for r in turn.of("tool_result")]
            called[request] = ran == [("toggle_setting", setting)]
        greeting = await Events.collect(host.run("Hi! Who are you?"), timeout=SMOL_TURN_BOUND_S)
    assert all(called.values()) == on_description, called
    assert not greeting.of("tool_result"), [e.to_json() for e in greeting]


LIMA = "3-day forecast for Lima:\nday 1: sunny, 15.4 C, wind 12.0 km/h\nday 2: rain, 18.1 C"


@pytest.mark.parametrize(
    ("answer", "results", "ignores"),
    [
        ('This response is a JSON object with the function name "get_forecast" and the '
         'arguments "city" and "days".', [LIMA], True),
        ("Sorry, but I can't assist with that request.", [LIMA], True),
        ("To get the forecast for Lima for the next 3 days, you can use the `get_forecast` "
         "function with the following parameters:\n\n1. `city`: Lima\n2. `days`: 3", [LIMA],
         True),  # the 1.5B explains its call: a list's numbers are no result's
        ("Day 2 reaches 18.1 C.", [LIMA], False),
        ("Sunny on day 1, rain on day 2.", [LIMA], False),  # "day 1" is the result's
        ("Lima will be sunny, then it rains.", [LIMA], True),  # the cost: no number, no pair
        ("Done.", ["bluetooth turned on"], False),  # no number: a confirmation is not judged
        ("Lima, for 3 days.", ["Lima 3"], False),  # nothing the request did not hold
    ],
)  # fmt: skip
def test_an_answer_ignores_results_holding_a_number_when_it_states_none_of_their_numbers_or_word_pairs_the_request_and_the_call_do_not_hold(
    answer: str, results: list[str], ignores: bool
) -> None:
    called = ["get_forecast", "city", "days", "units"]
    turn = [{"role": "user", "content": "Lima, 3 days."}, {"role": "assistant", "content": ""}]
    turn += [{"role": "tool", "name": "get_forecast", "content": r} for r in results]
    assert ignores_results(answer, turn, called) is ignores


@pytest.mark.parametrize("steered", [False, True])
async def test_an_answer_stating_nothing_of_a_good_result_is_written_again_once_begun_otherwise_unless_unsteered(
    monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    monkeypatch.setattr(Session, "reanswer_ignored_results", steered)
    monkeypatch.setattr(Recording, "avoids_tokens", True)  # as a local model's would
    replies = [call("get_battery_status"), "Sorry, I can't help.", "No.", "Unused."]
    events, model = await _scripted(replies, "How much battery do I have?")
    if steered:  # written again once, begun otherwise; the second such answer stands
        assert events.answer.endswith("No.") and events.stop == "answer"
        assert model.avoided == [frozenset(), frozenset(), frozenset({ord("S")})]
        assert model.allowed_calls[2] is False  # the answer again, not another call
        assert any("written again" in n for n in events.notices)
    else:
        assert events.answer == "Sorry, I can't help." and model.remaining == 2


@pytest.mark.model
@pytest.mark.parametrize("steered", [False, True])
async def test_on_the_real_qwen_lima_s_forecast_is_answered_from_its_result_unless_unsteered(
    qwen_gguf: Path, monkeypatch: pytest.MonkeyPatch, steered: bool
) -> None:
    # Qwen 0.5B answers "This response is a JSON object with the function name "get_forecast"
    # and the arguments "city" and "days"."; begun otherwise, it restates the forecast.
    monkeypatch.setattr(Session, "reanswer_ignored_results", steered)
    events = await last_turn(qwen_gguf, "Lima, 3 days.", server="weather")
    assert [r["name"] for r in events.of("tool_result")] == ["get_forecast"]
    assert ("15.4 C" in events.answer) == steered, [e.to_json() for e in events]
    assert events.stop == "answer"
