"""Per-turn mutable state plus the durable parts (cognitive state, guard counters) a checkpoint restores."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from pydantic import BaseModel, Field

from geode.conversation import ImageBlock, Message
from geode.protocol.turns import TerminationReason, TurnInput


class CognitiveState(BaseModel):
    """What the loop believes about the task (restored on resume; observations capped)."""

    goal: str = ""
    observations: list[str] = Field(default_factory=list)
    last_action: str = ""
    round_count: int = 0

    def observe(self, text: str, cap: int = 32) -> None:
        self.observations.append(text[:300])
        del self.observations[:-cap]


class GuardCounters(BaseModel):
    """Loop guards and per-turn progress that survive a crash (replacement semantics on restore)."""

    turn_id: str = ""
    round_index: int = 0
    step_count: int = 0
    error_streak: int = 0
    last_error_signature: str = ""
    success_streak: int = 0
    last_success_signature: str = ""
    consecutive_llm_failures: int = 0
    verify_attempt: int = 0
    cost_warned: bool = False
    tool_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    elapsed_s: float = 0.0  # wall clock used by earlier incarnations of this turn


class CancelFlag(threading.Event):
    """A turn's cancel flag: a ``threading.Event`` that also calls what :meth:`watch` registered when it is
    set, so a thread waiting for something else (the model call's outcome) is woken by a cancel instead of
    polling the flag."""

    def __init__(self) -> None:
        super().__init__()
        self._watchers: list[Callable[[], None]] = []
        self._watch_lock = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._watch_lock:
            watchers, self._watchers = self._watchers, []
        for fn in watchers:
            fn()

    def watch(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Call ``fn`` once when the flag is set (now, if it is); returns what stops watching."""
        with self._watch_lock:
            if not self.is_set():
                self._watchers.append(fn)
                return partial(self._unwatch, fn)
        fn()
        return _nothing

    def _unwatch(self, fn: Callable[[], None]) -> None:
        with self._watch_lock:
            if fn in self._watchers:
                self._watchers.remove(fn)


def _nothing() -> None:
    pass


@dataclass
class Terminal(Exception):
    """Raised inside a phase to end the turn with a reason (and optional text / error)."""

    reason: TerminationReason
    text: str = ""
    error: str | None = None


@dataclass
class TurnState:
    """One running turn: history (durable, append-only), guards, clock, cancellation."""

    session_id: str
    turn_id: str
    user_text: str
    user_images: tuple[ImageBlock, ...] = ()  # the turn's pictures, by reference (sha256 and path)
    history: list[Message] = field(default_factory=list)
    guards: GuardCounters = field(default_factory=GuardCounters)
    cognitive: CognitiveState = field(default_factory=CognitiveState)
    cancel: threading.Event = field(default_factory=CancelFlag)
    started: float = field(default_factory=time.monotonic)
    continuation: str = ""  # a Verify revise instruction injected into the dynamic system context
    context_recoveries: int = 0
    last_text: str = ""
    last_batch_all_errors: bool = False
    plan_bound: bool = False
    unresolved: list[str] = field(default_factory=list)  # operation ids found admitted/uncertain at repair
    meta: dict[str, Any] = field(default_factory=dict)

    def elapsed(self) -> float:
        return self.guards.elapsed_s + (time.monotonic() - self.started)

    def check_cancel(self) -> None:
        if self.cancel.is_set():
            raise Terminal(TerminationReason.USER_CANCELLED, error="cancelled")


def turn_images(turn_input: TurnInput) -> tuple[ImageBlock, ...]:
    """The pictures a turn's input carries by reference (its ``images`` key; the messenger saved them)."""
    raw = (turn_input.model_extra or {}).get("images") or []
    return tuple(ImageBlock.model_validate(i) for i in raw)
