"""The operator's views with no daemon: serve, make a turn that writes a file, stop, then `geode sessions`,
`geode receipts` and `geode timeline` print the stored records at once, read directly (no ZeroMQ socket is
opened: the CLI runs with ``zmq.Context.socket`` refusing; the run directory is left as it was)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from actors.tree.instance_lock import InstanceLock
from geode.home import GeodeHome
from tests.actors.tree_kit import ROOT, env, geode, scripted_tree, stop

# `geode ARGS` in a process where any ZeroMQ socket (a bus connection) ends it with exit 97
NO_BUS = """
import os, sys, zmq
def refuse(*a, **k):
    print("a ZeroMQ socket was opened", file=sys.stderr); sys.stderr.flush(); os._exit(97)
zmq.Context.socket = refuse
sys.argv = ["geode", *sys.argv[1:]]
from actors.cli.main import main
main()
"""


def _no_bus(home: GeodeHome, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", NO_BUS, *args],
        env=env(home),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    def reply(req: Any) -> Any:
        last = req.body["messages"][-1]
        if isinstance(last.get("content"), list) and any(
            b.get("type") == "tool_result" for b in last["content"]
        ):
            return {"text": "written"}
        long = "x" * 300  # the payload is cut in a text row: the tool's name must come before it
        call = {
            "name": "write_file",
            "id": "tu_w",
            "input": {"file_path": str(ws / "out.txt"), "content": long},
        }
        return {"tool_calls": [call]}

    return reply


def _listing(run_dir: Path) -> list[tuple[str, float]]:
    return sorted((p.name, p.stat().st_mtime) for p in run_dir.iterdir()) if run_dir.exists() else []


def test_sessions_receipts_and_timeline_read_the_records_with_no_daemon(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with scripted_tree(tmp_path, _reply(ws), ws=ws) as (home, _server):
        asked = geode(home, "ask", "--json", "--dangerously-skip-permissions", "write it", cwd=ws)
        assert asked.returncode == 0, asked.stderr
        sid = json.loads(asked.stdout)["session_id"]
        stop(home)
    assert not InstanceLock(home.lock_file).is_held() and (ws / "out.txt").exists()
    before = _listing(home.run_dir)

    listed = _no_bus(home, "sessions", "--json")
    receipts = _no_bus(home, "receipts", "--session", sid)
    timeline = _no_bus(home, "timeline", sid)

    assert listed.returncode == 0, listed.stderr
    assert [r["session_id"] for r in json.loads(listed.stdout)] == [sid]
    assert receipts.returncode == 0, receipts.stderr
    rows = [line for line in receipts.stdout.splitlines() if "write_file" in line]
    assert len(rows) == 1 and " committed " in rows[0] and sid in rows[0], receipts.stdout
    assert timeline.returncode == 0, timeline.stderr
    called = [line for line in timeline.stdout.splitlines() if " tool.called " in line]
    assert len(called) == 1, timeline.stdout
    assert re.search(r" tool\.called +write_file \{", called[0]), called[0]  # the tool first, then payload
    assert _listing(home.run_dir) == before  # no socket made, nothing touched
