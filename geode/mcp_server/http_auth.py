"""`geode mcp --http`: where it may listen, its bearer token (environment, ``.env``, config, or on loopback
the one made in the home) and the ASGI check of it."""

from __future__ import annotations

import hmac
import ipaddress
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geode.home import GeodeHome
from geode.home_secrets import mcp_http_token_path, read_or_create
from geode.mcp_server.settings import MAX_TOKEN, McpServeSection
from geode.protocol.errors import ConfigError

TOKEN_ENV = "GEODE_MCP_TOKEN"
DEFAULT_HOST = "127.0.0.1"
MIN_TOKEN = 16
LOGGED_REFUSALS = 20  # the first refusals are logged one by one, then every 100th (a flood stays readable)
log = logging.getLogger("geode.mcp_server.http")

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


def parse_bind(text: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[V6]:PORT`` or ``PORT`` (on loopback); ValueError with a usable message."""
    host, sep, port = text.rpartition(":")
    if not sep:
        host, port = DEFAULT_HOST, text
    host = host.strip("[]") or DEFAULT_HOST
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"--http wants HOST:PORT (got {text!r})")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Token:
    """The bearer token, where it came from (named in errors) and whether this start made it."""

    value: str = field(repr=False)
    source: str
    created: bool = False


def _checked(value: str, source: str, created: bool = False) -> Token:
    if len(value) < MIN_TOKEN:
        raise ConfigError(
            f"the bearer token from {source} has {len(value)} characters; at least {MIN_TOKEN} are required"
        )
    if len(value) > MAX_TOKEN:
        raise ConfigError(f"the bearer token from {source} is longer than {MAX_TOKEN} characters")
    return Token(value, source, created)


def resolve_token(
    env: Mapping[str, str], dotenv: Mapping[str, str], section: McpServeSection, home: GeodeHome
) -> Token | None:
    """The configured token: the environment, then ``$GEODE_HOME/.env``, then ``[mcp.serve] token``; each
    held to the same length floor (a ConfigError naming the source)."""
    for value, source in (
        (env.get(TOKEN_ENV), f"{TOKEN_ENV} in the environment"),
        (dotenv.get(TOKEN_ENV), f"{TOKEN_ENV} in {home.env_file}"),
        (section.token, f"[mcp.serve] token in {home.config_file}"),
    ):
        if value:
            return _checked(value, source)
    return None


def home_token(home: GeodeHome) -> Token:
    """The loopback default: the token kept 0600 in ``keys/mcp-http.token``, made on first use."""
    path: Path = mcp_http_token_path(home)
    value, created = read_or_create(path, lambda: secrets.token_urlsafe(32), "MCP HTTP token")
    return _checked(value, str(path), created)


def refusal(host: str, port: int, token: Token | None) -> str | None:
    """Why ``geode mcp`` must not listen there (one line), or None."""
    if token is None and not is_loopback(host):
        return (
            f"geode mcp: refusing to listen on {host}:{port} without a bearer token: set {TOKEN_ENV} "
            "or [mcp.serve] token (or bind a loopback address)"
        )
    return None


class BearerAuth:
    """ASGI middleware: every HTTP request without ``Authorization: Bearer <token>`` gets 401, and is logged
    (method, path, peer, why: never the header's value)."""

    def __init__(self, app: Asgi, token: str) -> None:
        self.app = app
        self._token = token.encode()
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        why = self._refusal(scope) if scope.get("type") == "http" else None
        if why is not None:
            self._log(scope, why)
            body = json.dumps({"error": "unauthorized", "detail": "send Authorization: Bearer <token>"})
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [
                        (b"content-type", b"application/json"),
                        (b"www-authenticate", b'Bearer realm="geode"'),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": body.encode()})
            return
        await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> str | None:
        for name, value in scope.get("headers") or ():
            if name.lower() == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                if scheme.lower() != b"bearer":
                    return "not a Bearer authorization"
                return None if hmac.compare_digest(given.strip(), self._token) else "wrong bearer token"
        return "no Authorization header"

    def _log(self, scope: Scope, why: str) -> None:
        self.refused += 1
        if self.refused > LOGGED_REFUSALS and self.refused % 100:
            return
        client = scope.get("client") or ("?", 0)
        path = str(scope.get("path", ""))[:200]
        log.warning(
            "401 for %s %r from %s:%s (%s; %d refused so far)",
            str(scope.get("method", "?"))[:16],
            path,
            client[0],
            client[1],
            why,
            self.refused,
        )
