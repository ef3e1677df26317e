"""Which attention kernel to run a model with, by measurement: flash attention on or off, each
timed over a turn at an agent's depth (:func:`probe_attention`, :class:`AttentionProbe`).

Stage: engine (measurement), beside :mod:`weavehost.engine.calibrate`, which re-exports it and
measures the pass costs with the kernel chosen here.

Guarantees:

- Each kernel is timed :data:`PROBE_ROUNDS` times, alternating (off, on, on, off), so a linear
  drift weighs on both alike and two openings of one kernel measure the noise.
- The kernel is kept unless the other is clearly faster: on (the engine's default), or off where
  only off keeps a wide pass's rows a one-row pass's (``native.exact_wide_passes``); the other
  is chosen only where it runs the turn faster by more than twice the noise, and by a third
  where only the kept kernel keeps drafted text exact.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from weavehost.engine.engine import Engine
from weavehost.engine.native import DEFAULT_KV_CACHE, exact_wide_passes
from weavehost.engine.passes import Row

__all__ = [
    "ATTENTION_MARGIN",
    "EXACT_ATTENTION_MARGIN",
    "FILLER",
    "PROBE_HELD_TOKENS",
    "PROBE_N_CTX",
    "PROBE_PREFILL_TOKENS",
    "PROBE_ROUNDS",
    "PROBE_SERIAL_PASSES",
    "PROBE_WIDE_PASSES",
    "PROBE_WIDE_ROWS",
    "AttentionProbe",
    "probe_attention",
]

# The least margin by which the other kernel must run a turn faster to be chosen over the kept
# one (the engine's default, on, where both or neither are exact). Two calibrations minutes
# apart on the AVX-512 machine timed the same kernel's turn 3.4% (off) and 5.4% (on) apart, and
# the two kernels under 2% apart, so that a smaller margin chose by chance; the Xeon, where off
# is clearly faster (a turn 13% less for Qwen2.5-Coder-0.5B), still chooses off.
ATTENTION_MARGIN = 0.05
# The margin where only one kernel keeps every width's numbers a one-row pass's (on with
# quantized keys in a build with llamafile's sgemm; off with f16 keys in one without:
# `native.exact_wide_passes`): with the other, drafted text and calls part from the undrafted
# ones at near-ties, so the other must cost at most two thirds of its turn. The EPYC's
# probe timed off 10-20% faster, its drafts then 2 of 57 answers other text (docs/engine.md,
# "Exactness weighs in the kernel"); the Xeon of run 13's 3.4x on wide passes clears it.
EXACT_ATTENTION_MARGIN = 1 / 3
# Openings of each kernel the probe times, alternating (off, on, on, off): a linear drift
# weighs on both alike, and two openings of one kernel measure the noise.
PROBE_ROUNDS = 2

# What the attention probe prices: a turn at an agent's depth. A prompt this long is held (a
# system prompt with its tools: the agent's answers run 700-1,400 cells deep), then the turn
# is this many new tokens prefilled at the rate of the prompt's last chunk, this many one-row
# passes (a call and a short answer; `constrained` writes a bench-200 call in ~40 passes) and
# this many passes of this many rows, all asking for logits (drafts verified, values side by
# side: a drafted answer on the 51 ran one wide pass to six one-row ones, session 47).
PROBE_HELD_TOKENS = 1024
PROBE_PREFILL_TOKENS = 256
PROBE_SERIAL_PASSES = 64
PROBE_WIDE_PASSES = 16
PROBE_WIDE_ROWS = 8
# The held prompt and its widest pass fit well within this context.
PROBE_N_CTX = 2048
# Ordinary words, repeated to the held prompt's length (and by the pass costs' calibration).
FILLER = " the weather in Paris is sunny and warm today, and Berlin is cloudy with rain"


@dataclass(frozen=True, slots=True)
class AttentionProbe:
    """llama.cpp's flash-attention kernel on and off, each timed over a
    :data:`PROBE_HELD_TOKENS`-token prompt: seconds per prefilled token (its last chunk), of a
    one-row pass after it and of a pass of :data:`PROBE_WIDE_ROWS` rows asking for logits
    (medians over the openings). ``rounds``: each opening's turn (:meth:`turn_s`), by kernel.
    The kernel's cost grows with the context the rows attend to, and with the rows, and which
    wins is the machine's (``docs/engine.md``, "Flash attention").

    :attr:`flash_attn` is the kept kernel, the engine's default (on) or the only one that keeps
    a wide pass's numbers a one-row pass's where that is off (``exact``, by setting), unless the
    other runs a turn faster by more than :attr:`margin`: :data:`ATTENTION_MARGIN`
    (:data:`EXACT_ATTENTION_MARGIN` where only the kept kernel is exact), or twice the
    :attr:`noise` between two openings of one kernel where that is more. Two kernels within the
    noise of each other are a coin flip, and a flip would change the kernel the table is
    measured and the model run with."""

    prefill_token_s: Mapping[bool, float]
    pass_s: Mapping[bool, float]
    wide_pass_s: Mapping[bool, float]
    rounds: Mapping[bool, tuple[float, ...]] = field(default_factory=dict)
    exact: Mapping[bool, bool] = field(default_factory=dict)

    def turn_s(self, flash_attn: bool) -> float:
        return _turn_s(
            self.prefill_token_s[flash_attn], self.pass_s[flash_attn], self.wide_pass_s[flash_attn]
        )

    @property
    def noise(self) -> float:
        """The largest relative spread of one kernel's turn between its openings (0 with one
        opening each)."""
        spreads = [(max(t) - min(t)) / min(t) for t in self.rounds.values() if len(t) > 1]
        return max(spreads, default=0.0)

    @property
    def kept(self) -> bool:
        """The kernel kept unless the other is clearly faster: on, or off where only off is
        exact."""
        return not (self.exact.get(False, False) and not self.exact.get(True, False))

    @property
    def margin(self) -> float:
        """How much faster the other kernel must run a turn to be chosen over :attr:`kept`."""
        one_exact = self.exact.get(True, False) != self.exact.get(False, False)
        return max(EXACT_ATTENTION_MARGIN if one_exact else ATTENTION_MARGIN, 2 * self.noise)

    @property
    def flash_attn(self) -> bool:
        kept = self.kept
        return kept != (self.turn_s(not kept) < self.turn_s(kept) * (1 - self.margin))

    def record(self) -> dict[str, Any]:
        return {
            "held_tokens": PROBE_HELD_TOKENS,
            "prefill_tokens": PROBE_PREFILL_TOKENS,
            "serial_passes": PROBE_SERIAL_PASSES,
            "wide_passes": PROBE_WIDE_PASSES,
            "wide_rows": PROBE_WIDE_ROWS,
            "exact_with_flash_attn": self.exact.get(True, False),
            "exact_without_flash_attn": self.exact.get(False, False),
            "noise": round(self.noise, 4),
            "margin": round(self.margin, 4),
            **{
                "on" if setting else "off": {
                    "prefill_ms_per_token": round(self.prefill_token_s[setting] * 1e3, 4),
                    "pass_ms": round(self.pass_s[setting] * 1e3, 4),
                    "wide_pass_ms": round(self.wide_pass_s[setting] * 1e3, 4),
                    "turn_ms": round(self.turn_s(setting) * 1e3, 1),
                    "turn_ms_by_opening": [round(t * 1e3, 1) for t in self.rounds.get(setting, ())],
                }
                for setting in (False, True)
            },
        }


def _turn_s(prefill_token_s: float, pass_s: float, wide_pass_s: float) -> float:
    """The probe's turn (:data:`PROBE_PREFILL_TOKENS` and its passes) at these costs."""
    return (
        PROBE_PREFILL_TOKENS * prefill_token_s
        + PROBE_SERIAL_PASSES * pass_s
        + PROBE_WIDE_PASSES * wide_pass_s
    )


def probe_attention(
    path: str | Path,
    *,
    n_threads: int | None = None,
    repeats: int = 9,
    chunk: int = 128,
    rounds: int = PROBE_ROUNDS,
    kv_cache: str = DEFAULT_KV_CACHE,
    held: int = PROBE_HELD_TOKENS,
) -> AttentionProbe:
    """Open the model with flash attention off and on, ``rounds`` times each in the order off,
    on, on, off, ..., and time each opening (see :class:`AttentionProbe`): a ``held``-token
    prompt in ``chunk``-token prefills, the last one timed, then ``repeats`` one-row passes and
    ``repeats`` passes of :data:`PROBE_WIDE_ROWS` rows over it, each kind after one untimed
    warm-up. ``kv_cache``: the cache both are opened with (one whose V is quantized needs
    flash attention: nothing to probe, :func:`~weavehost.engine.native.needs_flash_attn`)."""
    prefill: dict[bool, list[float]] = {False: [], True: []}
    passes: dict[bool, list[float]] = {False: [], True: []}
    wide: dict[bool, list[float]] = {False: [], True: []}
    turns: dict[bool, list[float]] = {False: [], True: []}
    for round_index in range(rounds):
        for setting in (False, True) if round_index % 2 == 0 else (True, False):
            opening = _time_turn(path, n_threads, setting, repeats, chunk, kv_cache, held)
            prefill[setting].append(opening.prefill_token_s)
            passes[setting].extend(opening.passes)
            wide[setting].extend(opening.wide_passes)
            turns[setting].append(
                _turn_s(
                    opening.prefill_token_s,
                    statistics.median(opening.passes),
                    statistics.median(opening.wide_passes),
                )
            )
    return AttentionProbe(
        {s: statistics.median(v) for s, v in prefill.items()},
        {s: statistics.median(v) for s, v in passes.items()},
        {s: statistics.median(v) for s, v in wide.items()},
        {s: tuple(v) for s, v in turns.items()},
        {s: exact_wide_passes(kv_cache, s) for s in (False, True)},
    )


@dataclass(frozen=True, slots=True)
class _Opening:
    """One opening of the probe: seconds per token of the prompt's last chunk, and of each
    timed one-row and wide pass after it."""

    prefill_token_s: float
    passes: list[float]
    wide_passes: list[float]


def _time_turn(
    path: str | Path,
    n_threads: int | None,
    flash_attn: bool,
    repeats: int,
    chunk: int,
    kv_cache: str,
    held: int,
) -> _Opening:
    """Open the model once with ``flash_attn`` and time a turn's shapes over its prompt."""
    with Engine.open(
        path,
        n_ctx=PROBE_N_CTX,
        n_threads=n_threads,
        flash_attn=flash_attn,
        kv_cache=kv_cache,
    ) as engine:
        filler = engine.tokenize(FILLER)
        prompt = (filler * (held // len(filler) + 1))[:held]
        per_token = 0.0
        for start in range(0, len(prompt), chunk):
            piece = prompt[start : start + chunk]
            began = time.perf_counter()
            engine.prefill(0, piece)
            per_token = (time.perf_counter() - began) / len(piece)
        timed: dict[int, list[float]] = {1: [], PROBE_WIDE_ROWS: []}
        for width, samples in timed.items():
            for attempt in range(repeats + 1):
                batch = [Row(filler[(attempt + i) % len(filler)], (0,), True) for i in range(width)]
                began = time.perf_counter()
                engine.run_pass(batch)
                if attempt:
                    samples.append(time.perf_counter() - began)
                engine.drop(0, len(prompt))
    return _Opening(per_token, timed[1], timed[PROBE_WIDE_ROWS])
