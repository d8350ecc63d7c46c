"""What a turn runs with on a loop worker: its settings (the session spec lanes forwards over ``[loop]`` /
``[verify]``, the mode's budget and denylist), its prompt sources and the loop's hooks."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from geode.loop import LoopSettings
from geode.prompt import PromptSources
from geode.protocol import turns
from geode.tools.plan import BoundToolPlan

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig

log = logging.getLogger("actors.loop_worker")


def turn_settings(run: turns.TurnRun, config: GeodeConfig, plan: BoundToolPlan | None = None) -> LoopSettings:
    """Turn settings (the session spec lanes forwards) over ``[loop]`` / ``[verify]`` config."""
    raw = dict(run.settings)
    if raw.get("time_budget_s") is None:
        raw.pop("time_budget_s", None)
        budget = _mode_budget(run.mode)
        if budget:
            raw["time_budget_s"] = budget
    if raw.get("denied_tools") is None:
        raw["denied_tools"] = sorted(_mode_denylist(run.mode, config, plan))
    loop = config.loop
    base: dict[str, Any] = {k: v for k, v in loop if k in LoopSettings.model_fields}
    base.update(verify=config.verify, mode=run.mode, origin=run.origin)
    settings = LoopSettings.from_mapping(raw, **base)
    window_set = "context_window_tokens" in raw or "context_window_tokens" in loop.model_fields_set
    if not window_set and settings.model:
        try:
            from geode.providers.catalogue import model_info

            window = model_info(settings.model).context_window
            settings = settings.model_copy(update={"context_window_tokens": window})
        except Exception as exc:  # an unknown model keeps the default window
            log.debug("no context window for %s: %s", settings.model, exc)
    return settings


def turn_prompt(settings: LoopSettings, rules_dir: Path) -> PromptSources:
    """The prompt's sources: the session's workspace and the home's rules."""
    ws = Path(settings.workspace) if settings.workspace else None
    return PromptSources(workspace=ws, home_rules=rules_dir)


def loop_hooks(config: dict[str, Any], base_dir: Any = None) -> Any:
    """UserPromptSubmit / PostVerify / Stop hooks from the global ``[hooks]`` tables (shared HookRunner)."""
    from geode.hooks.config import load_hooks
    from geode.hooks.runner import HookRunner
    from geode.loop.hook_bridge import RunnerHooks

    return RunnerHooks(HookRunner(load_hooks(config, base_dir=base_dir)))


def _mode_budget(mode: str) -> float | None:
    from geode.sessions.modes import MODES, SessionMode

    try:
        return MODES[SessionMode(mode)].time_budget_s
    except (ValueError, KeyError):  # not a session mode: no mode budget
        return None


def _mode_denylist(mode: str, config: GeodeConfig, plan: BoundToolPlan | None) -> frozenset[str]:
    """The mode's default denylist when the turn did not carry one (deny by default without a person)."""
    from geode.sessions.modes import default_denylist

    try:
        return default_denylist(mode, global_config=config, plan_tools=plan.specs if plan else ())
    except ValueError:  # not a session mode: no default denylist
        return frozenset()
