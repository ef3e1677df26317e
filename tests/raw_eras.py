"""The raw test server in both protocol eras, for the reliability tests of the pool.

A test module that imports :func:`era` (an autouse fixture) runs each of its tests twice: the
raw server (``tests/host_fixtures/raw_server.py``) refuses ``server/discover``, so the pool falls
back to the initialize handshake, or (``--modern``) answers it, so the pool speaks 2026-07-28
to it, every request carrying its envelope. :func:`raw` is the server's config in the era of
the running test.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from weavehost.config import ServerConfig

RAW = str(Path(__file__).parent / "host_fixtures" / "raw_server.py")
ERAS = {"handshake": (), "2026-07-28": ("--modern",)}
_era_args: list[str] = []


@pytest.fixture(autouse=True, params=list(ERAS))
def era(request: pytest.FixtureRequest) -> Iterator[str]:
    _era_args[:] = ERAS[request.param]
    yield request.param
    _era_args.clear()


def raw(name: str, *args: str) -> ServerConfig:
    """The raw server named ``name`` with ``args``, in the running test's era."""
    return ServerConfig(
        name=name, command=sys.executable, args=(RAW, "--name", name, *_era_args, *args)
    )
