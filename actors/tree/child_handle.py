"""One supervised child process: its spec, incarnation, state, and the ready pipe it reports through."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from actors.tree.child_guard import READY_FD_ENV, SUPERVISOR_PID_ENV
from actors.tree.spec import ChildSpec
from actors.tree.zygote_client import Zygote, ZygoteProc
from geode.protocol.runtime import ChildInfo

Proc = subprocess.Popen[bytes] | ZygoteProc


@dataclass
class ChildRun:
    """Mutable run state of one child; touched only by the supervisor loop thread."""

    spec: ChildSpec
    state: str = "stopped"
    incarnation: int = 0
    proc: Proc | None = None
    ready_fd: int | None = None
    started_at: float = 0.0
    ready_at: float | None = None
    starts: int = 0
    failures: int = 0  # consecutive start failures (died before ready, or within stable_s of it)
    restarts_at: deque[float] = field(default_factory=deque)  # this child's restarts within the period
    why: str = ""  # why it is fatal (shown by `geode status`)
    restart_at: float | None = None
    after: str | None = None  # rest_for_one: start only once this sibling is up again
    kill_at: float | None = None  # SIGKILL when the shutdown grace is over
    then: Literal["restart", "stop"] | None = None  # what an intentional stop leads to
    eof_at: float | None = None  # when the ready pipe closed (usually: the child is exiting)
    # drain-and-swap of an early fork (actors/tree/swaps.py): asked to retire, then its replacement starting
    swap: Literal["retiring", "replacing"] | None = None
    retire_told_at: float = 0.0  # when the retire request was last published (lossy: repeated)
    swaps: int = 0  # incarnations that ended by a swap, not counted as restarts

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def spawn(
        self, incarnation: int, env: dict[str, str], log_path: Path, zygote: Zygote | None = None
    ) -> None:
        """Start the next incarnation: forked by ``zygote`` when it can (a ``child_main`` child)."""
        r, w = os.pipe()
        full_env = {**os.environ, **env, **self.spec.env}
        full_env.update(
            GEODE_CHILD_NAME=self.name,
            GEODE_INCARNATION=str(incarnation),
            **{READY_FD_ENV: str(w), SUPERVISOR_PID_ENV: str(os.getpid())},
        )
        log_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(log_path, "ab") as log:
                forked = None
                if zygote is not None and self.spec.forkable:
                    forked = zygote.spawn(
                        self.name, full_env, w, log.fileno(), sdk=self.spec.sdks, early=self.spec.swappable
                    )
                self.proc = forked or subprocess.Popen(
                    list(self.spec.argv),
                    env=full_env,
                    pass_fds=(w,),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    close_fds=True,
                )
        except OSError:
            os.close(r)
            raise
        finally:
            os.close(w)
        os.set_blocking(r, False)
        self.ready_fd = r
        self.incarnation = incarnation
        self.state = "starting"
        self.started_at = time.monotonic()
        self.ready_at = None
        self.starts += 1
        self.restart_at = self.after = self.kill_at = self.eof_at = None
        self.then = None

    def retired(self, rc: int, *, asked: bool = False) -> bool:
        """Its exit ends a swap's retirement: clean (exit 0, no stop or restart ``asked`` meanwhile) → its
        replacement starts at once, not a crash."""
        clean = self.swap == "retiring" and rc == 0 and not asked
        self.swap = "replacing" if clean else None
        self.swaps += clean
        return clean

    def close_pipe(self) -> None:
        if self.ready_fd is not None:
            os.close(self.ready_fd)
            self.ready_fd = None

    def terminate(self, now: float) -> None:
        """SIGTERM now, SIGKILL once ``shutdown_ms`` has passed (see :meth:`kill_if_due`)."""
        if self.proc is not None and self.kill_at is None:
            _signal(self.proc, signal.SIGTERM)
            self.kill_at = now + self.spec.shutdown_ms / 1000

    def kill_if_due(self, now: float) -> None:
        if self.proc is not None and self.kill_at is not None and now >= self.kill_at:
            _signal(self.proc, signal.SIGKILL)

    def kill(self) -> None:
        if self.proc is not None:
            _signal(self.proc, signal.SIGKILL)

    def restarted_within(self, now: float, period_s: float) -> int:
        """Record one restart at ``now``; how many this child had within the last ``period_s``."""
        self.restarts_at.append(now)
        while self.restarts_at and self.restarts_at[0] < now - period_s:
            self.restarts_at.popleft()
        return len(self.restarts_at)

    def clear_fatal(self) -> None:
        """An operator's restart: forget the failures and the restart history."""
        self.failures = 0
        self.restarts_at.clear()
        self.why = ""

    def info(self, now: float) -> ChildInfo:
        up = now - self.ready_at if self.state == "running" and self.ready_at is not None else 0.0
        wait = None
        if self.state == "backoff" and self.restart_at is not None and self.proc is None:
            wait = round(max(0.0, self.restart_at - now), 3)
        return ChildInfo(
            name=self.name,
            pid=self.pid,
            incarnation=self.incarnation,
            state=self.state,
            uptime_s=round(up, 3),
            restarts=max(0, self.starts - 1 - self.swaps),
            next_try_s=wait,
            reason=self.why if self.state == "fatal" else "",
            swap=self.swap or ("early" if isinstance(self.proc, ZygoteProc) and self.proc.early else ""),
        )


def shown_state(info: ChildInfo) -> str:
    """``geode status``'s STATE: ``backoff (next try in 1.6 s)``, ``fatal (11 restarts within 10 s)``."""
    if info.state == "backoff" and info.next_try_s is not None:
        return f"backoff (next try in {info.next_try_s:.1f} s)"
    if info.state == "fatal" and info.reason:
        return f"fatal ({info.reason}; geode restart {info.name})"
    return info.state


def _signal(proc: Proc, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except ProcessLookupError:
        pass


def exit_reason(rc: int) -> str:
    if rc < 0:
        try:
            return f"killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"killed by signal {-rc}"
    return f"exit {rc}"


class IncarnationStore:
    """Last incarnation per name in ``<home>/incarnations.json``, so numbers grow across tree restarts."""

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._last: dict[str, int] = {}
        if path is not None:
            try:
                self._last = {str(k): int(v) for k, v in json.loads(path.read_text()).items()}
            except (OSError, ValueError, AttributeError):
                self._last = {}

    def next(self, name: str) -> int:
        n = self._last.get(name, 0) + 1
        self._last[name] = n
        if self._path is not None:
            tmp = self._path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self._last))
            os.replace(tmp, self._path)
        return n
