"""Containment of one run_bash call: a PID namespace and a subreaper, a cgroup v2 where writable, its token.

The shell runs under ``bash_subreaper.py``, a child subreaper of its own which, where it can, gives the call
a PID namespace: the namespace's init (``CallBox.init``) is then every orphan's parent, no process can leave
the namespace, and when the init dies the kernel kills every member. Without one, every orphan of the call
(``setsid``, ``nohup``, double forks) is reparented to the subreaper; when the shell exits it SIGKILLs its
descendants (a process that kills its subreaper and leaves the cgroup escapes this). Every process carries
``GEODE_BASH_GROUP=<token>`` in its environment, and with cgroup v2 (a writable ``cgroup.kill``) the
shell is moved into ``geode-bash-<token>`` under the executor's own cgroup before it runs the command.
At the end the executor SIGKILLs everything found by any of the three (cgroup, descendants, token) until
nothing is left; the orphan reaper of a later executor incarnation uses the cgroup and the token.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)
TOKEN_ENV = "GEODE_BASH_GROUP"  # set in the command's environment: proves a process is the call's
CGROUP_PREFIX = "geode-bash-"
KILL_ROUNDS = 200
STALE_CGROUP_S = 60.0


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    pgid: int
    start: int
    state: str


def proc_info(pid: int) -> ProcInfo | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    f = raw[raw.rindex(")") + 2 :].split()  # after "pid (comm) "; comm may hold spaces or parens
    return ProcInfo(pid, int(f[1]), int(f[2]), int(f[19]), f[0])


def all_procs() -> list[ProcInfo]:
    try:
        names = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []
    return [p for n in names if (p := proc_info(int(n))) is not None]


def has_token(pid: int, token: str) -> bool:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{TOKEN_ENV}={token}".encode() in env.split(b"\0")


def token_holders(token: str, procs: list[ProcInfo] | None = None) -> list[ProcInfo]:
    """Live (non-zombie) processes whose environment carries ``token``."""
    me = os.getpid()
    return [
        p
        for p in (all_procs() if procs is None else procs)
        if p.state not in ("Z", "X") and p.pid != me and has_token(p.pid, token)
    ]


# --- cgroup v2 -------------------------------------------------------------------------------------------
def cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted (``/sys/fs/cgroup`` or ``/sys/fs/cgroup/unified``)."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        left, _, right = line.partition(" - ")
        if right.split(" ", 1)[0] == "cgroup2":
            return Path(left.split()[4])
    return None


def own_cgroup() -> Path | None:
    """This process's cgroup v2 directory, when it is writable and has ``cgroup.kill`` (Linux ≥ 5.14)."""
    mount = cgroup2_mount()
    if mount is None:
        return None
    try:
        rel = next(
            line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines() if line.startswith("0::")
        )
    except (OSError, StopIteration):
        return None
    d = mount / rel.lstrip("/")
    if not (d / "cgroup.procs").exists() or not os.access(d, os.W_OK):
        return None
    return d


def make_cgroup(token: str, parent: Path | None) -> Path | None:
    """A fresh child cgroup for one call; None when none can be made (the walk still contains the call)."""
    if parent is None:
        return None
    d = parent / f"{CGROUP_PREFIX}{token}"
    try:
        d.mkdir(mode=0o700)
    except OSError as exc:
        log.debug("run_bash: no cgroup under %s: %s", parent, exc)
        return None
    if not (d / "cgroup.kill").exists():
        remove_cgroup(d)
        return None
    return d


def sweep_empty(parent: Path, min_age_s: float = STALE_CGROUP_S) -> int:
    """Remove empty ``geode-bash-*`` cgroups older than ``min_age_s`` (left by a call whose executor stopped
    mid-call); a live call's cgroup is populated from a few milliseconds after its creation."""
    removed = 0
    now = time.time()
    try:
        dirs = [d for d in parent.iterdir() if d.name.startswith(CGROUP_PREFIX)]
    except OSError:
        return 0
    for d in dirs:
        try:
            if now - d.stat().st_mtime < min_age_s or cgroup_populated(d):
                continue
            d.rmdir()
            removed += 1
        except OSError:
            continue
    return removed


def cgroup_pids(d: Path) -> list[int]:
    try:
        return [int(x) for x in (d / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


def cgroup_populated(d: Path) -> bool:
    try:
        return "populated 1" in (d / "cgroup.events").read_text()
    except OSError:
        return False


def kill_cgroup(d: Path, wait_s: float = 5.0) -> bool:
    """SIGKILL everything in the cgroup and wait until it is empty; True when it is."""
    try:
        (d / "cgroup.kill").write_text("1")
    except OSError:
        return not cgroup_populated(d)
    end = time.monotonic() + wait_s
    while cgroup_populated(d):
        if time.monotonic() > end:
            return False
        time.sleep(0.005)
    return True


def remove_cgroup(d: Path) -> None:
    try:
        d.rmdir()
    except FileNotFoundError:
        pass
    except OSError as exc:
        log.warning("run_bash: could not remove cgroup %s: %s", d, exc)


def ancestors_first(procs: list[ProcInfo]) -> list[ProcInfo]:
    """``procs`` ordered by their depth among themselves: every process before its descendants."""
    by_pid = {p.pid: p for p in procs}

    def depth(p: ProcInfo) -> int:
        n = 0
        while p.ppid in by_pid and n < len(by_pid):
            p, n = by_pid[p.ppid], n + 1
        return n

    return sorted(procs, key=depth)


# --- one call -------------------------------------------------------------------------------------------
@dataclass
class CallBox:
    """The processes of one call; ``cgroup`` None without cgroup v2, ``init`` None without a PID namespace."""

    token: str
    cgroup: Path | None = None
    reaper: int | None = None  # the call's subreaper (the executor's child)
    init: int | None = None  # the init of the call's PID namespace (the subreaper's child): all die with it
    seen: dict[int, int] = field(default_factory=dict)  # pid -> start ticks, every member ever found

    @classmethod
    def open(cls, token: str, *, use_cgroup: bool = True) -> CallBox:
        parent = own_cgroup() if use_cgroup else None
        if parent is not None:
            sweep_empty(parent)
        return cls(token, make_cgroup(token, parent))

    def adopt(self, reaper: int, shell: int) -> bool:
        """Record the call's subreaper; move its namespace's init and its (still waiting) shell into the
        cgroup; False without one."""
        self.reaper = reaper
        for pid in (reaper, self.init, shell):
            if pid and (st := proc_info(pid)) is not None:
                self.seen[pid] = st.start
        if self.cgroup is None:
            return False
        try:
            for pid in (self.init, shell):
                if pid:
                    (self.cgroup / "cgroup.procs").write_text(str(pid))
            return True
        except OSError as exc:
            log.warning("run_bash: could not move the shell into %s: %s", self.cgroup, exc)
            remove_cgroup(self.cgroup)
            self.cgroup = None
            return False

    def members(self) -> list[ProcInfo]:
        """Live processes of the call: in its cgroup, holding its token, or descending from one of those."""
        procs = all_procs()
        live = {p.pid: p for p in procs if p.state not in ("Z", "X") and p.pid != os.getpid()}
        found = {p.pid for p in token_holders(self.token, list(live.values()))}
        if self.cgroup is not None:
            found.update(pid for pid in cgroup_pids(self.cgroup) if pid in live)
        found.update(pid for pid, start in self.seen.items() if pid in live and live[pid].start == start)
        children: dict[int, list[int]] = {}
        for p in live.values():
            children.setdefault(p.ppid, []).append(p.pid)
        stack = list(found)
        while stack:  # descendants of any member
            for kid in children.get(stack.pop(), ()):
                if kid not in found:
                    found.add(kid)
                    stack.append(kid)
        out = [live[pid] for pid in found]
        for p in out:
            self.seen.setdefault(p.pid, p.start)
        return out

    def signal(self, sig: int) -> None:
        """Send ``sig`` to every process of the call but its subreaper (which waits for the shell).

        One process at a time would let a shell see its child die first and run the script's next line
        (``sleep 8; echo done > f`` writes f when only the sleep got the SIGTERM). So each process group is
        signalled in one ``killpg`` (the kernel marks every member before any of them runs again), and the
        processes that left their group are signalled after, ancestors before descendants."""
        procs = [p for p in self.members() if p.pid != self.reaper]
        reaper = proc_info(self.reaper) if self.reaper else None
        spared = {os.getpgrp(), reaper.pgid if reaper is not None else 0}
        for pgid in sorted({p.pgid for p in procs if p.pgid > 1 and p.pgid not in spared}):
            try:
                os.killpg(pgid, sig)
            except OSError:
                pass  # gone already, or not ours: the per-process pass below covers its members
        for p in ancestors_first(procs):
            _kill(p.pid, sig)

    def close(self) -> int:
        """SIGKILL every process of the call (the subreaper last) and remove the cgroup.

        Returns how many processes were still alive (0 when everything is gone)."""
        if self.cgroup is not None:
            kill_cgroup(self.cgroup)
        left: list[ProcInfo] = []
        for _ in range(KILL_ROUNDS):
            left = [p for p in self.members() if p.pid != self.reaper]
            if not left:
                break
            for p in left:
                _kill(p.pid, signal.SIGKILL)
            time.sleep(0.002)
        if self.reaper is not None:
            self._end_reaper()
        if self.cgroup is not None and kill_cgroup(self.cgroup, wait_s=2.0):
            remove_cgroup(self.cgroup)
        if left:
            log.warning("run_bash: %d process(es) of call %s survived SIGKILL", len(left), self.token[:6])
        return len(left)

    def _end_reaper(self) -> None:
        """The subreaper exits by itself once its shell is gone; SIGKILL it when it does not in time."""
        start = self.seen.get(self.reaper or 0)
        end = time.monotonic() + 2.0
        while time.monotonic() < end:
            st = proc_info(self.reaper or 0)
            if st is None or st.start != start or st.state in ("Z", "X"):
                return
            time.sleep(0.005)
        _kill(self.reaper or 0, signal.SIGKILL)


def _kill(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def close_leftover(token: str, cgroup: str | None, init: tuple[int, int] | None = None) -> bool:
    """For a dead executor's call: SIGKILL its cgroup, every token holder and its namespace's init (``init``:
    pid and start ticks, when it is still that process); True when anything was alive."""
    box = CallBox(token, Path(cgroup) if cgroup and Path(cgroup).is_dir() else None)
    if init is not None and (st := proc_info(init[0])) is not None and st.start == init[1]:
        box.seen[init[0]] = init[1]
    alive = bool(box.members()) or (box.cgroup is not None and cgroup_populated(box.cgroup))
    box.close()
    return alive
