"""Child processes for tests: a Popen that closes its pipes once it has been reaped.

With ``filterwarnings = error`` a pipe left for the garbage collector is a ResourceWarning that fails some
later, unrelated test; every test that spawns a child with pipes uses :class:`Child` (or ``with``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any


class Child(subprocess.Popen[Any]):
    """``subprocess.Popen`` whose ``wait`` (also reached through ``communicate``) closes the pipes once the
    process has exited, so kill/terminate + wait is the whole clean-up."""

    def wait(self, timeout: float | None = None) -> int:
        code = super().wait(timeout)
        self.close_pipes()
        return code

    def close_pipes(self) -> None:
        for pipe in (self.stdin, self.stdout, self.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError):  # a stdin with unflushed data and a dead reader
                    pipe.close()


def kill_bash_calls_in(directory: os.PathLike[str] | str) -> int:
    """SIGKILL every process of a run_bash call (in a PID namespace of its own, or carrying the call's token)
    whose working directory is ``directory``: the clean-up of a test whose executor died mid-command. (A
    shell's ``$$`` is its pid in its own namespace, not a process group this process can signal.)"""
    want, ours, killed = os.path.realpath(directory), os.readlink("/proc/self/ns/pid"), 0
    for e in os.scandir("/proc"):
        if not e.name.isdigit():
            continue
        try:
            if os.readlink(f"/proc/{e.name}/cwd") != want:
                continue
            inside = os.readlink(f"/proc/{e.name}/ns/pid") != ours
            with open(f"/proc/{e.name}/environ", "rb") as f:
                inside = inside or any(v.startswith(b"GEODE_BASH_GROUP=") for v in f.read().split(b"\0"))
            if inside:
                os.kill(int(e.name), signal.SIGKILL)
                killed += 1
        except OSError:
            continue
    return killed
