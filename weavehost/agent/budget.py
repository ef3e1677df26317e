"""What one step may write: the bound on its answer and the budget of its reply's calls.

Stage: agent (each step, between the model's sync and its free text; the session asks, the
decoder's driver :func:`~weavehost.decode.several.write_calls` spends). ``left`` is what the
context holds past the synced conversation.

Guarantees (a step whose context has room, ``left >= 2 * reserve``; a smaller one gives the
reply half of what is left, and the context is then the bound):

* **A call is never cut by the bound.** However long the free text before it ran (at most
  :meth:`StepBudget.free_bound`), the reply's budget (:meth:`StepBudget.reply_budget`) holds
  one whole call (``call_tokens``), the decision after it whether another follows
  (:data:`~weavehost.decode.several.DECISION_TOKENS`, made only where one token more than that
  fits) and the close the format writes after a reply's last call (SmolLM2's ``}]</tool_call>``),
  counted with the model's own tokenizer.
* The step keeps :data:`REPLY_SLACK` token past the reply, as before the reserve was named.
* Pure arithmetic: nothing here decodes or reads the engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from weavehost.decode.several import DECISION_TOKENS

__all__ = ["REPLY_SLACK", "StepBudget", "close_tokens"]

REPLY_SLACK = 1  # a token of the context no step's reply may take


def close_tokens(model: Any) -> int:
    """Tokens of the close a reply's calls end with, for a model that writes its calls in one
    of weavehost's formats (it has a ``format``, as :class:`~weavehost.agent.model.EngineModel`
    does); 0 for one that does not (a remote server writes its own calls)."""
    fmt = getattr(model, "format", None)
    several = None if fmt is None else fmt.several
    close = "" if several is None else several.close
    return int(model.count_tokens(close)) if close else 0


@dataclass(frozen=True, slots=True)
class StepBudget:
    """The tokens a step keeps for its reply's calls, and what that leaves its answer."""

    call_tokens: int  # one call's bound (the strategy's ``max_tokens``)
    close_tokens: int = 0  # the format's close after a reply's last call

    @property
    def reply_tokens(self) -> int:
        """What a reply needs for one whole call, the decision after it and the close."""
        return self.call_tokens + DECISION_TOKENS + 1 + self.close_tokens

    @property
    def reserve(self) -> int:
        """What the step keeps past its free text: the reply and the slack after it."""
        return self.reply_tokens + REPLY_SLACK

    def free_bound(self, left: int, free_tokens: int) -> int:
        """The most tokens of free text (``free_tokens`` at most) that leave the reply its
        :attr:`reserve` (half of ``left`` when ``left`` is smaller than twice that)."""
        return min(free_tokens, max(0, left - min(self.reserve, left // 2)))

    def reply_budget(self, left: int, written: int) -> int:
        """The tokens the reply's calls may take after ``written`` tokens of free text."""
        return max(0, left - written - REPLY_SLACK)
