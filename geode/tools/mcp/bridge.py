"""MCP tools as ToolSpecs (``mcp__<server>__<tool>``, handler ``mcp:<server>/<tool>``) and their handlers."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from geode.redaction import MASK, is_secret_key, redact_text
from geode.tools.handlers import HandlerEntry, ToolEnv, ToolFailure
from geode.tools.mcp.gate import McpGate
from geode.tools.mcp.hub import McpCallLost, McpHub, McpProtocolError, McpUnavailable, describe_error
from geode.tools.mcp.policy import UNDECLARED, tool_policy, undeclared_reason
from geode.tools.spec import ToolSpec
from geode.tools.structured_text import carry

log = logging.getLogger(__name__)
_SAFE = re.compile(r"[^A-Za-z0-9_-]")
MAX_RESULT_STR = 200_000
DEADLINE_MARGIN_S = 2.0  # the executor's deadline for an MCP call is its timeout_s plus this
__all__ = ["UNDECLARED", "Overlay", "connect", "project", "redact_result", "tool_name"]


def tool_name(server: str, tool: str) -> str:
    return f"mcp__{server}__{_SAFE.sub('_', tool)}"[:64]


def redact_result(obj: Any, depth: int = 0) -> Any:
    """A tool result with credential-looking strings and values under secret-named keys masked."""
    if isinstance(obj, str):
        return redact_text(obj, MAX_RESULT_STR)
    if depth > 32:
        return obj
    if isinstance(obj, dict):
        return {
            k: MASK if isinstance(k, str) and is_secret_key(k) and v else redact_result(v, depth + 1)
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [redact_result(v, depth + 1) for v in obj]
    return obj


def project(result: Any) -> dict[str, Any]:
    """CallToolResult → JSON: structured content first, a lone text block as ``result``, else the blocks."""
    structured = getattr(result, "structured_content", None)
    blocks = [b.model_dump(mode="json", exclude_none=True) for b in (getattr(result, "content", None) or [])]
    if structured is not None:
        return dict(structured) if isinstance(structured, dict) else {"result": structured}
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        return {"result": blocks[0].get("text", "")}
    return {"content": blocks}


def _keyed_by_data(result: Any, projected: dict[str, Any]) -> bool:
    """Whether a projected result may hold maps keyed by data: structured content, or a content block's
    ``_meta`` (the server's free-form map, on the block or its embedded resource)."""
    if getattr(result, "structured_content", None) is not None:
        return True
    blocks = projected.get("content")
    if not isinstance(blocks, list):
        return False
    for b in blocks:
        resource = b.get("resource") if isinstance(b, dict) else None
        if isinstance(b, dict) and ("meta" in b or (isinstance(resource, dict) and "meta" in resource)):
            return True
    return False


def _handler(hub: McpHub, cfg: Any, tool: str, read_only: bool) -> HandlerEntry:
    def call(args: dict[str, Any], env: ToolEnv) -> dict[str, Any]:
        # the server's answer is awaited a little less than the executor's deadline (``deadline_s`` below), so
        # a call that outlives it is reported here, with its reason
        timeout_s = max(0.1, min(cfg.timeout_s, env.deadline_s - DEADLINE_MARGIN_S))
        try:
            result = hub.call(cfg.name, tool, args, timeout_s=timeout_s)
        except McpUnavailable as exc:
            raise ToolFailure(
                f"MCP server {cfg.name!r} is currently unavailable: {exc}", "tool_unavailable"
            ) from None
        except McpProtocolError as exc:
            raise ToolFailure(str(exc)[:2000], "mcp_protocol_error") from None
        except McpCallLost as exc:
            if not read_only:
                raise  # a mutation's outcome is unknown: its receipt becomes uncertain
            raise ToolFailure(str(exc), "mcp_call_lost") from None
        projected = redact_result(project(result))
        if getattr(result, "is_error", False):
            raise ToolFailure(f"MCP tool {tool!r} failed: {str(projected)[:2000]}", "mcp_tool_error")
        if _keyed_by_data(result, projected):  # its JSON text (geode.tools.structured_text: no map key that
            return carry(projected)  # a process unpacking it interns for good)
        return projected

    return HandlerEntry(call)


@dataclass
class ServerTools:
    """What one server contributed: tool names offered (runnable) and refused (undeclared)."""

    offered: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


@dataclass
class Overlay:
    """The MCP overlay of the executor's catalogue: specs, handlers, the gate, per-server tool counts."""

    specs: list[ToolSpec] = field(default_factory=list)
    handlers: dict[str, HandlerEntry] = field(default_factory=dict)
    gate: McpGate = field(default_factory=McpGate)
    servers: dict[str, ServerTools] = field(default_factory=dict)


def describe(hub: McpHub, cfg: Any, tools: Iterable[Any], overlay: Overlay) -> None:
    """Add one started server's tools to ``overlay`` under their policies."""
    counts = overlay.servers.setdefault(cfg.name, ServerTools())
    origin = getattr(cfg, "origin", "global") or "global"
    for t in tools:
        pol = tool_policy(cfg, t)
        name = tool_name(cfg.name, t.name)
        handler_id = f"mcp:{cfg.name}/{t.name}"
        overlay.specs.append(
            ToolSpec(
                name=name,
                description=(t.description or t.name)[:1024],
                input_schema=dict(t.input_schema or {"type": "object", "properties": {}}),
                handler=handler_id,
                policy=pol.policy,
                deadline_s=cfg.timeout_s + DEADLINE_MARGIN_S,
                scope="" if origin == "global" else origin,  # a project's tools: only inside it
            )
        )
        if pol.offered:
            read_only = pol.policy.effect.value == "read"
            if read_only and origin == "global" and pol.source in ("read_only_tools", "config"):
                overlay.gate.declared.add(name)  # the operator lifts the first-use ask; a hint does not
            overlay.handlers[handler_id] = _handler(hub, cfg, t.name, read_only)
            counts.offered.append(name)
        else:
            counts.refused.append(name)
            overlay.gate.refused[name] = undeclared_reason(cfg.name, t.name)


def connect(hub: McpHub, servers: Iterable[Any]) -> tuple[list[ToolSpec], dict[str, HandlerEntry]]:
    """Start every server and describe its tools (the specs and handlers of :func:`connect_overlay`)."""
    overlay = connect_overlay(hub, servers)
    return overlay.specs, overlay.handlers


def connect_overlay(hub: McpHub, servers: Iterable[Any]) -> Overlay:
    """Start every enabled server at once; a server that fails to start is logged and contributes nothing."""
    overlay = Overlay()
    enabled = [cfg for cfg in servers if getattr(cfg, "enabled", True)]
    for cfg in enabled:
        origin = getattr(cfg, "origin", "global") or "global"
        if origin != "global":
            overlay.gate.origins[cfg.name] = Path(origin)
    started = hub.start_all(enabled)
    for cfg in enabled:
        got = started.get(cfg.name)
        if isinstance(got, BaseException) or got is None:
            log.warning(
                "MCP server %s did not start: %s", cfg.name, describe_error(got) if got else "no answer"
            )
            overlay.servers.setdefault(cfg.name, ServerTools())
            continue
        describe(hub, cfg, got, overlay)
    return overlay
