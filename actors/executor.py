"""The ``executor`` child: a ToolExecutor at bus endpoint ``executor`` (receipt owner = name#incarnation).

Hosted by ``python -m actors.child executor`` through the registry (``build``). Hooks come from the global
config's ``[hooks]`` tables; approvals go through lanes to the turn's origin; receipts and the timeline go
to the store. When this process dies, the store marks its admitted receipts uncertain (runtime.child_died).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.bus import Bus
from actors.registry import ChildContext
from geode.hooks.config import load_hooks
from geode.hooks.runner import HookRunner
from geode.records.store_client import StoreClient
from geode.tools.approval_lanes import LanesApprovalChannel
from geode.tools.builtin.bash import BashLimits
from geode.tools.builtin.catalogue import builtin_handlers, builtin_specs
from geode.tools.executor import ToolExecutor
from geode.tools.handlers import HandlerEntry
from geode.tools.service import ToolService
from geode.tools.spec import ToolSpec

log = logging.getLogger(__name__)
ENDPOINT = "executor"


@dataclass
class ExecutorChild:
    executor: ToolExecutor
    hooks: HookRunner
    mcp_hub: Any = None

    def stop(self) -> None:
        self.executor.shutdown()
        self.hooks.close()
        if self.mcp_hub is not None:
            self.mcp_hub.close()


def connect_mcp(cfg: dict[str, Any]) -> tuple[Any, list[ToolSpec], dict[str, HandlerEntry]]:
    """Start the configured MCP servers (``[mcp.servers.*]`` / ``mcpServers``); none → no hub."""
    from geode.tools.mcp.config import load_mcp_servers

    servers = load_mcp_servers(cfg)
    if not servers:
        return None, [], {}
    from geode.tools.mcp.bridge import connect
    from geode.tools.mcp.hub import McpHub

    hub = McpHub()
    specs, handlers = connect(hub, servers)
    log.info("MCP: %d server(s), %d tool(s), %d callable", len(servers), len(specs), len(handlers))
    return hub, specs, handlers


def executor_from_config(bus: Bus, ctx: ChildContext, **overrides: Any) -> ToolExecutor:
    """Compose the executor from the global config (``[tools]``, ``[hooks]``, ``[daemon]``)."""
    cfg = ctx.config
    tools_cfg = dict(cfg.get("tools") or {})
    bash_cfg = dict(tools_cfg.get("bash") or {})
    limits = BashLimits(
        cpu_s=bash_cfg.get("cpu_s"), fsize_bytes=int(bash_cfg.get("fsize_bytes", 50 * 1024 * 1024))
    )
    hooks = HookRunner(load_hooks(cfg, base_dir=ctx.home.root))
    # a call without a session workspace never falls back to the daemon's cwd
    default_ws = Path(str(tools_cfg.get("default_workspace") or ctx.home.root / "workspace")).expanduser()
    default_ws.mkdir(parents=True, exist_ok=True)
    kw: dict[str, Any] = dict(
        owner=f"{ctx.name}#{ctx.incarnation}",
        records=StoreClient(bus.transport, attempts=3),
        hooks=hooks,
        approvals=LanesApprovalChannel(bus.transport),
        global_config=cfg,
        services={"bash_limits": limits, "messengers": {}},
        roots=tuple(tools_cfg.get("roots") or ()),
        default_workspace=default_ws,
    )
    kw.update(overrides)
    return ToolExecutor(**kw)


def build(bus: Bus, ctx: ChildContext) -> ExecutorChild:
    """Registry builder: serve the executor (built-ins + MCP tools) on this child's bus."""
    hub, mcp_specs, mcp_handlers = connect_mcp(ctx.config)
    executor = executor_from_config(bus, ctx, handlers={**builtin_handlers(), **mcp_handlers})
    concurrency = int((ctx.config.get("tools") or {}).get("handlers", 32))
    service = ToolService(
        executor, name=ctx.name, incarnation=ctx.incarnation, catalogue=[*builtin_specs(), *mcp_specs]
    )
    bus.serve(ENDPOINT, service, concurrency=concurrency)
    log.info("executor %s serving (%d handler threads)", executor.owner, concurrency)
    assert executor.hooks is not None
    return ExecutorChild(executor, executor.hooks, hub)
