"""The shipped supervisord.conf: `supervisord -n` runs the tree and restores it after a root SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from actors.tree.instance_lock import InstanceLock
from tests.actors.supervision_kit import wait_for
from tests.actors.tree_kit import ROOT, alive, children, make_home

SUPERVISORD = Path(sys.executable).with_name("supervisord")


@pytest.mark.skipif(not SUPERVISORD.exists(), reason="supervisord not installed in this venv")
def test_supervisord_restarts_the_root(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    env = {**os.environ, "GEODE_HOME": str(home.root)}
    proc = subprocess.Popen(
        [str(SUPERVISORD), "-n", "-c", str(ROOT / "supervisord.conf")],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    lock = InstanceLock(home.lock_file)

    def tree_up() -> dict[str, object] | None:
        try:
            kids = children(home)
        except Exception:
            return None
        return kids if all(c.state == "running" for c in kids.values()) else None

    try:
        first = wait_for(tree_up, 30, what="tree under supervisord")
        root = lock.holder_pid()
        assert root is not None
        os.kill(root, signal.SIGKILL)
        gone = lambda: not any(alive(c.pid) for c in first.values())  # noqa: E731
        wait_for(gone, 10, what="children gone with the root")
        again = wait_for(
            lambda: (k := tree_up()) and lock.holder_pid() not in (None, root) and k,
            30,
            what="tree back under a new root",
        )
        assert {c.pid for c in again.values()}.isdisjoint({c.pid for c in first.values()})
        assert all(c.incarnation >= 2 for c in again.values())  # incarnations keep growing across roots
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert not lock.is_held()
