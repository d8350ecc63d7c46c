"""The per-call subreaper run_bash puts between the executor and the shell (run as a script, stdlib only).

``python -I -S bash_subreaper.py REPORT_FD pidns|nopidns ARGV...``: become a child subreaper, then, with
``pidns``, give the call a PID namespace of its own: fork its init (PID 1 there, a fresh ``/proc``), which
forks ARGV as its own process group and reaps every orphan of the call. When ARGV exits the init exits and
the kernel SIGKILLs every process left in the namespace: no process of the call can leave it (not by
``setsid``, ``env -i``, another cgroup, nor by killing its ancestors: the init ignores what members send it).
The init dies with this process (``PR_SET_PDEATHSIG``), and with it the whole namespace.

Without a namespace (``nopidns``, or none can be made) ARGV is forked here: every orphan of the call is
reparented to us, and when ARGV exits we SIGKILL every remaining descendant until none is left.

Either way one line goes to REPORT_FD: ``<shell pid> <init pid or 0> <mode>`` (pids as the executor sees
them; mode ``pidns``, ``userns`` (a PID namespace inside a user namespace of our own uid), ``off`` or
``none:<why>``); then we exit as ARGV did (same code, or the same signal). ``--probe`` prints the mode a
call would get, for ``geode doctor``.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import sys

PR_SET_CHILD_SUBREAPER = 36
PR_SET_PDEATHSIG = 1
CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_PRIVATE = 2, 4, 8, 16384, 1 << 18
# what the namespace's init ignores (members may send it anything); the shell gets the defaults back
INIT_IGNORES = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
SHELL_DEFAULTS = (signal.SIGPIPE, signal.SIGXFSZ, *INIT_IGNORES)


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


def _fork_shell(cmd: list[str], close: tuple[int, ...]) -> int:
    """Fork ARGV as the leader of its own process group, with default signal dispositions."""
    pid = os.fork()
    if pid == 0:
        try:
            for fd in close:
                os.close(fd)
            os.setpgid(0, 0)
            for sig in SHELL_DEFAULTS:
                signal.signal(sig, signal.SIG_DFL)
            os.execv(cmd[0], cmd)
        finally:
            os._exit(127)
    return pid


def _wait_for(pid: int) -> int:
    """Reap every child until ``pid`` exits; its wait status."""
    while True:
        try:
            got, st = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        except ChildProcessError:
            return 1 << 8
        if got == pid:
            return st


# --- the PID namespace ----------------------------------------------------------------------------------
def _err(libc: ctypes.CDLL) -> str:
    return os.strerror(ctypes.get_errno()).replace(" ", "-")


def _write(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def enter_pidns(libc: ctypes.CDLL) -> str:
    """Make our next child the init of a new PID namespace: ``pidns``, ``userns`` or ``none:<why>``."""
    if libc.unshare(CLONE_NEWPID) == 0:
        return "pidns"
    why = _err(libc)
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER) != 0:  # no privilege: a user namespace mapping only our own uid
        return f"none:{why}/userns-{_err(libc)}"
    try:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:
        return f"none:{why}/uid_map-{exc.errno}"
    if libc.unshare(CLONE_NEWPID) != 0:
        return f"none:{why}/userns-pidns-{_err(libc)}"
    return "userns"


def _own_proc(libc: ctypes.CDLL) -> None:
    """In the new namespace: a private mount table with a /proc that shows only the call's processes."""
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), f"unshare(CLONE_NEWNS): {_err(libc)}")
    if libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), f"mount --make-rprivate /: {_err(libc)}")
    if libc.mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None) != 0:
        raise OSError(ctypes.get_errno(), f"mount proc: {_err(libc)}")


def _init(libc: ctypes.CDLL, up: int, parent_alive: int, cmd: list[str]) -> None:
    """PID 1 of the call's namespace: run ARGV, reap orphans, write ARGV's wait status to ``up``, exit."""
    try:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if select.select([parent_alive], [], [], 0)[0]:  # EOF: our parent died before the prctl
            os._exit(1)
        for sig in INIT_IGNORES:
            signal.signal(sig, signal.SIG_IGN)
        _own_proc(libc)
        shell = _fork_shell(cmd, (up, parent_alive))
    except BaseException as exc:
        os.write(up, f"fail:{str(exc).replace(' ', '-')[:120]}\n".encode())
        os._exit(1)
    os.write(up, b"forked\n")
    os.write(up, f"{_wait_for(shell)}\n".encode())
    os._exit(0)  # the kernel kills whatever is left in the namespace before our parent sees us exit


def _child_of(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            kids = [int(x) for x in f.read().split()]
    except OSError:
        kids = _children(pid)
    return kids[0] if kids else 0


def _read_line(fd: int) -> str:
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = os.read(fd, 1)
        if not chunk:
            break
        buf += chunk
    return buf.decode().strip()


def _run_in_namespace(libc: ctypes.CDLL, report: int, mode: str, cmd: list[str]) -> None:
    up_r, up_w = os.pipe()
    alive_r, alive_w = os.pipe()  # the init sees EOF here once we are gone
    init = os.fork()
    if init == 0:
        os.close(report)
        os.close(up_r)
        os.close(alive_w)
        _init(libc, up_w, alive_r, cmd)
    os.close(up_w)
    os.close(alive_r)
    said = _read_line(up_r)
    shell = _child_of(init) if said == "forked" else 0
    if shell == 0:  # the executor starts the call again without a namespace
        os.write(report, f"0 0 none:{said.removeprefix('fail:') or 'init-died'}\n".encode())
        os.close(report)
        _wait_for(init)
        os._exit(124)
    os.write(report, f"{shell} {init} {mode}\n".encode())
    os.close(report)
    said = _read_line(up_r)
    ended = _wait_for(init)
    _exit_like(int(said) if said.isdigit() else ended)


def main(argv: list[str]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if argv[:1] == ["--probe"]:
        probe(libc)
    report, want_ns, cmd = int(argv[0]), argv[1] == "pidns", argv[2:]
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        os._exit(124)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the shell gets the SIGTERM; we wait for it, then clean up
    mode = enter_pidns(libc) if want_ns else "off"
    if mode in ("pidns", "userns"):
        _run_in_namespace(libc, report, mode, cmd)
    pid = _fork_shell(cmd, (report,))
    os.write(report, f"{pid} 0 {mode}\n".encode())
    os.close(report)
    status = _wait_for(pid)
    _kill_all_descendants(os.getpid())
    _exit_like(status)


def probe(libc: ctypes.CDLL) -> None:
    """Print the mode a call would get here (a namespace made, its init run, /proc mounted) and exit."""
    mode = enter_pidns(libc)
    if mode in ("pidns", "userns"):
        r, w = os.pipe()
        init = os.fork()
        if init == 0:
            try:
                _own_proc(libc)
                os.write(w, b"ok\n")
            except OSError as exc:
                os.write(w, f"{exc.strerror or exc}\n".replace(" ", "-").encode())
            os._exit(0)
        os.close(w)
        said = _read_line(r)
        os.waitpid(init, 0)
        mode = mode if said == "ok" else f"none:{said or 'init-died'}"
    print(mode, flush=True)
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1:])
