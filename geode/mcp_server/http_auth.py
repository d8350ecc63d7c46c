"""`geode mcp --http`: where it may listen, its bearer token (env or config) and the ASGI check of it."""

from __future__ import annotations

import hmac
import ipaddress
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

TOKEN_ENV = "GEODE_MCP_TOKEN"
DEFAULT_HOST = "127.0.0.1"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Asgi = Callable[[Scope, Receive, Send], Awaitable[None]]


class McpServeSection(BaseModel):
    """``[mcp.serve]``: ``geode mcp`` as a server. ``token``: the bearer token HTTP clients must send
    (``GEODE_MCP_TOKEN`` in the environment or ``$GEODE_HOME/.env`` wins); required off loopback."""

    model_config = ConfigDict(extra="forbid")
    token: str | None = Field(default=None, min_length=16, max_length=512)


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


def resolve_token(env: Mapping[str, str], dotenv: Mapping[str, str], section: McpServeSection) -> str | None:
    """The token: the environment, then ``$GEODE_HOME/.env``, then ``[mcp.serve] token``."""
    for value in (env.get(TOKEN_ENV), dotenv.get(TOKEN_ENV), section.token):
        if value:
            return value
    return None


def refusal(host: str, port: int, token: str | None) -> str | None:
    """Why ``geode mcp`` must not listen there (one line), or None."""
    if token is None and not is_loopback(host):
        return (
            f"geode mcp: refusing to listen on {host}:{port} without a bearer token: set {TOKEN_ENV} "
            "or [mcp.serve] token (or bind a loopback address)"
        )
    return None


class BearerAuth:
    """ASGI middleware: every HTTP request without ``Authorization: Bearer <token>`` gets 401."""

    def __init__(self, app: Asgi, token: str) -> None:
        self.app = app
        self._token = token.encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "http" and not self._authorized(scope):
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

    def _authorized(self, scope: Scope) -> bool:
        for name, value in scope.get("headers") or ():
            if name.lower() == b"authorization":
                scheme, _, given = bytes(value).partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self._token)
        return False
