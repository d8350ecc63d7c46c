"""Start a real `geode serve` tree in a temporary GEODE_HOME for the integration tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from actors.tree_client import stop_tree, tree_status
from geode.home import GeodeHome
from geode.protocol.runtime import ChildInfo

ROOT = Path(__file__).resolve().parents[2]
FAST_CONFIG = """
[supervisor]
backoff_base_s = 0.05
backoff_max_s = 0.2
stable_s = 1.0
[loop]
workers = 2
"""


def make_home(base: Path, extra: str = "") -> GeodeHome:
    home = GeodeHome(base / "gh").ensure()
    home.config_file.write_text(FAST_CONFIG + extra)
    return home


def geode(home: GeodeHome, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "actors.cli.main", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def children(home: GeodeHome) -> dict[str, ChildInfo]:
    st = tree_status(home)
    assert st is not None, "tree not running"
    return {c.name: c for c in st.children}


def wait_children(home: GeodeHome, pred, timeout_s: float = 15.0) -> dict[str, ChildInfo]:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while True:
        try:
            kids = children(home)
            if pred(kids):
                return kids
        except Exception:
            pass
        if time.monotonic() > end:
            raise AssertionError("tree did not reach the expected state")
        time.sleep(0.05)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


def stop(home: GeodeHome) -> None:
    stop_tree(home, timeout_s=20)
