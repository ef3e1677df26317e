"""Measuring what a pass costs on this machine, by the number of sequences in it.

Stage: engine (measurement). :func:`measure_pass_costs` times real ``llama_decode`` passes of
1..N sequences that share one prefilled prompt (one token per sequence, the shape of a parallel
value pass) and the per-token cost of a short prefill. Medians over repeats, so one slow pass
does not move the table. The padding plan of the ``weave`` strategy is made from this table.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from weavehost.engine.engine import Engine
from weavehost.engine.passes import Row
from weavehost.errors import EngineError

__all__ = [
    "CALIBRATION_N_CTX",
    "DEFAULT_MAX_WIDTH",
    "DEFAULT_REPEATS",
    "PassCosts",
    "measure_pass_costs",
]

# The probe prompt and max width + 1 sequences fit well within this context.
CALIBRATION_N_CTX = 2048
DEFAULT_MAX_WIDTH = 8
# Passes per width: enough for a stable median on a phone-class CPU.
DEFAULT_REPEATS = 30

_PROMPT = (
    "<|im_start|>system\nYou are a helpful assistant with tools.<|im_end|>\n"
    "<|im_start|>user\nWhat will the weather be in Paris and in Berlin over the next three "
    "days, in celsius please?<|im_end|>\n<|im_start|>assistant\n"
)


@dataclass(frozen=True, slots=True)
class PassCosts:
    """Median seconds of a decode pass per width, and of one prefilled token."""

    pass_s: dict[int, float]
    prefill_token_s: float
    repeats: int
    threads: int

    def relative(self) -> dict[int, float]:
        """Each width's cost over a serial pass's (the paper's Table 2)."""
        one = self.pass_s[1]
        return {width: cost / one for width, cost in self.pass_s.items()}

    def per_sequence(self) -> dict[int, float]:
        return {width: cost / width for width, cost in self.pass_s.items()}


def measure_pass_costs(
    engine: Engine,
    *,
    max_width: int = DEFAULT_MAX_WIDTH,
    repeats: int = DEFAULT_REPEATS,
    prefill_tokens: int = 20,
) -> PassCosts:
    """Time passes of 1..``max_width`` sequences; leaves the KV cache empty afterwards."""
    if max_width + 1 > engine.n_seq_max:
        raise EngineError(f"max_width {max_width} needs n_seq_max > {max_width}")
    engine.clear()
    prompt = engine.tokenize(_PROMPT, special=True)
    base = len(prompt)
    engine.prefill(0, prompt, logits_last=False)
    for seq in range(1, max_width):
        engine.fork(0, seq)
    probe = engine.tokenize(" Sure")[0]
    costs: dict[int, float] = {}
    # One warm-up pass per width, so first-use allocations are not timed.
    for width in range(1, max_width + 1):
        samples = []
        for attempt in range(repeats + 1):
            for seq in range(width):
                engine.drop(seq, base)
            rows = [Row(probe, (seq,), logits=True) for seq in range(width)]
            started = time.perf_counter()
            engine.run_pass(rows)
            if attempt:
                samples.append(time.perf_counter() - started)
        costs[width] = statistics.median(samples)
    filler = (engine.tokenize(" the weather in Paris is sunny and warm today") * 8)[:prefill_tokens]
    prefill_samples = []
    for attempt in range(max(5, repeats // 3) + 1):
        engine.drop(0, base)
        rows = [
            Row(t, (0,), logits=i == len(filler) - 1, forced=True) for i, t in enumerate(filler)
        ]
        started = time.perf_counter()
        engine.run_pass(rows)
        if attempt:
            prefill_samples.append((time.perf_counter() - started) / len(filler))
    engine.clear()
    return PassCosts(
        pass_s=costs,
        prefill_token_s=statistics.median(prefill_samples),
        repeats=repeats,
        threads=engine.n_threads,
    )


def format_table(costs: PassCosts) -> str:
    """A Markdown table: ms per pass, relative to serial, ms per sequence."""
    widths = sorted(costs.pass_s)
    head = "| | " + " | ".join(str(w) for w in widths) + " | prefill ms/token |"
    rule = "|---|" + "---|" * len(widths) + "---|"
    ms = "| pass ms | " + " | ".join(f"{costs.pass_s[w] * 1e3:.1f}" for w in widths)
    ms += f" | {costs.prefill_token_s * 1e3:.2f} |"
    rel = costs.relative()
    relative = "| × serial | " + " | ".join(f"{rel[w]:.2f}" for w in widths) + " | |"
    per = costs.per_sequence()
    per_seq = "| ms / sequence | " + " | ".join(f"{per[w] * 1e3:.1f}" for w in widths) + " | |"
    return "\n".join([head, rule, ms, relative, per_seq])
