"""Padding plans: how wide to make a pass of n rows, from costs measured on this machine.

Stage: parallel value decoding (planning). A pass with n rows may be cheaper padded to a wider
batch (llama.cpp's repacked Q4_0 kernels work on 4 and 8 rows; the paper pads to 4 on phones).
Instead of hard-coding a width, ``weavehost calibrate`` measures the cost of each width and
:func:`plan_from_costs` pads n to the width w >= n of least measured cost. Plans are stored per
model file and thread count under :func:`weavehost.paths.cache_dir`; without one, passes are not
padded.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from weavehost.engine import Engine
from weavehost.engine.calibrate import PassCosts
from weavehost.errors import ConfigError
from weavehost.paths import cache_dir

__all__ = ["PaddingPlan", "load_plan", "plan_from_costs", "plan_path", "save_plan"]


@dataclass(frozen=True, slots=True)
class PaddingPlan:
    """``widths[n]`` is the width to pad a pass of ``n`` rows to (``n`` itself if absent)."""

    widths: dict[int, int]
    source: str = "none"

    def width_for(self, rows: int) -> int:
        return max(rows, self.widths.get(rows, rows))


NO_PADDING = PaddingPlan({}, "none")


def plan_from_costs(costs: PassCosts, *, margin: float = 0.03) -> PaddingPlan:
    """Pad n to the cheapest measured width >= n, if it beats n's own cost by ``margin``."""
    widths: dict[int, int] = {}
    measured = sorted(costs.pass_s)
    for n in measured:
        best = min((w for w in measured if w >= n), key=lambda w: costs.pass_s[w])
        if best != n and costs.pass_s[best] < costs.pass_s[n] * (1 - margin):
            widths[n] = best
    return PaddingPlan(widths, "calibrated")


def plan_path(model: Path, threads: int) -> Path:
    stat = model.stat()
    key = f"{model.stem}-{stat.st_size}-t{threads}"
    return cache_dir() / "calibration" / f"{key}.json"


def save_plan(engine: Engine, costs: PassCosts, plan: PaddingPlan) -> Path:
    path = plan_path(engine.path, engine.n_threads)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "model": str(engine.path),
        "threads": engine.n_threads,
        "pass_ms": {str(w): round(c * 1e3, 3) for w, c in costs.pass_s.items()},
        "prefill_ms_per_token": round(costs.prefill_token_s * 1e3, 3),
        "repeats": costs.repeats,
        "padding": {str(n): w for n, w in plan.widths.items()},
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(record, indent=2))
    tmp.replace(path)
    return path


def load_plan(engine: Engine) -> PaddingPlan:
    """The stored plan for this model and thread count, or no padding if none was measured."""
    path = plan_path(engine.path, engine.n_threads)
    if not path.exists():
        return NO_PADDING
    try:
        record = json.loads(path.read_text())
        widths = {int(n): int(w) for n, w in record["padding"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # AttributeError: a padding that is not an object (null, a list) has no .items()
        raise ConfigError(
            f"{path}: the stored calibration is unreadable ({exc}); run `weavehost calibrate`"
        ) from exc
    return PaddingPlan(widths, f"calibrated ({path})")
