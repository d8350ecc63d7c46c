"""The session-level hook events the loop fires (Claude Code's payloads): SessionStart (``source`` startup |
resume | compact; its ``additionalContext`` is kept in the session's checkpoint meta and enters the system
prompt's dynamic part on every later call) and Notification ``idle_prompt`` (a turn of a session with a
person at a terminal ended: the agent waits for the next prompt)."""

from __future__ import annotations

import logging
from typing import Any

from geode.loop.settings import LoopSettings
from geode.loop.state import TurnState

log = logging.getLogger(__name__)

CONTEXT_KEY = "session_context"  # checkpoint meta: the SessionStart hooks' additionalContext
CONTEXT_MAX = 10_000
PERSON_MODES = ("IPC", "REPL")


def correlation(state: TurnState, s: LoopSettings) -> dict[str, str]:
    return {"session_id": state.session_id, "turn_id": state.turn_id, "cwd": s.workspace, "mode": s.mode}


def session_start(state: TurnState, s: LoopSettings, hooks: Any, source: str) -> None:
    """Run SessionStart with ``source``; a non-empty context replaces the session's stored one."""
    run = getattr(hooks, "session_start", None)
    if run is None or s.subagent_depth:  # a sub-agent's session: SubagentStart fired in the executor
        return
    try:
        context = run({"source": source}, correlation(state, s))
    except Exception as exc:  # a hook never stops a turn from starting
        log.warning("SessionStart hooks (%s) failed: %s", source, exc)
        return
    if context:
        state.meta[CONTEXT_KEY] = context[:CONTEXT_MAX]


def notify_idle(state: TurnState, s: LoopSettings, hooks: Any) -> None:
    """Notification ``idle_prompt`` when a turn of a person's session (IPC / REPL) ended."""
    observe = getattr(hooks, "observe", None)
    if observe is None or s.mode not in PERSON_MODES or s.subagent_depth:
        return
    payload = {"message": "GEODE is waiting for your input", "notification_type": "idle_prompt"}
    try:
        observe("Notification", payload, correlation(state, s))
    except Exception as exc:  # observation only
        log.debug("Notification hook not run: %s", exc)
