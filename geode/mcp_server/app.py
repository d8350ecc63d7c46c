"""The MCP server object: the three tools over a :class:`~geode.mcp_server.turns.TurnRunner`.

Each turn runs in a worker thread (the runner blocks); its events become progress notifications, with a
heartbeat while nothing happens, so a host can tell a long turn from a stuck one.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any
from urllib.parse import unquote, urlparse

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from pydantic import ValidationError

from geode.mcp_server.handshake import INSTRUCTIONS, SERVER_NAME
from geode.mcp_server.turns import (
    DEFAULT_TIME_BUDGET_S,
    AgentResult,
    HeadlessTurn,
    TurnRunner,
    agent_result,
    failed,
)

HEARTBEAT_S = 5.0


def build_server(runner: TurnRunner, *, version: str) -> MCPServer:
    server = MCPServer(SERVER_NAME, version=version, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    async def run_agent(
        prompt: str, ctx: Context, time_budget_s: float = DEFAULT_TIME_BUDGET_S, model: str | None = None
    ) -> AgentResult:
        """Run a GEODE agent turn on PROMPT in a new session; continue it with continue_agent(session_id)."""
        return await _run(runner, ctx, prompt=prompt, time_budget_s=time_budget_s, model=model)

    @server.tool()
    async def continue_agent(session_id: str, prompt: str, ctx: Context) -> AgentResult:
        """Send PROMPT to an existing GEODE session (the session_id a run_agent result gave)."""
        return await _run(runner, ctx, prompt=prompt, session_id=session_id)

    @server.tool()
    async def get_health() -> dict[str, Any]:
        """Whether GEODE can run turns: its version, GEODE_HOME and backend (daemon or single-process)."""
        return await anyio.to_thread.run_sync(runner.health)

    return server


async def _run(runner: TurnRunner, ctx: Context, **fields: Any) -> AgentResult:
    try:
        turn = HeadlessTurn(
            workspace=await client_root(ctx), **{k: v for k, v in fields.items() if v is not None}
        )
    except ValidationError as exc:  # an empty prompt, a budget out of range
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err.get("loc", ())) or "arguments"
        return failed(f"invalid {where}: {err.get('msg')}", fields.get("session_id"))
    sent = 0
    last = time.monotonic()

    async def report(message: str) -> None:
        nonlocal sent, last
        sent += 1
        last = time.monotonic()
        await ctx.report_progress(sent, None, message)

    def progress(message: str) -> None:  # from the runner's thread
        try:
            anyio.from_thread.run(report, message)
        except Exception:  # a progress notification is observation: never fails the turn
            pass

    async def heartbeat() -> None:
        while True:
            await anyio.sleep(HEARTBEAT_S)
            if time.monotonic() - last >= HEARTBEAT_S:
                try:
                    await report("running")
                except Exception:  # as above: a lost notification never ends the wait for the turn
                    pass

    sessions: list[str] = []
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat)
            raw = await anyio.to_thread.run_sync(
                runner.run, turn, progress, sessions.append, abandon_on_cancel=True
            )
            tg.cancel_scope.cancel()
    except anyio.get_cancelled_exc_class():  # the client cancelled the call (or left): so is the turn
        if sessions:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(runner.cancel, sessions[-1])
        raise
    return agent_result(raw, turn.session_id)


async def client_root(ctx: Context) -> str:
    """The workspace: the MCP client's first ``file://`` root (roots/list) when it offers roots, else cwd."""
    caps = ctx.client_capabilities
    if caps is not None and caps.roots is not None:
        try:
            with warnings.catch_warnings():  # roots is deprecated as of 2026-07-28; hosts still send them
                warnings.simplefilter("ignore")
                listed = await ctx.session.list_roots()
            for root in listed.roots:
                uri = urlparse(str(root.uri))
                if uri.scheme == "file" and os.path.isdir(unquote(uri.path)):
                    return unquote(uri.path)
        except Exception:  # a client that declares roots but cannot answer: fall back to the cwd
            pass
    return os.getcwd()
