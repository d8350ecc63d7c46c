"""The restart policy on a real `geode serve` tree: a flapping loop worker turns fatal in `geode status` while
every other child keeps its process, and `geode restart` brings it back."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from tests.actors.tree_kit import geode, make_home, serve, stop, wait_children

GUARD = "[supervisor]\nintensity = 2\nperiod_s = 300.0\n"


def test_a_flapping_loop_worker_is_fatal_the_tree_keeps_serving_and_restart_clears_it(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    home.config_file.write_text(home.config_file.read_text().replace("[supervisor]\n", GUARD, 1))
    serve(home)
    try:
        kids = wait_children(home, lambda k: all(c.state == "running" for c in k.values()), 90)
        others = {n: c.pid for n, c in kids.items() if n != "loop-1"}
        for _ in range(3):
            c = wait_children(home, lambda k: k["loop-1"].state == "running", 90)["loop-1"]
            assert c.pid is not None
            os.kill(c.pid, signal.SIGKILL)
            wait_children(
                home, lambda k, i=c.incarnation: k["loop-1"].incarnation > i or k["loop-1"].pid is None, 90
            )
        kids = wait_children(home, lambda k: k["loop-1"].state == "fatal", 90)
        assert {n: c.pid for n, c in kids.items() if n != "loop-1"} == others  # nobody else was touched
        out = geode(home, "status").stdout
        assert "fatal (3 restarts within 300 s; geode restart loop-1)" in out, out
        r = geode(home, "restart", "loop-1")
        assert r.returncode == 0, r.stderr
        back = wait_children(home, lambda k: k["loop-1"].state == "running", 90)["loop-1"]
        assert back.reason == "" and geode(home, "status").returncode == 0
    finally:
        stop(home)
