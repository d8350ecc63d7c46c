"""Dispatch with a deadline: the handler runs on its own thread; locks are released when it really ends.

The threads are kept for the next call (``Workers``): a handler runs on a thread no other call is using, in
an empty context (as on a new thread), and a thread idle for ``IDLE_S`` ends; a call whose deadline passed
keeps its thread until the handler returns.

A bounded read-only built-in (``HandlerEntry.inline``: its walk checks ``env.cancel.is_set()`` per entry) runs
on the calling thread instead, its env's ``cancel`` a ``Cooperative`` one that also reads as set once the
deadline passes: no hop to a handler thread and back, the same outcomes (a result that comes after the
deadline is a timeout, as the waiter would have given up on it)."""

from __future__ import annotations

import contextvars
import os
import queue
import threading
import time
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
    entry: HandlerEntry,
    args: dict[str, Any],
    env: ToolEnv,
    *,
    on_exit: Callable[[], None],
) -> Outcome:
    """Call the handler; give up waiting after ``env.deadline_s`` (the work may still be running then).
    With a ``Cooperative`` ``env.cancel`` the handler runs here (``run_here``)."""
    if isinstance(env.cancel, Cooperative):
        return run_here(entry, args, env, on_exit=on_exit)
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

    end = time.monotonic() + env.deadline_s
    WORKERS.run(target, f"tool-{env.ctx.operation_id or 'call'}")
    if not done.wait(max(0.0, end - time.monotonic())):
        env.cancel.set()
        return Outcome("timeout")
    return box["out"]


_MAKING = threading.Lock()


class Cooperative(threading.Event):
    """``env.cancel`` of a call run on its caller's thread: set by a cancel as any event, and seen set by
    ``is_set`` once the deadline passes (``expired``). Its handler must check ``is_set`` as it goes."""

    def __init__(self) -> None:  # Event's Condition only when a thread sets, clears or waits (``_cond``)
        self._flag = False
        self.expired = False
        self.end = float("inf")  # the deadline (monotonic), armed by ``run_here``

    @property
    def _cond(self) -> threading.Condition:  # type: ignore[override]
        """Event's Condition, made on first use (most inline calls are never cancelled): one per event,
        made under a lock so a setter and a waiter always share it."""
        made = self.__dict__.get("_made")
        if made is None:
            with _MAKING:
                made = self.__dict__.get("_made")
                if made is None:
                    made = self.__dict__["_made"] = threading.Condition(threading.Lock())
        return made  # type: ignore[no-any-return]

    def is_set(self) -> bool:
        if self._flag:  # type: ignore[attr-defined]
            return True
        if time.monotonic() >= self.end:
            self.expired = True
            self.set()
            return True
        return False


def run_here(
    entry: HandlerEntry, args: dict[str, Any], env: ToolEnv, *, on_exit: Callable[[], None]
) -> Outcome:
    """``run_with_deadline`` on this thread for a handler that checks ``env.cancel`` (a ``Cooperative``):
    the deadline is seen by its checks; a result that comes after the deadline is a timeout."""
    cancel = env.cancel
    assert isinstance(cancel, Cooperative)
    cancel.end = end = time.monotonic() + env.deadline_s
    try:
        out = contextvars.Context().run(_outcome, entry, args, env)  # as on a handler thread: empty
    finally:
        fault("executor.in_handler")  # the handler's work is done; it has not returned yet
        on_exit()
    if cancel.expired or time.monotonic() >= end:
        cancel.set()
        return Outcome("timeout")
    return out


def _outcome(entry: HandlerEntry, args: dict[str, Any], env: ToolEnv) -> Outcome:
    try:
        return Outcome("ok", entry.fn(dict(args), env))
    except ToolFailure as exc:
        return Outcome("failed", error=exc)
    except BaseException as exc:  # as on a handler thread: whatever it raised is its crash
        return Outcome("crashed", error=exc)


Job = Callable[[], None]


class Workers:
    """Handler threads, each running one call at a time; an idle one takes the next call (most recently
    idle first), a new one starts when none is idle. ``started`` counts the threads ever started."""

    IDLE_S = 30.0
    MAX_IDLE = 32

    def __init__(self) -> None:
        self._mu = threading.Lock()
        self._idle: list[queue.SimpleQueue[tuple[Job, str]]] = []
        self.started = 0

    def run(self, job: Job, name: str) -> None:
        with self._mu:
            inbox = self._idle.pop() if self._idle else None
            if inbox is None:
                self.started += 1
        if inbox is not None:
            inbox.put((job, name))
            return
        inbox = queue.SimpleQueue()
        thread = threading.Thread(target=self._serve, args=(inbox, job), name=name, daemon=True)
        thread.start()

    def _serve(self, inbox: queue.SimpleQueue[tuple[Job, str]], job: Job) -> None:
        me = threading.current_thread()
        while True:
            contextvars.Context().run(job)  # nothing of the previous call's context
            with self._mu:
                if len(self._idle) >= self.MAX_IDLE:
                    return
                self._idle.append(inbox)
            while True:
                try:
                    job, me.name = inbox.get(timeout=self.IDLE_S)
                    break
                except queue.Empty:
                    with self._mu:
                        if inbox in self._idle:  # nobody took it meanwhile: end
                            self._idle.remove(inbox)
                            return
                    # taken just now: its call is on the way

    def forked(self) -> None:
        """In a forked child the parent's threads do not exist: forget them."""
        self._mu = threading.Lock()
        self._idle = []


WORKERS = Workers()
os.register_at_fork(after_in_child=WORKERS.forked)
