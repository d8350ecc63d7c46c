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
from geode.protocol import tools as m
from geode.records.store_client import StoreClient
from geode.tools.builtin.bash_groups import proc_stat
from geode.tools.builtin.catalogue import builtin_specs
from geode.tools.executor_client import ExecutorClient
from geode.tools.plan import BoundToolPlan
from geode.tools.spec import ToolCall, ToolContext
from tests.actors.tree_kit import children, geode, make_home, stop, wait_children

ALLOW_ALL = """
[[hooks.PermissionRequest]]
command = '''echo '{"hookSpecificOutput": {"permissionDecision": "allow"}}' '''
"""


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[GeodeHome]:
    home = make_home(tmp_path, ALLOW_ALL)
    r = geode(home, "serve")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        yield home
    finally:
        stop(home)


def _members(pgid: int) -> list[int]:
    found = []
    for e in os.scandir("/proc"):
        if e.name.isdigit() and (st := proc_stat(int(e.name))) is not None and st[0] == pgid:
            found.append(int(e.name))
    return found


def _wait(pred, timeout_s: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.05)


def _bind(client: ExecutorClient, plan: BoundToolPlan) -> bool:
    try:
        client.bind_plan(plan)
        return True
    except Exception:
        return False


def _fire(bus: Bus, ctx: ToolContext, call: ToolCall) -> None:
    try:
        bus.transport.call("executor", m.EXECUTE, m.ToolExecute(ctx=ctx, call=call), timeout_s=20)
    except Exception:
        pass  # the executor dies under this call


def test_orphaned_group_is_killed_at_its_deadline_by_the_next_incarnation(
    tree: GeodeHome, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    bus = Bus("orphan-test", 1, tree).start()
    pgid_file, pgid = ws / "pgid", 0
    try:
        client = ExecutorClient(bus.transport)
        plan = BoundToolPlan.build(builtin_specs())
        _wait(lambda: _bind(client, plan))
        ctx = ToolContext(
            session_id="orphan-s",
            turn_id="t1",
            step_id="st1",
            operation_id="op-orphan-1",
            mode="IPC",
            workspace=str(ws),
            plan_hash=plan.content_hash,
            plan_generation=plan.generation,
        )
        call = ToolCall(
            id="tu-1", name="run_bash", input={"command": "echo $$ > pgid; sleep 60", "timeout": 3}
        )
        threading.Thread(target=_fire, args=(bus, ctx, call), daemon=True).start()
        _wait(lambda: pgid_file.exists() and pgid_file.read_text().strip() != "")
        started = time.monotonic()  # the command runs: its deadline is about started + 3 s
        pgid = int(pgid_file.read_text())
        groups = tree.run_dir / "executor-groups"
        _wait(lambda: any(groups.glob(f"{pgid}-*.json")))  # noted durably
        before = children(tree)["executor"]
        os.kill(before.pid, signal.SIGKILL)
        assert _members(pgid), "the group outlives its executor"
        wait_children(
            tree,
            lambda k: (
                k["executor"].state == "running" and k["executor"].incarnation == before.incarnation + 1
            ),
        )
        _wait(lambda: not _members(pgid), timeout_s=15)
        took = time.monotonic() - started
        print(f"\norphaned group gone {took:.2f}s after the command started (timeout 3 s, grace 2 s)")
        assert 2.5 <= took < 3 + 2 + 4, took  # at its deadline, not before, not never
        _wait(lambda: not any(groups.glob(f"{pgid}-*.json")), timeout_s=5)
        log = (tree.logs_dir / "executor.log").read_text()
        assert f"orphaned run_bash group {pgid} of op-orphan-1" in log and "killed at its deadline" in log
        store = StoreClient(bus.transport, timeout_s=5)
        _wait(lambda: (r := store.get_receipt("op-orphan-1")) is not None and r.state.value == "uncertain")
        rows = store.read_timeline("orphan-s")
        assert any(
            r.event.kind == "tool.orphan_group" and r.event.payload["action"] == "killed" for r in rows
        ), [r.event.kind for r in rows]
    finally:
        if pgid and _members(pgid):
            os.killpg(pgid, signal.SIGKILL)
        bus.stop()
