"""Answer the client's MCP ``initialize`` before the SDK is imported, then hand the wire over to the SDK.

Importing the mcp SDK costs ~0.5 s; a host waits for ``initialize`` before anything else. The first line
on stdin, when it is a well-formed ``initialize`` for a protocol version this SDK negotiates by handshake,
is answered here (stdlib only) with the result the SDK gives for this server; the SDK then reads that same
request first, and its own answer (same id) is dropped, after checking it matches (a mismatch is logged:
``tests/mcp_server`` compares both answers). Anything else is left to the SDK as it comes.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any, BinaryIO

SERVER_NAME = "geode"
INSTRUCTIONS = (
    "GEODE runs an agent turn for you: run_agent starts a session (HEADLESS: no shell, no sub-agents, no "
    "computer use, approvals denied), continue_agent sends another prompt to the same session."
)
# mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS of the SDK in use (2.3); a test keeps them equal
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# what MCPServer.create_initialization_options() declares for a server with tools only
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}


def initialize_answer(line: bytes, *, version: str) -> dict[str, Any] | None:
    """The JSON-RPC reply to ``line`` if it is an ``initialize`` we can answer exactly; else None."""
    try:
        msg = json.loads(line)
    except ValueError:
        return None
    if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or msg.get("method") != "initialize":
        return None
    params, mid = msg.get("params"), msg.get("id")
    if not isinstance(mid, (str, int)) or isinstance(mid, bool) or not isinstance(params, dict):
        return None
    info, caps = params.get("clientInfo"), params.get("capabilities")
    if params.get("protocolVersion") not in HANDSHAKE_VERSIONS or not isinstance(caps, dict):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        return None
    if not isinstance(info.get("version"), str):
        return None
    result = {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": params["protocolVersion"],
        "serverInfo": {"name": SERVER_NAME, "version": version},
    }
    return {"jsonrpc": "2.0", "id": mid, "result": result}


class WireIn:
    """stdin for the SDK (wrapped by ``anyio.wrap_file``): the line already read, then the wire."""

    def __init__(self, first: bytes, wire: BinaryIO) -> None:
        self._first: bytes | None = first
        self._wire = wire

    def readline(self) -> str:
        if self._first is not None:
            line, self._first = self._first, None
        else:
            line = self._wire.readline()
        return line.decode("utf-8", errors="replace")


class WireOut:
    """stdout for the SDK: every message to the wire, except its own reply to an ``initialize`` answered
    already (checked against what was sent)."""

    def __init__(self, wire: BinaryIO, answered: dict[str, Any] | None) -> None:
        self._wire = wire
        self._answered = answered
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        if self._answered is not None and self._is_duplicate(text):
            return len(text)
        with self._lock:
            self._wire.write(text.encode("utf-8"))
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self._wire.flush()

    def _is_duplicate(self, text: str) -> bool:
        assert self._answered is not None
        try:
            msg = json.loads(text)
        except ValueError:
            return False
        if not isinstance(msg, dict) or msg.get("id") != self._answered["id"] or "method" in msg:
            return False
        if msg != self._answered:
            print(
                f"geode mcp: the SDK's initialize answer differs from the early one: {text.strip()}",
                file=sys.stderr,
            )
        self._answered = None
        return True


def send(wire: BinaryIO, msg: dict[str, Any]) -> None:
    wire.write(json.dumps(msg, separators=(",", ":")).encode("utf-8") + b"\n")
    wire.flush()
