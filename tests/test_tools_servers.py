"""The example servers in tools/: in-process logic, real stdio end to end, and `weavehost tools`."""

# ruff: noqa: E501 - test names are sentences and fault tables read best one row a line

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from tools import android, files, weather
from weavehost.cli import main
from weavehost.config import load_config
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.executor import Executor, StaticApprover
from weavehost.mcp.servers import ServerPool

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.anyio
async def test_weather_is_deterministic_and_checks_days_in_process() -> None:
    async with Client(weather.server) as client:
        with anyio.fail_after(5):
            a = await client.call_tool(
                "get_forecast", {"city": "Lima", "days": 3, "units": "imperial"}
            )
            b = await client.call_tool(
                "get_forecast", {"city": "Lima", "days": 3, "units": "imperial"}
            )
            bad = await client.call_tool("get_forecast", {"city": "Lima", "days": 30})
    assert a.content[0].text == b.content[0].text
    assert a.content[0].text.count("\n") == 3 and " F," in a.content[0].text
    assert bad.is_error


@pytest.mark.anyio
async def test_android_tools_change_the_fake_device_and_hints_mark_which_do() -> None:
    device = android.Device()
    server = android.build_server(device)
    async with Client(server) as client:
        with anyio.fail_after(5):
            listed = {t.name: t for t in (await client.list_tools()).tools}
            await client.call_tool(
                "set_alarm", {"hour": 7, "minute": 30, "label": "gym", "days": ["mon"]}
            )
            alarms = await client.call_tool("list_alarms", {})
            hits = await client.call_tool("search_contacts", {"query": "ali"})
            bad = await client.call_tool("open_app", {"app_name": "tiktok"})
    assert 10 <= len(listed) <= 14
    assert all(1 <= len(t.input_schema.get("properties", {})) <= 5 for t in listed.values())
    read_only = {
        n for n, t in listed.items() if t.annotations and t.annotations.read_only_hint is True
    }
    assert read_only == {
        "list_alarms",
        "search_contacts",
        "get_battery_status",
        "get_current_location",
        "web_search",
    }
    assert device.alarms[0]["time"] == "07:30" and "07:30" in alarms.content[0].text
    assert [c["name"] for c in json.loads(hits.content[0].text)] == ["Alice Chen", "Alicia Keyes"]
    assert bad.is_error and "no app named 'tiktok'" in bad.content[0].text


@pytest.mark.anyio
async def test_the_file_reader_cannot_leave_its_directory(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "notes.md").write_text("hello")
    (tmp_path / "secret.txt").write_text("s3cret")
    (shared / "link").symlink_to(tmp_path / "secret.txt")
    async with Client(files.build_server(shared)) as client:
        with anyio.fail_after(5):
            ok = await client.call_tool("read_file", {"path": "notes.md"})
            listing = await client.call_tool("list_files", {})
            escapes = [
                await client.call_tool("read_file", {"path": p})
                for p in ("../secret.txt", "link", "/etc/passwd")
            ]
    assert ok.content[0].text == "hello"
    assert listing.content[0].text.split("\n") == ["link", "notes.md"]
    assert all(r.is_error and "outside the shared directory" in r.content[0].text for r in escapes)


@pytest.mark.anyio
async def test_the_claude_desktop_config_runs_the_real_servers_over_stdio(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(ROOT)
    config = load_config(ROOT / "configs" / "claude_desktop_config.json")
    with anyio.fail_after(60):
        async with ServerPool(config) as pool:
            catalog = await Catalog.load(pool)
            executor = Executor(pool, catalog, config, StaticApprover(True))
            forecast = await executor.run("get_forecast", {"city": "Oslo", "days": 2})
            alarm = await executor.run("set_alarm", {"hour": 6, "minute": 5})
            readme = await executor.run("read_file", {"path": "pyproject.toml", "max_bytes": 40})
            pids = [s.pid for s in pool.status().values()]
    assert len(catalog) == 17 and not catalog.omitted
    assert forecast.status == "ok" and forecast.text.startswith("2-day forecast for Oslo")
    assert alarm.text == "alarm 1 set for 06:05"
    assert readme.status == "ok" and readme.text.startswith("[build-system]")
    assert all(p is not None for p in pids)


def test_weavehost_tools_prints_the_catalog_of_the_given_servers() -> None:
    result = CliRunner().invoke(
        main, ["tools", "--server", str(ROOT / "tools/weather.py"), "--server", str(ROOT / "tools/android.py"),
               "--trust", "weather"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip()}
    assert lines["TOOL"][:2] == ["TOOL", "SERVER"]
    assert lines["get_forecast"][1:5] == ["weather", "city*,", "days*,", "units"]
    assert lines["get_forecast"][-3:] == ["yes", "yes", "yes"]
    assert lines["send_message"][-3:] == ["no", "no", "no"]
    assert len(lines) == 16


def test_weavehost_tools_json_lists_every_tool_with_its_schema() -> None:
    result = CliRunner().invoke(
        main, ["tools", "--json", "--server", str(ROOT / "tools/weather.py")]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    names = [t["name"] for t in payload["tools"]]
    assert names == ["get_current_weather", "get_forecast"]
    forecast = payload["tools"][1]
    assert (
        forecast["required"] == ["city", "days"]
        and forecast["read_only"]
        and not forecast["trusted"]
    )
    assert forecast["input_schema"]["properties"]["days"]["maximum"] == 7


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["tools"], 2, "no servers"),
        (["tools", "--server", "nope.py"], 2, "no such Python file"),
        (["tools", "--config", "missing.json"], 2, "missing.json: config file not found"),
        (["tools", "--server", "sh -c 'exit 4'"], 1, "failed to start: exited with code 4"),
    ],
)
def test_weavehost_tools_fails_with_a_message_and_exit_code_never_a_traceback(
    args: list[str], code: int, message: str
) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == code
    assert message in result.stderr
    assert "Traceback" not in result.output + result.stderr
