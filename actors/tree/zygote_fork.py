"""The daemon's first zygote, forked instead of exec'd, so that it shares the daemon's imports.

The supervisor imports ~420 modules (pydantic, zmq, the bus, the config schema, the tree: ~22 MiB of heap)
and the zygote imports nearly all of them again for the children: exec'd, each holds its own copy. Forked
from ``actors.tree.daemon_main`` once the tree's modules are imported (and frozen out of the collector, so
neither side's GC writes to their pages), the zygote starts with them and with ``CORE``, which the daemon
imports just before (:func:`import_core`); the pages stay shared by the supervisor, the zygote and every
child. Only while the daemon has one thread (a fork after threads start is unsafe): otherwise, and for every
later zygote (a restart, from a supervisor whose threads run), :class:`actors.tree.zygote_client.Zygote`
execs ``python -m actors.tree.zygote``.
"""

from __future__ import annotations

import contextlib
import gc
import io
import os
import signal
import socket
import subprocess
import sys
import time
import traceback
from pathlib import Path

TITLE = "-m actors.tree.zygote"  # what ``ps`` shows, as for the exec'd zygote


class ForkedProc:
    """What the zygote client uses of ``subprocess.Popen`` (pid, poll, wait, kill), for a forked zygote."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: gone
                self.returncode = -signal.SIGKILL
                return self.returncode
            if pid == self.pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        end = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if end is not None and time.monotonic() >= end:
                raise subprocess.TimeoutExpired(f"zygote pid {self.pid}", timeout or 0.0)
            time.sleep(0.01)  # a bounded wait for an exit already asked for (close, kill)
        assert self.returncode is not None
        return self.returncode

    def kill(self) -> None:
        if self.returncode is None:  # never signal a pid that may have been reused
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)


def single_threaded() -> bool:
    """This process runs one thread (its own tasks in /proc; False where that cannot be read)."""
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _unbuffered() -> None:
    """stdout and stderr written through, as ``PYTHONUNBUFFERED=1`` makes them in the exec'd zygote (its
    children inherit these objects: a child killed keeps nothing in a buffer)."""
    for fd, name, errors in ((1, "stdout", "strict"), (2, "stderr", "backslashreplace")):
        raw = io.FileIO(fd, "w", closefd=False)
        stream = io.TextIOWrapper(raw, encoding="utf-8", errors=errors, write_through=True)  # type: ignore[arg-type]
        setattr(sys, name, stream)
    os.environ["PYTHONUNBUFFERED"] = "1"


def import_core() -> None:
    """The zygote's ``CORE`` (every child's code), imported here before the fork: the zygote then has nothing
    left to import. Imported by the zygote after the fork instead, its imports wrote into ~11 MiB of the
    pages it shared with this process (new objects in their free slots, reference counts), a private copy in
    each (``GEODE_ZYGOTE_PREIMPORT=0``: that way, to compare). The zygote reports a module that fails."""
    import importlib

    from actors.tree.httpx_no_cli import import_httpx_without_cli
    from actors.tree.zygote import CORE

    import_httpx_without_cli()
    for name in CORE:
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def fork_zygote(env: dict[str, str], log_path: Path, sock: socket.socket) -> ForkedProc | None:
    """Fork the zygote with ``sock`` (its end of the socket pair) and ``env`` added to the environment; its
    output goes to ``log_path``. None when this process has threads (the caller execs it instead)."""
    if not single_threaded():
        return None
    if os.environ.get("GEODE_ZYGOTE_PREIMPORT", "1") != "0":
        import_core()
        if not single_threaded():  # an import started a thread: no fork
            return None
    from actors.tree import immortal, pool_fill
    from actors.tree.child_guard import SUPERVISOR_PID_ENV
    from actors.tree.zygote import ENV_FD

    log_fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice
        with contextlib.suppress(Exception):
            stream.flush()
    gc.collect()
    immortal.immortalize()  # their code's counts: no call in the zygote or a child writes to their pages
    gc.freeze()  # the daemon's imports: neither its collector nor the zygote's writes to their pages
    pool_fill.fill()  # neither side's next allocations land in holes of the pages they share
    pid = os.fork()
    if pid != 0:
        os.close(log_fd)
        return ForkedProc(pid)
    rc = 1
    try:
        from actors.tree import zygote

        if zygote._setproctitle is not None:  # first, before any change to the environment: setproctitle
            # then claims (and blanks) the whole environment block the daemon was exec'd with, which
            # /proc/<pid>/environ shows for the zygote and its children (a variable the daemon drops, e.g.
            # PROMETHEUS_MULTIPROC_DIR with metrics off, would otherwise still be listed there)
            zygote._setproctitle(f"{sys.executable} {TITLE}")
        fd = sock.detach()  # ours to keep; every other descriptor of the daemon is closed below
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.closerange(3, fd)
        os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
        _unbuffered()
        os.environ.update(env)
        os.environ[ENV_FD] = str(fd)
        os.environ[SUPERVISOR_PID_ENV] = str(os.getppid())
        sys.argv = [TITLE]
        rc = zygote.main()
    except BaseException:
        with contextlib.suppress(Exception):
            traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(rc)
