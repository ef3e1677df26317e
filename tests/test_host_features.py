"""The Host offers servers its client features: sampling by its model (approved once per
server), elicitation by its elicitor (declined without one), roots (set_roots), progress and
log events, cancellation by abort; and the console shows progress and logs.

Against the real SDK server in tests/host_fixtures/features_server.py, in-process (the raw
server of tests/host_fixtures/raw_server.py over stdio where a test reads what reached the
server: abort's notifications/cancelled); a scripted model answers sampling where the test is
about the host's wiring, the embedded SmolLM2 where the model is loaded lazily for a server's
request (``model`` mark).
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import io
import json
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.host_fixtures.features_server import build
from weavehost import gguf
from weavehost.agent.events import Event
from weavehost.config import HostConfig, ServerConfig
from weavehost.console import EventPrinter, progress_text
from weavehost.decode import constraint
from weavehost.errors import ModelNotFoundError, ServerStartError
from weavehost.host import Host
from weavehost.mcp.elicitors import ScriptedElicitor
from weavehost.mcp.executor import StaticApprover
from weavehost.testing import Events, ScriptedModel

pytestmark = pytest.mark.anyio

BOUND_S = 20
RAW = str(Path(__file__).parent / "host_fixtures" / "raw_server.py")


def host(**kw: Any) -> Host:
    kw.setdefault("agent_model", ScriptedModel(["a short answer"]))
    config = kw.pop("config", HostConfig(approval="always"))
    return Host(config, inproc={"f": build()}, **kw)


async def call(h: Host, name: str, arguments: dict[str, Any]) -> Events:
    return await Events.collect(h.call(name, arguments))


def result(events: list[Event]) -> Event:
    [found] = [e for e in events if e.type == "tool_result"]
    return found


async def test_a_servers_sampling_request_is_answered_by_the_hosts_model() -> None:
    model = ScriptedModel(["Paris. END and more"])
    with anyio.fail_after(BOUND_S):
        async with host(agent_model=model) as h:
            events = await call(h, "ask_model", {"prompt": "Capital of France?"})
    assert result(events)["text"] == "weavehost said: Paris.  (stopSequence)"
    [sampling] = model.samplings
    assert sampling is not None and sampling.stop == ("END",) and sampling.temperature == 0.2
    assert model.synced[0][0] == {"role": "system", "content": "Answer briefly."}


async def test_sampling_is_approved_once_per_server_under_ask() -> None:
    approver = StaticApprover(True)
    model = ScriptedModel(["one", "two"])
    config = HostConfig(approval="ask", trusted_servers=frozenset())
    with anyio.fail_after(BOUND_S):
        async with host(agent_model=model, config=config, approver=approver) as h:
            first = await call(h, "ask_model", {"prompt": "a"})
            second = await call(h, "ask_model", {"prompt": "b"})
    assert "said: one" in result(first)["text"] and "said: two" in result(second)["text"]
    sampling_asks = [r for r in approver.seen if not hasattr(r, "spec")]
    assert len(sampling_asks) == 1 and sampling_asks[0].server == "f"
    assert "Answer briefly." in sampling_asks[0].describe()


async def test_a_refused_sampling_request_reaches_the_server_as_an_error_and_the_host_goes_on() -> (
    None
):
    config = HostConfig(approval="ask")
    with anyio.fail_after(BOUND_S):
        async with host(config=config, approver=StaticApprover("yes")) as h:
            h.sampler.approval = "never"
            events = await call(h, "ask_model", {"prompt": "a"})
            again = await call(h, "roots", {})
    # Handshake era: the server's tool reads the error; 2026-07-28: the call itself fails.
    assert result(events)["status"] in ("tool_error", "server_error")
    assert "approval: never" in result(events)["text"]
    assert result(again)["status"] == "ok"


async def test_elicitation_is_answered_by_the_hosts_elicitor() -> None:
    elicitor = ScriptedElicitor([{"name": "Ada", "age": 36}])
    with anyio.fail_after(BOUND_S):
        async with host(elicitor=elicitor) as h:
            events = await call(h, "ask_user", {})
    assert result(events)["text"] == "hello Ada, 36"
    assert elicitor.seen[0].message == "Who is asking?" and elicitor.seen[0].mode == "form"


async def test_an_embedder_without_an_elicitor_declares_elicitation_and_declines_every_request() -> (
    None
):
    with anyio.fail_after(BOUND_S):
        async with host() as h:
            events = await call(h, "ask_user", {})
            declared = await call(h, "client_capabilities", {})
    assert result(events)["text"] == "the user chose decline"
    assert '"elicitation"' in result(declared)["text"] and '"sampling"' in result(declared)["text"]


async def test_the_roots_are_the_hosts_and_set_roots_changes_what_servers_list(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "one", tmp_path / "two"
    first.mkdir(), second.mkdir()
    with anyio.fail_after(BOUND_S):
        async with host(roots=[first]) as h:
            before = await call(h, "roots", {})
            h.set_roots([second, first])
            after = await call(h, "roots", {})
    assert result(before)["text"] == first.as_uri()
    assert result(after)["text"] == f"{second.as_uri()}\n{first.as_uri()}"


def test_the_roots_default_to_the_configs_then_to_none(tmp_path: Path) -> None:
    assert host(config=HostConfig(roots=(str(tmp_path),))).roots.paths == (tmp_path.resolve(),)
    assert host().roots.paths == ()  # not the current directory: a server keeps its own


async def test_a_host_offered_no_roots_declares_the_capability_and_lists_none() -> None:
    with anyio.fail_after(BOUND_S):
        async with host() as h:
            listed = await call(h, "roots", {})
            declared = await call(h, "client_capabilities", {})
    assert result(listed)["status"] == "ok" and "file://" not in result(listed)["text"]
    assert '"roots"' in result(declared)["text"]


async def test_a_calls_progress_and_the_servers_log_lines_become_events() -> None:
    with anyio.fail_after(BOUND_S):
        async with host() as h:
            events = await call(h, "steps", {"n": 3})
    progress = [e.data for e in events if e.type == "progress"]
    assert [(p["progress"], p["total"], p["message"]) for p in progress] == [
        (1, 3, "step 1"),
        (2, 3, "step 2"),
        (3, 3, "step 3"),
    ]
    assert all(p["name"] == "steps" and p["server"] == "f" for p in progress)
    logs = [e.data for e in events if e.type == "log"]
    assert [(entry["level"], entry["data"]) for entry in logs] == [
        ("info", f"did step {i}") for i in (1, 2, 3)
    ]
    assert result(events)["text"] == "3 steps"


async def told_cancelled(record: Path) -> bool:
    """Whether the server's ``wait`` tool recorded its cancellation, within a bound (the server
    writes it in its own task, after the notification arrives)."""
    for _ in range(CANCEL_POLLS):
        if "cancelled" in await anyio.Path(record).read_text():
            return True
        await anyio.sleep(0.01)
    return False


CANCEL_POLLS = 500  # 5 s


async def test_a_consumer_that_stops_reading_a_call_cancels_it_on_the_server_and_the_host_goes_on(
    tmp_path: Path,
) -> None:
    record = tmp_path / "record"
    with anyio.fail_after(BOUND_S):
        async with host() as h:
            async for event in h.call("wait", {"record": str(record)}):
                assert event.type == "progress"
                break
            assert await told_cancelled(record), "the server heard notifications/cancelled"
            after = await call(h, "steps", {"n": 1})
    assert result(after)["text"] == "1 steps"


async def test_abort_during_a_call_cancels_it(tmp_path: Path) -> None:
    # Over stdio, so the server can only hear of it by notifications/cancelled (in-process, the
    # SDK cancels the handler directly). abort() cancels the body of `async with` as well, so
    # what reached the server is read once the host (and the server) are gone.
    record = tmp_path / "record"
    server = ServerConfig("raw", command=sys.executable, args=(RAW, "--record", str(record)))
    seen: list[str] = []
    with anyio.fail_after(BOUND_S):
        async with Host(HostConfig(servers=(server,), approval="always"), load_model=False) as h:
            async for event in h.call("progress", {}):
                seen.append(event.type)
                h.abort()
    received = [json.loads(line) for line in record.read_text().splitlines()]
    [call_request] = [m for m in received if m.get("method") == "tools/call"]
    [cancel] = [m for m in received if m.get("method") == "notifications/cancelled"]
    assert cancel["params"]["requestId"] == call_request["id"]
    assert seen == ["progress"]


async def test_a_direct_calls_result_carries_the_content_blocks_and_structured_content_the_server_sent() -> (
    None
):
    with anyio.fail_after(BOUND_S):
        async with host() as h:
            events = await call(h, "steps", {"n": 1})
    sent = result(events)
    assert sent["server"] == "f" and sent["status"] == "ok" and sent["text"] == "1 steps"
    assert sent["content"] == [{"type": "text", "text": "1 steps"}]
    assert sent["structuredContent"] == sent["structured"] == {"result": "1 steps"}


async def test_a_refused_direct_call_carries_no_content_blocks() -> None:
    config = HostConfig(approval="never")
    with anyio.fail_after(BOUND_S):
        async with host(config=config) as h:
            events = await call(h, "steps", {"n": 1})
    refused = result(events)
    assert refused["status"] == "denied"
    assert refused["content"] == [] and refused["structuredContent"] is None


async def test_a_lazy_host_loads_no_model_for_a_call_that_needs_none() -> None:
    with anyio.fail_after(BOUND_S):
        async with Host(
            HostConfig(approval="always"), inproc={"f": build()}, load_model="lazy"
        ) as h:
            events = await call(h, "steps", {"n": 1})
            assert h.model is None
            with pytest.raises(RuntimeError, match="load_model"):
                h.session()
    assert result(events)["text"] == "1 steps"


@pytest.mark.model
async def test_a_lazy_host_loads_the_embedded_model_when_a_server_asks_for_sampling() -> None:
    with anyio.fail_after(120):
        async with Host(HostConfig(approval="always"), inproc={"f": build()}, load_model="lazy",
                        threads=1, n_ctx=1024) as h:  # fmt: skip
            assert h.model is None
            events = await call(h, "ask_model", {"prompt": "Say hello", "max_tokens": 20})
            assert h.model is not None
            name = Path(h.description["model"]).stem
    text = result(events)["text"]
    assert text.startswith(f"{name} said: "), "the reply names the model that wrote it"
    assert len(text) > len(f"{name} said:  (endTurn)"), "and it wrote something"


# A stdio weather server that starts only once the model file is being opened (or gives up).
_AFTER_THE_MARK = """
import pathlib, runpy, sys, time
mark = pathlib.Path(sys.argv[1])
for _ in range(600):
    if mark.exists():
        break
    time.sleep(0.05)
else:
    sys.exit("the model was not being opened while the servers started")
sys.argv = sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
WEATHER = str(Path(__file__).resolve().parent.parent / "tools" / "weather.py")


@pytest.mark.model
async def test_the_model_file_is_opened_while_the_servers_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mark = tmp_path / "opening"
    read_metadata = gguf.read_metadata

    def reading(*args: Any, **kwargs: Any) -> Any:  # the opening's first step
        mark.touch()
        return read_metadata(*args, **kwargs)

    monkeypatch.setattr(gguf, "read_metadata", reading)
    server = ServerConfig("weather", command=sys.executable,
                          args=("-c", _AFTER_THE_MARK, str(mark), WEATHER))  # fmt: skip
    with anyio.fail_after(60):
        async with Host(HostConfig(servers=(server,)), threads=1, n_ctx=512) as h:
            assert h.model is not None and "get_current_weather" in h.catalog.names


@pytest.mark.model
async def test_the_strategys_view_of_the_vocabulary_is_built_while_the_servers_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built_in: list[str] = []
    build_factory = constraint.ConstraintFactory.__init__

    def building(self: constraint.ConstraintFactory, engine: Any) -> None:
        built_in.append(threading.current_thread().name)
        build_factory(self, engine)

    monkeypatch.setattr(constraint.ConstraintFactory, "__init__", building)
    with anyio.fail_after(120):
        async with Host(servers=[WEATHER], trust=["weather"], threads=1, n_ctx=2048) as h:
            assert len(built_in) == 1 and built_in[0].startswith("weavehost-load")
            async for _ in h.run("What is the weather in Paris?"):
                pass
    assert len(built_in) == 1  # the turn's calls found it built


@pytest.mark.model
async def test_a_server_that_fails_while_the_model_opens_fails_the_host_and_the_model_is_freed(
    tmp_path: Path,
) -> None:
    broken = ServerConfig("broken", command=sys.executable, args=("-c", "raise SystemExit(3)"))
    with anyio.fail_after(60), pytest.raises(ServerStartError):
        async with Host(HostConfig(servers=(broken,)), threads=1, n_ctx=512):
            pass
    assert not [t for t in threading.enumerate() if t.name.startswith("weavehost-load")]


async def test_a_missing_model_file_fails_the_host_before_any_server_starts(tmp_path: Path) -> None:
    started = tmp_path / "started"
    server = ServerConfig("marker", command=sys.executable,
                          args=("-c", f"open({str(started)!r}, 'w')"))  # fmt: skip
    missing = tmp_path / "missing.gguf"
    with anyio.fail_after(BOUND_S), pytest.raises(ModelNotFoundError, match="missing.gguf"):
        async with Host(HostConfig(servers=(server,)), model=str(missing)):
            pass
    assert not started.exists()


# --------------------------------------------------------------------------- the console


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def progress(n: int, total: float | None = 4, message: str | None = None) -> Event:
    return Event(
        "progress",
        {"name": "build", "server": "f", "progress": n, "total": total, "message": message},
    )


def test_on_a_terminal_progress_is_one_line_that_updates_and_ends_before_the_next_line() -> None:
    err = Tty()
    printer = EventPrinter(as_json=False, verbose=0, out=io.StringIO(), err=err)
    for event in (progress(1), progress(4, message="done"),
                  Event("tool_result", {"name": "build", "arguments": {}, "status": "ok", "text": "ok", "source": "final"})):  # fmt: skip
        printer(event)
    shown = err.getvalue()
    assert shown.count("\r\033[K") == 2 and shown.count("\n") == 2
    assert "25%" in shown and "100% (4/4)  done\n  → ok: ok" in shown


def test_without_a_terminal_each_progress_is_a_plain_line_and_with_json_a_json_line() -> None:
    err, out = io.StringIO(), io.StringIO()
    EventPrinter(as_json=False, verbose=0, out=out, err=err)(
        progress(2, total=None, message="half")
    )
    assert err.getvalue() == "  ⋯ build 2  half\n" and out.getvalue() == ""
    out = io.StringIO()
    EventPrinter(as_json=True, verbose=0, out=out, err=err)(progress(2))
    assert (
        out.getvalue()
        == '{"type": "progress", "name": "build", "server": "f", "progress": 2, "total": 4, "message": null}\n'
    )


def test_log_events_are_shown_only_at_verbose() -> None:
    log = Event("log", {"server": "f", "level": "info", "data": {"n": 1}, "logger": None})
    quiet, loud = io.StringIO(), io.StringIO()
    EventPrinter(as_json=False, verbose=0, out=io.StringIO(), err=quiet)(log)
    EventPrinter(as_json=False, verbose=1, out=io.StringIO(), err=loud)(log)
    assert quiet.getvalue() == "" and loud.getvalue() == '  [log f info] {"n": 1}\n'


def test_a_progress_bar_is_drawn_from_progress_and_total() -> None:
    line = progress_text(progress(1, total=2).data)
    assert "[" + "█" * 12 + "·" * 12 + "]" in line and "50%" in line
