"""The runtime part of scripts/demo: serve, status, SIGKILL a child, see it back, stop."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

VENV_BIN = Path(sys.executable).parent


def geode(*args: str, env: dict[str, str], check: bool = True) -> subprocess.CompletedProcess[str]:
    print(f"$ geode {' '.join(args)}", flush=True)
    r = subprocess.run([str(VENV_BIN / "geode"), *args], env=env, text=True, capture_output=True, timeout=60)
    out = (r.stdout + r.stderr).rstrip()
    if out:
        print(out, flush=True)
    if check and r.returncode != 0:
        raise SystemExit(f"geode {' '.join(args)} failed with {r.returncode}")
    return r


def main() -> int:
    home = Path(tempfile.mkdtemp(prefix="geode-demo-"))
    env = {**os.environ, "GEODE_HOME": str(home)}
    (home / "config.toml").write_text("[loop]\nworkers = 2\n")
    print(f"GEODE_HOME={home}")
    try:
        geode("serve", env=env)
        geode("status", env=env)
        from actors.tree.client import tree_status
        from geode.home import GeodeHome

        gh = GeodeHome(home)
        st = tree_status(gh)
        assert st is not None
        victim = next(c for c in st.children if c.name == "store")
        print(f"\n# SIGKILL store (pid {victim.pid}, incarnation {victim.incarnation})", flush=True)
        assert victim.pid is not None
        os.kill(victim.pid, signal.SIGKILL)
        t0 = time.monotonic()
        while True:
            st = tree_status(gh)
            back = next(c for c in st.children if c.name == "store") if st else None
            if back and back.state == "running" and back.incarnation == victim.incarnation + 1:
                break
            if time.monotonic() - t0 > 15:
                raise SystemExit("store did not come back")
            time.sleep(0.05)
        took = time.monotonic() - t0
        print(f"# store is back after {took:.2f}s as pid {back.pid}, incarnation {back.incarnation}\n")
        geode("status", env=env)
        geode("stop", env=env)
        left = list(gh.run_dir.glob("*.sock"))
        assert not left, left
        print("\ndemo ok: tree started, child restarted with a new incarnation, tree stopped cleanly")
        return 0
    finally:
        from actors.tree.client import is_running, stop_tree
        from geode.home import GeodeHome

        if is_running(GeodeHome(home)):
            stop_tree(GeodeHome(home))
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
