"""SIGKILL the executor child while a handler runs: after restart the receipt is uncertain, the handler is not
re-run, the caller gets effect_outcome_uncertain; `geode reconcile` lifts the session's quarantine."""

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


def _wait(pred, timeout_s: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout_s
    while not pred():
        assert time.monotonic() < end, "condition not reached"
        time.sleep(0.05)


def test_sigkill_mid_handler_leaves_an_uncertain_receipt(tree: GeodeHome, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    bus = Bus("crash-test", 1, tree).start()
    pgid_file = ws / "pgid"
    try:
        client = ExecutorClient(bus.transport)
        store = StoreClient(bus.transport, timeout_s=5)
        plan = BoundToolPlan.build(builtin_specs())
        _wait(lambda: _bind(client, plan))
        ctx = ToolContext(
            session_id="crash-s",
            turn_id="t1",
            step_id="st1",
            operation_id="op-crash-1",
            mode="IPC",
            workspace=str(ws),
            plan_hash=plan.content_hash,
            plan_generation=plan.generation,
        )
        call = ToolCall(
            id="tu-1",
            name="run_bash",
            input={"command": "echo $$ > pgid; echo run >> runs.log; sleep 30", "timeout": 60},
        )
        first = threading.Thread(target=_fire, args=(bus, ctx, call), daemon=True)
        first.start()
        _wait(lambda: (ws / "runs.log").exists())
        before = children(tree)["executor"]
        os.kill(before.pid, signal.SIGKILL)
        wait_children(
            tree,
            lambda k: (
                k["executor"].state == "running" and k["executor"].incarnation == before.incarnation + 1
            ),
        )
        _wait(lambda: (r := store.get_receipt("op-crash-1")) is not None and r.state.value == "uncertain")
        receipt = store.get_receipt("op-crash-1")
        assert receipt.owner == f"executor#{before.incarnation}"

        again = client.execute(ctx, call)  # re-binds the plan on the new incarnation, then admission
        assert again.error_type == "effect_outcome_uncertain", again
        assert (ws / "runs.log").read_text() == "run\n"  # the handler was not re-run

        later = ctx.model_copy(update={"step_id": "st2", "operation_id": "op-crash-2"})
        blocked = client.execute(
            later, ToolCall(id="tu-2", name="write_file", input={"file_path": "x.txt", "content": "x"})
        )
        assert blocked.error_type == "effect_outcome_uncertain"  # the session is quarantined
        r = geode(tree, "reconcile", "op-crash-1", "--outcome", "applied")
        assert r.returncode == 0, r.stderr
        later = ctx.model_copy(update={"step_id": "st3", "operation_id": "op-crash-3"})
        ok = client.execute(
            later, ToolCall(id="tu-3", name="write_file", input={"file_path": "x.txt", "content": "x"})
        )
        assert not ok.is_error, ok
    finally:
        if pgid_file.exists():
            try:
                os.killpg(int(pgid_file.read_text()), signal.SIGKILL)
            except (ProcessLookupError, ValueError):
                pass
        bus.stop()


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
