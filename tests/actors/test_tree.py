"""The real tree in a temp GEODE_HOME: kill children, kill the supervisor, refuse a second serve, stop."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.tree.instance_lock import InstanceLock
from geode.home import GeodeHome
from tests.actors.tree_kit import alive, children, geode, make_home, settled, stop, wait_children
from tests.waiting import poll_for

NAMES = ["store", "lanes", "executor", "loop-1", "loop-2", "control", "messengers", "scheduler"]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeodeHome]:
    h = make_home(tmp_path_factory.mktemp("tree"))
    r = geode(h, "serve")
    assert r.returncode == 0, r.stdout + r.stderr
    settled(h)  # the loop workers swapped for forks with the SDKs: kills below hit the settled tree
    yield h
    stop(h)


def test_status_json_lists_every_child(home: GeodeHome) -> None:
    r = geode(home, "status", "--json")
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert [c["name"] for c in obj["children"]] == NAMES
    for c in obj["children"]:
        assert set(c) >= {"name", "pid", "incarnation", "state", "uptime_s", "restarts"}
        assert c["state"] == "running" and c["pid"] > 0


def test_sigkill_each_child_comes_back_with_next_incarnation(home: GeodeHome) -> None:
    for name in NAMES:
        before = children(home)[name]
        os.kill(before.pid, signal.SIGKILL)
        after = wait_children(
            home,
            lambda k, n=name, b=before: k[n].state == "running" and k[n].incarnation == b.incarnation + 1,
        )[name]
        assert after.pid != before.pid and after.restarts == before.restarts + 1


def test_second_serve_refuses(home: GeodeHome) -> None:
    for args in (("serve",), ("serve", "--foreground")):
        r = geode(home, *args)
        assert r.returncode == 3
        assert "already running" in r.stderr and str(home.root) in r.stderr


def test_restart_command(home: GeodeHome) -> None:
    before = children(home)["executor"]
    r = geode(home, "restart", "executor")
    assert r.returncode == 0, r.stderr
    wait_children(
        home,
        lambda k: k["executor"].incarnation == before.incarnation + 1 and k["executor"].state == "running",
    )
    assert geode(home, "restart", "nope").returncode == 2


def test_sigkill_supervisor_leaves_no_child(tmp_path: Path) -> None:
    h = make_home(tmp_path)
    assert geode(h, "serve").returncode == 0
    kids = children(h)
    sup_pid = InstanceLock(h.lock_file).holder_pid()
    assert sup_pid
    os.kill(sup_pid, signal.SIGKILL)
    orphans = lambda: [c.pid for c in kids.values() if c.pid and alive(c.pid)]  # noqa: E731
    poll_for(lambda: not orphans(), 5, interval_s=0.05, what="no child surviving the supervisor")
    poll_for(lambda: not InstanceLock(h.lock_file).is_held(), 5, what="the instance lock released")
    # the stale sockets of a killed tree do not stop a new one
    assert geode(h, "serve").returncode == 0
    stop(h)


def test_stop_leaves_no_process_and_no_socket(tmp_path: Path) -> None:
    h = make_home(tmp_path)
    assert geode(h, "serve").returncode == 0
    pids = [c.pid for c in children(h).values() if c.pid]
    sup_pid = InstanceLock(h.lock_file).holder_pid()
    t0 = time.monotonic()
    r = geode(h, "stop")
    assert r.returncode == 0 and "stopped" in r.stdout
    assert time.monotonic() - t0 < 15
    assert not any(alive(p) for p in [*pids, sup_pid])
    assert not list(h.run_dir.glob("*.sock"))
    assert geode(h, "status").returncode == 1


def test_single_process_mode(tmp_path: Path) -> None:
    h = make_home(tmp_path)
    r = geode(h, "serve", "--single-process")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        kids = children(h)
        assert list(kids) == NAMES and len({c.pid for c in kids.values()}) == 1
        assert geode(h, "restart", "store").returncode == 0
        wait_children(h, lambda k: k["store"].incarnation == kids["store"].incarnation + 1)
        assert [p.name for p in h.run_dir.glob("*.sock")] == ["supervisor.sock"]
    finally:
        stop(h)
    assert not list(h.run_dir.glob("*.sock"))


def test_the_daemon_entry_imports_no_cli() -> None:
    """`geode serve` starts the supervisor as ``python -m actors.tree.daemon_main``: the tree's own entry,
    which imports neither typer nor the CLI's command modules (≈ 5 MiB and 0.1-0.4 s at every start), nor
    http.server while the metrics page is off."""
    code = "import sys, actors.tree.daemon_main, actors.tree.serve; print(sorted(m for m in sys.modules"
    code += " if m.split('.')[0] in ('typer', 'click', 'rich', 'http') or m.startswith('actors.cli')))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr
    bad = subprocess.run(
        [sys.executable, "-m", "actors.tree.daemon_main", "--bogus"], capture_output=True, text=True
    )
    assert bad.returncode == 2 and bad.stderr.strip().startswith("usage:"), bad.stderr
