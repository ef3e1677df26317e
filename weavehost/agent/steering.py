"""What the session's steering reads in a small model's text (issue 30; docs/agent.md,
"Steering").

Stage: agent (pure functions over text, used by :class:`weavehost.agent.session.Session`). No
model, no state: an answer, a prompt or the conversation's texts in, a verdict out. Read
leniently: a small model's JSON may be cut or malformed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from difflib import SequenceMatcher
from typing import Any

__all__ = [
    "INVENTED_DIGITS",
    "STALE_SPAN",
    "call_shaped",
    "copies",
    "ignores_results",
    "invented_numbers",
    "new_names",
    "restates_earlier_result",
    "told_texts",
]

# An answer that is a call's JSON: a fence, a list or doubled braces around {"name": "…"}.
_CALL_SHAPED = re.compile(r'\s*(?:```[A-Za-z]*\s*)?\[?\s*\{+\s*"name"\s*:\s*"([^"]*)"')
_ARGUMENTS = re.compile(r'"(?:arguments|parameters)"\s*:\s*\{')
_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"\s*:')


def call_shaped(text: str) -> tuple[str, frozenset[str]] | None:
    """The tool and the argument names of an answer that is, whole, a call written as JSON
    (what a small model prints when the tool it means has another name: ``{"name":
    "set_wifi", "arguments": {"enabled": false}}`` with ``toggle_setting`` on offer), else
    ``None``. Read leniently: the JSON may be cut or malformed."""
    found = _CALL_SHAPED.match(text)
    if found is None:
        return None
    arguments = _ARGUMENTS.search(text, found.end())
    keys = _KEY.findall(text, arguments.end()) if arguments else []
    return found.group(1), frozenset(keys)


STALE_SPAN = 20  # characters of an earlier turn's result that an answer copies when it is stale
_WORD = re.compile(r"[^\W\d_][\w'-]*")


def new_names(prompt: str, earlier: str) -> list[str]:
    """The words of ``prompt`` written with a capital where no sentence begins (names: "And in
    Oslo?" → ``Oslo``) that ``earlier`` never held, case aside."""
    seen = earlier.casefold()
    names = []
    for word in _WORD.finditer(prompt):
        before = prompt[: word.start()].rstrip()
        opens = not before or before[-1] in ".!?\"'(\n:;"
        if word.group()[0].isupper() and not opens and word.group().casefold() not in seen:
            names.append(word.group())
    return names


def copies(text: str, source: str, span: int = STALE_SPAN) -> bool:
    """Whether ``text`` holds ``span`` characters or more of ``source`` word for word."""
    match = SequenceMatcher(None, text, source, autojunk=False).find_longest_match(
        0, len(text), 0, len(source)
    )
    return match.size >= span


INVENTED_DIGITS = 6  # a run of this many digits in a string value is an identifier's
_DIGITS = re.compile(rf"\d{{{INVENTED_DIGITS},}}")


def invented_numbers(arguments: object, texts: Iterable[str]) -> list[str]:
    """The long numbers (:data:`INVENTED_DIGITS` digits or more in a row) in the string values
    of a call's ``arguments`` that none of ``texts`` holds, their digits compared alone (a
    phone number the user wrote as "+1 (555) 010-4321" holds ``15550104321``). Such a number
    is an identifier (a phone number, an account, a commit): a small model invents them
    (``make_phone_call {"phone_number": "1234567890"}`` for "Call Dmitri Ivanov."). Dates
    and times (``2025-05-02``, ``10:00``) have shorter runs and never count."""
    digits = ["".join(ch for ch in text if ch.isdigit()) for text in texts]
    return [n for n in _numbers(arguments) if not any(n in known for known in digits)]


def _numbers(value: object) -> list[str]:
    if isinstance(value, str):
        return _DIGITS.findall(value)
    if isinstance(value, dict):
        return [n for item in value.values() for n in _numbers(item)]
    if isinstance(value, list | tuple):
        return [n for item in value for n in _numbers(item)]
    return []


def told_texts(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the model was told, not what it wrote: the user, system and tool messages'
    texts."""
    return [
        str(m.get("content") or "") for m in messages if m.get("role") in ("user", "system", "tool")
    ]


def restates_earlier_result(text: str, messages: Sequence[Mapping[str, Any]], turn: int) -> bool:
    """Whether ``text``, an answer to ``messages[turn]`` (the user's message), names a word
    the user writes now and never wrote before (:func:`new_names`) and copies an earlier
    turn's tool result (:func:`copies`): "And in Oslo?" answered with Paris's weather, the city
    swapped. Restating a result asked about again ("What temperature did you just tell me?")
    names nothing new."""
    names, results = _new_names_and_results(messages, turn)
    return any(n in text for n in names) and any(copies(text, r) for r in results)


def may_restate_earlier_result(messages: Sequence[Mapping[str, Any]], turn: int) -> bool:
    """Whether any answer to ``messages[turn]`` could be one :func:`restates_earlier_result`
    finds: the user names something new, and an earlier turn has a tool result."""
    names, results = _new_names_and_results(messages, turn)
    return bool(names and results)


def _new_names_and_results(
    messages: Sequence[Mapping[str, Any]], turn: int
) -> tuple[list[str], list[str]]:
    """The names ``messages[turn]`` writes for the first time, and the earlier tool results."""
    earlier = messages[:turn]
    results = [str(m.get("content", "")) for m in earlier if m.get("role") == "tool"]
    prompt = str(messages[turn].get("content", ""))
    return new_names(prompt, "\n".join(str(m.get("content", "")) for m in earlier)), results


_WORDS = re.compile(r"[^\W_]+")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_STOP = frozenset(
    "a an and are as at be by can do for from how i in is it me my of on or the this to was "
    "what when where which will with you your".split()
)


def _long_numbers(text: str) -> set[str]:
    """The numbers of ``text`` of two characters or more (``15.4``, ``73``, ``14:05``; a
    list's ``1.`` and a lone digit say too little to tell a result from a list)."""
    return {n for n in _NUMBER.findall(text) if len(n) >= 2}


def _pairs(text: str) -> set[str]:
    """The pairs of words in a row in ``text`` ("partly cloudy"), case aside, where neither is
    a stop word ("forecast for" says nothing of a forecast)."""
    words = _WORDS.findall(text.casefold())
    return {f"{a} {b}" for a, b in zip(words, words[1:], strict=False) if not {a, b} & _STOP}


def _names(text: str) -> set[str]:
    """The words of ``text`` written with a capital ("Zurich"), case aside, stop words aside."""
    return {w.casefold() for w in _WORDS.findall(text) if w[0].isupper()} - _STOP


def ignores_results(
    answer: str, turn: Sequence[Mapping[str, Any]], called: Iterable[str] = ()
) -> bool:
    """Whether ``answer``, to the ``turn`` (the user's message, then what followed it), states
    nothing of the turn's tool results that hold a number of their own: none of their numbers,
    their word pairs or their names that the user's message and the ``called`` words (the
    tools' names and argument names) do not already hold. Qwen2.5-Coder-0.5B, shown Lima's
    forecast, answers "This response is a JSON object with the function
    name "get_forecast" …", or "Sorry, but I can't assist with that request." after Tokyo's and
    Berlin's weather; the 1.5B explains the call it made ("… The response will provide the
    current weather conditions, including temperature, humidity, and wind speed."). Results
    without a number of their own ("bluetooth turned on") are never judged: a confirmation may
    well say nothing a result adds ("Bluetooth is on."). The cost: an answer that only
    paraphrases ("Lima will be sunny, then it rains.") is judged to ignore them."""
    request = str(turn[0].get("content", ""))
    told = "\n".join([request, *(" ".join(_WORDS.findall(c)) for c in called)])
    joined = "\n".join(str(m.get("content", "")) for m in turn if m.get("role") == "tool")
    numbers = _long_numbers(joined) - _long_numbers(told)
    if not numbers:
        return False
    told_words = set(_WORDS.findall(told.casefold()))
    facts = numbers | (_pairs(joined) - _pairs(told)) | (_names(joined) - told_words)
    said = _long_numbers(answer) | _pairs(answer) | set(_WORDS.findall(answer.casefold()))
    return not facts & said
