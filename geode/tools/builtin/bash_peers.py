"""Whether a local process is part of a run_bash call, for the control socket to refuse it as a peer.

Checked on what a command cannot drop: its ancestry (in a call's PID namespace every process descends from
the namespace's init, the call's subreaper's child; nothing leaves a PID namespace), its cgroup v2
(``geode-bash-*``); and, for the fallback without a namespace, the call's environment token.
"""

from __future__ import annotations

from pathlib import Path

from geode.tools.builtin.bash import SUBREAPER
from geode.tools.builtin.bash_containment import CGROUP_PREFIX, TOKEN_ENV, ProcInfo, proc_info

MAX_DEPTH = 4096


def _argv(pid: int) -> list[bytes]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


def _pidns(pid: int | str) -> str | None:
    try:
        return str(Path(f"/proc/{pid}/ns/pid").readlink())
    except OSError:
        return None


def is_subreaper(pid: int) -> bool:
    """A run_bash subreaper (or the init it forked for the call's PID namespace)."""
    return SUBREAPER.encode() in _argv(pid)


def run_bash_membership(pid: int) -> str | None:
    """Why process ``pid`` (as this process's /proc shows it) belongs to a run_bash call; None if it does not.

    ``pid`` 0 (a peer in no descendant of our PID namespace, which no call's process can be) is not one; a
    pid with no /proc entry (gone before it could be checked) is refused, as is one whose ancestry cannot
    be read."""
    if pid <= 0:
        return None
    me = proc_info(pid)
    if me is None:
        return "gone before its process could be checked"
    ours = _pidns("self")
    cur: ProcInfo | None = me
    for _ in range(MAX_DEPTH):
        if cur is None:  # gone between two reads: cannot tell, so refuse
            return "its ancestry could not be read"
        if is_subreaper(cur.pid):
            where = "PID namespace" if _pidns(pid) != ours else "process tree"
            return f"inside a run_bash call's {where} (subreaper pid {cur.pid})"
        if cur.ppid <= 1:
            break
        nxt = proc_info(cur.ppid)
        if nxt is None:  # the parent exited: read this process again for the one it was reparented to
            again = proc_info(cur.pid)
            nxt = proc_info(again.ppid) if again is not None and again.start == cur.start else None
        cur = nxt
    try:
        groups = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        groups = []
    for line in groups:
        if line.startswith("0::") and any(part.startswith(CGROUP_PREFIX) for part in line[3:].split("/")):
            return f"inside a run_bash call's cgroup ({line[3:]})"
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        env = []
    if any(v.startswith(f"{TOKEN_ENV}=".encode()) for v in env):
        return f"carries a run_bash call's {TOKEN_ENV}"
    return None
