"""Child-side half of supervision: die with the supervisor (no orphans) and report readiness on the pipe."""

from __future__ import annotations

import ctypes
import os
import signal
import threading
from collections.abc import Callable

READY_FD_ENV = "GEODE_READY_FD"  # the write end of the ready pipe the supervisor reads
SUPERVISOR_PID_ENV = "GEODE_SUPERVISOR_PID"
PR_SET_PDEATHSIG = 1


def parent_check() -> Callable[[], None] | None:
    """Arm the supervisor's death (prctl SIGKILL) and return the ``getppid`` check of the second net, which
    exits 70 once the supervisor is gone; None when this process is not a supervised child. The caller runs
    the check every half second on a thread it already has (a child: the heap trimmer's, ``c_heap.py``)."""
    expected = int(os.environ.get(SUPERVISOR_PID_ENV, "0") or 0)
    if not expected:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass

    def check() -> None:
        if os.getppid() != expected:
            os._exit(70)

    check()  # the supervisor died before prctl took effect
    return check


def arm_parent_death(poll_s: float = 0.5) -> None:
    """SIGKILL this process when the supervisor goes (prctl), plus a ``getppid`` watch thread as a second net
    (a process without a housekeeping thread of its own; ``child_main`` runs the check on its trimmer's)."""
    check = parent_check()
    if check is None:
        return
    stop = threading.Event()  # never set: one wait object, not one per poll

    def watch() -> None:
        while not stop.wait(poll_s):
            check()

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def report_ready() -> None:
    """Tell the supervisor we finished start-up. The pipe stays open: its EOF tells our exit."""
    fd = os.environ.get(READY_FD_ENV)
    if not fd:  # started by hand or by a test harness: say it on stdout
        print("ready", flush=True)
        return
    if fd:
        try:
            os.write(int(fd), b"ready\n")
        except OSError:
            pass
