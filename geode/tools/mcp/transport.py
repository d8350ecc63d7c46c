"""How the hub reaches one MCP server: stdio (the server's stderr piped to our log, redacted) or streamable
HTTP (the config's headers on every request), both through the official SDK clients."""

from __future__ import annotations

import contextlib
import logging
import os
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


@contextlib.asynccontextmanager
async def open_streams(cfg: Any) -> AsyncIterator[tuple[Any, Any]]:
    """(read stream, write stream) to the server ``cfg`` describes."""
    url = getattr(cfg, "url", None)
    if url:
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client

        headers = dict(getattr(cfg, "headers", None) or {})
        async with (
            create_mcp_http_client(headers=headers or None) as client,
            streamable_http_client(url, http_client=client) as streams,
        ):
            yield streams[0], streams[1]
        return
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=cfg.command, args=list(cfg.args), env=dict(cfg.env) or None, cwd=cfg.cwd
    )
    pump = StderrPump(cfg.name)
    try:
        async with stdio_client(params, errlog=pump.writer) as streams:
            yield streams[0], streams[1]
    finally:
        pump.close()
