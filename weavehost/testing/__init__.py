"""weavehost.testing: end-to-end tests of MCP servers and agents, with stub servers.

Stage: testing (a public kit over the host; nothing in weavehost imports it). What it offers:

* :class:`StubServer` and :func:`load_spec`: a real MCP server process from a declarative spec
  (``stub-spec.schema.json``), over stdio or streamable HTTP, that records what it received;
* :class:`ScriptedModel` and :func:`call`: a model that writes the calls and answers a test
  gives it, through the real agent loop;
* :class:`Events` and the assertions that read as sentences (:func:`assert_called`, …);
* the pytest plugin (:mod:`weavehost.testing.plugin`, registered as a ``pytest11`` entry
  point): fixtures ``stub_server`` and ``weavehost_host``.

Names load on first use, so importing the package (as the pytest plugin does for every test
session) pulls in neither the MCP SDK nor llama.cpp, and ``python -m weavehost.testing.stub``
runs its module once.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from weavehost.mcp.elicitors import ScriptedElicitor
    from weavehost.testing.assertions import (
        Call,
        Events,
        assert_answer_contains,
        assert_called,
        assert_no_orphan_processes,
        assert_not_called,
        child_processes,
    )
    from weavehost.testing.driver import HostDriver, open_host
    from weavehost.testing.model import SCRIPT_DONE, ScriptedCall, ScriptedModel, call
    from weavehost.testing.spec import load_spec
    from weavehost.testing.stub_server import StubServer

__all__ = [
    "SCRIPT_DONE",
    "Call",
    "Events",
    "HostDriver",
    "ScriptedCall",
    "ScriptedElicitor",
    "ScriptedModel",
    "StubServer",
    "assert_answer_contains",
    "assert_called",
    "assert_no_orphan_processes",
    "assert_not_called",
    "call",
    "child_processes",
    "load_spec",
    "open_host",
]

# name -> the module that defines it.
_HOME = {
    "StubServer": "weavehost.testing.stub_server",
    "load_spec": "weavehost.testing.spec",
    "ScriptedModel": "weavehost.testing.model",
    "ScriptedCall": "weavehost.testing.model",
    "SCRIPT_DONE": "weavehost.testing.model",
    "call": "weavehost.testing.model",
    "ScriptedElicitor": "weavehost.mcp.elicitors",
    "HostDriver": "weavehost.testing.driver",
    "open_host": "weavehost.testing.driver",
    "Call": "weavehost.testing.assertions",
    "child_processes": "weavehost.testing.assertions",
    "Events": "weavehost.testing.assertions",
    "assert_answer_contains": "weavehost.testing.assertions",
    "assert_called": "weavehost.testing.assertions",
    "assert_no_orphan_processes": "weavehost.testing.assertions",
    "assert_not_called": "weavehost.testing.assertions",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'weavehost.testing' has no attribute {name!r}")
    value = getattr(import_module(home), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
