"""Start the daemon for the thin CLI when it is not running: startup lock, one starter, bounded wait."""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol.errors import GeodeError

START_TIMEOUT_S = 30.0
EXIT_CONFIG = 78  # what `geode serve --foreground` exits with on a bad config
CRASH_RESTARTS = 2  # a child restarted this often while the tree starts: it cannot start
ERROR_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*")


class DaemonStartFailed(GeodeError):
    """The daemon exited while starting; ``message`` is its one-line reason, ``exit_code`` its exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def start_daemon_reporting(
    home: GeodeHome,
    *,
    single_process: bool = False,
    timeout_s: float = START_TIMEOUT_S,
    spawned: tuple[subprocess.Popen[bytes], int] | None = None,
) -> tuple[int, str]:
    """``start_daemon`` whose failure message is only this start's own output (``serve.out`` is appended
    to by every start), exactly the lines ``geode serve --foreground`` prints. A child that keeps exiting
    while the tree starts ends the wait early: the tree is stopped (nothing is left running) and the
    child's last error is the reason. ``spawned``: the daemon already spawned and ``serve.out``'s size
    before it (:mod:`actors.tree.daemon_spawn`; `geode serve` spawns it before importing this module)."""
    from actors.tree.client import start_daemon, stop_tree
    from actors.tree.daemon_spawn import serve_out_offset

    home.ensure()
    out = home.logs_dir / "serve.out"
    proc, offset = spawned if spawned is not None else (None, serve_out_offset(home))
    box: dict[str, tuple[int, str]] = {}

    def run() -> None:
        try:
            box["out"] = start_daemon(home, single_process=single_process, timeout_s=timeout_s, proc=proc)
        except Exception as exc:  # e.g. a config the client itself cannot read: the start failed, say why
            box["out"] = (1, str(getattr(exc, "message", "") or exc))

    starter = threading.Thread(target=run, name="daemon-start", daemon=True)
    starter.start()
    while starter.is_alive():
        starter.join(0.5)
        failing = None if "out" in box else failing_child(home)
        if failing is not None:
            stop_tree(home, timeout_s=10.0)
            return 1, failing
    rc, message = box["out"]
    if rc == 0:
        return rc, message
    try:
        with open(out, "rb") as f:
            f.seek(offset)
            own = f.read().decode(errors="replace").strip()
    except OSError:
        own = ""
    return rc, own or message


def failing_child(home: GeodeHome, *, restarts: int = CRASH_RESTARTS) -> str | None:
    """``<child> keeps exiting at start: <its last error> (see <its log>)`` when a child of a starting tree
    has been restarted ``restarts`` times and is not running, else None."""
    from actors.tree.client import tree_status

    try:
        st = tree_status(home, timeout_s=1.0)
    except GeodeError:
        return None
    for child in st.children if st is not None else ():
        if child.state == "fatal" or (child.restarts >= restarts and child.state != "running"):
            log = home.logs_dir / f"{child.name}.log"
            return f"{child.name} keeps exiting at start: {last_error(log)} (see {log})"
    return None


def last_error(log: Path) -> str:
    """The last exception line (``FileNotFoundError: …``) of a log, else its last line."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 16_384))
            lines = [ln.strip() for ln in f.read().decode(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return "no log"
    for line in reversed(lines):
        if ERROR_LINE.match(line):
            return line[:300]
    return lines[-1][:300] if lines else "empty log"


def one_line(output: str) -> str:
    """The reason of a failed start in one line: the first ``geode serve:`` problem, not the epilogue."""
    lines = [ln.strip() for ln in output.splitlines() if ln.strip()]
    problems = [
        ln.removeprefix("geode serve: ")
        for ln in lines
        if ln.startswith("geode serve: ") and "refusing to start" not in ln and "warning:" not in ln
    ]
    if problems:
        more = f" (and {len(problems) - 1} more: run `geode doctor`)" if len(problems) > 1 else ""
        return problems[0] + more
    return lines[-1] if lines else "no output (see the logs)"


def control_answers(home: GeodeHome, timeout_s: float = 1.0) -> bool:
    """The socket file exists and something answers ``cli.ping`` within ``timeout_s``."""
    if not home.cli_socket.exists():
        return False
    cl = ControlClient(home)
    try:
        cl.open()
        cl.request(c.PING, {}, timeout_s=timeout_s)
        return True
    except GeodeError:
        return False
    finally:
        cl._hb_stop.set()
        if cl._sock is not None:
            cl._sock.close(0)


def ensure_daemon(
    home: GeodeHome, *, timeout_s: float = START_TIMEOUT_S, say: Callable[[str], None] | None = _say
) -> str:
    """Make sure a daemon serves ``home``; returns how ("running" | "started" | "waited"). Says
    ``starting the daemon…`` (on stderr) while it starts it; a start that fails raises
    :class:`DaemonStartFailed` with the daemon's own one-line reason."""
    if control_answers(home):
        return "running"
    home.ensure()
    deadline = time.monotonic() + timeout_s
    fd = os.open(home.startup_lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            winner = True
        except BlockingIOError:
            winner = False  # another CLI is starting it: just wait for the socket
        if winner and not control_answers(home):
            from actors.tree.client import is_running

            if not is_running(home):
                if say is not None:
                    say("starting the daemon…")
                rc, message = start_daemon_reporting(home, timeout_s=timeout_s)
                if rc != 0:
                    raise DaemonStartFailed(f"the daemon cannot start: {one_line(message)}", rc)
        elif not winner and say is not None:
            say("waiting for the daemon to start…")
        while time.monotonic() < deadline:
            if control_answers(home, timeout_s=0.5):
                return "started" if winner else "waited"
            time.sleep(0.1)
        raise GeodeError(f"the daemon did not open {home.cli_socket} within {timeout_s:g}s")
    finally:
        os.close(fd)  # releases the flock
