"""Child-side half of supervision: die with the supervisor (no orphans) and report readiness on the pipe."""

from __future__ import annotations

import ctypes
import os
import signal
import threading

READY_FD_ENV = "GEODE_READY_FD"  # the write end of the ready pipe the supervisor reads
SUPERVISOR_PID_ENV = "GEODE_SUPERVISOR_PID"
PR_SET_PDEATHSIG = 1


def arm_parent_death(poll_s: float = 0.5) -> None:
    """SIGKILL this process when the supervisor goes (prctl), plus a ``getppid`` watch as a second net."""
    expected = int(os.environ.get(SUPERVISOR_PID_ENV, "0") or 0)
    if not expected:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() != expected:  # the supervisor died before prctl took effect
        os._exit(70)

    def watch() -> None:
        while True:
            threading.Event().wait(poll_s)
            if os.getppid() != expected:
                os._exit(70)

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
