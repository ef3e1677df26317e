"""What a turn may be asked for: whether it must call a tool, how long its answer may run, and
how many steps it may take.

Stage: agent (its settings). A module of names only, with no imports of the rest of the agent,
so the command line can build its options from them without loading the MCP SDK or llama.cpp.
"""

from __future__ import annotations

from collections.abc import Collection

from weavehost.errors import ConfigError

__all__ = [
    "DEFAULT_MAX_ANSWER_TOKENS",
    "DEFAULT_MAX_STEPS",
    "TOOL_CHOICES",
    "ToolChoice",
    "check_tool_choice",
]

ToolChoice = str
"""As OpenAI's API has it. ``auto``: the model decides whether to call (a call begins when it
writes one of the format's triggers). ``required``: each turn's first step is a call, written by
the strategy from the format's opener on; later steps are ``auto`` again, so a turn cannot loop
on calls (the OpenAI Agents SDK resets ``tool_choice`` after a call for the same reason).
``none``: no call is written (the tools are still described in the prompt). A tool's name: as
``required``, with the strategy offered only that tool."""
TOOL_CHOICES: tuple[str, ...] = ("auto", "required", "none")

DEFAULT_MAX_STEPS = 6
# Free text one step may write: the answer after a tool result ends at the model's end of turn,
# at a repeated call, or here (with a notice).
DEFAULT_MAX_ANSWER_TOKENS = 512


def check_tool_choice(choice: str, tools: Collection[str]) -> str:
    """``choice`` if it is one of :data:`TOOL_CHOICES` or the name of one of ``tools``;
    otherwise a :class:`ConfigError` that names what is known."""
    if choice in TOOL_CHOICES or choice in tools:
        return choice
    known = ", ".join(sorted(tools)) or "none (no server lists a tool)"
    raise ConfigError(
        f"tool choice {choice!r} is not one of {', '.join(TOOL_CHOICES)} or a tool's name; "
        f"known tools: {known}"
    )
