"""Authority checks on one request: monotonic rewrites, declared/headless/sub-agent/mode policy, roots."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geode.sessions.modes import (
    MODES,
    SCHEDULE_TOOL,
    SessionMode,
    computer_allowed_in_daemon,
    default_denylist,
    operator_granted,
)
from geode.tools.paths import InvalidPath, PathOutsideRoots, checked_path
from geode.tools.spec import ApprovalMode, DataClass, EffectClass, SafetyPolicy, ToolContext, ToolSpec

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig

_APPROVAL_RANK = {ApprovalMode.NONE: 0, ApprovalMode.CACHED: 1, ApprovalMode.PER_INVOCATION: 2}
COMPUTER_TOOLS = frozenset({"computer", "computer_use"})
CHAT = "messengers"  # the origin of a bound chat's turns


class PolicyDenial(Exception):
    """A check refused the call; ``error_type`` and ``reason`` travel in the error result."""

    def __init__(self, message: str, error_type: str = "tool_policy_denied", reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.error_type = error_type
        self.reason = reason


def check_monotonic(old: ToolSpec, new: ToolSpec) -> None:
    """A rewrite may keep or strengthen the safety level; it may never weaken it or drop personal data."""
    a, b = old.policy, new.policy
    if a.data_class is DataClass.PERSONAL and b.data_class is not DataClass.PERSONAL:
        raise PolicyDenial(
            f"Rewrite of '{old.name}' into '{new.name}' drops its personal-data classification.",
            "privacy_classification_downgrade",
        )
    weaker = (
        _APPROVAL_RANK[b.approval] < _APPROVAL_RANK[a.approval]
        or (a.effect is not EffectClass.READ and b.effect is not a.effect)
        or (b.allow_headless and not a.allow_headless)
        or (b.allow_subagents and not a.allow_subagents)
        or (a.denied and not b.denied)
    )
    if weaker:
        raise PolicyDenial(
            f"Rewrite of '{old.name}' into '{new.name}' would weaken its safety policy.",
            "tool_policy_downgrade",
        )


def is_headless(mode: str) -> bool:
    try:
        return MODES[SessionMode(mode)].headless
    except ValueError:
        return True  # an unknown mode has nobody to ask


def check_runtime_policy(ctx: ToolContext, spec: ToolSpec, config: GeodeConfig) -> None:
    """Declared denial → headless policy → sub-agent policy → the mode's default denylist (DESIGN §6). An
    AUTOMATION call to a tool the operator's job names (``ctx.granted_tools``) passes the headless policy
    and the denylist; never a declared denial, the sub-agent policy or computer use."""
    pol: SafetyPolicy = spec.policy
    name = spec.name
    granted = operator_granted(ctx.mode, ctx.granted_tools, name)
    # schedule_job in a chat's DAEMON turn: the chat's binding decides (the executor's schedule rule)
    chat_schedule = name == SCHEDULE_TOOL and ctx.mode == SessionMode.DAEMON.value and ctx.origin == CHAT
    exception = granted or chat_schedule or (
        name in COMPUTER_TOOLS and ctx.mode == SessionMode.DAEMON.value and computer_allowed_in_daemon(config)
    )
    if pol.denied:
        raise PolicyDenial(f"Tool '{name}' is denied by its declared policy.", reason="declared")
    if is_headless(ctx.mode) and not pol.allow_headless and not exception:
        raise PolicyDenial(f"Tool '{name}' is unavailable under headless policy.", reason="headless")
    if ctx.subagent_depth > 0 and not pol.allow_subagents:
        raise PolicyDenial(f"Tool '{name}' is unavailable under sub-agent policy.", reason="subagent")
    if is_headless(ctx.mode) and not granted:
        try:
            denied = default_denylist(
                ctx.mode, config=config, plan_tools=(spec,), schedule_allowed=chat_schedule
            )
        except ValueError:
            denied = frozenset({name})
        if name in denied:
            raise PolicyDenial(f"Tool '{name}' is denied in {ctx.mode} mode.", reason="mode_denylist")


def check_paths(
    args: Mapping[str, Any], path_args: tuple[str, ...], workspace: Path, roots: tuple[Path, ...]
) -> None:
    """Every path argument must be a valid path resolving inside an allowed root (default: the workspace)
    and outside the GEODE home (``roots`` carry the exclusion, see ``geode.tools.paths.AllowedRoots``)."""
    for key in path_args:
        raw = args.get(key)
        if raw is None or raw == "":
            continue
        try:
            checked_path(workspace, roots, str(raw))
        except InvalidPath as exc:
            raise PolicyDenial(
                f"Invalid path in {key!r}: {exc}.", "invalid_tool_input", reason="invalid_path"
            ) from None
        except PathOutsideRoots as exc:
            raise PolicyDenial(f"{exc}; refused by the workspace policy.", reason=exc.reason) from None
