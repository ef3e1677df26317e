"""weavehost's pytest plugin: the ``stub_server`` and ``weavehost_host`` fixtures.

Stage: the test kit. Registered through the ``pytest11`` entry point (``pyproject.toml``), so
installing weavehost is enough for pytest to offer these fixtures in any project::

    def test_the_forecast(stub_server, weavehost_host):
        weather = stub_server({"name": "weather", "tools": [...]})
        host = weavehost_host(weather, model=ScriptedModel([call("get_forecast", city="Oslo"),
                                                            "Sunny in Oslo."]))
        events = host.run("Weather in Oslo?")
        assert_called(events, "get_forecast", city="Oslo")

Invariants:

* Both fixtures are factories scoped to one test; what they made is closed at its teardown, in
  reverse order, hosts before the stub servers they use (``weavehost_host`` depends on
  ``stub_server``), and a host's teardown checks that its servers left no process behind
  (:func:`~weavehost.testing.driver.open_host`).
* Loading the plugin imports nothing heavy (no MCP SDK, no llama.cpp): a project that never asks
  for these fixtures pays only for this module. pytest's ``-p no:weavehost`` turns it off.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from weavehost.testing.driver import HostDriver
    from weavehost.testing.stub_server import StubServer

__all__ = ["stub_server", "weavehost_host"]


@pytest.fixture
def stub_server() -> Iterator[Callable[..., StubServer]]:
    """A factory of stub MCP servers: ``stub_server(spec, http=False) -> StubServer``, where
    ``spec`` is a dict or a .json/.yaml file (``weavehost/testing/stub-spec.schema.json``).
    Each is closed when the test ends (an HTTP one's process stopped)."""
    from weavehost.testing import StubServer

    with contextlib.ExitStack() as stack:

        def start(spec: Any, *, http: bool = False) -> StubServer:
            return stack.enter_context(StubServer(spec, http=http))

        yield start


@pytest.fixture
def weavehost_host(stub_server: Callable[..., StubServer]) -> Iterator[Callable[..., HostDriver]]:
    """A factory of driven hosts: ``weavehost_host(*servers, model=..., trust=(),
    approval=None, approver=None, timeouts=None, **host_options) -> HostDriver``.

    ``servers``: StubServers, ServerConfigs, ``.py`` paths, command lines or URLs. ``model``: a
    :class:`~weavehost.testing.ScriptedModel`, a GGUF path, ``"embedded"``, or ``None`` (no
    model: only ``driver.call``). Calls are approved unless ``approval``/``approver`` say
    otherwise. ``driver.run(prompt)`` returns the turn's ``Events``; ``driver.session()`` holds
    several turns. Every host is closed when the test ends, with no orphan process."""
    from weavehost.testing.driver import open_host

    with contextlib.ExitStack() as stack:

        def start(*servers: Any, **options: Any) -> HostDriver:
            return stack.enter_context(open_host(*servers, **options))

        yield start
