"""What a turn may be asked for: whether it must call a tool, and how many steps it may take.

Stage: agent (its settings). A module of names only, with no imports of the rest of the agent,
so the command line can build its options from them without loading the MCP SDK or llama.cpp.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["DEFAULT_MAX_STEPS", "TOOL_CHOICES", "ToolChoice"]

ToolChoice = Literal["auto", "required"]
"""``auto``: the model decides whether to call (a call begins when it writes the format's
opener). ``required``: each turn's first step is a call, written by the strategy from the
opener on; later steps are ``auto`` again, so a turn cannot loop on calls (the OpenAI Agents
SDK resets ``tool_choice`` after a call for the same reason)."""
TOOL_CHOICES: tuple[str, ...] = ("auto", "required")

DEFAULT_MAX_STEPS = 6
