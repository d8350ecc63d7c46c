"""Start the daemon for the thin CLI when it is not running: startup lock, one starter, bounded wait."""

from __future__ import annotations

import fcntl
import os
import time

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol.errors import GeodeError

START_TIMEOUT_S = 30.0


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


def ensure_daemon(home: GeodeHome, *, timeout_s: float = START_TIMEOUT_S) -> str:
    """Make sure a daemon serves ``home``; returns how ("running" | "started" | "waited")."""
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
            from actors.tree_client import is_running, start_daemon

            if not is_running(home):
                rc, message = start_daemon(home, timeout_s=timeout_s)
                if rc != 0:
                    raise GeodeError(f"could not start the daemon: {message}")
        while time.monotonic() < deadline:
            if control_answers(home, timeout_s=0.5):
                return "started" if winner else "waited"
            time.sleep(0.1)
        raise GeodeError(f"the daemon did not open {home.cli_socket} within {timeout_s:g}s")
    finally:
        os.close(fd)  # releases the flock
