"""The executor's MCP runtime as one object: the catalogue's servers, the hub, the overlay it made, and
``geode mcp-servers`` rows (name, transport, origin, state, tools offered / refused; a project server
waiting for approval is listed as "pending approval")."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from geode.protocol import tools as m
from geode.tools.mcp.bridge import Overlay
from geode.tools.mcp.transport import transport_of


@dataclass
class McpRuntime:
    servers: list[Any] = field(default_factory=list)  # every configured McpServerConfig, disabled included
    notes: list[str] = field(default_factory=list)
    pending: list[Any] = field(default_factory=list)  # catalogue.PendingServer: never started until approved
    hub: Any = None  # geode.tools.mcp.hub.McpHub, or None when no server is enabled
    overlay: Overlay = field(default_factory=Overlay)

    def close(self) -> None:
        if self.hub is not None:
            self.hub.close()

    def rows(self) -> m.McpServers:
        states = {s.name: s for s in (self.hub.states() if self.hub is not None else [])}
        out = []
        for cfg in self.servers:
            tools = self.overlay.servers.get(cfg.name)
            row = m.McpServerRow(
                name=cfg.name,
                transport=transport_of(cfg),
                origin=getattr(cfg, "origin", "global") or "global",
                state="disabled",
                offered=list(tools.offered) if tools else [],
                refused=list(tools.refused) if tools else [],
            )
            st = states.get(cfg.name)
            if getattr(cfg, "enabled", True) and st is not None:
                row.state, row.reason, row.next_try_s, row.restarts = (
                    st.state,
                    st.reason,
                    st.next_try_s,
                    st.restarts,
                )
            elif getattr(cfg, "enabled", True):
                row.state = "failed"
            out.append(row)
        for waiting in self.pending:
            cfg = waiting.server
            why = "new" if waiting.why == "new" else "changed what it runs"
            out.append(
                m.McpServerRow(
                    name=cfg.name,
                    transport=transport_of(cfg),
                    origin=cfg.origin,
                    state="pending approval",
                    reason=f"{why} since `geode trust`; run `geode trust {cfg.origin}` to approve it",
                )
            )
        return m.McpServers(servers=out, notes=list(self.notes))
