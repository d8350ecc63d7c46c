"""SessionEnd hooks (Claude Code's event) run by host control when a client that ran turns in a session
leaves: ``reason`` ``prompt_input_exit`` (the client said exit) or ``other`` (it disconnected, or went
silent past the idle timeout). The runner follows ``geode reload`` (built from the current snapshot)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from geode.hooks.config import hooks_of
from geode.hooks.events import HookEvent
from geode.hooks.runner import HookRunner

log = logging.getLogger(__name__)


class SessionEndHooks:
    """``hooks(session_id, reason, cwd)``: observation, never blocks the disconnect."""

    def __init__(self, snapshot: Callable[[], Any], base_dir: Path) -> None:
        self.snapshot, self.base_dir = snapshot, base_dir
        self._cfg: Any = None
        self._runner: HookRunner | None = None
        self._lock = threading.Lock()

    def _current(self) -> HookRunner:
        cfg = self.snapshot()
        with self._lock:
            if self._runner is None or cfg is not self._cfg:
                old, self._runner, self._cfg = (
                    self._runner,
                    HookRunner(hooks_of(cfg, base_dir=self.base_dir)),
                    cfg,
                )
                if old is not None:
                    old.close()
            return self._runner

    def __call__(self, session_id: str, reason: str, cwd: str) -> None:
        try:
            runner = self._current()
            if runner.has(HookEvent.SESSION_END):
                runner.run(HookEvent.SESSION_END, {"reason": reason}, {"session_id": session_id, "cwd": cwd})
        except Exception as exc:  # observation only: a bad hooks table never breaks a disconnect
            log.warning("SessionEnd hooks for %s not run: %s", session_id, exc)
