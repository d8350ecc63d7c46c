"""An MCP server for the runtime tests, written with the SDK: ``lookup`` is annotated read-only (its answer
carries a fake secret the client must redact), ``append`` mutates ($EFFECTS_FILE gets one line per run),
``pause`` sleeps (read-only), ``crash`` exits the process. Serves stdio by default; ``--http PORTFILE``
serves streamable HTTP on a free loopback port written to PORTFILE (``$MCP_TEST_TOKEN`` set: requests
need ``Authorization: Bearer <it>``).
"""

import os
import socket
import sys
import time
from pathlib import Path

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

app = MCPServer("policysrv")
FAKE_SECRET = "sk-test-0123456789abcdef"


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup(key: str) -> str:
    """Look a key up (read-only)."""
    print(f"lookup {key} with api_key={FAKE_SECRET}", file=sys.stderr, flush=True)
    return f"value-of-{key} (fetched with {FAKE_SECRET})"


@app.tool()
def append(line: str) -> str:
    """Append a line to $EFFECTS_FILE."""
    with open(os.environ["EFFECTS_FILE"], "a") as f:
        f.write(line + "\n")
    return f"appended {line}"


@app.tool(annotations=ToolAnnotations(read_only_hint=True))
def pause(seconds: float) -> str:
    """Sleep, then answer (read-only)."""
    time.sleep(seconds)
    return "awake"


@app.tool()
def crash() -> str:
    """Exit the server process."""
    os._exit(3)


def _guarded(inner, token: str):  # type: ignore[no-untyped-def]
    async def asgi(scope, receive, send):  # type: ignore[no-untyped-def]
        if scope["type"] == "http":
            auth = dict(scope.get("headers") or []).get(b"authorization", b"").decode()
            if auth != f"Bearer {token}":
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await inner(scope, receive, send)

    return asgi


def serve_http(port_file: str) -> None:
    import anyio
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    starlette = app.streamable_http_app()
    token = os.environ.get("MCP_TEST_TOKEN")
    asgi = _guarded(starlette, token) if token else starlette
    server = uvicorn.Server(uvicorn.Config(asgi, log_level="warning", lifespan="on"))
    tmp = Path(port_file + ".tmp")
    tmp.write_text(str(sock.getsockname()[1]))
    tmp.rename(port_file)
    anyio.run(lambda: server.serve(sockets=[sock]))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--http":
        serve_http(sys.argv[2])
    else:
        app.run()
