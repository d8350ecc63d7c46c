"""`geode mcp-servers [list]`: the executor's MCP servers (name, transport, origin, state, tools offered /
refused) and the config lines it ignored, asked over the bus (``tool.mcp.servers``); registered with add and
remove by ``mcp_servers_cmds``."""

from __future__ import annotations

from typing import Any

import typer

from actors.cli.child_view import ask_child, show
from geode.home import GeodeHome
from geode.protocol import tools as tools_msg


def mcp_servers_detail(home: GeodeHome, timeout_s: float = 3.0) -> dict[str, Any] | None:
    """The running executor's ``tool.mcp.servers`` reply, or None when it does not answer."""
    query = tools_msg.McpServersQuery()
    return ask_child(home, "executor", tools_msg.MCP_SERVERS, query, tools_msg.McpServers, timeout_s)


def state_text(row: dict[str, Any]) -> str:
    state = str(row.get("state", "?"))
    if state == "restarting" and row.get("next_try_s") is not None:
        return f"restarting (next try in {row['next_try_s']:.0f} s)"
    if state in ("failed", "pending approval"):
        return f"{state}: {row.get('reason') or 'unknown'}"
    if state == "exited":  # a stdio server that ended while idle (hub.py): the next call starts it again
        wait = row.get("next_try_s")
        later = f", {wait:.0f} s from now or later" if wait else ""
        return f"exited ({row.get('reason') or 'code unknown'}): restarts on the next call{later}"
    return state


def server_lines(detail: dict[str, Any]) -> list[str]:
    rows = detail.get("servers") or []
    out: list[str] = []
    if not rows:
        out.append("no MCP servers: add [mcp.servers.NAME] to config.toml (see docs/mcp.md)")
    else:
        out.append(f"{'NAME':<16} {'TRANSPORT':<9} {'STATE':<34} {'TOOLS':<20} ORIGIN")
        for r in rows:
            tools = f"{len(r.get('offered') or [])} offered / {len(r.get('refused') or [])} refused"
            out.append(
                f"{r['name']:<16} {r.get('transport', '?'):<9} {state_text(r):<34} {tools:<20} "
                f"{r.get('origin') or 'global'}"
            )
            if r.get("refused"):
                out.append(f"  refused (no declared policy): {', '.join(r['refused'])}")
    out += [f"note: {n}" for n in detail.get("notes") or []]
    return out


def mcp_servers(as_json: bool = typer.Option(False, "--json", help="machine-readable object")) -> None:
    """List the MCP servers the executor runs, their state and tool counts (exit 1: not running)."""
    show("executor", mcp_servers_detail, server_lines, as_json)
