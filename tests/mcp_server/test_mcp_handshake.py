"""`geode mcp` answers `initialize` before importing the SDK: the early answer is the one the SDK gives, the
SDK's duplicate never reaches the client, and a request the early path does not know is left to the SDK.
Also the pure pieces of `--http`: bind parsing, loopback, token precedence, the 401 check."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types.version
import pytest
from mcp.server.mcpserver import MCPServer

from geode.mcp_server import handshake
from geode.mcp_server.http_auth import (
    BearerAuth,
    Token,
    is_loopback,
    parse_bind,
    refusal,
    resolve_token,
)
from geode.mcp_server.settings import McpServeSection
from tests.actors.tree_kit import ROOT, env, make_home


def _init(version: str = "2025-11-25", mid: Any = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": mid,
        "method": "initialize",
        "params": {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }


def _exchange(tmp_path: Path, early: bool, init: dict[str, Any]) -> tuple[list[dict[str, Any]], str]:
    """initialize, initialized, tools/list on a spawned `geode mcp`: the two replies and its stderr."""
    home = make_home(tmp_path / ("early" if early else "sdk"))
    msgs = [init, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    msgs.append({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors.cli.main", "mcp"],
        env={**env(home), "GEODE_MCP_EARLY_INIT": "1" if early else "0"},
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in msgs))
    proc.stdin.flush()
    replies = [json.loads(proc.stdout.readline()), json.loads(proc.stdout.readline())]
    _, err = proc.communicate(timeout=30)  # closes stdin: the server ends
    return replies, err.decode()


@pytest.mark.parametrize("version", ["2025-11-25", "2024-11-05"])
def test_the_early_answer_is_the_sdks_and_its_duplicate_is_dropped(tmp_path: Path, version: str) -> None:
    early, err_early = _exchange(tmp_path, True, _init(version))
    sdk, err_sdk = _exchange(tmp_path, False, _init(version))
    assert early[0] == sdk[0], (early[0], sdk[0])
    assert early[0]["result"]["protocolVersion"] == version
    assert early[1]["id"] == 2 and early[1] == sdk[1]  # the next line is tools/list's, not a 2nd initialize
    assert "differs" not in err_early + err_sdk


def test_an_initialize_it_does_not_know_goes_to_the_sdk(tmp_path: Path) -> None:
    assert handshake.initialize_answer(json.dumps(_init("2099-01-01")).encode(), version="1") is None
    replies, _ = _exchange(tmp_path, True, _init("2099-01-01", mid="a"))
    assert replies[0]["id"] == "a" and replies[0]["result"]["protocolVersion"] == "2025-11-25"


def test_known_versions_and_capabilities_follow_the_sdk() -> None:
    assert handshake.HANDSHAKE_VERSIONS == mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS
    server = MCPServer(handshake.SERVER_NAME, instructions=handshake.INSTRUCTIONS)
    caps = server._lowlevel_server.create_initialization_options().capabilities
    declared = caps.model_dump(mode="json", by_alias=True, exclude_none=True)
    if declared.get("extensions") == {}:  # an empty map is not on the wire (the spawned servers above agree)
        del declared["extensions"]
    assert declared == handshake.CAPABILITIES


def test_bind_parsing_and_loopback() -> None:
    assert parse_bind("8765") == ("127.0.0.1", 8765)
    assert parse_bind("0.0.0.0:80") == ("0.0.0.0", 80)
    assert parse_bind("[::1]:9000") == ("::1", 9000)
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_bind("localhost:http")
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.9.9.9", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "example.com"))
    assert refusal("127.0.0.1", 1, None) is None and refusal("0.0.0.0", 1, Token("t" * 16, "env")) is None
    assert "refusing" in (refusal("0.0.0.0", 1, None) or "")


def test_token_precedence_env_then_dotenv_then_config(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    cfg = McpServeSection(token="c" * 16)

    def value(env: dict[str, str], dotenv: dict[str, str], section: McpServeSection) -> str | None:
        token = resolve_token(env, dotenv, section, home)
        return None if token is None else token.value

    assert value({"GEODE_MCP_TOKEN": "e" * 16}, {"GEODE_MCP_TOKEN": "d" * 16}, cfg) == "e" * 16
    assert value({}, {"GEODE_MCP_TOKEN": "d" * 16}, cfg) == "d" * 16
    assert value({}, {}, cfg) == "c" * 16
    assert value({}, {}, McpServeSection()) is None


def test_bearer_check() -> None:
    seen: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    async def status(headers: list[tuple[bytes, bytes]], kind: str = "http") -> int | None:
        sent: list[dict[str, Any]] = []

        async def send(msg: dict[str, Any]) -> None:
            sent.append(msg)

        async def receive() -> dict[str, Any]:
            return {}

        await BearerAuth(app, "sekrit-token-123456")({"type": kind, "headers": headers}, receive, send)
        return sent[0]["status"] if sent else None

    async def main() -> None:
        assert await status([]) == 401
        assert await status([(b"authorization", b"Bearer nope")]) == 401
        assert await status([(b"Authorization", b"Bearer sekrit-token-123456")]) is None
        assert await status([], kind="lifespan") is None  # startup/shutdown pass through

    anyio.run(main)
    assert seen == ["http", "lifespan"]
