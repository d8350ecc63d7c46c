"""``create_session(mode, ...)``: the one place a session's authority and model are decided."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.memory.scopes import OPERATOR, parse_scope
from geode.sessions.modes import MODES, SessionMode, session_limits
from geode.sessions.settings import config_snapshot, current_model
from geode.tools.plan import BoundToolPlan, compile_plan
from geode.tools.spec import ToolSpec


def _valid_scope(scope: str) -> str:
    parse_scope(scope)
    return scope


class SessionSpec(BaseModel):
    """Everything the executor and the loop of one session are built from (as a pair)."""

    model_config = ConfigDict(frozen=True)
    session_id: str
    mode: SessionMode
    workspace: str
    hitl_level: int
    approvals: str  # forward | terminal | deny
    time_budget_s: float | None
    denied_tools: frozenset[str]
    allowed_tools: frozenset[str] | None = None  # a binding's allowlist; None = no allowlist
    granted_tools: frozenset[str] = frozenset()  # AUTOMATION: an operator job's explicit tools (no approval)
    model: str
    provider: str
    model_origin: str = "default"
    visible_tools: tuple[str, ...] = ()  # the plan's tools after denylist and allowlist, in plan order
    plan: Any = Field(default=None, exclude=True)  # the BoundToolPlan projected onto the provider
    # the session's plan (catalogue + its allow/deny lists, before provider projection): the loop worker
    # compiles the same from the executor's catalogue and notes a mismatch (the catalogue changed since)
    plan_hash: str = ""
    plan_generation: int = 0
    origin: str = ""
    skip_permissions: bool = False
    creator: str = ""  # an MCP session's creator (HEADLESS handshake), recorded in its checkpoint meta
    # whose session: operator | chat:<platform>-<chat> | job:<name> | hook:<route> | "" (geode.memory.scopes);
    # recorded once in its checkpoint meta; memory and search never cross scopes
    scope: Annotated[str, AfterValidator(_valid_scope)] = ""

    @property
    def interactive(self) -> bool:
        return self.approvals != "deny"

    def permits(self, tool_name: str) -> bool:
        if tool_name in self.denied_tools:
            return False
        return self.allowed_tools is None or tool_name in self.allowed_tools

    def turn_settings(self, session_id: str | None = None) -> dict[str, Any]:
        """The ``turn.run`` settings a turn of this session carries to lanes and its loop worker, where
        ``compose_turn`` builds the turn from them: the spec's JSON dump without the plan (its hash and
        generation travel), the tool lists sorted; ``session_id`` when the turn runs in another session."""
        settings = self.model_dump(mode="json", exclude={"plan"})
        settings.update(
            session_id=session_id or self.session_id,
            denied_tools=sorted(self.denied_tools),
            granted_tools=sorted(self.granted_tools),
        )
        if self.allowed_tools is not None:
            settings["allowed_tools"] = sorted(self.allowed_tools)
        return settings


def _default_scope(mode: SessionMode) -> str:
    """The operator's own CLI sessions are "operator"; the rest have none unless their creator names one."""
    return OPERATOR if mode in (SessionMode.IPC, SessionMode.REPL) else ""


def new_session_id() -> str:
    return f"s-{uuid.uuid4().hex[:16]}"


def _project_bound(plan: Any, provider: str, names: frozenset[str]) -> Any:
    """A BoundToolPlan (geode.tools.plan) filtered to the visible names, then projected onto the provider."""
    return plan.filtered(allowed=names).projected(provider)


def _generation(base: Any, session_plan: BoundToolPlan | None) -> int:
    """The session plan's generation in the catalogue's lineage (the base plan's, + 1 when filtered)."""
    if session_plan is None:
        return 0
    return base.generation if session_plan.content_hash == base.content_hash else base.generation + 1


PlanProjector = Callable[[Any, str, frozenset[str]], Any]  # (plan, provider, visible names) -> plan


def create_session(
    mode: SessionMode | str,
    *,
    home: GeodeHome | None = None,
    session_id: str | None = None,
    workspace: str | os.PathLike[str] | None = None,
    time_budget_override: float | None = None,
    allowed_tool_names: Iterable[str] | None = None,
    model_override: str | None = None,
    plan: Any = None,
    plan_tools: Iterable[ToolSpec] | None = None,
    project: PlanProjector | None = None,
    origin: str = "",
    skip_permissions: bool = False,
    env: Mapping[str, str] | None = None,
    config: GeodeConfig | None = None,
    schedule_allowed: bool = False,
    scope: str | None = None,
) -> SessionSpec:
    """Compose a session: mode defaults, denylist and budget (:func:`session_limits`, the rule a turn without
    a session spec gets too), allowlist, projected plan. ``config`` is the caller's typed snapshot (None: the
    home's, as :func:`config_snapshot` reads it now). ``scope``: whose session (None: ``"operator"`` for IPC
    and REPL, none for the rest; chats, jobs and webhook routes pass theirs)."""
    mode = SessionMode(mode)
    home = home or GeodeHome.from_env()
    defaults = MODES[mode]
    cfg = config if config is not None else config_snapshot(home)
    choice = current_model(home, override=model_override, env=env, config=cfg)
    tools = tuple(plan_tools if plan_tools is not None else getattr(plan, "tools", ()) or ())
    if isinstance(tools and tools[0], str):  # a plan listing names only
        tools = ()
    ws = Path(workspace) if workspace is not None else Path.cwd()
    # a project's tools (a trusted project's MCP servers) are offered only inside that project
    limits = session_limits(
        mode,
        cfg,
        tools=tools,
        workspace=ws,
        time_budget_override=time_budget_override,
        schedule_allowed=schedule_allowed,  # a DAEMON chat whose binding allows schedule_job
    )
    denied = limits.denied_tools
    allowed = frozenset(allowed_tool_names) if allowed_tool_names is not None else None
    visible = tuple(t.name for t in tools if t.name not in denied and (allowed is None or t.name in allowed))
    project = project or (
        _project_bound if hasattr(plan, "filtered") and hasattr(plan, "projected") else None
    )
    projected = project(plan, choice.provider, frozenset(visible)) if (project and plan is not None) else plan
    session_plan = (
        compile_plan(tools, allowed=allowed, denied=denied) if isinstance(plan, BoundToolPlan) else None
    )
    names = getattr(projected, "tool_names", None)
    if isinstance(names, tuple) and projected is not plan:
        visible = tuple(n for n in visible if n in names)
    return SessionSpec(
        session_id=session_id or new_session_id(),
        mode=mode,
        workspace=str(ws.resolve()),
        hitl_level=defaults.hitl_level,
        approvals=defaults.approvals,
        time_budget_s=limits.time_budget_s,
        denied_tools=denied,
        allowed_tools=allowed,
        model=choice.model,
        provider=choice.provider,
        model_origin=choice.origin,
        visible_tools=visible,
        plan=projected,
        plan_hash=session_plan.content_hash if session_plan is not None else "",
        plan_generation=_generation(plan, session_plan),
        origin=origin,
        skip_permissions=bool(skip_permissions) and mode in (SessionMode.IPC, SessionMode.REPL),
        scope=_default_scope(mode) if scope is None else scope,
    )
