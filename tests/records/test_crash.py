"""Crash test: several client processes write over the bus; the store child is SIGKILLed mid-burst and
restarted. Every acknowledged write is present, no record is partial, retried writes are not doubled."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from geode.home import GeodeHome
from geode.records.engine import RecordEngine
from tests.processes import Child
from tests.records.harness import ROOT, spawn_store
from tests.waiting import poll_for

CLIENTS, WRITES = 4, 40


def test_sigkill_mid_burst_loses_no_acknowledged_write(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    store = spawn_store(home, 1)
    acks = tmp_path / "acks"
    writers = [
        Child(
            [
                sys.executable,
                "-m",
                "tests.records.crash_writer",
                str(home.root),
                str(i),
                str(WRITES),
                f"{acks}{i}",
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(CLIENTS)
    ]
    try:
        acked = lambda: sum(_count(Path(f"{acks}{i}")) for i in range(CLIENTS)) >= CLIENTS * 15  # noqa: E731
        poll_for(acked, 60, interval_s=0.01, what="the writers' first acknowledged writes")
        store.kill()  # SIGKILL mid-burst
        store.wait()
        store = spawn_store(home, 2)
        retries = 0
        for w in writers:
            out, err = w.communicate(timeout=120)
            assert w.returncode == 0, err[-2000:]
            assert out.startswith("done")
            retries += int(out.split("retries=")[1])
        assert retries >= 1  # the kill really landed mid-burst: some request had to be retried
    finally:
        for w in writers:
            w.kill()
            w.wait()
        store.terminate()
        store.wait(10)

    with RecordEngine.for_home(home) as engine:
        for i in range(CLIENTS):
            sid = f"crash-{i}"
            lines = Path(f"{acks}{i}").read_text().splitlines()
            restored = engine.load_checkpoint(sid)
            assert restored is not None
            # complete, in order, not doubled: the chain has exactly WRITES messages
            assert restored.state.seq == WRITES and restored.state.message_count == WRITES
            assert [m["content"] for m in restored.messages] == [f"{i}:{n}" for n in range(WRITES)]
            rows = engine.read_timeline(sid)
            assert [r.event.event_id for r in rows] == [f"e{n}" for n in range(WRITES)]
            assert [r.seq for r in rows] == list(range(1, WRITES + 1)) and not any(r.corrupt for r in rows)
            for line in lines:
                tag, ident, *rest = line.split()
                if tag == "ck":
                    assert int(rest[0]) <= restored.state.seq
                if tag == "tl":
                    assert rest[0] in {r.event.event_id for r in rows}
                if tag == "rc":
                    r = engine.get_receipt(ident)
                    assert r is not None and r.state.value == "committed"
            receipts = engine.list_receipts(session_id=sid)
            assert len(receipts) == WRITES  # one per op id, never two
            # an op admitted by the killed store's batch but never committed must be visible, not lost
            assert all(r.state.value in ("committed", "admitted") for r in receipts)


def _count(path: Path) -> int:
    try:
        return path.read_text().count("\n")
    except FileNotFoundError:
        return 0
