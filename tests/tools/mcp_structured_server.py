"""A tiny MCP stdio server whose tools return structured content keyed by data (``-> dict[str, X]``)."""

from mcp.server.mcpserver import MCPServer

app = MCPServer("structsrv")


@app.tool()
def sizes(names: list[str]) -> dict[str, int]:
    """The length of each name, keyed by the name."""
    return {n: len(n) for n in names}


@app.tool()
def tag(names: list[str], secret: str = "") -> dict[str, str]:
    """Tag each name (a mutation: receipted); ``secret`` is echoed under each name's ``.note`` key."""
    out = {n: "tagged" for n in names}
    if secret:
        out["note"] = f"token {secret}"
    return out


if __name__ == "__main__":
    app.run()
