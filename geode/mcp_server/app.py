"""The MCP server object: the three tools over a :class:`~geode.mcp_server.turns.TurnRunner`.

Each turn runs in a worker thread (the runner blocks); its events become progress notifications, with a
heartbeat while nothing happens, so a host can tell a long turn from a stuck one. Arguments are checked
against the schema each tool publishes (bounds, no unknown argument) before it runs; every error, a refused
argument or a turn that could not run, is ``isError: true`` with a one-line reason.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Annotated, Any
from urllib.parse import unquote, urlparse

import anyio
import anyio.from_thread
import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, InputRequiredResult, TextContent
from mcp_types import Tool as MCPTool
from pydantic import ValidationError

from geode.mcp_server.handshake import INSTRUCTIONS, SERVER_NAME
from geode.mcp_server.turns import (
    DEFAULT_TIME_BUDGET_S,
    TOOL_ARGS,
    AgentResult,
    HeadlessTurn,
    TurnRunner,
    agent_result,
    failed,
    invalid_arguments,
    one_line,
)

HEARTBEAT_S = 5.0
Answer = Annotated[CallToolResult, AgentResult]  # structured content of this shape, isError on an error


class GeodeMCPServer(MCPServer):
    """MCPServer whose tools validate like they publish: each tool's input schema is its model in
    :data:`~geode.mcp_server.turns.TOOL_ARGS`, and a call is checked against it before the tool runs."""

    async def list_tools(self) -> list[MCPTool]:
        tools = await super().list_tools()
        return [
            t.model_copy(update={"input_schema": TOOL_ARGS[t.name].model_json_schema()})
            if t.name in TOOL_ARGS
            else t
            for t in tools
        ]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult | InputRequiredResult:
        model = TOOL_ARGS.get(name)
        if model is not None:
            try:
                model.model_validate(arguments)
            except ValidationError as exc:  # isError with one line (the SDK's own text spans lines)
                raise ToolError(invalid_arguments(name, exc)) from None
        return await super().call_tool(name, arguments, context)


def build_server(runner: TurnRunner, *, version: str) -> MCPServer:
    server = GeodeMCPServer(SERVER_NAME, version=version, instructions=INSTRUCTIONS, log_level="WARNING")

    @server.tool()
    async def run_agent(
        prompt: str, ctx: Context, time_budget_s: float = DEFAULT_TIME_BUDGET_S, model: str | None = None
    ) -> Answer:
        """Run a GEODE agent turn on PROMPT in a new session; continue it with continue_agent(session_id)."""
        return answer(await _run(runner, ctx, prompt=prompt, time_budget_s=time_budget_s, model=model))

    @server.tool()
    async def continue_agent(session_id: str, prompt: str, ctx: Context) -> Answer:
        """Send PROMPT to an existing GEODE session (the session_id a run_agent result gave)."""
        return answer(await _run(runner, ctx, prompt=prompt, session_id=session_id))

    @server.tool()
    async def get_health() -> dict[str, Any]:
        """Whether GEODE can run turns: its version, GEODE_HOME and backend (daemon or single-process)."""
        return await anyio.to_thread.run_sync(runner.health)

    return server


def answer(result: AgentResult) -> CallToolResult:
    """The tool result: the structured answer always (a host can continue the session it names); an error
    is ``isError: true`` and its one-line reason is the text."""
    structured = result.model_dump(mode="json")
    if result.error is not None:
        reason = one_line(result.error)
        return CallToolResult(
            content=[TextContent(type="text", text=reason)],
            structured_content={**structured, "error": reason},
            is_error=True,
        )
    return CallToolResult(
        content=[TextContent(type="text", text=result.model_dump_json())], structured_content=structured
    )


async def _run(runner: TurnRunner, ctx: Context, **fields: Any) -> AgentResult:
    try:
        turn = HeadlessTurn(
            workspace=await client_root(ctx), **{k: v for k, v in fields.items() if v is not None}
        )
    except ValidationError as exc:  # checked against the published schema already: a last guard
        tool = "continue_agent" if fields.get("session_id") else "run_agent"
        return failed(invalid_arguments(tool, exc), fields.get("session_id"))
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
