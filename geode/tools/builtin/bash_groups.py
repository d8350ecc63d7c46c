"""Durable notes of running run_bash process groups, so a dead executor's deadlines still hold.

run_bash notes each call it starts (one small JSON file: process group, env token, cgroup) and removes the
note once the call is reaped. A new executor incarnation runs ``GroupReaper.reap()``: the processes of a call
whose owner is dead (its PID namespace's init, its cgroup, every process holding its token, its process
group) die at its deadline.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from geode.tools.builtin.bash_containment import TOKEN_ENV, CallBox, cgroup_populated, close_leftover

log = logging.getLogger(__name__)
__all__ = ["TOKEN_ENV", "GroupNote", "GroupNotes", "GroupReaper"]


def boot_clock() -> float:
    """Seconds since boot: one clock for every process on the machine, immune to wall-clock jumps."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def proc_stat(pid: int) -> tuple[int, int, str] | None:
    """(pgid, start time in clock ticks since boot, state) of a live process; None when gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces or parens
    state, pgid, start = fields[0], int(fields[2]), int(fields[19])
    return None if state in ("Z", "X") else (pgid, start, state)


def start_ticks(pid: int) -> int | None:
    st = proc_stat(pid)
    return None if st is None else st[1]


class GroupNote(BaseModel):
    """One run_bash group, as its executor saw it when it started the command."""

    pgid: int
    start_ticks: int | None  # the group leader's /proc starttime (None: it exited before we looked)
    token: str  # the value of TOKEN_ENV in the command's environment
    operation_id: str
    session_id: str = ""
    owner: str  # "executor#<incarnation>"
    owner_pid: int
    owner_start_ticks: int | None
    deadline_boot_s: float  # SIGTERM due (boot clock)
    grace_s: float  # then SIGKILL
    deadline_unix: float  # the same moment, for people reading the file
    cgroup: str | None = None  # the call's cgroup v2 directory (None: contained by the token walk alone)
    init: int | None = None  # the init of the call's PID namespace (None: no namespace)
    init_start_ticks: int | None = None

    @property
    def kill_at(self) -> float:
        return self.deadline_boot_s + self.grace_s

    def live_init(self) -> tuple[int, int] | None:
        """(pid, start ticks) of the call's namespace init while that very process lives."""
        pid, start = self.init, self.init_start_ticks
        if pid is None or start is None or start_ticks(pid) != start:
            return None
        return pid, start


class GroupNotes:
    """The note directory of one executor process (``GeodeHome.run_dir / "executor-groups"``)."""

    def __init__(self, directory: Path, owner: str) -> None:
        self.dir, self.owner = directory, owner
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._pid = os.getpid()
        self._start = start_ticks(self._pid)

    @staticmethod
    def new_token() -> str:
        return secrets.token_hex(12)

    def note(
        self,
        pgid: int,
        token: str,
        *,
        operation_id: str,
        session_id: str,
        timeout_s: float,
        grace_s: float,
        cgroup: str | None = None,
        init: int | None = None,
    ) -> Path:
        """Write the note atomically (temp file + rename); returns its path for ``forget``."""
        body = GroupNote(
            pgid=pgid,
            start_ticks=start_ticks(pgid),
            token=token,
            operation_id=operation_id,
            session_id=session_id,
            owner=self.owner,
            owner_pid=self._pid,
            owner_start_ticks=self._start,
            deadline_boot_s=boot_clock() + timeout_s,
            grace_s=grace_s,
            deadline_unix=time.time() + timeout_s,
            cgroup=cgroup,
            init=init,
            init_start_ticks=start_ticks(init) if init else None,
        )
        path = self.dir / f"{pgid}-{token}.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(body.model_dump_json())
        os.replace(tmp, path)
        return path

    @staticmethod
    def forget(path: Path) -> None:
        path.unlink(missing_ok=True)


def owner_alive(note: GroupNote) -> bool:
    """True only for the very process that wrote the note (pid and start time both match)."""
    st = proc_stat(note.owner_pid)
    return st is not None and note.owner_start_ticks is not None and st[1] == note.owner_start_ticks


def _pgid_is_ours(note: GroupNote) -> bool:
    """Whether process group ``note.pgid`` is provably the one noted: its leader with the noted start time,
    or a member carrying the note's token. (While a member lives, Linux never reuses the group's number.)"""
    if note.start_ticks is not None:
        leader = proc_stat(note.pgid)
        if leader is not None:
            return leader[0] == note.pgid and leader[1] == note.start_ticks
    box = CallBox(note.token)
    return any(p.pgid == note.pgid for p in box.members())


def is_recorded_group(note: GroupNote) -> bool:
    """Whether anything of the noted call still runs: its process group, a token holder, its cgroup, the
    init of its PID namespace."""
    if _pgid_is_ours(note) or note.live_init() is not None:
        return True
    if note.cgroup and cgroup_populated(Path(note.cgroup)):
        return True
    return bool(CallBox(note.token).members())


def signal_call(note: GroupNote, sig: int) -> None:
    """Send ``sig`` to every process of the noted call; SIGKILL also empties and removes its cgroup."""
    if _pgid_is_ours(note):
        _killpg(note.pgid, sig)
    if sig == signal.SIGKILL:
        close_leftover(note.token, note.cgroup, note.live_init())
    else:
        box = CallBox(note.token, Path(note.cgroup) if note.cgroup and Path(note.cgroup).is_dir() else None)
        if (init := note.live_init()) is not None:
            box.seen[init[0]] = init[1]  # every member descends from it
        box.signal(sig)


Report = Callable[[GroupNote, str], None]  # (note, action): killed | scheduled | gone | not_ours | ...


class GroupReaper:
    """Enforce the deadlines of groups whose executor died: overdue → SIGKILL now; else a timer thread sends
    SIGTERM at the deadline and SIGKILL after the grace. A note is removed once its group is settled."""

    def __init__(self, directory: Path, *, report: Report | None = None) -> None:
        self.dir = directory
        self._report = report or (lambda note, action: None)
        self._stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def reap(self) -> dict[str, str]:
        """One pass over the notes; returns {note file name: action}. Notes of live owners are skipped."""
        done: dict[str, str] = {}
        for path in sorted(self.dir.glob("*.json")) if self.dir.is_dir() else ():
            try:
                note = GroupNote.model_validate_json(path.read_text())
            except (OSError, ValidationError, ValueError):
                path.unlink(missing_ok=True)
                done[path.name] = "unreadable"
                continue
            if owner_alive(note):
                continue
            done[path.name] = self._settle(path, note)
        return done

    def _settle(self, path: Path, note: GroupNote) -> str:
        if not is_recorded_group(note):
            action = "gone" if not _group_exists(note.pgid) else "not_ours"
            if note.cgroup:
                close_leftover(note.token, note.cgroup)  # an empty cgroup left behind: remove it
            path.unlink(missing_ok=True)
        elif boot_clock() >= note.kill_at:
            signal_call(note, signal.SIGKILL)
            path.unlink(missing_ok=True)
            action = "killed"
        else:
            t = threading.Thread(target=self._enforce, args=(path, note), name="bash-reaper", daemon=True)
            self.threads.append(t)
            t.start()
            action = "scheduled"
        self._report(note, action)
        return action

    def _enforce(self, path: Path, note: GroupNote) -> None:
        while (left := note.deadline_boot_s - boot_clock()) > 0:
            if self._stop.wait(min(left, 1.0)):
                return  # this incarnation stops: the note stays for the next one
        sent = is_recorded_group(note)
        if sent:
            signal_call(note, signal.SIGTERM)
            while is_recorded_group(note):
                if boot_clock() >= note.kill_at:
                    break
                if self._stop.wait(0.05):
                    return
        signal_call(note, signal.SIGKILL)  # stragglers, and the cgroup directory
        path.unlink(missing_ok=True)
        self._report(note, "killed" if sent else "ended")

    def stop(self, join_s: float = 1.0) -> None:
        self._stop.set()
        for t in self.threads:
            t.join(join_s)


def _group_exists(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _killpg(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
