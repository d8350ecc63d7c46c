"""Messages of the tools area: bind a plan, execute one call, cancel, the catalogue (docs/tools.md)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from geode.protocol.catalog import message
from geode.tools.spec import ToolCall, ToolContext, ToolResult, ToolSpec


class PlanBind(BaseModel):
    """A BoundToolPlan on the wire (``BoundToolPlan.to_wire()``); the executor re-hashes and checks it."""

    v: int = 1
    generation: int = Field(ge=1)
    content_hash: str = Field(min_length=1, max_length=128)
    lineage: str = "default"
    base_hash: str = ""
    specs: list[dict[str, Any]] = Field(default_factory=list, max_length=512)


class PlanBound(BaseModel):
    content_hash: str
    generation: int
    tools: int


class ToolExecute(BaseModel):
    """Run one call against a bound plan (``ctx.plan_hash`` / ``ctx.plan_generation``)."""

    ctx: ToolContext
    call: ToolCall


class ToolCancel(BaseModel):
    """Cancel a turn's calls (or a whole session's when ``turn_id`` is empty): prompts deny, handlers see the
    cancel flag, later calls of that turn are refused before they start."""

    session_id: str = Field(min_length=1, max_length=128)
    turn_id: str = Field(default="", max_length=128)


class ToolCancelled(BaseModel):
    touched: int


class CatalogueQuery(BaseModel):
    """The tools this executor can run (built-ins plus connected MCP servers), for plan compilation."""


class Catalogue(BaseModel):
    specs: list[ToolSpec]


PLAN_BIND = message("tool.plan.bind", PlanBind, PlanBound)
EXECUTE = message("tool.execute", ToolExecute, ToolResult)
CANCEL = message("tool.cancel", ToolCancel, ToolCancelled)
CATALOGUE = message("tool.catalogue", CatalogueQuery, Catalogue)


class McpServersQuery(BaseModel):
    """The executor's MCP servers as ``geode mcp-servers`` lists them."""


class McpServerRow(BaseModel):
    """One configured server: where it came from, its state, and how many of its tools run or are refused."""

    name: str
    transport: str  # stdio | http
    origin: str = "global"  # "global" or the trusted project directory
    state: str  # running | starting | restarting | exited | failed | disabled | stopped | pending approval
    reason: str = ""  # exited: how ("killed by SIGKILL while idle", "exited with code 1 while idle")
    next_try_s: float | None = None  # restarting / exited: seconds until the next call may restart it
    restarts: int = 0
    offered: list[str] = Field(default_factory=list)  # tool names the model is offered
    refused: list[str] = Field(default_factory=list)  # undeclared tools: never offered, refused by name


class McpServers(BaseModel):
    servers: list[McpServerRow] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)  # ignored or invalid config (one line each)


MCP_SERVERS = message("tool.mcp.servers", McpServersQuery, McpServers)


class ExecutorReady(BaseModel):
    """A remote executor (on a worker host) registers with main's executor: it serves the tool calls of
    sessions whose workspace lies under ``roots``; its receipts are owned by ``HOST/NAME#INCARNATION``."""

    host: str = Field(min_length=1, max_length=40, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    name: str = Field(default="executor", min_length=1, max_length=20)
    incarnation: int = Field(ge=0)
    roots: list[str] = Field(default_factory=list, max_length=64)
    address: str = Field(default="", max_length=200)
    pid: int = 0


class ExecutorHeartbeat(BaseModel):
    """A registered remote executor is alive (every second; three missed = lost, its effects uncertain)."""

    host: str = Field(min_length=1, max_length=40)
    name: str = Field(default="executor", min_length=1, max_length=20)
    incarnation: int = Field(ge=0)


class ExecutorKnown(BaseModel):
    """``known`` False: register again (main's executor restarted, or it already declared this one lost)."""

    known: bool
    heartbeat_s: float = 1.0
    liveness_s: float = 3.0


class HostsQuery(BaseModel):
    """The remote executors main's executor routes to (``geode status`` hosts view)."""


class HostRow(BaseModel):
    host: str
    address: str = ""
    name: str
    incarnation: int
    state: str  # up | lost
    last_seen_s: float  # seconds since its last heartbeat
    effects_in_flight: int = 0
    roots: list[str] = Field(default_factory=list)


class Hosts(BaseModel):
    hosts: list[HostRow] = Field(default_factory=list)


EXECUTOR_READY = message("executor.ready", ExecutorReady, ExecutorKnown)
EXECUTOR_HEARTBEAT = message("executor.heartbeat", ExecutorHeartbeat, ExecutorKnown)
HOSTS = message("tool.hosts", HostsQuery, Hosts)
