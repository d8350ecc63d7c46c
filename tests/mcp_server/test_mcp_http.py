"""`geode mcp --http`: off loopback it refuses to start without a bearer token; with one, every request
without `Authorization: Bearer <token>` gets 401 and a client sending it initializes and lists the tools."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from geode.home import GeodeHome
from tests.actors.tree_kit import ROOT, geode, make_home
from tests.actors.tree_kit import env as tree_env
from tests.waiting import poll_for

TOKEN = "test-token-0123456789abcdef"
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _post(url: str, headers: dict[str, str]) -> int:
    req = urllib.request.Request(
        url,
        data=json.dumps(INIT).encode(),
        method="POST",
        headers={
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
            **headers,
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        exc.close()
        return int(exc.code)


@contextmanager
def _serving(home: GeodeHome, bind: str, **env: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors.cli.main", "mcp", "--http", bind],
        env={**tree_env(home), **env},
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        yield proc
    finally:
        proc.terminate()
        proc.communicate(timeout=20)


def test_off_loopback_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    r = geode(home, "mcp", "--http", f"0.0.0.0:{_free_port()}", timeout=30)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "refusing to listen on 0.0.0.0" in lines[0] and "GEODE_MCP_TOKEN" in lines[0]
    ), r


async def test_with_a_token_requests_without_it_get_401(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    port = _free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with _serving(home, f"0.0.0.0:{port}", GEODE_MCP_TOKEN=TOKEN) as proc:
        first = poll_for(
            lambda: _post(url, {}), 30, interval_s=0.1, what="geode mcp --http to listen", swallow=(OSError,)
        )
        assert proc.poll() is None
        assert first == 401
        assert _post(url, {"authorization": "Bearer wrong-token-0123456789"}) == 401
        assert _post(url, {"authorization": f"Basic {TOKEN}"}) == 401
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {TOKEN}"}) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    init = await session.initialize()
                    tools = {t.name for t in (await session.list_tools()).tools}
                    health = await session.call_tool("get_health", {})
    assert init.server_info.name == "geode"
    assert tools == {"run_agent", "continue_agent", "get_health"}
    assert not health.is_error and health.structured_content is not None, health
    assert health.structured_content["geode_home"] == str(home.root)
