"""How the hub reaches one MCP server: stdio (the server's stderr piped to our log, redacted) or streamable
HTTP (the config's headers on every request), both through the official SDK clients. A :class:`Link` says
when the server's read stream ended (a stdio server that exited) and, for stdio, its exit code."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import AsyncIterator
from typing import Any, TextIO

from geode.redaction import redact_text

log = logging.getLogger(__name__)


def transport_of(cfg: Any) -> str:
    """ "http" for a server with a ``url``, else "stdio"."""
    return "http" if getattr(cfg, "url", None) else "stdio"


class StderrPump:
    """A pipe whose read end a daemon thread copies, line by line and redacted, into the log."""

    def __init__(self, server: str) -> None:
        r, w = os.pipe()
        self.writer: TextIO = os.fdopen(w, "w")
        self._reader = os.fdopen(r, "r", errors="replace")
        self._thread = threading.Thread(
            target=self._pump, args=(server,), name=f"mcp-stderr-{server}", daemon=True
        )
        self._thread.start()

    def _pump(self, server: str) -> None:
        with self._reader:
            for line in self._reader:
                if line.strip():
                    log.info("MCP server %s stderr: %s", server, redact_text(line.rstrip(), 1000))

    def close(self) -> None:
        """Close our write end: the thread ends once the server process closed its copy too."""
        with contextlib.suppress(OSError):
            self.writer.close()


class EndWatch:
    """The transport's read stream, passed through to the SDK session; ``ended`` is set once it ends (a stdio
    server's stdout closed: the server exited, or our own shutdown closed it)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.ended = asyncio.Event()

    async def receive(self) -> Any:
        import anyio

        try:
            return await self.inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.ended.set()
            raise

    def __aiter__(self) -> EndWatch:
        return self

    async def __anext__(self) -> Any:
        import anyio

        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> EndWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self.inner.aclose()

    def close(self) -> None:
        self.inner.close()

    def __getattr__(self, name: str) -> Any:  # what else the SDK reads off its stream
        return getattr(self.inner, name)


class Link:
    """One open connection: the streams for the SDK session, ``ended`` (the server side closed), and a stdio
    server's exit code once it exited (None while it runs, for HTTP, or when it cannot be read)."""

    def __init__(self, read: Any, write: Any, process: Any = None) -> None:
        self.read = EndWatch(read)
        self.write = write
        self.process = process

    @property
    def ended(self) -> asyncio.Event:
        return self.read.ended

    def exit_code(self) -> int | None:
        code = getattr(self.process, "returncode", None)
        return code if isinstance(code, int) else None


def describe_exit(code: int | None) -> str:
    """``exited with code 1``, ``killed by SIGKILL``, or ``exited`` when the code is unknown."""
    if code is None:
        return "exited"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _process_of(client: Any) -> Any:
    """The server process the SDK's ``stdio_client`` started (it keeps it in its generator's frame and does
    not hand it out): read for its exit code only; None when this SDK version keeps it elsewhere."""
    frame = getattr(getattr(client, "gen", None), "ag_frame", None)
    proc = frame.f_locals.get("process") if frame is not None else None
    return proc if hasattr(proc, "returncode") else None


@contextlib.asynccontextmanager
async def open_streams(cfg: Any) -> AsyncIterator[Link]:
    """A :class:`Link` to the server ``cfg`` describes."""
    url = getattr(cfg, "url", None)
    if url:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        headers = dict(getattr(cfg, "headers", None) or {})
        async with (
            create_mcp_http_client(headers=headers or None) as client,
            streamable_http_client(url, http_client=client) as streams,
        ):
            yield Link(streams[0], streams[1])
        return
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=cfg.command, args=list(cfg.args), env=dict(cfg.env) or None, cwd=cfg.cwd
    )
    pump = StderrPump(cfg.name)
    try:
        stdio = stdio_client(params, errlog=pump.writer)
        async with stdio as streams:
            yield Link(streams[0], streams[1], _process_of(stdio))
    finally:
        pump.close()
