"""The per-call subreaper run_bash puts between the executor and the shell (run as a script, stdlib only).

``python -I -S bash_subreaper.py REPORT_FD ARGV...``: become a child subreaper (so every orphan of the call,
``setsid``'d or double-forked, is reparented here and stays a descendant), fork ARGV as its own process group,
write its pid to REPORT_FD, reap everything; when ARGV exits, SIGKILL every remaining descendant until none is
left, then exit as ARGV did (same code, or the same signal).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36


def _children(me: int) -> list[int]:
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rindex(b")") + 2 :].split()
        if int(fields[1]) == me and fields[0] not in (b"Z", b"X"):
            out.append(int(name))
    return out


def _kill_all_descendants(me: int) -> None:
    """Orphans come back to us, so 'no child left' means 'no descendant left'."""
    while True:
        for pid in _children(me):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.waitpid(-1, 0)
        except ChildProcessError:
            return
        except InterruptedError:
            continue


def _exit_like(status: int) -> None:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        except (ImportError, ValueError, OSError):
            pass
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
            pass
        os.kill(os.getpid(), sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1)


def main(argv: list[str]) -> None:
    report, cmd = int(argv[0]), argv[1:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os._exit(124)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the shell gets the SIGTERM; we wait for it, then clean up
    pid = os.fork()
    if pid == 0:
        try:
            os.close(report)
            os.setpgid(0, 0)
            for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            os.execv(cmd[0], cmd)
        finally:
            os._exit(127)
    os.write(report, f"{pid}\n".encode())
    os.close(report)
    status = 1 << 8
    while True:
        try:
            got, st = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            break
        if got == pid:
            status = st
            break
    _kill_all_descendants(os.getpid())
    _exit_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
