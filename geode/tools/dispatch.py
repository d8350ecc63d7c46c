"""Dispatch with a deadline: the handler runs on its own thread; locks are released when it really ends."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from geode.faults import fault
from geode.tools.handlers import HandlerEntry, ToolEnv, ToolFailure


@dataclass(frozen=True)
class Outcome:
    """``status``: ok | failed (ToolFailure: clean, known outcome) | crashed (unexpected) | timeout."""

    status: str
    value: Any = None
    error: BaseException | None = None


def run_with_deadline(
    entry: HandlerEntry, args: dict[str, Any], env: ToolEnv, *, on_exit: Callable[[], None]
) -> Outcome:
    """Call the handler; give up waiting after ``env.deadline_s`` (the work may still be running then)."""
    box: dict[str, Outcome] = {}
    done = threading.Event()

    def target() -> None:
        try:
            box["out"] = Outcome("ok", entry.fn(dict(args), env))
        except ToolFailure as exc:
            box["out"] = Outcome("failed", error=exc)
        except BaseException as exc:
            box["out"] = Outcome("crashed", error=exc)
        finally:
            fault("executor.in_handler")  # the handler's work is done; it has not returned yet
            try:
                on_exit()
            finally:
                done.set()

    worker = threading.Thread(target=target, name=f"tool-{env.ctx.operation_id or 'call'}", daemon=True)
    worker.start()
    if not done.wait(env.deadline_s):
        env.cancel.set()
        return Outcome("timeout")
    return box["out"]
