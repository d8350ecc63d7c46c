"""A synchronous facade over MCP clients (stdio and streamable HTTP): one asyncio loop thread, one long-lived
task per server holding its session; calls run concurrently on that session with a request timeout.

A server found dead (its transport closed) is restarted on the first call after a cooldown (5 s, doubling
to 60 s; back to 5 s after a minute of stable running). A stdio server that exits while idle is seen at once
(its stdout ends): ``exited`` with its code, restarted the same way. A call whose server went away while it
was in flight, or that timed out, has an unknown outcome (:class:`McpCallLost`); a call to a server that is
down is never sent (:class:`McpUnavailable`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

from geode.redaction import redact_text
from geode.tools.mcp.transport import Link, describe_exit, open_streams, transport_of

log = logging.getLogger(__name__)
CONNECTION_CLOSED = -32000  # JSON-RPC code the SDK uses when the transport closed
REQUEST_TIMEOUT = -32001  # the SDK's code for a request that got no answer in time
COOLDOWN_S = 5.0
MAX_COOLDOWN_S = 60.0
PING_TIMEOUT_S = 5.0
RESTARTABLE = ("restarting", "exited")  # the next call after the cooldown restarts the server


class McpUnavailable(RuntimeError):
    """The server is not running (failed to start, died, cooling down): the call was never sent."""


class McpCallLost(RuntimeError):
    """The server went away, or did not answer in time, while the call was in flight: outcome unknown."""


class McpProtocolError(RuntimeError):
    """The server answered the call with a JSON-RPC error (the tool did not run as asked)."""


@dataclass(frozen=True)
class ServerState:
    """One server as ``geode mcp-servers`` shows it."""

    name: str
    transport: str
    state: str  # running | starting | restarting | exited | failed | stopped
    reason: str = ""
    next_try_s: float | None = None  # restarting / exited: seconds until the next call may restart it
    restarts: int = 0


class _Server:
    def __init__(self, cfg: Any, clock: Callable[[], float]) -> None:
        self.cfg = cfg
        self.clock = clock
        self.session: Any = None
        self.task: asyncio.Task[None] | None = None
        self.stop: asyncio.Event | None = None
        self.state = "starting"
        self.reason = ""
        self.cooldown_s = COOLDOWN_S
        self.next_try = 0.0
        self.started_at = 0.0
        self.restarts = 0
        self.calls = 0  # calls in flight (a server ending under one is the call's to report)
        self.lock = threading.Lock()  # one (re)start at a time

    async def run(self, ready: asyncio.Future[list[Any]]) -> None:
        self.stop = asyncio.Event()
        link: Link | None = None
        try:
            async with open_streams(self.cfg) as link:
                from mcp.client.session import ClientSession

                async with ClientSession(link.read, link.write) as session:
                    await session.initialize()
                    tools = await _list_tools(session)
                    self.session, self.state, self.reason = session, "running", ""
                    self.started_at = self.clock()
                    ready.set_result(tools)
                    await _first(self.stop.wait(), link.ended.wait())
                    if not self.stop.is_set() and not self.calls:  # the server ended its side while idle
                        if link.process is None:  # HTTP (or a process the SDK did not show us)
                            self.died("closed the connection while idle")
                        else:
                            await _reaped(link)
                            self.died(f"{describe_exit(link.exit_code())} while idle", state="exited")
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            elif self.state == "running":
                self.died(f"{type(exc).__name__}: {exc}")
            if not isinstance(exc, Exception):
                raise
        finally:
            self.session = None
        if self.state == "exited" and link is not None and self.reason == "exited while idle":
            self.reason = f"{describe_exit(link.exit_code())} while idle"  # reaped now: its code is known

    def died(self, why: str, state: str = "restarting") -> None:
        """The transport closed (``exited``: a stdio server's process ended while idle): calls are refused
        until the cooldown passed, then the next one restarts it."""
        if self.state != "running":
            return
        now = self.clock()
        if self.started_at and now - self.started_at >= MAX_COOLDOWN_S:
            self.cooldown_s = COOLDOWN_S  # it ran stably: a fresh cooldown
        self.state, self.reason, self.session = state, why[:300], None
        self.next_try = now + self.cooldown_s
        self.cooldown_s = min(self.cooldown_s * 2, MAX_COOLDOWN_S)
        log.warning(
            "MCP server %s went away (%s); restarted on the next call after %.0f s",
            self.cfg.name,
            redact_text(why, 300),
            self.next_try - now,
        )

    def snapshot(self) -> ServerState:
        wait = None
        if self.state in RESTARTABLE:
            wait = max(0.0, round(self.next_try - self.clock(), 1))
        return ServerState(
            self.cfg.name, transport_of(self.cfg), self.state, self.reason, wait, self.restarts
        )


async def _first(*waits: Coroutine[Any, Any, Any]) -> None:
    """Wait until the first of ``waits`` finishes (the others are cancelled)."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for t in tasks:
            t.cancel()


async def _reaped(link: Link, within_s: float = 1.0) -> None:
    """Give a stdio server whose stdout ended a moment to be reaped, so its exit code can be told."""
    for _ in range(int(within_s / 0.02)):
        if link.process is None or link.exit_code() is not None:
            return
        await asyncio.sleep(0.02)


async def _list_tools(session: Any) -> list[Any]:
    tools: list[Any] = []
    cursor = None
    for _ in range(100):  # a bounded number of pages
        if cursor is None:
            page = await session.list_tools()
        else:
            from mcp.types import PaginatedRequestParams

            page = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))
        tools += list(page.tools)
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            break
    return tools


class McpHub:
    """Thread-safe. ``start(cfg)`` returns the server's tools; ``call(...)`` returns a CallToolResult."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="mcp-hub", daemon=True)
        self._thread.start()
        self._servers: dict[str, _Server] = {}

    # --- starting --------------------------------------------------------------------------------------
    def start(self, cfg: Any) -> list[Any]:
        """Start one server (within its ``startup_timeout_s``) and return its tools; raises when it fails."""
        srv = self._servers.get(cfg.name)
        if srv is None:
            srv = self._servers[cfg.name] = _Server(cfg, self.clock)
        with srv.lock:
            return self._launch(srv)

    def start_all(self, cfgs: Iterable[Any]) -> dict[str, list[Any] | BaseException]:
        """Start several servers at once (each within its own startup timeout): tools, or why it failed."""
        out: dict[str, list[Any] | BaseException] = {}
        threads = []

        def one(cfg: Any) -> None:
            try:
                out[cfg.name] = self.start(cfg)
            except BaseException as exc:
                out[cfg.name] = exc

        for cfg in cfgs:
            t = threading.Thread(target=one, args=(cfg,), name=f"mcp-start-{cfg.name}", daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join()
        return out

    def _launch(self, srv: _Server) -> list[Any]:
        cfg = srv.cfg
        srv.state = "starting"

        async def go() -> list[Any]:
            ready: asyncio.Future[list[Any]] = self._loop.create_future()
            srv.task = asyncio.create_task(srv.run(ready))
            return await ready

        fut = asyncio.run_coroutine_threadsafe(go(), self._loop)
        try:
            return fut.result(cfg.startup_timeout_s)
        except FutureTimeout:
            self._stop_task(srv)
            srv.state, srv.reason = "failed", f"did not start within {cfg.startup_timeout_s:g}s"
            raise McpUnavailable(f"MCP server {cfg.name!r} {srv.reason}") from None
        except Exception as exc:
            srv.state, srv.reason = "failed", describe_error(exc)[:300]
            raise

    def _ensure(self, srv: _Server) -> None:
        """A dead server past its cooldown is restarted now; before that the call is refused."""
        if srv.state == "running":
            return
        with srv.lock:
            if srv.state == "running":
                return
            if srv.state not in RESTARTABLE:
                raise McpUnavailable(
                    f"MCP server {srv.cfg.name!r} is not running ({srv.reason or srv.state})"
                )
            wait = srv.next_try - self.clock()
            if wait > 0:
                raise McpUnavailable(
                    f"MCP server {srv.cfg.name!r} is {srv.state} (next try in {wait:.0f} s): {srv.reason}"
                )
            self._stop_task(srv)
            srv.restarts += 1
            try:
                self._launch(srv)
                log.info("MCP server %s restarted (restart %d)", srv.cfg.name, srv.restarts)
            except Exception as exc:
                srv.state = "running"  # so died() applies the doubled cooldown
                srv.started_at = self.clock()
                srv.died(f"restart failed: {describe_error(exc)}")
                raise McpUnavailable(
                    f"MCP server {srv.cfg.name!r} could not be restarted: {describe_error(exc)[:300]}"
                ) from None

    # --- calling ---------------------------------------------------------------------------------------
    def call(self, server: str, tool: str, args: dict[str, Any], timeout_s: float) -> Any:
        srv = self._servers.get(server)
        if srv is None:
            raise McpUnavailable(f"MCP server {server!r} is not configured here")
        self._ensure(srv)
        late = f"MCP server {server!r} did not answer within {timeout_s:.3g}s"

        async def go() -> Any:
            srv.calls += 1  # on the hub's loop: a server that ends now ends during a call, not idle
            try:
                return await one_call()
            finally:
                srv.calls -= 1

        async def one_call() -> Any:
            session = srv.session
            if session is None:
                raise McpUnavailable(f"MCP server {server!r} is not running")
            from mcp.shared.exceptions import MCPError

            try:  # a cheap probe first: a dead server is found before the call is sent
                await asyncio.wait_for(session.send_ping(), min(PING_TIMEOUT_S, timeout_s))
            except (MCPError, TimeoutError, OSError) as exc:
                srv.died(f"no answer to ping: {describe_error(exc)}")
                raise McpUnavailable(
                    f"MCP server {server!r} is not answering; the call was not sent"
                ) from None
            try:
                return await session.call_tool(tool, args, read_timeout_seconds=timeout_s)
            except MCPError as exc:
                if exc.code == CONNECTION_CLOSED:
                    srv.died("closed during a call")
                    raise McpCallLost(f"MCP server {server!r} closed during the call") from None
                if exc.code == REQUEST_TIMEOUT:
                    raise McpCallLost(late) from None
                raise McpProtocolError(f"MCP server {server!r} answered with an error: {exc}") from None
            except OSError as exc:
                srv.died(describe_error(exc))
                raise McpCallLost(
                    f"MCP server {server!r} failed during the call: {describe_error(exc)}"
                ) from None

        fut = asyncio.run_coroutine_threadsafe(go(), self._loop)
        try:
            return fut.result(timeout_s + PING_TIMEOUT_S + 5)
        except FutureTimeout:
            fut.cancel()
            raise McpCallLost(late) from None

    # --- status and shutdown ---------------------------------------------------------------------------
    def alive(self, server: str) -> bool:
        srv = self._servers.get(server)
        return srv is not None and srv.state == "running"

    def states(self) -> list[ServerState]:
        return [srv.snapshot() for srv in list(self._servers.values())]

    def _stop_task(self, srv: _Server) -> None:
        async def go() -> None:
            task = srv.task
            if task is None or task.done():
                return
            if srv.stop is not None:
                srv.stop.set()
            try:
                await asyncio.wait_for(asyncio.shield(task), 5)
            except TimeoutError:
                task.cancel()
            except BaseException:
                pass

        try:
            asyncio.run_coroutine_threadsafe(go(), self._loop).result(10)
        except Exception as exc:
            log.warning("stopping MCP server %s: %s", srv.cfg.name, exc)

    def close(self) -> None:
        for srv in list(self._servers.values()):
            self._stop_task(srv)
            srv.state = "stopped"
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()  # and with it the loop's self-pipe sockets


def describe_error(exc: BaseException) -> str:
    """One line for a start/call failure (an exception group names its first leaf)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or type(exc).__name__
    return redact_text(f"{type(exc).__name__}: {text}" if str(exc) else text, 300)
