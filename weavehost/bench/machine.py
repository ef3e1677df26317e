"""Where a benchmark ran: the CPU flags, the load, the versions, a busy-machine warning.

Stage: benchmark (records). Every benchmark (``bench``, ``bench-agent``, ``calibrate``) prints
and stores these beside its numbers, so two runs can be told apart and a number measured on a
busy machine says so.
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

from weavehost.engine import default_threads

__all__ = [
    "FREE_CPUS_PER_THREAD",
    "busy_warning",
    "cpu_flags",
    "load_average",
    "machine_info",
    "source_commit",
]

# Other work is taken to compete with the bench's threads when the 1-minute load average leaves
# fewer than this many CPUs free per bench thread (what ran just before counts too).
FREE_CPUS_PER_THREAD = 0.75


def load_average() -> float | None:
    """The 1-minute load average, or ``None`` where the OS does not say."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):  # not on this OS
        return None


def cpu_flags() -> list[str]:
    """The SIMD flags that decide llama.cpp's speed here (``avx2``, ``avx512*``), if readable."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    return sorted(set(re.findall(r"\b(avx2|avx512[a-z_]*)\b", text)))


def machine_info() -> dict[str, Any]:
    """What every benchmark records about where it ran: enough to tell two runs apart."""
    return {
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpus": os.cpu_count(),
        "cpu_flags": cpu_flags(),
        "python": platform.python_version(),
        "weavehost": _version("weavehost"),
        "llama_cpp_python": _version("llama-cpp-python"),
        "commit": source_commit(),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load_average_at_start": load_average(),
    }


def source_commit() -> str | None:
    """The git commit of the weavehost source that runs, with ``+dirty`` when it has uncommitted
    changes; ``None`` outside a git checkout (an installed wheel) or without git."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        head = _git(root, "rev-parse", "--short=12", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return None
    return f"{head}+dirty" if dirty else head or None


def _git(root: Path, *args: str) -> str:
    """``git -C root ARGS``'s output, stripped; raises where git fails or is absent."""
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5, check=True
    )
    return done.stdout.strip()


def busy_warning(load: float | None, threads: int) -> str | None:
    """A warning when other work competes with the benchmark's threads, else ``None``."""
    if load is None or default_threads() - load >= FREE_CPUS_PER_THREAD * threads:
        return None
    return (
        f"warning: the machine is busy (1-minute load {load:.1f}); llama.cpp threads that "
        "share CPUs slow down many times over, so latencies will be noise"
    )


def _version(distribution: str) -> str | None:
    try:
        return importlib_metadata.version(distribution)
    except importlib_metadata.PackageNotFoundError:
        return None
