"""MCP tools as ToolSpecs (``mcp__<server>__<tool>``, handler ``mcp:<server>/<tool>``) and their handlers."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from typing import Any

from geode.redaction import redact_text
from geode.tools.handlers import HandlerEntry, ToolEnv, ToolFailure
from geode.tools.mcp.config import McpServerConfig
from geode.tools.mcp.hub import McpHub, McpUnavailable
from geode.tools.spec import SafetyPolicy, ToolSpec

log = logging.getLogger(__name__)
UNDECLARED = SafetyPolicy(denied=True)  # listed so it is visible in status, never called
_SAFE = re.compile(r"[^A-Za-z0-9_-]")


def tool_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{_SAFE.sub('_', tool)}"[:64]


def project(result: Any) -> dict[str, Any]:
    """CallToolResult → JSON: structured content first, a lone text block as ``result``, else the blocks."""
    structured = getattr(result, "structured_content", None)
    blocks = [b.model_dump(mode="json", exclude_none=True) for b in (getattr(result, "content", None) or [])]
    if structured is not None:
        return dict(structured) if isinstance(structured, dict) else {"result": structured}
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        return {"result": blocks[0].get("text", "")}
    return {"content": blocks}


def _handler(hub: McpHub, cfg: McpServerConfig, tool: str) -> HandlerEntry:
    def call(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
        try:
            result = hub.call(cfg.name, tool, args, timeout_s=min(cfg.timeout_s, env.deadline_s))
        except McpUnavailable as exc:
            raise ToolFailure(
                f"MCP server {cfg.name!r} is currently unavailable: {exc}", "tool_unavailable"
            ) from None
        projected = project(result)
        if getattr(result, "is_error", False):
            raise ToolFailure(f"MCP tool {tool!r} failed: {str(projected)[:2000]}", "mcp_tool_error")
        return projected

    return HandlerEntry(call)


def connect(
    hub: McpHub, servers: Iterable[McpServerConfig]
) -> tuple[list[ToolSpec], dict[str, HandlerEntry]]:
    """Start every server and describe its tools; a server that fails to start is logged and skipped."""
    specs: list[ToolSpec] = []
    handlers: dict[str, HandlerEntry] = {}
    for cfg in servers:
        try:
            tools = hub.start(cfg)
        except Exception as exc:
            log.warning("MCP server %s did not start: %s", cfg.name, redact_text(str(exc), 500))
            continue
        for t in tools:
            declared = cfg.tools.get(t.name)
            handler_id = f"mcp:{cfg.name}/{t.name}"
            specs.append(
                ToolSpec(
                    name=tool_name(cfg.name, t.name),
                    description=(t.description or t.name)[:1024],
                    input_schema=dict(t.input_schema or {"type": "object", "properties": {}}),
                    handler=handler_id,
                    policy=declared or UNDECLARED,
                    deadline_s=cfg.timeout_s,
                )
            )
            if declared is not None:
                handlers[handler_id] = _handler(hub, cfg, t.name)
    return specs, handlers
