"""What the session's steering reads in a small model's text (issue 30; docs/agent.md,
"Steering").

Stage: agent (pure functions over text, used by :class:`weavehost.agent.session.Session`). No
model, no state: an answer, a prompt or the conversation's texts in, a verdict out. Read
leniently: a small model's JSON may be cut or malformed.
"""

from __future__ import annotations

import re
from difflib import SequenceMatcher

__all__ = ["STALE_SPAN", "call_shaped", "copies", "new_names"]

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
