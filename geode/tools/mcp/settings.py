"""``[mcp]`` (``[mcp.servers.<name>]``, ``[mcp.serve]``), the top-level ``mcpServers`` table and ``[trust]``:
the MCP client's sections, a leaf the MCP config loader and the trust gate read."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from geode.mcp_server.settings import McpServeSection


class McpSection(BaseModel):
    """``[mcp.servers.<name>]`` (checked by ``load_mcp_servers``): command/args/env/cwd or url/headers,
    resource_keys, read_only_tools, tools, enabled, timeout_s, startup_timeout_s."""

    servers: dict[str, dict[str, Any]] = Field(default_factory=dict)
    serve: McpServeSection = McpServeSection()  # ``[mcp.serve]``: `geode mcp` as a server (its HTTP token)


class TrustSection(BaseModel):
    """``[trust]``: directories whose ``.geode/config.toml`` and ``.mcp.json`` are read (``geode trust``)."""

    projects: list[str] = Field(default_factory=list)
