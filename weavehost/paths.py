"""Where weavehost keeps files between runs: the one definition of the cache directory.

Stage: none (a leaf every layer may import; it imports nothing of weavehost).

Guarantee: :func:`cache_dir` is the only place the cache directory is decided, read from the
environment on every call (so a test or a user can move it at any time): ``WEAVEHOST_CACHE`` if
set, else ``$XDG_CACHE_HOME/weavehost``, else ``~/.cache/weavehost``. Calibrations
(:mod:`weavehost.decode.padding`), saved prompt prefixes (``prompts/``,
:mod:`weavehost.agent.prompt_cache`) and benchmark assets (:mod:`weavehost.bench.assets`) live
under it.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CACHE_ENV_VAR", "cache_dir"]

CACHE_ENV_VAR = "WEAVEHOST_CACHE"


def cache_dir() -> Path:
    """``WEAVEHOST_CACHE``, else ``$XDG_CACHE_HOME/weavehost``, else ``~/.cache/weavehost``."""
    root = os.environ.get(CACHE_ENV_VAR) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "weavehost"
    )
    return Path(root)
