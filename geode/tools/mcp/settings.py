"""``[mcp]`` (``[mcp.servers.<name>]``, ``[mcp.serve]``), the top-level ``mcpServers`` table and ``[trust]``:
the MCP client's sections, a leaf the MCP config loader and the trust gate read."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, model_validator

from geode.mcp_server.settings import McpServeSection
from geode.tools.spec import SafetyPolicy

SERVER_TIMEOUT_S = 120.0  # one MCP tool call (s)
STARTUP_TIMEOUT_S = 20.0  # a server's start and handshake (s)
HTTP_TYPES = frozenset({"http", "streamable-http", "streamable_http", "streamableHttp"})
STDIO_TYPES = frozenset({"stdio"})


class McpServerTable(BaseModel):
    """``[mcp.servers.<name>]``: one MCP server, stdio (``command``...) or streamable HTTP (``url``...)."""

    model_config = ConfigDict(extra="forbid")
    command: str | None = None  # stdio
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None  # streamable HTTP
    headers: dict[str, str] = Field(default_factory=dict)
    resource_keys: list[str] = Field(default_factory=list)  # lock keys for the server's mutating tools
    read_only_tools: list[str] = Field(default_factory=list)  # tools the config declares read-only
    tools: dict[str, SafetyPolicy] = Field(default_factory=dict)  # explicit policies by tool name (win)
    enabled: bool = True
    timeout_s: float = Field(default=SERVER_TIMEOUT_S, gt=0, le=900)
    startup_timeout_s: float = Field(default=STARTUP_TIMEOUT_S, gt=0, le=120)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerTable:
        if (self.command is None) == (self.url is None):
            raise ValueError(_transport_msg(self.command is not None))
        if self.url is not None and not re.match(r"^https?://[^\s/]+", self.url):
            raise ValueError(f"url {self.url!r} must start with http:// or https://")
        if self.command is not None and not self.command.strip():
            raise ValueError("command is empty")
        if any(not k.strip() for k in self.resource_keys):
            raise ValueError("resource_keys entries must be non-empty strings")
        return self

    @property
    def transport(self) -> Literal["stdio", "http"]:
        return "stdio" if self.command is not None else "http"


def _transport_msg(both: bool) -> str:
    if both:
        return "give either command (stdio) or url (streamable HTTP), not both"
    return "needs command (a stdio server) or url (a streamable HTTP server)"


def json_shape_error(raw: dict[str, object]) -> str | None:
    """What is wrong with an entry's ``type`` (the ``mcpServers`` JSON shape), or None."""
    kind = raw.get("type")
    if kind is None:
        return None
    if kind == "sse":
        return "type 'sse' is not supported; use type 'http'"
    if kind not in HTTP_TYPES | STDIO_TYPES:
        return f"type {kind!r} unknown; use 'stdio' or 'http'"
    if kind in HTTP_TYPES and "url" not in raw:
        return f"type {kind!r} needs a url"
    if kind in STDIO_TYPES and "command" not in raw:
        return "type 'stdio' needs a command"
    return None


class McpJsonServer(McpServerTable):
    """``[mcpServers.<name>]``: the common JSON shape (``.mcp.json`` too): the same keys, and ``type``
    (``"stdio"`` or ``"http"``) and ``disabled`` instead of ``enabled``."""

    type: str | None = None
    disabled: StrictBool = False

    @model_validator(mode="before")
    @classmethod
    def _json_shape(cls, data: object) -> object:
        if isinstance(data, dict) and (problem := json_shape_error(data)) is not None:
            raise ValueError(problem)
        return data


class McpSection(BaseModel):
    """``[mcp]``: ``[mcp.servers.<name>]`` (also checked by ``load_mcp_servers``, whose errors name the entry)
    and ``[mcp.serve]``."""

    servers: dict[str, McpServerTable] = Field(default_factory=dict)
    serve: McpServeSection = McpServeSection()  # ``[mcp.serve]``: `geode mcp` as a server (its HTTP token)


class TrustSection(BaseModel):
    """``[trust]``: directories whose ``.geode/config.toml`` and ``.mcp.json`` are read (``geode trust``)."""

    projects: list[str] = Field(default_factory=list)
