"""Per-server tool filters (``"tools": {"include": [...], "exclude": [...]}``) against a real
stdio server (tools/weather.py: ``get_current_weather`` and ``get_forecast``).

A filtered tool is never shown to the model (not in the catalog) nor callable (the executor
answers ``unknown_tool`` without reaching the server); an ``include`` that names a tool the
server lacks is a warning, not a crash.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import logging
import sys
from dataclasses import replace
from pathlib import Path

import anyio
import pytest

from weavehost.config import HostConfig, ServerConfig, Timeouts, parse_config
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import Executor
from weavehost.mcp.servers import ServerPool

ROOT = Path(__file__).resolve().parents[1]
WEATHER = str(ROOT / "tools" / "weather.py")
FAST = Timeouts(startup=20, list_tools=10, call=10, ping=5, shutdown_grace=0.5, kill_grace=0.5)


def weather(**filters: object) -> HostConfig:
    document = {
        "mcpServers": {"weather": {"command": sys.executable, "args": [WEATHER], "tools": filters}},
        "weavehost": {"approval": "always", "trustedServers": ["weather"]},
    }
    return replace(parse_config(document), timeouts=FAST)


async def catalog_and_call(config: HostConfig, tool: str) -> tuple[Catalog, str, str]:
    async with ServerPool(config) as pool:
        catalog = await Catalog.load(pool)
        result = await Executor(pool, catalog, config).run(tool, {"city": "Oslo", "days": 2})
    return catalog, result.status, result.text


@pytest.mark.anyio
async def test_an_excluded_tool_is_neither_shown_nor_callable_and_the_others_are() -> None:
    with anyio.fail_after(30):
        catalog, status, text = await catalog_and_call(
            weather(exclude=["get_forecast"]), "get_forecast"
        )
    assert catalog.names == ("get_current_weather",)
    assert status == "unknown_tool" and "no tool named 'get_forecast'" in text
    assert catalog.omitted == []  # the user's choice is not a problem to warn about


@pytest.mark.anyio
async def test_include_keeps_only_the_named_tools_and_exclude_wins_over_a_glob_include() -> None:
    with anyio.fail_after(30):
        only, _, _ = await catalog_and_call(
            weather(include=["get_current_weather"]), "get_current_weather"
        )
        globbed, status, text = await catalog_and_call(
            weather(include=["get_*"], exclude=["*current*"]), "get_forecast"
        )
    assert only.names == ("get_current_weather",)
    assert globbed.names == ("get_forecast",)
    assert status == "ok" and text.startswith("2-day forecast for Oslo:")


@pytest.mark.anyio
async def test_an_include_naming_a_tool_the_server_lacks_warns_once_and_does_not_crash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    config = weather(include=["get_forecast", "get_tides"])
    with anyio.fail_after(30), caplog.at_level(logging.WARNING, logger="weavehost.mcp.catalog"):
        async with ServerPool(config) as pool:
            catalog = await Catalog.load(pool)
            await catalog.refresh(pool, "weather")  # a re-listing does not warn again
    warnings = [r.getMessage() for r in caplog.records if "tools.include" in r.getMessage()]
    assert catalog.names == ("get_forecast",)
    assert warnings == [
        "server 'weather': tools.include names 'get_tides', but the server lists no such tool"
    ]


def test_a_filtered_tool_takes_no_part_in_name_qualification() -> None:
    listing = {"name": "search", "description": "d", "inputSchema": {"type": "object"}}
    config = HostConfig(
        servers=(
            ServerConfig(name="a", command="x", tools_exclude=("search",)),
            ServerConfig(name="b", command="y"),
        )
    )
    catalog = Catalog.from_listings({"a": [listing], "b": [listing]}, config)
    assert catalog.names == ("search",) and catalog.get("search").server == "b"


def test_filters_match_exact_names_and_globs_case_sensitively() -> None:
    server = ServerConfig(
        name="s", command="x", tools_include=("read_*", "stat"), tools_exclude=("read_secret",)
    )
    assert [
        t for t in ("read_file", "read_secret", "stat", "Stat", "write") if server.allows_tool(t)
    ] == [
        "read_file",
        "stat",
    ]
