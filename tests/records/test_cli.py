"""The records CLI against a running store child: `--json` output parses and reflects the store."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.models import CheckpointSave, ReceiptIdentity, TimelineEvent
from geode.records.store_client import StoreClient
from tests.records.harness import ROOT, spawn_store


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeodeHome]:
    home = GeodeHome(tmp_path_factory.mktemp("cli") / "h").ensure()
    proc = spawn_store(home)
    bus = Bus("seed", 1, home).start()
    c = StoreClient(bus.transport)
    c.save_checkpoint(CheckpointSave(session_id="s1", seq=1, base_count=0, new_messages=[{"role": "user"}]))
    c.append_timeline(
        TimelineEvent(
            session_id="s1", event_id="e1", kind="turn.started", ts=1.0, payload={"token": "sekret", "n": 1}
        )
    )
    ident = ReceiptIdentity(
        session_id="s1", turn_id="t", step_id="st", tool_name="write_file", fingerprint="f"
    )
    c.admit("op-1", ident, owner="executor#1", effect="write")
    c.owner_died("executor", 1)
    bus.stop()
    yield home
    proc.terminate()
    proc.wait(10)


def geode(home: GeodeHome, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "actors.cli.main", *args, "--home", str(home.root)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_sessions_json(tree: GeodeHome) -> None:
    out = geode(tree, "sessions", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows[0]["session_id"] == "s1" and rows[0]["unresolved_receipts"] == 1


def test_timeline_json(tree: GeodeHome) -> None:
    out = geode(tree, "timeline", "s1", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows[0]["event"]["kind"] == "turn.started" and rows[0]["event"]["payload"]["token"] == "[REDACTED]"
    assert rows[0]["corrupt"] is False


def test_receipts_and_reconcile_json(tree: GeodeHome) -> None:
    out = geode(tree, "receipts", "--uncertain", "--session", "s1", "--json")
    assert out.returncode == 0, out.stderr
    assert [r["operation_id"] for r in json.loads(out.stdout)] == ["op-1"]
    out = geode(tree, "reconcile", "op-1", "--outcome", "not-applied", "--note", "checked", "--json")
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout)
    assert r["state"] == "reconciled" and r["outcome"] == "not_applied" and r["note"] == "checked"
    assert r["reconciled_by"].startswith("cli:")
    out = geode(tree, "receipts", "--uncertain", "--json")
    assert json.loads(out.stdout) == []
    plain = geode(tree, "receipts")
    assert plain.returncode == 0 and "op-1" in plain.stdout


def test_bad_outcome_is_refused(tree: GeodeHome) -> None:
    out = geode(tree, "reconcile", "op-1", "--outcome", "maybe")
    assert out.returncode == 2 and "applied or not-applied" in out.stderr


def test_unknown_receipt_is_a_clear_error(tree: GeodeHome) -> None:
    out = geode(tree, "reconcile", "nope", "--outcome", "applied")
    assert out.returncode == 1 and "no receipt nope" in out.stderr
    assert Path(tree.root).exists()
