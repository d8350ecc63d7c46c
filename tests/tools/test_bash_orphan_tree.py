"""A real `geode serve` tree: run_bash `sleep 60` with timeout 3, the executor is SIGKILLed mid-command; the
next incarnation kills the orphaned process group at the call's deadline (the receipt stays uncertain)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.store_client import StoreClient
from geode.tools.builtin.bash_groups import proc_stat
from geode.tools.spec import ToolCall
from tests.actors.tree_kit import children, wait_children, wait_for
from tests.tools.executor_tree import allow_all_tree, bound_executor, fire


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[GeodeHome]:
    with allow_all_tree(tmp_path) as home:
        yield home


def _members(pgid: int) -> list[int]:
    found = []
    for e in os.scandir("/proc"):
        if e.name.isdigit() and (st := proc_stat(int(e.name))) is not None and st[0] == pgid:
            found.append(int(e.name))
    return found


def test_orphaned_group_is_killed_at_its_deadline_by_the_next_incarnation(
    tree: GeodeHome, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    bus = Bus("orphan-test", 1, tree).start()
    pgid_file, pgid = ws / "pgid", 0
    try:
        _client, ctx = bound_executor(bus, ws, "orphan-s", "op-orphan-1")
        call = ToolCall(
            id="tu-1", name="run_bash", input={"command": "echo $$ > pgid; sleep 60", "timeout": 3}
        )
        threading.Thread(target=fire, args=(bus, ctx, call), daemon=True).start()
        wait_for(lambda: pgid_file.exists() and pgid_file.read_text().strip() != "")
        started = time.monotonic()  # the command runs: its deadline is about started + 3 s
        groups = tree.run_dir / "executor-groups"
        # noted durably before the command starts; its $$ is its pid in its own PID namespace, the note
        # names the group as this process sees it
        pgid = int(next(groups.glob("*.json")).name.split("-")[0])
        before = children(tree)["executor"]
        os.kill(before.pid, signal.SIGKILL)
        assert _members(pgid), "the group outlives its executor"
        wait_children(
            tree,
            lambda k: (
                k["executor"].state == "running" and k["executor"].incarnation == before.incarnation + 1
            ),
        )
        wait_for(lambda: not _members(pgid), timeout_s=15)
        took = time.monotonic() - started
        print(f"\norphaned group gone {took:.2f}s after the command started (timeout 3 s, grace 2 s)")
        assert 2.5 <= took < 3 + 2 + 4, took  # at its deadline, not before, not never
        wait_for(lambda: not any(groups.glob(f"{pgid}-*.json")), timeout_s=5)
        log_file = tree.logs_dir / "executor.log"
        # the reaper removes the note, then reports: wait for its line rather than read the log once
        wait_for(lambda: "killed at its deadline" in log_file.read_text(), timeout_s=5)
        log = log_file.read_text()
        assert f"orphaned run_bash group {pgid} of op-orphan-1" in log and "killed at its deadline" in log
        store = StoreClient(bus.transport, timeout_s=5)
        wait_for(lambda: (r := store.get_receipt("op-orphan-1")) is not None and r.state.value == "uncertain")

        def killed_event() -> bool:  # appended off the reaper's thread, after its log line
            rows = store.read_timeline("orphan-s")
            kinds = [(r.event.kind, r.event.payload.get("action")) for r in rows]
            return ("tool.orphan_group", "killed") in kinds

        wait_for(killed_event, timeout_s=10)
    finally:
        if pgid and _members(pgid):
            os.killpg(pgid, signal.SIGKILL)
        bus.stop()
