"""Threads and pacing for phones: performance cores, and backing off when the device is hot.

Stage: engine (how hard the model may run on this device; the agent's session applies it
between steps through :meth:`~weavehost.engine.Engine.set_threads`). Pure functions decide;
readers only read files and return ``None`` where nothing is readable, so on a desktop nothing
changes.

The back-off table follows seed 003 (on-device agent loops on Android)::

    status            threads             pause between steps   free tokens per step
    NONE / LIGHT      all performance     0 s                   as configured
    MODERATE          half (at least 1)   0.2 s                 half
    SEVERE            1                   0.5 s                 a quarter
    CRITICAL          1                   5 s (paused)          a quarter

Android's own thermal status (``PowerManager.getCurrentThermalStatus``) is not readable from a
Termux shell, so the status is derived from the hottest ``/sys/class/thermal`` zone, and only
on Android (Termux), where those zones describe the phone's SoC.
"""

from __future__ import annotations

import enum
import glob
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Backoff",
    "ThermalStatus",
    "backoff_for",
    "is_android",
    "performance_cores",
    "read_thermal_status",
    "status_from_celsius",
    "default_thread_count",
    "performance_thread_count",
]


# A critical phone waits this long before each step (seed 003 pauses the loop).
CRITICAL_PAUSE_S = 5.0


class ThermalStatus(enum.IntEnum):
    NONE = 0
    LIGHT = 1
    MODERATE = 2
    SEVERE = 3
    CRITICAL = 4


@dataclass(frozen=True, slots=True)
class Backoff:
    threads: int
    step_pause_s: float
    max_tokens: int
    paused: bool = False


def backoff_for(status: ThermalStatus | None, threads: int, max_tokens: int) -> Backoff:
    """The threads, pause between agent steps and token budget for a thermal status."""
    if status is None or status <= ThermalStatus.LIGHT:
        return Backoff(threads, 0.0, max_tokens)
    if status == ThermalStatus.MODERATE:
        return Backoff(max(1, threads // 2), 0.2, max(1, max_tokens // 2))
    if status == ThermalStatus.SEVERE:
        return Backoff(1, 0.5, max(1, max_tokens // 4))
    return Backoff(1, CRITICAL_PAUSE_S, max(1, max_tokens // 4), paused=True)


# Skin/SoC temperatures (°C) at which phones typically report each status.
_THRESHOLDS = ((80.0, ThermalStatus.CRITICAL), (70.0, ThermalStatus.SEVERE),
               (60.0, ThermalStatus.MODERATE), (50.0, ThermalStatus.LIGHT))  # fmt: skip


def status_from_celsius(celsius: float) -> ThermalStatus:
    for limit, status in _THRESHOLDS:
        if celsius >= limit:
            return status
    return ThermalStatus.NONE


def is_android() -> bool:
    return "ANDROID_ROOT" in os.environ or "TERMUX_VERSION" in os.environ


def read_thermal_status(root: str = "/sys/class/thermal") -> ThermalStatus | None:
    """The status from the hottest readable thermal zone on Android; ``None`` elsewhere or when
    nothing is readable."""
    if not is_android():
        return None
    hottest: float | None = None
    for path in glob.glob(os.path.join(root, "thermal_zone*", "temp")):
        try:
            raw = int(Path(path).read_text().strip())
        except (OSError, ValueError):
            continue
        celsius = raw / 1000 if raw > 1000 else float(raw)  # millidegrees on most kernels
        if 0 < celsius < 150 and (hottest is None or celsius > hottest):
            hottest = celsius
    return None if hottest is None else status_from_celsius(hottest)


def performance_cores(max_freqs: Mapping[int, int], allowed: set[int]) -> int:
    """How many allowed CPUs are not efficiency cores: with big.LITTLE (several maximum
    frequencies), the cores clocked above the slowest cluster; otherwise all of them."""
    freqs = {cpu: f for cpu, f in max_freqs.items() if cpu in allowed}
    if len(set(freqs.values())) < 2:
        return max(1, len(allowed))
    slowest = min(freqs.values())
    return max(1, sum(1 for f in freqs.values() if f > slowest))


def _read_max_freqs() -> dict[int, int]:
    out: dict[int, int] = {}
    for path in glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/cpuinfo_max_freq"):
        try:
            out[int(Path(path).parts[-3][3:])] = int(Path(path).read_text().strip())
        except (OSError, ValueError):
            continue
    return out


def performance_thread_count() -> int:
    """The performance cores this process may run on (what a cool device runs with)."""
    try:
        allowed = set(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        allowed = set(range(os.cpu_count() or 1))
    return performance_cores(_read_max_freqs(), allowed)


def default_thread_count() -> int:
    """The performance cores this process may run on, backed off when the phone is hot."""
    return backoff_for(read_thermal_status(), performance_thread_count(), 1).threads
