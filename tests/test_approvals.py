"""Approvals that outlive one call: "always for this tool", "always for this server" (for the
session) and approvals pinned in the config, each for one definition of a tool, so a rug pull
asks again; and the terminal prompt that offers them.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
import mcp_types as types
import pytest

from weavehost.config import HostConfig
from weavehost.console import TerminalApprover
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import (
    ApprovalRequest,
    Executor,
    StaticApprover,
    as_decision,
    pinned_hash_matches,
)
from weavehost.mcp.features import SamplingMessage, SamplingRequest

pytestmark = pytest.mark.anyio

SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}


def tool(name: str, description: str = "d") -> dict[str, Any]:
    return {"name": name, "description": description, "inputSchema": SCHEMA}


@dataclass
class Caller:
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def call_tool(
        self, server: str, tool: str, arguments: Mapping[str, Any] | None = None, **_: Any
    ) -> Any:
        self.calls.append((server, tool))
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])


def setup(approver: Any, **config: Any) -> tuple[Executor, Catalog, Caller]:
    cfg = HostConfig(approval="ask", **config)
    catalog = Catalog.from_listings(
        {"fs": [tool("read"), tool("write")], "web": [tool("fetch")]}, cfg
    )
    caller = Caller()
    return Executor(caller, catalog, cfg, approver), catalog, caller


async def run(executor: Executor, name: str) -> str:
    return (await executor.run(name, {"path": "/tmp/x"})).status


async def test_always_for_this_tool_runs_that_tool_again_without_asking_but_not_its_neighbours() -> (
    None
):
    approver = StaticApprover("always_tool")
    executor, _, caller = setup(approver)
    assert [
        await run(executor, "read"),
        await run(executor, "read"),
        await run(executor, "write"),
    ] == ["ok"] * 3
    assert [r.spec.name for r in approver.seen] == ["read", "write"]
    assert len(caller.calls) == 3


async def test_always_for_this_server_runs_every_tool_of_that_server_without_asking_but_not_another_servers() -> (
    None
):
    approver = StaticApprover("always_server")
    executor, _, _ = setup(approver)
    for name in ("read", "write", "read", "fetch"):
        assert await run(executor, name) == "ok"
    assert [r.spec.name for r in approver.seen] == ["read", "fetch"]


async def test_yes_approves_only_the_call_it_was_asked_for() -> None:
    approver = StaticApprover("yes")
    executor, _, _ = setup(approver)
    await run(executor, "read")
    await run(executor, "read")
    assert len(approver.seen) == 2


@pytest.mark.parametrize("answer", ["always_tool", "always_server"])
async def test_a_rug_pull_after_an_always_approval_asks_again(answer: str) -> None:
    approver = StaticApprover(answer)  # type: ignore[arg-type]
    executor, catalog, _ = setup(approver)
    await run(executor, "read")
    catalog.replace_listing("fs", [tool("read", "now also uploads your keys"), tool("write")])
    await run(executor, "read")
    assert len(approver.seen) == 2
    assert "CHANGED since first listed" in approver.seen[1].describe()


async def test_an_approval_pinned_in_the_config_runs_the_tool_without_asking_while_its_hash_matches() -> (
    None
):
    digest = setup(None)[1].get("read").schema_hash
    approver = StaticApprover(False)
    executor, catalog, caller = setup(approver, approved={"fs": {"read": digest[:16]}})
    assert await run(executor, "read") == "ok" and approver.seen == []
    assert await run(executor, "write") == "denied", "only the pinned tool is approved"
    catalog.replace_listing("fs", [tool("read", "now also uploads your keys"), tool("write")])
    assert await run(executor, "read") == "denied", (
        "a changed definition asks again (and is refused here)"
    )
    assert [r.spec.name for r in approver.seen] == ["write", "read"]
    assert caller.calls == [("fs", "read")]


@pytest.mark.parametrize(("pinned", "matches"), [
    ("full", True), ("prefix16", True), ("PREFIX16", True), ("prefix15", False), ("other", False), ("not-hex-at-all-xxxx", False),
])  # fmt: skip
def test_a_pinned_hash_is_the_full_hash_or_a_prefix_of_at_least_16_hex_digits(
    pinned: str, matches: bool
) -> None:
    digest = "0123456789abcdef" * 4
    value = {"full": digest, "prefix16": digest[:16], "PREFIX16": digest[:16].upper(),
             "prefix15": digest[:15], "other": "f" * 16}.get(pinned, pinned)  # fmt: skip
    assert pinned_hash_matches(value, digest) is matches


async def test_the_policy_never_refuses_even_a_pinned_tool_and_always_needs_no_pin() -> None:
    _, catalog, _ = setup(None)
    digest = catalog.get("read").schema_hash
    never = Executor(
        Caller(), catalog, HostConfig(approval="never", approved={"fs": {"read": digest}})
    )
    always = Executor(Caller(), catalog, HostConfig(approval="always"))
    assert await run(never, "read") == "denied"
    assert await run(always, "write") == "ok"


async def test_an_always_answer_for_a_definition_that_changed_while_deciding_is_refused_and_not_remembered() -> (
    None
):
    executor: Executor
    catalog: Catalog

    class Slow:
        seen = 0

        async def approve(self, request: ApprovalRequest) -> str:
            self.seen += 1
            if self.seen == 1:  # the server swaps the tool while the person reads the prompt
                catalog.replace_listing("fs", [tool("read", "evil"), tool("write")])
            return "always_tool"

    approver = Slow()
    executor, catalog, caller = setup(approver)
    first = await executor.run("read", {"path": "/x"})
    assert first.status == "denied" and "changed while approval was pending" in first.text
    assert executor.tool_approvals == {}
    assert await run(executor, "read") == "ok" and approver.seen == 2
    assert caller.calls == [("fs", "read")]


@pytest.mark.parametrize(("answer", "decision"), [
    (True, "yes"), (False, "no"), (None, "no"), ("yes", "yes"), ("always_tool", "always_tool"),
    ("always_server", "always_server"), ("sure", "no"), (1, "no"),
])  # fmt: skip
def test_an_approvers_answer_is_a_decision_and_anything_unknown_refuses(
    answer: object, decision: str
) -> None:
    assert as_decision(answer) == decision


# --------------------------------------------------------------------------- the terminal prompt


def scripted(*lines: str | None) -> Any:
    queue = list(lines)
    prompts: list[str] = []

    async def ask(prompt: str) -> str | None:
        prompts.append(prompt)
        return queue.pop(0) if queue else None

    ask.prompts = prompts  # type: ignore[attr-defined]
    return ask


@pytest.mark.parametrize(("typed", "decision"), [
    ("y", "yes"), ("", "no"), ("n", "no"), ("t", "always_tool"), ("S", "always_server"), (None, "no"),
])  # fmt: skip
async def test_the_terminal_prompt_offers_yes_no_always_for_the_tool_and_always_for_the_server(
    typed: str | None, decision: str
) -> None:
    _, catalog, _ = setup(None)
    ask = scripted(typed)
    err = io.StringIO()
    approver = TerminalApprover(interactive=True, ask=ask, err=err)
    assert await approver.approve(ApprovalRequest(catalog.get("read"), {"path": "/x"})) == decision
    assert "[t]ool" in ask.prompts[0] and "[s]erver" in ask.prompts[0]
    assert "schema hash" in err.getvalue()


async def test_always_for_this_tool_typed_at_the_prompt_is_not_asked_again_in_the_session() -> None:
    ask = scripted("t")
    executor, _, caller = setup(TerminalApprover(interactive=True, ask=ask, err=io.StringIO()))
    assert [await run(executor, "read"), await run(executor, "read")] == ["ok", "ok"]
    assert len(ask.prompts) == 1 and len(caller.calls) == 2


async def test_without_a_terminal_the_prompt_refuses_and_asks_nothing() -> None:
    ask = scripted("y")
    executor, _, caller = setup(TerminalApprover(interactive=False, ask=ask, err=io.StringIO()))
    assert await run(executor, "read") == "denied" and ask.prompts == [] and caller.calls == []


async def test_the_sampling_prompt_shows_the_servers_request_and_approves_on_yes() -> None:
    err = io.StringIO()
    approver = TerminalApprover(interactive=True, ask=scripted("y", "n"), err=err)
    request = SamplingRequest("mail", (SamplingMessage("user", "Summarise these"),), max_tokens=30,
                              system_prompt="You are a summariser")  # fmt: skip
    assert await approver.approve_sampling(request) == "yes"
    assert await approver.approve_sampling(request) == "no"
    assert "You are a summariser" in err.getvalue() and "Summarise these" in err.getvalue()


def test_a_plain_bool_approver_still_satisfies_the_executor() -> None:
    class Old:
        async def approve(self, request: ApprovalRequest) -> bool:
            return True

    executor, _, caller = setup(Old())
    assert anyio.run(run, executor, "write") == "ok" and caller.calls == [("fs", "write")]
