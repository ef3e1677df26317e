"""The model's recent answers, kept beside the prompt cache: text a later answer may be drafted
from (issue 29).

Stage: agent (used by :class:`weavehost.agent.model.EngineModel`). A small model opens its
answers the same way turn after turn ("Here is the response for the function call `…`:"),
and nothing in a new conversation holds that text, so it was decoded one token a pass. Like
llama.cpp's dynamic n-gram cache (``lookup``'s ``--lookup-cache-dynamic``), the answers this
model wrote before are kept on disk, and an answer's drafts look them up after the
conversation's own texts (:class:`~weavehost.decode.answer_drafts.AnswerDrafts`).

Guarantees:

* **Drafts only.** The texts are never shown to the model or put in a conversation; a draft is
  kept only where it is the greedy choice, so what is remembered changes how many passes an
  answer takes, never its text.
* **What the model wrote on its own.** What an answer copied from its conversation (a run of
  :data:`COPIED_SPAN` characters or more that the user's messages, the tool results or earlier
  replies hold: Paris's weather restated) is cut out before it is kept: a new conversation
  drafts its own results from itself, and another conversation's would be drafted wrong. What
  is kept is the model's own wording ("Here is the response for the function call `"), in
  pieces.
* **Bounded.** The :data:`MAX_ANSWERS` latest answers that ended by themselves (not at a bound,
  not in a call), each cut to :data:`MAX_CHARS`, in one JSON file per model file in the prompt
  cache's directory; it goes where the prompt cache goes (``--no-prompt-cache`` keeps none).
* **Never costs a turn.** A file that cannot be read (missing, torn, another version) is an
  empty memory; one that cannot be written is logged and the answer goes on. Writes are atomic
  (a temporary file renamed).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = ["COPIED_SPAN", "MAX_ANSWERS", "MAX_CHARS", "AnswerMemory", "own_pieces"]

logger = logging.getLogger(__name__)

MAX_ANSWERS = 32  # answers kept per model file
MAX_CHARS = 1000  # of each answer, from its start (openings recur; a long tail rarely does)
COPIED_SPAN = 8  # characters in a row an answer copied from its conversation: not kept
_VERSION = 2  # answers as lists of pieces (1: whole texts)


class AnswerMemory:
    """The latest answers of one model file, read from and written to ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._answers = self._read()

    @classmethod
    def beside(cls, directory: Path, model: Path) -> AnswerMemory:
        """The memory of ``model`` (its file name and size name it) in ``directory``."""
        try:
            size = model.stat().st_size
        except OSError:
            size = 0
        return cls(directory / f"answers-{model.stem}-{size}.json")

    def texts(self) -> list[str]:
        """The pieces of the remembered answers, oldest first."""
        return [piece for answer in self._answers for piece in answer]

    def add(self, text: str, told: Sequence[str] = ()) -> None:
        """Remember ``text`` (cut to :data:`MAX_CHARS`), less what it copied from ``told``
        (:func:`own_pieces`), as the latest answer, forgetting the oldest past
        :data:`MAX_ANSWERS`, and write the file."""
        pieces = own_pieces(text.strip()[:MAX_CHARS], told)
        if not pieces:
            return
        answers = [a for a in self._answers if a != pieces] + [pieces]
        self._answers = answers[-MAX_ANSWERS:]
        self._write()

    def _read(self) -> list[str]:
        try:
            record = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as exc:
            logger.debug("answer memory: %s unreadable (%s); starting empty", self.path, exc)
            return []
        ours = isinstance(record, dict) and record.get("version") == _VERSION
        answers = record.get("answers") if ours else None
        if not (isinstance(answers, list) and all(_pieces(a) for a in answers)):
            logger.debug("answer memory: %s is not a version-%d record; starting empty",
                         self.path, _VERSION)  # fmt: skip
            return []
        return [list(a) for a in answers[-MAX_ANSWERS:]]

    def _write(self) -> None:
        record = {"version": _VERSION, "answers": self._answers}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as out:
                    json.dump(record, out, ensure_ascii=False)
                os.replace(temporary, self.path)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        except OSError as exc:
            logger.warning("answer memory: could not write %s: %s", self.path, exc)


def own_pieces(text: str, told: Sequence[str]) -> list[str]:
    """The pieces of ``text`` left once every run of :data:`COPIED_SPAN` characters or more
    that one of ``told`` holds is cut out, blank ones dropped: "Here is the weather in Paris:
    Paris: partly cloudy, -2.9 C" after that result keeps "Here is the weather in " (the
    rest, from "Paris: partly", is the result's)."""
    haystack = "\x00".join(told)
    pieces: list[str] = []
    start = at = 0
    while at <= len(text) - COPIED_SPAN:
        if text[at : at + COPIED_SPAN] not in haystack:
            at += 1
            continue
        end = at + COPIED_SPAN
        while end < len(text) and text[at : end + 1] in haystack:
            end += 1
        pieces.append(text[start:at])
        start = at = end
    pieces.append(text[start:])
    return [piece for piece in pieces if piece.strip()]


def _pieces(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(piece, str) for piece in value)
