"""`geode stop` under the shipped supervisord.conf says that supervisord manages the tree, how to stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from actors.tree.instance_lock import InstanceLock
from tests.actors.tree_kit import ROOT, alive, children, geode, make_home, wait_for

SUPERVISORD = Path(sys.executable).with_name("supervisord")


@pytest.mark.skipif(not SUPERVISORD.exists(), reason="supervisord not installed in this venv")
def test_stop_names_supervisord_and_how_to_stop_it_there(tmp_path: Path) -> None:
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

    def tree_up() -> bool:
        try:
            return all(c.state == "running" for c in children(home).values())
        except Exception:
            return False

    try:
        wait_for(tree_up, 30, what="tree under supervisord")
        r = geode(home, "stop")
        assert r.returncode == 0, r.stderr
        assert f"managed by supervisord (pid {proc.pid})" in r.stderr
        assert "supervisorctl -c supervisord.conf stop geode" in r.stderr
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        # the tree can outlive supervisord here (seen: one `geode serve` left behind per run): end it too
        root = InstanceLock(home.lock_file).holder_pid()
        if root is not None and alive(root):
            os.kill(root, signal.SIGKILL)  # its children die with it
            wait_for(lambda: not InstanceLock(home.lock_file).is_held(), 10, what="the leftover tree gone")
