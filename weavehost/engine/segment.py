"""Prompt text as the engine tokenizes it: pieces that may or may not hold special tokens.

Stage: engine (its input type). A model format renders a conversation into :class:`Segment` s and
:meth:`~weavehost.engine.Engine.tokenize_segments` parses special tokens only in the segments
marked ``special``. It lives here, at the engine, so the engine needs nothing from the layers
above it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Segment"]


@dataclass(frozen=True, slots=True)
class Segment:
    """A piece of prompt text; ``special`` says whether special tokens may be parsed in it."""

    text: str
    special: bool
