"""A synchronous facade over MCP stdio clients: one asyncio loop thread, one long-lived task per server.

Each server's session lives in its own task (anyio scopes stay in the task that opened them); calls reach
it through a queue and run one at a time per server. A server that dies fails its pending and later calls.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from geode.tools.mcp.config import McpServerConfig

log = logging.getLogger(__name__)
CONNECTION_CLOSED = -32000  # JSON-RPC code the SDK uses when the transport closed


class McpUnavailable(RuntimeError):
    """The server is not running (failed to start, or died): the call was never sent."""


class McpCallLost(RuntimeError):
    """The server went away while the call was in flight: its outcome is unknown."""


class _Server:
    def __init__(self, cfg: McpServerConfig) -> None:
        self.cfg = cfg
        self.queue: asyncio.Queue[tuple[str, dict[str, Any], asyncio.Future[Any]] | None] = asyncio.Queue()
        self.dead: BaseException | None = None
        self.task: asyncio.Task[None] | None = None

    async def run(self, ready: asyncio.Future[list[Any]]) -> None:
        params = StdioServerParameters(
            command=self.cfg.command, args=self.cfg.args, env=self.cfg.env or None, cwd=self.cfg.cwd
        )
        try:
            async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
                await session.initialize()
                ready.set_result(list((await session.list_tools()).tools))
                while (item := await self.queue.get()) is not None:
                    tool, args, fut = item
                    try:
                        result = await session.call_tool(tool, args)
                        if not fut.done():
                            fut.set_result(result)
                    except MCPError as exc:
                        if exc.code == CONNECTION_CLOSED:  # the server process is gone
                            if not fut.done():
                                fut.set_exception(
                                    McpCallLost(f"MCP server {self.cfg.name!r} closed during the call")
                                )
                            raise
                        if not fut.done():
                            fut.set_exception(exc)
                    except Exception as exc:
                        if not fut.done():
                            fut.set_exception(exc)
        except BaseException as exc:
            self.dead = exc
            if not ready.done():
                ready.set_exception(exc)
        finally:
            self.dead = self.dead or McpUnavailable("stopped")
            while not self.queue.empty():
                item = self.queue.get_nowait()
                if item is not None and not item[2].done():
                    item[2].set_exception(McpUnavailable(f"MCP server {self.cfg.name!r} stopped"))


class McpHub:
    """Thread-safe. ``start(cfg)`` returns the server's tools; ``call(...)`` returns a CallToolResult."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-hub", daemon=True)
        self._thread.start()
        self._servers: dict[str, _Server] = {}

    def start(self, cfg: McpServerConfig) -> list[Any]:
        async def go() -> list[Any]:
            srv = _Server(cfg)
            ready: asyncio.Future[list[Any]] = self._loop.create_future()
            srv.task = asyncio.create_task(srv.run(ready))
            self._servers[cfg.name] = srv
            return await ready

        fut = asyncio.run_coroutine_threadsafe(go(), self._loop)
        try:
            return fut.result(cfg.startup_timeout_s)
        except FutureTimeout:
            self._stop(cfg.name)
            raise McpUnavailable(
                f"MCP server {cfg.name!r} did not start within {cfg.startup_timeout_s:g}s"
            ) from None

    def call(self, server: str, tool: str, args: dict[str, Any], timeout_s: float) -> Any:
        async def go() -> Any:
            srv = self._servers.get(server)
            if srv is None or srv.dead is not None:
                raise McpUnavailable(f"MCP server {server!r} is not running")
            fut: asyncio.Future[Any] = self._loop.create_future()
            await srv.queue.put((tool, args, fut))
            return await asyncio.wait_for(fut, timeout_s)

        return asyncio.run_coroutine_threadsafe(go(), self._loop).result(timeout_s + 5)

    def alive(self, server: str) -> bool:
        srv = self._servers.get(server)
        return srv is not None and srv.dead is None

    def _stop(self, name: str) -> None:
        async def go() -> None:
            srv = self._servers.pop(name, None)
            if srv is None or srv.task is None:
                return
            await srv.queue.put(None)
            try:
                await asyncio.wait_for(asyncio.shield(srv.task), 5)
            except TimeoutError:
                srv.task.cancel()
            except BaseException:
                pass

        try:
            asyncio.run_coroutine_threadsafe(go(), self._loop).result(10)
        except Exception as exc:
            log.warning("stopping MCP server %s: %s", name, exc)

    def close(self) -> None:
        for name in list(self._servers):
            self._stop(name)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()  # and with it the loop's self-pipe sockets
