"""The records CLI against a whole running tree (`geode serve --foreground`), including a store restart."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.models import CheckpointSave, ReceiptIdentity
from geode.records.store_client import StoreClient
from tests.actors.tree_kit import geode, geode_popen, status_children
from tests.waiting import poll_for


def child_pid(home: GeodeHome, name: str) -> tuple[int, int]:
    # the supervisor lists its children once the tree has started them all (the store serves before)
    kid = poll_for(
        lambda: status_children(home, timeout=60).get(name), 60, interval_s=0.2, what=f"{name} in status"
    )
    assert kid is not None
    return kid["pid"], kid["incarnation"]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeodeHome]:
    home = GeodeHome(tmp_path_factory.mktemp("tree") / "h").ensure()
    proc = geode_popen(home, "serve", "--foreground", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    bus = Bus("seed", 1, home).start()
    try:
        client = StoreClient(bus.transport, timeout_s=1.0, attempts=1)
        deadline = time.monotonic() + 60
        while True:
            try:
                client.stats()
                break
            except Exception:
                assert proc.poll() is None and time.monotonic() < deadline, "tree never served the store"
        client.attempts = 20
        client.save_checkpoint(
            CheckpointSave(session_id="t1", seq=1, base_count=0, new_messages=[{"role": "user"}])
        )
        ident = ReceiptIdentity(
            session_id="t1", turn_id="t", step_id="s", tool_name="write_file", fingerprint="f"
        )
        client.admit("tree-op", ident, owner="executor#1", effect="write")
        client.mark_uncertain("tree-op", "deadline passed")
    finally:
        bus.stop()
    yield home
    geode(home, "stop")
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_cli_json_against_a_running_tree_survives_a_store_restart(tree: GeodeHome) -> None:
    rows = json.loads(geode(tree, "sessions", "--json").stdout)
    assert [r["session_id"] for r in rows] == ["t1"] and rows[0]["unresolved_receipts"] == 1
    pid, inc = child_pid(tree, "store")
    os.kill(pid, 9)  # the supervisor restarts the store; acknowledged records are still there
    restarted = lambda: child_pid(tree, "store")[1] != inc  # noqa: E731
    poll_for(restarted, 30, interval_s=0.05, what="the store restarted")
    out = geode(tree, "receipts", "--uncertain", "--json")
    assert out.returncode == 0, out.stderr
    assert [r["operation_id"] for r in json.loads(out.stdout)] == ["tree-op"]
    out = geode(tree, "reconcile", "tree-op", "--outcome", "applied", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["outcome"] == "applied"
    assert json.loads(geode(tree, "receipts", "--uncertain", "--json").stdout) == []
    assert json.loads(geode(tree, "timeline", "t1", "--json").stdout) == []
