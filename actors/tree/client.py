"""Talking to a running tree from outside (CLI, tests, demo): status, stop, restart, daemon start."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager

from actors.bus import Bus
from actors.bus.endpoints import Endpoints
from actors.tree.instance_lock import SERVE, InstanceLock
from geode.home import GeodeHome
from geode.protocol import runtime
from geode.protocol.errors import ConfigError, GeodeError, RequestTimeout, Unavailable

ENDPOINT = "supervisor"


_buses = itertools.count(1)


@contextmanager
def client_bus(home: GeodeHome) -> Iterator[Bus]:
    """A short-lived bus. Its name (the DEALER routing id) is unique per bus, not per process: two at once
    under one id would make the supervisor's ROUTER (ROUTER_HANDOVER) send one's replies to the other."""
    bus = Bus(f"cli-{os.getpid()}-{next(_buses)}", 1, home, endpoints=_endpoints(home)).start()
    try:
        yield bus
    finally:
        bus.stop()


def _endpoints(home: GeodeHome) -> Endpoints:
    """The home's endpoints; with a broken config and no last good one, the defaults (ipc under the home's
    run directory, where the supervisor listens): `geode stop`, `status`, `restart` never need the file."""
    try:
        return Endpoints.from_config(home)
    except ConfigError:
        return Endpoints(home)


def is_running(home: GeodeHome) -> bool:
    return InstanceLock(home.lock_file).is_held()


def in_process_tree(home: GeodeHome) -> str | None:
    """When the home's tree runs inside another command's process (`geode mcp`, `geode --repl`), the line
    that says so, the same for `geode serve` and `geode status` (such a tree has no supervisor socket to ask);
    None when a `geode serve` daemon, or nothing, holds the home."""
    lock = InstanceLock(home.lock_file)
    if not lock.is_held() or (holder := lock.holder()) == SERVE:
        return None
    pid = lock.holder_pid()
    who = f" (pid {pid})" if pid else ""
    return f"a {holder} process{who} runs an in-process tree for GEODE_HOME={home.root}"


def tree_status(home: GeodeHome, timeout_s: float = 3.0) -> runtime.TreeStatus | None:
    """The tree's status, or None when no supervisor holds this home."""
    if not is_running(home):
        return None
    with client_bus(home) as bus:
        reply = bus.transport.call(ENDPOINT, runtime.TREE_STATUS, timeout_s=timeout_s)
    return runtime.TreeStatus.model_validate(reply)


def restart_child(home: GeodeHome, name: str, timeout_s: float = 3.0) -> None:
    with client_bus(home) as bus:
        bus.transport.call(ENDPOINT, runtime.TREE_RESTART, {"name": name}, timeout_s=timeout_s)


def stop_tree(home: GeodeHome, timeout_s: float = 30.0) -> bool:
    """Ask for a graceful stop; fall back to SIGTERM, then SIGKILL of the lock holder. True if stopped."""
    lock = InstanceLock(home.lock_file)
    if not lock.is_held():
        return True
    pid = lock.holder_pid()
    try:
        with client_bus(home) as bus:
            bus.transport.call(ENDPOINT, runtime.TREE_STOP, timeout_s=3.0)
    except (RequestTimeout, Unavailable):
        if pid:
            _signal(pid, signal.SIGTERM)
    end = time.monotonic() + timeout_s
    while lock.is_held() or (pid and _running(pid)):  # the lock goes first; the process ends just after
        if time.monotonic() > end:
            if pid:
                _signal(pid, signal.SIGKILL)
            time.sleep(0.2)
            return not lock.is_held()
        time.sleep(0.05)
    return True


def _running(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a detached daemon is reaped by init, not by us)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1][:1] != "Z"
    except (OSError, IndexError):
        return False


def start_daemon(
    home: GeodeHome,
    *,
    single_process: bool = False,
    timeout_s: float = 30.0,
    proc: subprocess.Popen[bytes] | None = None,
) -> tuple[int, str]:
    """Start ``geode serve --foreground`` detached (its entry without the CLI: ``actors.tree.daemon_main``;
    ``proc``: already spawned by :func:`actors.tree.daemon_spawn.spawn_daemon`); wait until every child is
    running. (exit code, message)"""
    if proc is None:
        from actors.tree.daemon_spawn import spawn_daemon

        proc = spawn_daemon(home, single_process=single_process)
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        rc = proc.poll()
        if rc is not None:
            return rc, _tail(home)
        try:
            st = tree_status(home, timeout_s=1.0)
        except GeodeError:  # not up yet, or it cannot be asked (a bad config): the process's exit code tells
            st = None
        if st is not None and st.children and all(c.state == "running" for c in st.children):
            return 0, f"geode is running (pid {st.pid}, {len(st.children)} children)"
        time.sleep(0.1)
    return 1, f"geode serve (pid {proc.pid}) not ready within {timeout_s:g}s; see {home.logs_dir}"


def _tail(home: GeodeHome, n: int = 2000) -> str:
    try:
        return (home.logs_dir / "serve.out").read_bytes()[-n:].decode(errors="replace").strip()
    except OSError:
        return ""


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass
