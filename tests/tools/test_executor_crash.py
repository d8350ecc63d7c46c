"""SIGKILL the executor child while a handler runs: after restart the receipt is uncertain, the handler is not
re-run, the caller gets effect_outcome_uncertain; `geode reconcile` lifts the session's quarantine."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.store_client import StoreClient
from geode.tools.spec import ToolCall
from tests.actors.tree_kit import children, geode, wait_children, wait_for
from tests.processes import kill_bash_calls_in
from tests.tools.executor_tree import allow_all_tree, bound_executor, fire


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[GeodeHome]:
    with allow_all_tree(tmp_path) as home:
        yield home


def test_sigkill_mid_handler_leaves_an_uncertain_receipt(tree: GeodeHome, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    bus = Bus("crash-test", 1, tree).start()
    try:
        client, ctx = bound_executor(bus, ws, "crash-s", "op-crash-1")
        store = StoreClient(bus.transport, timeout_s=5)
        call = ToolCall(
            id="tu-1",
            name="run_bash",
            input={"command": "echo $$ > pgid; echo run >> runs.log; sleep 30", "timeout": 60},
        )
        first = threading.Thread(target=fire, args=(bus, ctx, call), daemon=True)
        first.start()
        wait_for(lambda: (ws / "runs.log").exists())
        before = children(tree)["executor"]
        os.kill(before.pid, signal.SIGKILL)
        wait_children(
            tree,
            lambda k: (
                k["executor"].state == "running" and k["executor"].incarnation == before.incarnation + 1
            ),
        )
        wait_for(lambda: (r := store.get_receipt("op-crash-1")) is not None and r.state.value == "uncertain")
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
        kill_bash_calls_in(ws)
        bus.stop()
