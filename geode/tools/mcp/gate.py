"""The executor's MCP gate: the reason an undeclared MCP tool is refused, project servers kept to their
project's workspaces, and the first use of a server in an interactive session asking for approval (once per
server per session; not for a tool the operator's global config declares read-only — a server's own
readOnlyHint is its claim, not the operator's, so it still asks)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from geode.tools.spec import ToolContext, ToolSpec

INTERACTIVE = frozenset({"IPC", "REPL"})  # modes with a person at the other end of the approval prompt
MAX_SESSIONS = 1024


@dataclass(frozen=True)
class Refusal:
    message: str
    reason: str


def server_of(spec: ToolSpec) -> str | None:
    """The server name of an MCP tool (handler ``mcp:<server>/<tool>``), else None."""
    if not spec.handler.startswith("mcp:"):
        return None
    return spec.handler.removeprefix("mcp:").split("/", 1)[0]


class McpGate:
    """Thread-safe. ``refused`` maps undeclared tool names to their reason; ``origins`` maps a project
    server's name to its project directory (global servers are absent); ``declared`` holds the tools the
    operator's global config declares read-only (``read_only_tools``, or a ``tools.<t>`` read policy)."""

    def __init__(
        self,
        refused: dict[str, str] | None = None,
        origins: dict[str, str] | None = None,
        declared: set[str] | None = None,
    ) -> None:
        self.refused = dict(refused or {})
        self.origins = {k: Path(v) for k, v in (origins or {}).items()}
        self.declared = set(declared or ())
        self._approved: OrderedDict[str, set[str]] = OrderedDict()  # session → servers approved in it
        self._mu = threading.Lock()

    def unknown_tool(self, name: str) -> Refusal | None:
        """A call by name to a tool the plan does not hold: the reason when it is an undeclared MCP tool."""
        why = self.refused.get(name)
        return Refusal(why, "mcp_undeclared") if why else None

    def refusal(self, ctx: ToolContext, spec: ToolSpec) -> Refusal | None:
        """Refuse before dispatch: an undeclared tool, or a project server's tool outside its project."""
        why = self.refused.get(spec.name)
        if why and spec.policy.denied:
            return Refusal(why, "mcp_undeclared")
        server = server_of(spec)
        project = self.origins.get(server) if server else None
        if project is not None and not _inside(ctx.workspace, project):
            return Refusal(
                f"MCP server '{server}' comes from the project {project} and serves only sessions whose "
                f"workspace is inside it (this one: {ctx.workspace or 'none'}).",
                "mcp_project_scope",
            )
        return None

    def asks_first(self, ctx: ToolContext, spec: ToolSpec) -> bool:
        """True for the first call of a server's tools in an interactive session (until one is granted),
        unless the operator declared this tool read-only."""
        server = server_of(spec)
        if server is None or ctx.mode not in INTERACTIVE or spec.name in self.declared:
            return False
        with self._mu:
            return server not in self._approved.get(ctx.session_id, ())

    def granted(self, ctx: ToolContext, spec: ToolSpec) -> None:
        """A call was approved (or needed no approval): the session will not be asked for its server again."""
        server = server_of(spec)
        if server is None or ctx.mode not in INTERACTIVE:
            return
        with self._mu:
            self._approved.setdefault(ctx.session_id, set()).add(server)
            self._approved.move_to_end(ctx.session_id)
            while len(self._approved) > MAX_SESSIONS:
                self._approved.popitem(last=False)


def outside_scope(specs: Iterable[ToolSpec], workspace: str | Path) -> frozenset[str]:
    """Names of the scoped tools (``ToolSpec.scope``: a project's MCP tools) a session in ``workspace`` is
    not offered: its workspace is not inside their project."""
    return frozenset(s.name for s in specs if s.scope and not _inside(str(workspace), Path(s.scope)))


def _inside(workspace: str, project: Path) -> bool:
    if not workspace:
        return False
    try:
        Path(workspace).resolve().relative_to(project.resolve())
    except ValueError:
        return False
    return True
