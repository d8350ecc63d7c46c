"""The five session modes and their defaults: HITL level, approvals, time budget and default denylist, the
one rule for a session's limits (:func:`session_limits`), and the one AUTOMATION exception: the tools an
operator-defined job names explicitly (:func:`operator_granted`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Literal

from geode.config_schema import GeodeConfig
from geode.tools.mcp.gate import outside_scope
from geode.tools.spec import DataClass, ToolSpec


class SessionMode(StrEnum):
    IPC = "IPC"  # a thin CLI connection: approvals forwarded to the CLI
    REPL = "REPL"  # in-process interactive: approvals in the terminal
    DAEMON = "DAEMON"  # messenger threads, webhooks: nobody to ask
    HEADLESS = "HEADLESS"  # run_agent over MCP: nobody to ask
    AUTOMATION = "AUTOMATION"  # scheduled jobs (the scheduler child): nobody to ask, computer use never


Approvals = Literal["forward", "terminal", "deny"]


@dataclass(frozen=True)
class ModeDefaults:
    """What a mode fixes for every session it creates."""

    mode: SessionMode
    hitl_level: int
    approvals: Approvals
    time_budget_s: float | None  # None: unlimited
    headless: bool  # True: deny-by-default policy applies

    @property
    def interactive(self) -> bool:
        return self.approvals != "deny"


MODES: dict[SessionMode, ModeDefaults] = {
    SessionMode.IPC: ModeDefaults(SessionMode.IPC, 2, "forward", None, False),
    SessionMode.REPL: ModeDefaults(SessionMode.REPL, 2, "terminal", None, False),
    SessionMode.DAEMON: ModeDefaults(SessionMode.DAEMON, 0, "deny", 120.0, True),
    SessionMode.HEADLESS: ModeDefaults(SessionMode.HEADLESS, 0, "deny", 120.0, True),
    SessionMode.AUTOMATION: ModeDefaults(SessionMode.AUTOMATION, 0, "deny", 300.0, True),
}
AUTOMATION_ORIGIN = "scheduler"  # the peer lanes streams an AUTOMATION turn's events to (the scheduler child)
WEBHOOKS_ORIGIN = "webhooks"  # ... or, for a webhook delivery's AUTOMATION turn, the webhooks child

COMPUTER_TOOLS = frozenset({"computer", "computer_use"})
# Name-based residue for tools outside a plan (reference §2.2 step 5): execution and sub-agent control.
HEADLESS_DENIED_TOOLS = frozenset(
    {
        "run_bash",
        "delegate_task",
        "spawn_agent",
        "list_agents",
        "wait_agent",
        "interrupt_agent",
        "send_message_agent",
        "followup_task",
        "schedule_job",  # DAEMON: only a chat whose binding sets allow_schedule (schedule_allowed)
    }
    | COMPUTER_TOOLS
)
SCHEDULE_TOOL = "schedule_job"
# what no operator's job can grant in AUTOMATION: computer use, and making jobs (a job never makes jobs)
NEVER_GRANTED = COMPUTER_TOOLS | {SCHEDULE_TOOL}
# Personal-data tools known by name even when no plan spec says so (Google Workspace, calendar, mail).
PERSONAL_DATA_PREFIXES = ("gmail_", "google_", "calendar_", "gcal_", "contacts_", "gdrive_")


def computer_allowed_in_daemon(config: GeodeConfig | None) -> bool:
    """The one exception: computer use in DAEMON when the operator wrote the literal ``true`` in ``[daemon]``
    or ``[gateway]`` ``allow_computer_use`` of the global config (never the project's; a ``StrictBool``, so
    ``"true"`` or ``1`` is refused when the snapshot is built). None: the defaults (no exception)."""
    return config is not None and config.computer_use_in_daemon()


def computer_use_allowed(mode: SessionMode, config: GeodeConfig | None) -> bool:
    """Computer use without a person: only DAEMON, only a literal ``true`` in the global config (never
    AUTOMATION, whatever ``allow_computer_use`` says)."""
    if mode is not SessionMode.DAEMON:
        return mode in (SessionMode.IPC, SessionMode.REPL)
    return computer_allowed_in_daemon(config)


def operator_granted(mode: str, granted: Iterable[str], name: str) -> bool:
    """An AUTOMATION call to a tool the operator's job names explicitly in ``allowed_tools`` (``granted``):
    it passes the headless policy and runs without an approval (policy, not a prompt). Never computer use or
    schedule_job (:data:`NEVER_GRANTED`), never in another mode (a model-created job grants nothing)."""
    return mode == SessionMode.AUTOMATION.value and name in granted and name not in NEVER_GRANTED


def is_personal(name: str, spec: ToolSpec | None = None) -> bool:
    if spec is not None and spec.policy.data_class is DataClass.PERSONAL:
        return True
    return name.startswith(PERSONAL_DATA_PREFIXES)


def default_denylist(
    mode: SessionMode | str,
    *,
    config: GeodeConfig | None = None,
    plan_tools: Iterable[ToolSpec] = (),
    extra: Iterable[str] = (),
    schedule_allowed: bool = False,
) -> frozenset[str]:
    """Tools a session of ``mode`` may never see. IPC and REPL gate by approval instead (empty list).
    ``config`` is the typed snapshot (None: the defaults, so no computer-use exception).
    ``schedule_allowed``: a DAEMON chat whose binding sets ``allow_schedule`` (schedule_job offered)."""
    mode = SessionMode(mode)
    denied: set[str] = set(extra)
    if not MODES[mode].headless:
        return frozenset(denied)
    denied |= HEADLESS_DENIED_TOOLS
    for spec in plan_tools:
        if not spec.policy.allow_headless or is_personal(spec.name, spec) or spec.policy.denied:
            denied.add(spec.name)
        elif spec.name.startswith(PERSONAL_DATA_PREFIXES):
            denied.add(spec.name)
    if computer_use_allowed(mode, config):
        denied -= COMPUTER_TOOLS
    if schedule_allowed and mode is SessionMode.DAEMON:
        denied.discard(SCHEDULE_TOOL)
    return frozenset(denied)


@dataclass(frozen=True)
class SessionLimits:
    """What a mode limits a session (and each of its turns) to: a wall-clock budget and denied tools."""

    time_budget_s: float | None  # None: no mode budget ([loop] time_budget_s applies)
    denied_tools: frozenset[str]


def session_limits(
    mode: SessionMode | str,
    config: GeodeConfig | None,
    *,
    tools: Iterable[ToolSpec] = (),
    workspace: str | Path = "",
    time_budget_override: float | None = None,
    schedule_allowed: bool = False,
) -> SessionLimits:
    """The one rule for a session's budget and denylist, used when a session is composed and again for a
    turn whose session spec carries none: the override or the mode's budget (0 or less: none); the mode's
    default denylist plus the scoped tools (a project's MCP tools) outside ``workspace``."""
    mode = SessionMode(mode)
    specs = tuple(tools)
    denied = default_denylist(mode, config=config, plan_tools=specs, schedule_allowed=schedule_allowed)
    denied |= outside_scope(specs, workspace)
    budget = time_budget_override if time_budget_override is not None else MODES[mode].time_budget_s
    return SessionLimits(budget if budget and budget > 0 else None, denied)
