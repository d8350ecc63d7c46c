"""Operator commands at scale (issue 12): `geode receipts --limit` and a marker line when a listing is cut;
an out-of-range --limit is a one-line error with exit 2, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.records.models import CheckpointSave, ReceiptIdentity
from geode.records.store_client import StoreClient
from tests.records.harness import spawn_store
from tests.records.test_cli import geode

RECEIPTS = 5


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeodeHome]:
    home = GeodeHome(tmp_path_factory.mktemp("cli-limits") / "h").ensure()
    proc = spawn_store(home)
    bus = Bus("seed", 1, home).start()
    c = StoreClient(bus.transport)
    for i in range(3):
        c.save_checkpoint(
            CheckpointSave(session_id=f"s{i}", seq=1, base_count=0, new_messages=[{"role": "user"}])
        )
    for i in range(RECEIPTS):
        ident = ReceiptIdentity(
            session_id="s0", turn_id="t", step_id="st", tool_name="write_file", fingerprint=f"f{i}"
        )
        c.admit(f"op-{i}", ident, owner="executor#1", effect="write")
        c.commit(f"op-{i}", {"ok": i})
    bus.stop()
    yield home
    proc.terminate()
    proc.wait(10)


def test_receipts_limit_cuts_and_says_so(tree: GeodeHome) -> None:
    out = geode(tree, "receipts", "--limit", "2")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    assert sum(1 for ln in lines if ln.startswith("op-")) == 2
    assert lines[-1] == "showing 2 of more than 2; --limit to see more"
    js = geode(tree, "receipts", "--limit", "2", "--json")
    assert js.returncode == 0 and len(json.loads(js.stdout)) == 2  # stdout stays JSON
    assert "showing 2 of more than 2" in js.stderr


def test_receipts_without_a_cut_has_no_marker(tree: GeodeHome) -> None:
    out = geode(tree, "receipts", "--limit", str(RECEIPTS))
    assert out.returncode == 0, out.stderr
    assert sum(1 for ln in out.stdout.splitlines() if ln.startswith("op-")) == RECEIPTS
    assert "showing" not in out.stdout + out.stderr


def test_sessions_limit_marker(tree: GeodeHome) -> None:
    out = geode(tree, "sessions", "--limit", "1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "showing 1 of more than 1; --limit to see more"


@pytest.mark.parametrize("cmd", [("sessions", "--limit", "10000"), ("receipts", "--limit", "0")])
def test_bad_limit_is_a_one_line_error(tree: GeodeHome, cmd: tuple[str, ...]) -> None:
    out = geode(tree, *cmd)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and "validation error" not in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("error: --limit must be")
