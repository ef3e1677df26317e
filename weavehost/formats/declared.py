"""What a model format declares about itself besides its calls: how a model is recognised as
its own, and how its values are written for the decoder's drafts.

Stage: model opening (detection) and call writing (drafts). These are plain data a format
holds, read by shared code that never asks a format's name:

- :class:`Clue`: what ``ModelFormat.detect(metadata)`` returns when the GGUF metadata says the
  model is this format's. :func:`weavehost.formats.detect_format` asks every registered format in
  the order of ``FORMATS``; the first strong clue decides, and a weak one (a ChatML template with
  no tool syntax) decides only when no format has a strong one.
- :class:`ValueSyntax`: how a string value is written (its quote, how text is escaped inside
  it), for :mod:`weavehost.decode.drafts`, which copies text of the conversation into values.
  Every syntax here has JSON's shape (objects ``{k…v}`` with ``:`` between a key and its value,
  arrays ``[a, b]``, members after ``,``); what differs is the string.

A format's control markers (``ModelFormat.control_markers``) are the texts of its special
tokens that open or close turns, calls or results; their union over every registered format is
:func:`weavehost.formats.control_markers`, which the host hands to the MCP executor (``mcp/``
imports nothing of the model side).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["Clue", "ValueSyntax"]


@dataclass(frozen=True, slots=True)
class Clue:
    """Why a model's metadata says it is one format's (``reason`` is what ``weavehost models``
    prints). ``weak``: it decides only when no format finds a strong clue."""

    reason: str
    weak: bool = False


@dataclass(frozen=True, slots=True)
class ValueSyntax:
    """How a format writes a string value, for drafting text into one.

    ``quote`` opens and closes a string (``"`` in JSON, ``<escape>`` in FunctionGemma);
    ``escape`` writes a text as it stands between the quotes; ``backslash_escapes``: whether a
    backslash inside a string begins an escape (``\\n``, ``\\u00e9``), which a draft never
    splits, or is a character like any other. A syntax with backslash escapes has a
    one-character quote.
    """

    quote: str
    escape: Callable[[str], str]
    backslash_escapes: bool = True

    def __post_init__(self) -> None:
        if not self.quote or (self.backslash_escapes and len(self.quote) != 1):
            raise ValueError(
                f"a string quote with backslash escapes is one character: {self.quote!r}"
            )

    @property
    def string_ends(self) -> tuple[str, ...]:
        """What may close a string value, most likely first: its quote and the next member's
        comma, the object's end or the array's end."""
        return (self.quote + ",", self.quote + "}", self.quote + "]")
