"""A tiny MCP stdio server for the executor tests (run with this interpreter)."""

import os

from mcp.server.mcpserver import MCPServer

app = MCPServer("testsrv")


@app.tool()
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@app.tool()
def note(text: str) -> str:
    """Append a note to $NOTES_FILE."""
    with open(os.environ["NOTES_FILE"], "a") as f:
        f.write(text + "\n")
    return "noted"


@app.tool()
def undeclared() -> str:
    """Nobody declared a policy for me."""
    return "should never run"


@app.tool()
def die() -> str:
    """Exit the server process."""
    os._exit(3)


if __name__ == "__main__":
    app.run()
