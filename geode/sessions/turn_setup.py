"""A turn's composition, once for every path (:func:`compose_turn`): its settings (the session spec lanes
forwards, over ``[loop]`` / ``[verify]``, with the mode's budget and denylist where the spec has none), its
tool plan and its prompt sources; and the loop's hooks. The loop worker only wires what this returns."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from geode.config_schema import GeodeConfig
from geode.loop import LoopSettings
from geode.loop.settings import LOOP_FIELDS
from geode.memory.prompt_block import memory_block
from geode.prompt import PromptSources
from geode.protocol import turns
from geode.sessions.modes import SessionMode, session_limits
from geode.skills.prompt_block import skill_cards
from geode.tools.plan import BoundToolPlan, compile_plan

log = logging.getLogger("actors.loop_worker")


PlanFor = Callable[[BoundToolPlan, LoopSettings], BoundToolPlan]  # (catalogue, settings) -> the turn's plan


@dataclass(frozen=True)
class ComposedTurn:
    """What one turn runs with: its settings, its tool plan (None: no tools) and its prompt's sources."""

    settings: LoopSettings
    plan: BoundToolPlan | None
    prompt: PromptSources


def compose_turn(
    run: turns.TurnRun,
    config: GeodeConfig,
    *,
    catalogue: BoundToolPlan | None,
    rules_dir: Path,
    plan_for: PlanFor | None = None,
) -> ComposedTurn:
    """Compose one turn from its ``turn.run`` and the typed config snapshot: settings (:func:`turn_settings`),
    the catalogue with the session's allow/deny lists (``plan_for``: the worker's cached builder, the same
    rule as :func:`session_plan`), and the prompt's sources (:func:`turn_prompt`)."""
    settings = turn_settings(run, config, catalogue)
    plan = None if catalogue is None else (plan_for or session_plan)(catalogue, settings)
    prompt = turn_prompt(settings, rules_dir)
    prompt.memory = memory_block(  # the scope's MEMORY.md files, read as the turn starts
        rules_dir.parent,
        settings.scope,
        workspace=prompt.workspace,
        projects=config.trust.projects,
        max_bytes=config.memory.max_bytes,
    )
    if plan is not None and plan.get("use_skill") is not None:  # names and descriptions (geode/skills/)
        prompt.skills = skill_cards(rules_dir.parent, prompt.workspace, config.trust.projects)
    return ComposedTurn(settings, plan, prompt)


def session_plan(catalogue: BoundToolPlan, settings: LoopSettings) -> BoundToolPlan:
    """The catalogue with the turn's allowlist (None: all) and denylist applied."""
    return compile_plan(catalogue.specs, allowed=settings.allowed_tools, denied=settings.denied_tools)


def turn_settings(run: turns.TurnRun, config: GeodeConfig, plan: BoundToolPlan | None = None) -> LoopSettings:
    """Turn settings (the session spec lanes forwards) over ``[loop]`` / ``[verify]`` config. A spec without a
    budget or a denylist gets the session rule's (:func:`session_limits`: the mode's, and the scoped tools
    outside its workspace), as a session composed for the same mode would."""
    raw = dict(run.settings)
    missing_budget, missing_denied = raw.get("time_budget_s") is None, raw.get("denied_tools") is None
    if missing_budget:
        raw.pop("time_budget_s", None)
    if (missing_budget or missing_denied) and run.mode in SessionMode.__members__:
        limits = session_limits(
            run.mode, config, tools=plan.specs if plan else (), workspace=str(raw.get("workspace") or "")
        )
        if missing_budget and limits.time_budget_s:
            raw["time_budget_s"] = limits.time_budget_s
        if missing_denied:
            raw["denied_tools"] = sorted(limits.denied_tools)
    loop = config.loop
    base: dict[str, Any] = {
        **_loop_base(loop),
        "verify": config.verify,
        "mode": run.mode,
        "origin": run.origin,
    }
    window_set = "context_window_tokens" in raw or "context_window_tokens" in loop.model_fields_set
    model = raw["model"] if "model" in raw else base.get("model")
    early = False
    if not window_set and isinstance(model, str) and model:  # the window validated with the rest: no copy
        early = True
        window = _context_window(model)
        if window is not None:
            raw["context_window_tokens"] = window
    settings = LoopSettings.from_mapping(raw, **base)
    if not early and not window_set and settings.model:
        window = _context_window(settings.model)
        if window is not None:
            settings = settings.model_copy(update={"context_window_tokens": window})
    return settings


def _context_window(model: str) -> int | None:
    """The catalogue's context window of ``model`` (None: an unknown model keeps the default window)."""
    try:
        from geode.providers.catalogue import model_info

        return model_info(model).context_window
    except Exception as exc:
        log.debug("no context window for %s: %s", model, exc)
        return None


_BASE: tuple[object, dict[str, Any]] | None = None  # the last [loop] section and its LoopSettings fields


def _loop_base(loop: Any) -> dict[str, Any]:
    """``[loop]``'s values of LoopSettings fields, once per config snapshot (a worker keeps its snapshot; a
    reload gives a new section object). Callers copy it; nobody writes to it."""
    global _BASE
    kept = _BASE
    if kept is not None and kept[0] is loop:
        return kept[1]
    base = {k: v for k, v in loop if k in LOOP_FIELDS}
    _BASE = (loop, base)
    return base


def turn_prompt(settings: LoopSettings, rules_dir: Path) -> PromptSources:
    """The prompt's sources: the session's workspace and the home's rules."""
    ws = Path(settings.workspace) if settings.workspace else None
    return PromptSources(workspace=ws, home_rules=rules_dir)


def loop_hooks(config: GeodeConfig, base_dir: Any = None) -> Any:
    """UserPromptSubmit / PostVerify / Stop hooks from the snapshot's ``[hooks]`` (shared HookRunner)."""
    from geode.hooks.config import hooks_of
    from geode.hooks.runner import HookRunner
    from geode.loop.hook_bridge import RunnerHooks

    return RunnerHooks(HookRunner(hooks_of(config, base_dir=base_dir)))
