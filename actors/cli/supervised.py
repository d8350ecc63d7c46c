"""Is the running tree under supervisord? Then `geode stop` says that supervisord will start it again."""

from __future__ import annotations

from pathlib import Path

from geode.home import GeodeHome

PROC = Path("/proc")


def _environ(pid: int, proc: Path) -> dict[str, str]:
    try:
        raw = (proc / str(pid) / "environ").read_bytes()
    except OSError:
        return {}
    out: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            out[key.decode(errors="replace")] = value.decode(errors="replace")
    return out


def _parent(pid: int, proc: Path) -> tuple[int, str]:
    """(parent pid, parent command line) of ``pid``; (0, "") when unknown."""
    try:
        stat = (proc / str(pid) / "stat").read_text()
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        cmd = (proc / str(ppid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (OSError, ValueError, IndexError):
        return 0, ""
    return ppid, cmd


def supervisord_of(pid: int | None, *, proc: Path = PROC) -> int | None:
    """The supervisord pid managing the process ``pid`` (its parent), or None when it is not managed."""
    if not pid:
        return None
    ppid, cmd = _parent(pid, proc)
    if "supervisord" in cmd:
        return ppid
    if _environ(pid, proc).get("SUPERVISOR_ENABLED"):  # supervisord sets it for every program it runs
        return ppid or None
    return None


def supervisord_notice(pid: int | None, *, proc: Path = PROC) -> str | None:
    """The line `geode stop` prints when supervisord would undo the stop by starting the tree again."""
    sup = supervisord_of(pid, proc=proc)
    if sup is None:
        return None
    name = _environ(pid or 0, proc).get("SUPERVISOR_PROCESS_NAME") or "geode"
    return (
        f"geode: this tree is managed by supervisord (pid {sup}), which starts it again after a stop; "
        f"stop it there: supervisorctl -c supervisord.conf stop {name}"
    )


def notice_for_home(home: GeodeHome) -> str | None:
    """``supervisord_notice`` for the supervisor pid of the tree serving ``home`` (None when unknown)."""
    from actors.tree.client import tree_status
    from geode.protocol.errors import GeodeError

    try:
        st = tree_status(home)
    except GeodeError:
        return None
    return supervisord_notice(st.pid if st is not None else None)
