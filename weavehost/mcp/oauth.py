"""OAuth for HTTP servers: stored tokens, the SDK's client provider, and the loopback redirect.

Stage: servers (authentication of one HTTP connection; :mod:`weavehost.mcp.http` asks
:func:`connection_auth` for a server with ``oauth``, ``weavehost auth`` runs :func:`authorize`).

Invariants:

* One file per server name, ``<cache>/oauth/<name>-<digest>.json`` (:func:`token_path`), holds
  the server's URL, its client registration and its tokens (with their absolute expiry). It is
  written atomically (a private temporary file in the same folder, fsync, rename) with mode 0600
  in a 0700 folder, and never read for a different URL: a server whose URL changed is
  authorized afresh.
* A connection (:func:`connection_auth`) never waits for a person and never opens a browser.
  With no stored tokens it raises :class:`~weavehost.errors.AuthError` at once; an expired token
  with a refresh token is refreshed without anyone (the new one is stored); a server that refuses
  the tokens anyway raises ``AuthError`` saying to run ``weavehost auth SERVER``.
* :func:`authorize` (``weavehost auth SERVER``) runs the whole authorization-code flow with
  PKCE through the SDK's ``OAuthClientProvider``: dynamic client registration when none is
  stored, a loopback listener on 127.0.0.1 for the redirect (bound before the URL is shown, so
  the redirect cannot arrive too early), the URL shown (and opened only through ``open_url``, a
  callable the caller passes only with the user's leave), and the code awaited for at most
  ``answer_within`` seconds. Every failure, the SDK's and the network's included, is an
  ``AuthError`` naming the server.
* :func:`logout` deletes the file; nothing else holds a token.
* No traceback reaches the user: the SDK's own log of a failed flow (with its traceback) is
  dropped, since the error it raises is reported once, as one line, by the pool or the CLI.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio
import anyio.abc
import httpx2
from anyio.abc import SocketAttribute
from mcp.client.auth import (
    OAuthClientProvider,
    OAuthFlowError,
    OAuthRegistrationError,
    OAuthTokenError,
)
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import ValidationError

from weavehost.config import Limits, ServerConfig
from weavehost.errors import AuthError, ConfigError
from weavehost.paths import cache_dir

__all__ = [
    "AUTH_CALLBACK_TIMEOUT",
    "AUTH_HANDSHAKE_TIMEOUT",
    "TokenStore",
    "authorize",
    "connection_auth",
    "logout",
    "token_path",
]

logger = logging.getLogger(__name__)

OAUTH_FOLDER = "oauth"
AUTH_CALLBACK_TIMEOUT = 300.0  # seconds a person has to approve in the browser
AUTH_HANDSHAKE_TIMEOUT = 30.0  # seconds for the requests around it (metadata, token, MCP connect)
CALLBACK_READ_TIMEOUT = 5.0  # seconds for one loopback request's head to arrive
CALLBACK_MAX_BYTES = 16 * 1024  # a redirect's request head is far smaller
CALLBACK_PATH = "/callback"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_PAGE = (
    "<!doctype html><meta charset=utf-8><title>weavehost</title>"
    "<p>{message} You can close this window and return to the terminal.</p>"
)


def token_path(server_name: str) -> Path:
    """Where the tokens and client registration of ``server_name`` are kept."""
    digest = hashlib.sha256(server_name.encode()).hexdigest()[:8]
    safe = _SAFE.sub("_", server_name).strip("_")[:64] or "server"
    return cache_dir() / OAUTH_FOLDER / f"{safe}-{digest}.json"


def _needs_auth(server: ServerConfig, why: str) -> AuthError:
    return AuthError(
        f"server {server.name!r} needs authorization ({why}): run `weavehost auth {server.name}`"
    )


# --------------------------------------------------------------------------- storage


@dataclass(slots=True)
class TokenStore:
    """The SDK's ``TokenStorage`` over one private file (see the module's invariants)."""

    server_name: str
    url: str
    # True for ``weavehost auth``: the SDK is handed no stored tokens, so it authorizes afresh,
    # yet the stored ones stay on disk until new ones replace them (a failed flow loses nothing).
    fresh: bool = False
    # When set (by ``weavehost auth``), a stored registration is handed to the SDK only if it
    # lists this redirect URI; otherwise the SDK registers the client again.
    redirect_uri: str | None = None
    path: Path = field(init=False)

    def __post_init__(self) -> None:
        self.path = token_path(self.server_name)

    def _read(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            logger.warning("ignoring unreadable OAuth tokens in %s: %s", self.path, exc)
            return {}
        if not isinstance(data, dict) or data.get("url") != self.url:
            return {}  # another URL's tokens are never sent here
        return data

    def _update(self, **values: Any) -> None:
        data = self._read()
        data.update(values, url=self.url)
        _write_private(self.path, json.dumps(data, indent=2))

    @property
    def expires_at(self) -> float | None:
        """When the stored access token expires (seconds since the epoch), if it says."""
        value = self._read().get("expires_at")
        return float(value) if isinstance(value, int | float) else None

    def has_tokens(self) -> bool:
        return isinstance(self._read().get("tokens"), dict)

    def client_info(self) -> OAuthClientInformationFull | None:
        raw = self._read().get("client_info")
        try:
            return None if raw is None else OAuthClientInformationFull.model_validate(raw)
        except ValidationError:
            return None

    # The SDK's TokenStorage protocol.

    async def get_tokens(self) -> OAuthToken | None:
        raw = None if self.fresh else self._read().get("tokens")
        try:
            return None if raw is None else OAuthToken.model_validate(raw)
        except ValidationError:
            return None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        expires_at = None if tokens.expires_in is None else time.time() + tokens.expires_in
        self._update(tokens=tokens.model_dump(mode="json"), expires_at=expires_at)
        self.fresh = False

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        info = self.client_info()
        if info is not None and self.redirect_uri is not None:
            if self.redirect_uri not in {str(uri) for uri in info.redirect_uris or ()}:
                return None  # registered for another loopback port
        return info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self._update(client_info=client_info.model_dump(mode="json", exclude_none=True))


def _write_private(path: Path, text: str) -> None:
    """Replace ``path`` atomically with ``text``, readable by its owner only (0600, in 0700)."""
    folder = path.parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    fd, temporary = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            os.fchmod(handle.fileno(), 0o600)  # mkstemp's own mode, said out loud
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def logout(server_name: str) -> Path | None:
    """Delete the stored tokens and registration of ``server_name``; the path, or None if none."""
    path = token_path(server_name)
    try:
        path.unlink()
    except FileNotFoundError:
        return None
    return path


# --------------------------------------------------------------------------- the SDK provider


class _StoredTokenProvider(OAuthClientProvider):
    """``OAuthClientProvider`` that also restores the stored token's expiry.

    The SDK loads stored tokens without their expiry, so an expired token would be sent, refused
    with 401 and answered with a whole new authorization (a browser) instead of a refresh. This
    restores the absolute expiry the store kept, so the SDK refreshes first.
    """

    def __init__(self, store: TokenStore, **kwargs: Any) -> None:
        super().__init__(storage=store, **kwargs)
        self._store = store

    async def _initialize(self) -> None:
        await super()._initialize()
        if self.context.current_tokens is not None:
            self.context.token_expiry_time = self._store.expires_at


def _client_metadata(server: ServerConfig, redirect_uri: str) -> OAuthClientMetadata:
    return OAuthClientMetadata(
        client_name=server.oauth_client_name,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]  # pydantic parses the str
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=" ".join(server.oauth_scopes) if server.oauth_scopes else None,
    )


def _oauth_server(server: ServerConfig) -> str:
    if server.url is None or not server.oauth:
        raise ConfigError(
            f'server {server.name!r} does not use OAuth; give it a "url" and "oauth": true'
        )
    return server.url


def connection_auth(server: ServerConfig) -> httpx2.Auth:
    """The auth of a connection to ``server``: its stored tokens, never a person.

    Raises :class:`AuthError` at once when nothing is stored.
    """
    url = _oauth_server(server)
    store = TokenStore(server.name, url)
    if not store.has_tokens():
        raise _needs_auth(server, "no stored authorization")
    stored = store.client_info()
    redirect = str(stored.redirect_uris[0]) if stored and stored.redirect_uris else None

    async def refuse(_url: str) -> None:
        raise _needs_auth(server, "it refused the stored authorization, or it expired")

    async def unreachable() -> AuthorizationCodeResult:  # refuse() raises first
        raise _needs_auth(server, "it asked for a new authorization")

    return _StoredTokenProvider(
        store,
        server_url=url,
        client_metadata=_client_metadata(server, redirect or f"http://127.0.0.1{CALLBACK_PATH}"),
        redirect_handler=refuse,
        callback_handler=unreachable,
    )


class _QuietRefusals(logging.Filter):
    """The SDK logs every failed OAuth flow with a traceback, then raises the error. The error
    is what counts: the pool or :func:`authorize` reports it once, as one clear line (an
    ``AuthError`` telling the user what to run), so the traceback is dropped here."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.exc_info is None


logging.getLogger("mcp.client.auth.oauth2").addFilter(_QuietRefusals())


# --------------------------------------------------------------------------- the loopback redirect


@dataclass(slots=True)
class _Callback:
    """The loopback listener's one result: the first ``/callback`` request's parameters."""

    redirect_uri: str
    timeout: float
    params: dict[str, str] | None = None
    arrived: anyio.Event = field(default_factory=anyio.Event)

    async def wait(self) -> AuthorizationCodeResult:
        with anyio.move_on_after(self.timeout):
            await self.arrived.wait()
        if self.params is None:
            raise AuthError(f"no answer from the browser within {self.timeout:g} s")
        if "error" in self.params:
            detail = self.params.get("error_description") or ""
            raise AuthError(
                f"the authorization was refused: {self.params['error']}"
                + (f" ({detail})" if detail else "")
            )
        if not self.params.get("code"):
            raise AuthError("the redirect carried no authorization code")
        return AuthorizationCodeResult(
            code=self.params["code"], state=self.params.get("state"), iss=self.params.get("iss")
        )

    async def handle(self, stream: anyio.abc.SocketStream) -> None:
        async with stream:
            head = b""
            with anyio.move_on_after(CALLBACK_READ_TIMEOUT):
                while b"\r\n\r\n" not in head and len(head) < CALLBACK_MAX_BYTES:
                    try:
                        head += await stream.receive()
                    except (anyio.EndOfStream, anyio.BrokenResourceError):
                        break
            parts = head.split(b"\r\n", 1)[0].decode("latin-1").split()
            target = urlsplit(parts[1]) if len(parts) == 3 and parts[0] == "GET" else None
            if target is None or target.path != CALLBACK_PATH:
                await _respond(stream, 404, "Not the authorization redirect.")
                return
            params = {k: v[0] for k, v in parse_qs(target.query).items()}
            if self.params is None:
                self.params = params
                self.arrived.set()
            ok = "error" not in params
            await _respond(stream, 200, "Authorized." if ok else "Authorization refused.")


async def _respond(stream: anyio.abc.SocketStream, status: int, message: str) -> None:
    body = _PAGE.format(message=message).encode()
    reason = {200: "OK", 404: "Not Found"}[status]
    head = (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/html; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    try:
        await stream.send(head.encode() + body)
    except (anyio.BrokenResourceError, anyio.ClosedResourceError):
        pass  # the browser went away; the result is what matters


@asynccontextmanager
async def _loopback(port: int, answer_within: float) -> AsyncIterator[_Callback]:
    """Listen on 127.0.0.1:``port`` (0: any free port) for the redirect, while the body runs."""
    try:
        listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=port)
    except OSError as exc:
        raise AuthError(f"cannot listen on 127.0.0.1:{port} for the redirect: {exc}") from exc
    async with listener, anyio.create_task_group() as tg:
        bound = listener.listeners[0].extra(SocketAttribute.local_port)
        callback = _Callback(f"http://127.0.0.1:{bound}{CALLBACK_PATH}", answer_within)
        tg.start_soon(listener.serve, callback.handle)
        try:
            yield callback
        finally:
            tg.cancel_scope.cancel()


# --------------------------------------------------------------------------- weavehost auth


async def authorize(
    server: ServerConfig,
    limits: Limits,
    *,
    show_url: Callable[[str], object],
    open_url: Callable[[str], object] | None = None,
    answer_within: float = AUTH_CALLBACK_TIMEOUT,
) -> Path:
    """Authorize weavehost for ``server`` and store the tokens; returns where they are.

    Stored tokens are not offered to the server, so the flow always runs; they stay on disk
    until new ones replace them, so a failed flow loses nothing. A stored registration is reused
    when it lists the redirect URI listened on (its port is tried first), else the client
    registers again. ``show_url`` gets the
    authorization URL; ``open_url`` (``webbrowser.open``, say) is called with it only if given.
    The browser's answer is awaited for at most ``answer_within`` seconds.
    """
    from mcp import Client

    from weavehost.mcp.http import open_http_transport

    url = _oauth_server(server)
    store = TokenStore(server.name, url, fresh=True)
    registered = store.client_info()
    port = server.oauth_redirect_port or _registered_port(registered) or 0
    try:
        async with _loopback(port, answer_within) as callback:
            store.redirect_uri = callback.redirect_uri

            async def redirect(authorization_url: str) -> None:
                show_url(authorization_url)
                if open_url is not None:
                    open_url(authorization_url)

            provider = _StoredTokenProvider(
                store,
                server_url=url,
                client_metadata=_client_metadata(server, callback.redirect_uri),
                redirect_handler=redirect,
                callback_handler=callback.wait,
            )
            transport = open_http_transport(server, limits, auth=provider)
            with anyio.fail_after(answer_within + AUTH_HANDSHAKE_TIMEOUT):
                async with Client(transport, mode=server.protocol, cache=None):
                    pass
    except Exception as exc:  # boundary: the SDK's OAuth, httpx2 and MCP errors, in groups
        raise _auth_failure(server, exc) from exc
    if store.fresh:  # no tokens came in: the server never asked
        raise AuthError(
            f"server {server.name!r} did not ask for authorization; nothing was stored "
            '(remove "oauth" from its config if it needs none)'
        )
    return store.path


def _registered_port(info: OAuthClientInformationFull | None) -> int | None:
    """The loopback port a stored registration redirects to, to listen there again."""
    for uri in (info.redirect_uris or ()) if info else ():
        parts = urlsplit(str(uri))
        if parts.hostname == "127.0.0.1" and parts.port:
            return parts.port
    return None


def _auth_failure(server: ServerConfig, exc: BaseException) -> AuthError:
    leaf = exc
    while isinstance(leaf, BaseExceptionGroup) and leaf.exceptions:
        leaf = leaf.exceptions[0]
    if isinstance(leaf, TimeoutError):
        return AuthError(f"authorizing server {server.name!r} timed out")
    if isinstance(leaf, httpx2.HTTPError):
        leaf_text = f"cannot reach {server.describe()}: {leaf}"
    elif isinstance(leaf, AuthError | OAuthFlowError | OAuthTokenError | OAuthRegistrationError):
        leaf_text = str(leaf)
    else:  # an MCP or protocol error after the tokens: say what it was
        leaf_text = f"{type(leaf).__name__}: {leaf}"
    return AuthError(f"authorizing server {server.name!r} failed: {leaf_text}")
