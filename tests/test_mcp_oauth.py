"""OAuth against a real authorization server built with the SDK's own server-side auth.

The server is the SDK's ``MCPServer`` with an ``auth_server_provider`` (its authorization,
token and registration endpoints, protected-resource metadata and bearer middleware) on
127.0.0.1, in a thread of the test. Its provider approves every authorization request at once,
so the test plays the user's browser by following the authorization URL with httpx2: the
authorization endpoint redirects to weavehost's loopback listener with the code.
"""

# ruff: noqa: E501 - test names are sentences

from __future__ import annotations

import json
import logging
import os
import secrets
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import click
import httpx2
import pytest
from click.testing import CliRunner
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

from tests.host_fixtures.threaded_asgi import serve_asgi
from weavehost.auth_cli import auth
from weavehost.cli_options import WeavehostGroup
from weavehost.config import HostConfig, Limits, ServerConfig, Timeouts
from weavehost.errors import AuthError, ServerStartError
from weavehost.mcp.catalog import Catalog
from weavehost.mcp.oauth import authorize, token_path
from weavehost.mcp.servers import ServerPool

FAST = Timeouts(startup=10, list_tools=5, call=5, ping=5, shutdown_grace=0.5, kill_grace=0.5)
BROWSER_WAIT = 10.0  # seconds the fake browser's requests may take


class AutoApprove:
    """An in-memory ``OAuthAuthorizationServerProvider`` that approves every request at once."""

    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.authorizations = 0
        self.refreshes = 0
        self.deny = False  # the person clicks "deny"

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(
        self, client: OAuthClientInformationFull, params: AuthorizationParams
    ) -> str:
        self.authorizations += 1
        if self.deny:
            raise AuthorizeError("access_denied", "the person said no")
        code = secrets.token_urlsafe(16)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id or "",
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(
        self, client: Any, authorization_code: str
    ) -> AuthorizationCode | None:
        return self.codes.get(authorization_code)

    async def exchange_authorization_code(
        self, client: Any, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        return self._issue(client.client_id, authorization_code.scopes)

    async def load_refresh_token(self, client: Any, refresh_token: str) -> RefreshToken | None:
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(
        self, client: Any, refresh_token: RefreshToken, scopes: list[str]
    ) -> OAuthToken:
        self.refreshes += 1
        del self.refresh[refresh_token.token]
        return self._issue(client.client_id, scopes or refresh_token.scopes)

    async def load_access_token(self, token: str) -> AccessToken | None:
        return self.access.get(token)

    async def revoke_token(self, token: Any) -> None:
        self.access.pop(token.token, None)

    def _issue(self, client_id: str, scopes: list[str]) -> OAuthToken:
        access, refresh = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access, client_id=client_id, scopes=scopes, expires_at=int(time.time()) + 3600
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes)
        return OAuthToken(
            access_token=access,
            expires_in=3600,
            refresh_token=refresh,
            scope=" ".join(scopes) or None,
        )


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts with no stored tokens: the cache directory is its own."""
    monkeypatch.setenv("WEAVEHOST_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def oauth_server() -> Iterator[tuple[str, AutoApprove]]:
    provider = AutoApprove()

    def make_app(base: str) -> Any:
        server = MCPServer(
            "oauth-fixture",
            log_level="WARNING",
            auth_server_provider=provider,
            auth=AuthSettings(
                issuer_url=base,  # type: ignore[arg-type]
                resource_server_url=f"{base}/mcp",  # type: ignore[arg-type]
                client_registration_options=ClientRegistrationOptions(enabled=True),
                validate_token_resource=False,
            ),
        )

        @server.tool()
        def whoami() -> str:
            """Say that the caller is authorized."""
            return "an authorized caller"

        return server.streamable_http_app()

    with serve_asgi(make_app) as base:
        yield f"{base}/mcp", provider


def play_browser(url: str) -> None:
    """What a person's browser does: open the URL, follow the redirects (to weavehost's
    loopback listener), in a thread of its own, as a browser is not on the host's event loop."""

    def visit() -> None:
        httpx2.get(url, follow_redirects=True, timeout=BROWSER_WAIT)

    threading.Thread(target=visit, daemon=True).start()


def shown_nowhere(_url: str) -> None:
    """The terminal the URL would be printed on; the browser above gets it anyway."""


def server_config(url: str) -> ServerConfig:
    return ServerConfig(name="secure", url=url, oauth=True)


def host_config(url: str) -> HostConfig:
    return HostConfig(servers=(server_config(url),), timeouts=FAST, approval="always")


async def list_tools(url: str) -> list[str]:
    async with ServerPool(host_config(url)) as pool:
        return list((await Catalog.load(pool)).names)


@pytest.mark.anyio
async def test_weavehost_auth_stores_tokens_0600_and_a_second_connection_reuses_them_without_authorizing_again(
    oauth_server: tuple[str, AutoApprove],
) -> None:
    url, provider = oauth_server
    shown: list[str] = []
    with anyio.fail_after(30):
        path = await authorize(
            server_config(url), Limits(), show_url=shown.append, open_url=play_browser
        )
        first = await list_tools(url)
        second = await list_tools(url)
    assert path == token_path("secure")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    stored = json.loads(path.read_text())
    assert stored["url"] == url and stored["tokens"]["access_token"] in provider.access
    assert shown and shown[0].startswith(url.removesuffix("/mcp") + "/authorize?")
    assert first == second == ["whoami"]
    assert provider.authorizations == 1 and provider.refreshes == 0


@pytest.mark.anyio
async def test_an_expired_stored_token_is_refreshed_without_a_person(
    oauth_server: tuple[str, AutoApprove],
) -> None:
    url, provider = oauth_server
    with anyio.fail_after(30):
        path = await authorize(
            server_config(url), Limits(), show_url=shown_nowhere, open_url=play_browser
        )
        stored = json.loads(path.read_text())
        old_token = stored["tokens"]["access_token"]
        path.write_text(json.dumps({**stored, "expires_at": time.time() - 1}))
        tools = await list_tools(url)
    renewed = json.loads(path.read_text())
    assert tools == ["whoami"]
    assert provider.authorizations == 1 and provider.refreshes == 1
    assert renewed["tokens"]["access_token"] != old_token
    assert renewed["expires_at"] > time.time()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


@pytest.mark.anyio
async def test_a_server_with_oauth_and_no_stored_tokens_fails_to_start_saying_to_run_weavehost_auth(
    oauth_server: tuple[str, AutoApprove],
) -> None:
    url, provider = oauth_server
    with anyio.fail_after(15), pytest.raises((AuthError, ServerStartError)) as info:
        async with ServerPool(host_config(url)) as pool:
            await pool.list_tools("secure")
    assert (
        "server 'secure' needs authorization (no stored authorization): run `weavehost auth secure`"
        in str(info.value)
    )
    assert provider.authorizations == 0 and not provider.clients


@pytest.mark.anyio
async def test_a_server_that_refuses_the_stored_token_fails_saying_to_run_weavehost_auth_without_a_traceback(
    oauth_server: tuple[str, AutoApprove], caplog: pytest.LogCaptureFixture
) -> None:
    url, provider = oauth_server
    with anyio.fail_after(30):
        await authorize(server_config(url), Limits(), show_url=shown_nowhere, open_url=play_browser)
        provider.access.clear()  # revoked at the server; the client still holds it as valid
        with caplog.at_level(logging.WARNING), pytest.raises((AuthError, ServerStartError)) as info:
            await list_tools(url)
    assert (
        "server 'secure' needs authorization (it refused the stored authorization, or it expired): run `weavehost auth secure`"
        in str(info.value)
    )
    assert provider.authorizations == 1  # no new authorization was started
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


@pytest.mark.anyio
async def test_authorizing_again_reuses_the_registration_and_a_denied_attempt_keeps_the_old_tokens(
    oauth_server: tuple[str, AutoApprove],
) -> None:
    url, provider = oauth_server
    with anyio.fail_after(30):
        path = await authorize(
            server_config(url), Limits(), show_url=shown_nowhere, open_url=play_browser
        )
        first = json.loads(path.read_text())
        await authorize(server_config(url), Limits(), show_url=shown_nowhere, open_url=play_browser)
        second = json.loads(path.read_text())
        provider.deny = True
        with pytest.raises(AuthError) as info:
            await authorize(
                server_config(url), Limits(), show_url=shown_nowhere, open_url=play_browser
            )
        provider.deny = False
        tools = await list_tools(url)
    assert len(provider.clients) == 1 and provider.authorizations == 3
    assert second["client_info"] == first["client_info"]
    assert second["tokens"]["access_token"] != first["tokens"]["access_token"]
    assert str(info.value) == (
        "authorizing server 'secure' failed: the authorization was refused: access_denied (the person said no)"
    )
    assert json.loads(path.read_text())["tokens"] == second["tokens"] and tools == ["whoami"]


@pytest.mark.anyio
async def test_with_nobody_at_the_browser_authorization_ends_after_its_wait_and_stores_nothing(
    oauth_server: tuple[str, AutoApprove],
) -> None:
    url, provider = oauth_server
    shown: list[str] = []
    with anyio.fail_after(15), pytest.raises(AuthError) as info:
        await authorize(server_config(url), Limits(), show_url=shown.append, answer_within=0.5)
    assert (
        str(info.value)
        == "authorizing server 'secure' failed: no answer from the browser within 0.5 s"
    )
    assert len(shown) == 1 and provider.authorizations == 0  # shown, never opened
    assert "tokens" not in json.loads(token_path("secure").read_text())  # the registration only


def write_config(tmp_path: Path, url: str) -> str:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps({"servers": {"secure": {"type": "http", "url": url, "oauth": True}}})
    )
    return str(path)


def cli() -> click.Group:
    return WeavehostGroup(name="weavehost", commands={"auth": auth})


def test_the_auth_command_authorizes_through_the_browser_and_logout_removes_the_tokens(
    oauth_server: tuple[str, AutoApprove], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, provider = oauth_server
    config = write_config(tmp_path, url)
    monkeypatch.setattr("webbrowser.open", lambda target, *a, **k: play_browser(target) or True)
    authorized = CliRunner().invoke(cli(), ["auth", "--config", config, "--browser", "secure"])
    stored = token_path("secure").is_file()
    out = CliRunner().invoke(cli(), ["auth", "--logout", "secure"])
    again = CliRunner().invoke(cli(), ["auth", "--logout", "secure"])
    assert authorized.exit_code == 0, authorized.output
    assert "/authorize?" in authorized.output and "authorized server 'secure'" in authorized.output
    assert stored and provider.authorizations == 1
    assert (
        out.exit_code == 0 and "removed the stored authorization of server 'secure'" in out.output
    )
    assert not token_path("secure").exists()
    assert again.exit_code == 0 and "no stored authorization for server 'secure'" in again.output


def test_the_auth_command_for_a_server_without_oauth_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "mcp.json"
    path.write_text(
        json.dumps({"servers": {"plain": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}})
    )
    result = CliRunner().invoke(cli(), ["auth", "--config", str(path), "plain"])
    missing = CliRunner().invoke(cli(), ["auth", "--config", str(path), "ghost"])
    assert result.exit_code == 2
    assert (
        'Error: server \'plain\' does not use OAuth; give it a "url" and "oauth": true'
        in result.output
    )
    assert missing.exit_code == 2 and "no server named 'ghost'" in missing.output
