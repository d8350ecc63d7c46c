"""SIGKILL the executor child while a handler runs: after restart the receipt is uncertain, the handler is not
re-run, the caller gets effect_outcome_uncertain; `geode reconcile` lifts the session's quarantine. A
write_file killed mid-way (fault points) is settled by observation: the new executor looks at the file and
reconciles it applied or not applied, with the hashes as evidence."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.models import Receipt
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


# the first write is killed after its admission (the handler never ran); the next incarnation's first write is
# killed in its handler thread after the file was replaced (the write landed); each fault fires once per home
FAULTS = "executor@executor.after_admit:kill,executor@executor.in_handler:kill"


@pytest.fixture
def faulted_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[GeodeHome]:
    monkeypatch.setenv("GEODE_FAULTS", FAULTS)
    with allow_all_tree(tmp_path) as home:
        yield home


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _killed_write(home: GeodeHome, bus: Bus, ws: Path, session: str, op: str, path: str) -> Receipt:
    """Send a write_file that the armed fault kills; return its receipt once it is settled (the executor's
    next incarnation observes it at start: no person, no `geode reconcile`)."""
    before = children(home)["executor"]
    _client, ctx = bound_executor(bus, ws, session, op)
    call = ToolCall(id=f"tu-{op}", name="write_file", input={"file_path": path, "content": "new\n"})
    threading.Thread(target=fire, args=(bus, ctx, call), daemon=True).start()
    wait_children(
        home,
        lambda k: k["executor"].state == "running" and k["executor"].incarnation > before.incarnation,
        timeout_s=30,
    )
    store = StoreClient(bus.transport, timeout_s=5)
    wait_for(
        lambda: (r := store.get_receipt(op)) is not None and r.state.value == "reconciled",
        timeout_s=30,
        what=f"{op} was not settled by observation",
    )
    receipt = store.get_receipt(op)
    assert receipt is not None and receipt.owner == f"executor#{before.incarnation}"
    return receipt


def test_a_write_killed_mid_way_is_settled_by_observation(faulted_tree: GeodeHome, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "kept.txt").write_text("old\n")
    bus = Bus("observe-test", 1, faulted_tree).start()
    try:
        # killed before the handler ran: the file still holds what it held at admission → not applied
        lost = _killed_write(faulted_tree, bus, ws, "obs-s1", "op-obs-1", "kept.txt")
        assert (ws / "kept.txt").read_text() == "old\n"
        assert lost.outcome == "not_applied" and lost.reconciled_by == "observation", lost
        seen = lost.observation
        assert seen is not None and seen.kind == "file_sha256" and seen.target == str(ws / "kept.txt")
        assert (seen.before, seen.intended, seen.observed) == (_sha("old\n"), _sha("new\n"), _sha("old\n"))
        assert lost.result is not None and lost.result["reconciled_by_operator"] is False

        # killed after the write landed (in the handler thread): the file holds the intended text → applied
        landed = _killed_write(faulted_tree, bus, ws, "obs-s2", "op-obs-2", "made.txt")
        assert (ws / "made.txt").read_text() == "new\n"
        assert landed.outcome == "applied" and landed.reconciled_by == "observation", landed
        seen = landed.observation
        assert seen is not None and (seen.before, seen.observed) == ("absent", _sha("new\n"))

        # what an operator reads says the same, and both sessions take their next write without a person
        listed = json.loads(geode(faulted_tree, "receipts", "--json").stdout)
        by_op = {r["operation_id"]: r for r in listed}
        assert by_op["op-obs-1"]["reconciled_by"] == "observation"
        assert by_op["op-obs-2"]["result"]["evidence"]["observed"] == _sha("new\n")
        client, ctx = bound_executor(bus, ws, "obs-s1", "op-obs-3")
        later = ctx.model_copy(update={"step_id": "st2"})
        ok = client.execute(
            later, ToolCall(id="tu-3", name="write_file", input={"file_path": "kept.txt", "content": "x"})
        )
        assert not ok.is_error, ok
        assert (ws / "kept.txt").read_text() == "x"
    finally:
        bus.stop()
