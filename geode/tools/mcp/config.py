"""MCP server entries from GEODE's TOML (``[mcp.servers.<name>]``) or the common ``mcpServers`` JSON shape.

Each server may declare per-tool policies (``tools.<tool> = {effect = "mutate", resource_strategy = ...}``).
A tool without a declared policy is listed but never called (DESIGN §1: only declared MCP tools run).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from geode.protocol.errors import ConfigError
from geode.tools.spec import SafetyPolicy

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")


class McpServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    command: str
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    tools: dict[str, SafetyPolicy] = Field(default_factory=dict)  # declared policies by tool name
    timeout_s: float = Field(default=120.0, gt=0, le=900)
    startup_timeout_s: float = Field(default=20.0, gt=0, le=120)


def _entry(name: str, raw: Mapping[str, Any], where: str) -> McpServerConfig:
    if not _NAME.match(name):
        raise ConfigError(f"{where}: server name {name!r} must match [A-Za-z0-9_-]{{1,32}}")
    data = {k: v for k, v in raw.items() if k not in ("type", "disabled")}
    try:
        cfg = McpServerConfig(name=name, **data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise ConfigError(f"{where}.{name}: {loc}: {first.get('msg')}") from None
    for tool, pol in cfg.tools.items():
        if pol.effect.value != "read" and not pol.resource_strategy and not pol.denied:
            raise ConfigError(
                f"{where}.{name}.tools.{tool}: effect {pol.effect.value} needs a resource_strategy"
            )
    return cfg


def load_mcp_servers(config: Mapping[str, Any]) -> list[McpServerConfig]:
    """``[mcp.servers.<name>]`` tables plus a top-level ``mcpServers`` object (stdio servers only)."""
    out: dict[str, McpServerConfig] = {}
    mcp = config.get("mcp") or {}
    servers = mcp.get("servers") if isinstance(mcp, Mapping) else None
    for name, raw in (servers or {}).items():
        if isinstance(raw, Mapping) and not raw.get("disabled"):
            out[name] = _entry(name, raw, "mcp.servers")
    for name, raw in (config.get("mcpServers") or {}).items():
        if isinstance(raw, Mapping) and "command" in raw and not raw.get("disabled"):
            out.setdefault(name, _entry(name, raw, "mcpServers"))
    return list(out.values())
