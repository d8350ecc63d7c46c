"""Drive `geode mcp` as a real MCP host would: a ClientSession over stdio against a spawned process (or over
streamable HTTP against a spawned `geode mcp --http`), with a temporary GEODE_HOME whose provider is a
ScriptedServer that records the tools it was offered."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from geode.home import GeodeHome
from tests.actors.tree_kit import ROOT, env

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

FORBIDDEN = {"run_bash", "delegate_task", "computer"}


class Provider:
    """The scripted model: answers ``answer: <last prompt text>`` and keeps every request's tool names and
    system prompt."""

    def __init__(self) -> None:
        self.tools: list[list[str]] = []
        self.systems: list[str] = []
        self.messages: list[list[dict[str, Any]]] = []

    def __call__(self, req: Any) -> Any:
        body = req.body if isinstance(req.body, dict) else {}
        self.tools.append([t.get("name", "") for t in body.get("tools") or []])
        self.systems.append(json.dumps(body.get("system", "")))
        msgs = body.get("messages") or []
        self.messages.append(msgs)
        content = msgs[-1].get("content") if msgs else ""
        text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])
        return {"text": f"answer: {text.strip()}"}


def mcp_params(home: GeodeHome, cwd: Path = ROOT, **extra_env: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "actors.cli.main", "mcp"],
        env={**env(home), **extra_env},
        cwd=str(cwd),
    )


@asynccontextmanager
async def mcp_session(
    params: StdioServerParameters, errlog: Path, roots: list[Path] | None = None
) -> AsyncIterator[ClientSession]:
    """An initialized ClientSession on a spawned `geode mcp` (its stderr to ``errlog``)."""

    async def list_roots(_ctx: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri(), name=p.name) for p in roots or []])

    with errlog.open("a") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(
                read, write, list_roots_callback=list_roots if roots is not None else None
            ) as session:
                await session.initialize()
                yield session


async def call(session: ClientSession, tool: str, args: dict[str, Any], progress: list[str] | None = None):  # type: ignore[no-untyped-def]
    """A tool call's structured content (asserting it is not an error)."""

    async def on_progress(_p: float, _total: float | None, message: str | None) -> None:
        if progress is not None:
            progress.append(message or "")

    res = await session.call_tool(tool, args, read_timeout_seconds=120, progress_callback=on_progress)
    assert not res.is_error, res.content
    assert res.structured_content is not None, res.content
    return res.structured_content


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post_initialize(url: str, headers: dict[str, str]) -> int:
    """The HTTP status of an ``initialize`` POSTed to ``url`` with ``headers``."""
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
def serving_http(
    home: GeodeHome, bind: str, errlog: Path, cwd: Path = ROOT, **extra_env: str
) -> Iterator[subprocess.Popen[bytes]]:
    """A spawned `geode mcp --http BIND`, its stderr to ``errlog``; terminated on exit."""
    with errlog.open("ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "actors.cli.main", "mcp", "--http", bind],
            env={**env(home), **extra_env},
            cwd=cwd,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@asynccontextmanager
async def http_session(url: str, token: str, roots: list[Path] | None = None) -> AsyncIterator[ClientSession]:
    """An initialized ClientSession over streamable HTTP, sending ``Authorization: Bearer <token>``."""

    async def list_roots(_ctx: ClientRequestContext) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[types.Root(uri=p.as_uri(), name=p.name) for p in roots or []])

    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=120) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(
                read, write, list_roots_callback=list_roots if roots is not None else None
            ) as session:
                await session.initialize()
                yield session


async def tool_error(session: ClientSession, tool: str, args: dict[str, Any]) -> str:
    """A tool call's one-line reason, asserting the result is ``isError: true``."""
    res = await session.call_tool(tool, args, read_timeout_seconds=120)
    assert res.is_error, res
    assert len(res.content) == 1 and isinstance(res.content[0], types.TextContent), res.content
    reason = res.content[0].text
    assert reason and "\n" not in reason, reason
    return reason


async def refused(session: ClientSession, tool: str, args: dict[str, Any]) -> str:
    """A tool call's ``error``: ``isError: true`` with that one line as its text, and the turn did not run
    (no text, no rounds)."""
    res = await session.call_tool(tool, args, read_timeout_seconds=120)
    out = res.structured_content
    assert res.is_error and out is not None, res
    assert out["error"] and not out["text"] and not out["rounds"], out
    assert [c.text for c in res.content if isinstance(c, types.TextContent)] == [out["error"]], res
    return str(out["error"])
