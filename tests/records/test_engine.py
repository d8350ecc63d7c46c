"""Engine contracts: group commit, a bad operation never poisons its batch, map full, unwritable directory."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from geode.config_schema import GeodeConfig
from geode.config_source import ConfigSource
from geode.home import GeodeHome
from geode.protocol.errors import Conflict, Unavailable
from geode.records.engine import RecordEngine
from geode.records.lmdb_env import key
from geode.records.models import CheckpointSave, TimelineEvent
from geode.records.settings import StoreConfig
from tests.records.harness import local_store, spawn_store, write_config


def test_concurrent_writes_are_group_committed(home: GeodeHome) -> None:
    ls = local_store(home)
    try:
        start = threading.Barrier(32)

        def worker(n: int) -> None:
            start.wait()
            for i in range(10):
                ls.client.set_cursor("p", "a", f"c{n}-{i}", str(i))

        threads = [threading.Thread(target=worker, args=(n,)) for n in range(32)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        stats = ls.engine.writer.stats
        assert stats.ops >= 320 and stats.max_batch > 1 and stats.batches < stats.ops
        assert all(
            ls.client.get_cursor("p", "a", f"c{n}-{i}") == str(i) for n in range(32) for i in range(10)
        )
    finally:
        ls.close()


def test_a_failing_operation_does_not_poison_its_batch(home: GeodeHome) -> None:
    ls = local_store(home)
    w = ls.engine.writer
    db = ls.engine.renv.db("cursors")
    gate = threading.Event()
    try:
        blocker = w.submit(lambda txn: gate.wait(5))  # holds the writer so the next three share one batch
        good1 = w.submit(lambda txn: txn.put(key("g1"), b"1", db=db))

        def bad(txn):  # type: ignore[no-untyped-def]
            txn.put(key("bad"), b"x", db=db)
            raise Conflict("refused")

        bad_f = w.submit(bad)
        good2 = w.submit(lambda txn: txn.put(key("g2"), b"2", db=db))
        gate.set()
        blocker.result(5)
        assert good1.result(5) and good2.result(5)
        with pytest.raises(Conflict):
            bad_f.result(5)
        assert w.stats.max_batch >= 3
        with ls.engine.renv.read() as txn:
            assert txn.get(key("g1"), db=db) == b"1" and txn.get(key("g2"), db=db) == b"2"
            assert txn.get(key("bad"), db=db) is None  # the failed op's partial write was rolled back
    finally:
        ls.close()


def test_map_grows_then_full_is_unavailable_and_acknowledged_data_survives(home: GeodeHome) -> None:
    cfg = StoreConfig(map_size_mb=1, map_max_mb=2)
    ls = local_store(home, cfg)
    ls.client.attempts = 1
    acked = []
    blob = [{"role": "user", "content": "x" * 20_000}]
    err = None
    try:
        for i in range(400):
            try:
                ls.client.save_checkpoint(
                    CheckpointSave(session_id=f"s{i}", seq=1, base_count=0, new_messages=blob)
                )
                acked.append(f"s{i}")
            except Unavailable as exc:
                err = exc
                break
        assert err is not None and "map is full" in err.message and "2 MiB" in err.message
        assert ls.engine.renv.growths == 1 and len(acked) > 30
        # small writes that still fit keep working; the store stays up
        ls.client.set_cursor("p", "a", "c", "1")
    finally:
        ls.close()
    with RecordEngine.for_home(home, cfg) as engine:
        assert all(engine.load_checkpoint(s) is not None for s in acked)
        assert engine.get_cursor("p", "a", "c") == "1"


def test_unwritable_records_directory_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    engine = RecordEngine(blocker / "records", tmp_path / "ev")
    with pytest.raises(Unavailable, match="cannot open record store"):
        engine.open()
    if os.geteuid() != 0:  # root ignores permission bits
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o500)
        with pytest.raises(Unavailable, match="not writable"):
            RecordEngine(ro / "records", tmp_path / "ev").open()


def test_store_child_exits_with_the_reason_when_it_cannot_open(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    home.records_dir.rmdir()
    home.records_dir.write_text("blocked")
    p = spawn_store(home, wait=False)
    _out, err = p.communicate(timeout=30)
    assert p.returncode == 75 and "the record store cannot open" in err


def test_map_size_comes_from_config(home: GeodeHome) -> None:
    write_config(home, {"map_size_mb": 8, "map_max_mb": 64})
    with RecordEngine.for_home(home, ConfigSource(home, GeodeConfig.from_raw).snapshot.store) as engine:
        st = engine.stats()
        assert st["map_size"] == 8 * 1024 * 1024 and st["map_max"] == 64 * 1024 * 1024
        engine.append_timeline(TimelineEvent(session_id="s", event_id="e", kind="k", ts=0.0))
        assert st["stale_readers_cleared"] >= 0


def test_map_full_over_the_bus_is_an_unavailable_reply(home: GeodeHome) -> None:
    from actors.bus import Bus
    from geode.records.store_client import StoreClient

    write_config(home, {"map_size_mb": 1, "map_max_mb": 1})
    proc = spawn_store(home)
    bus = Bus("tester", 1, home).start()
    acked: list[str] = []
    try:
        client = StoreClient(bus.transport, attempts=1, timeout_s=10)
        blob = [{"role": "user", "content": "x" * 20_000}]
        with pytest.raises(Unavailable, match="map is full"):
            for i in range(200):
                client.save_checkpoint(
                    CheckpointSave(session_id=f"s{i}", seq=1, base_count=0, new_messages=blob)
                )
                acked.append(f"s{i}")
        assert client.stats()["writer"]["failed_batches"] >= 1  # the store is still up and answering
    finally:
        bus.stop()
        proc.terminate()
        proc.wait(10)
    write_config(home, {"map_size_mb": 4, "map_max_mb": 8})
    with RecordEngine.for_home(home) as engine:
        assert acked and all(engine.load_checkpoint(s) is not None for s in acked)
        engine.save_checkpoint(CheckpointSave(session_id="after", seq=1, base_count=0, new_messages=blob))


def test_an_lmdb_error_inside_one_operation_fails_only_that_operation(home: GeodeHome) -> None:
    import lmdb

    ls = local_store(home)
    w = ls.engine.writer
    db = ls.engine.renv.db("cursors")
    gate = threading.Event()
    try:
        blocker = w.submit(lambda txn: gate.wait(5))
        good = w.submit(lambda txn: txn.put(key("ok"), b"1", db=db))
        bad = w.submit(lambda txn: txn.put(b"k" * 600, b"x", db=db))  # key over LMDB's limit
        gate.set()
        blocker.result(5)
        assert good.result(5)
        with pytest.raises(Unavailable, match="rejected"):
            bad.result(5)
        assert isinstance(lmdb.BadValsizeError("x"), lmdb.Error)
        assert ls.client.get_cursor("x", "y", "z") is None
        with ls.engine.renv.read() as txn:
            assert txn.get(key("ok"), db=db) == b"1"
    finally:
        ls.close()


def test_bad_store_config_is_a_config_error(home: GeodeHome) -> None:
    from geode.protocol.errors import ConfigError

    write_config(home, {"map_size_mb": "lots"})
    with pytest.raises(ConfigError, match=r"\[store\] map_size_mb"):
        ConfigSource(home, GeodeConfig.from_raw)  # the one place a process reads its [store]


def test_store_child_prunes_periodically(home: GeodeHome) -> None:
    import time

    from actors.bus import Bus
    from actors.store import start_store

    cfg = StoreConfig(prune_interval_s=0.05, session_retention_days=0)
    server = Bus("store", 1, home, single_process=True).start()
    child = start_store(home, bus=server, config=cfg, concurrency=2)
    try:
        child.engine.save_checkpoint(
            CheckpointSave(session_id="old", seq=1, base_count=0, status="completed")
        )
        deadline = time.monotonic() + 10
        while child.engine.load_checkpoint("old") is not None:
            assert time.monotonic() < deadline, "never pruned"
            child.stopping.wait(0.02)
    finally:
        server.stop()
        child.stop()


def test_map_growth_while_readers_run(home: GeodeHome) -> None:
    ls = local_store(home, StoreConfig(map_size_mb=1, map_max_mb=64))
    stop = threading.Event()
    errors: list[BaseException] = []

    def reader() -> None:
        while not stop.is_set():
            try:
                ls.client.load_checkpoint("s0")
                ls.client.get_cursor("p", "a", "c")
            except BaseException as exc:
                errors.append(exc)
                return
            stop.wait(0.002)  # busy readers, not GIL spinners (those starve any Python writer)

    readers = [threading.Thread(target=reader) for _ in range(3)]
    for t in readers:
        t.start()
    try:
        blob = [{"role": "user", "content": "z" * 50_000}]
        for i in range(60):
            save = CheckpointSave(session_id=f"s{i}", seq=1, base_count=0, new_messages=blob)
            ls.client.save_checkpoint(save)
    finally:
        stop.set()
        for t in readers:
            t.join(10)
    try:
        assert errors == [] and ls.engine.renv.growths >= 2
        assert all(ls.client.load_checkpoint(f"s{i}") is not None for i in range(60))
    finally:
        ls.close()


def test_disk_full_is_unavailable_and_loses_no_acknowledged_write(tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from tests.records.harness import ROOT

    out = subprocess.run(
        [sys.executable, "-m", "tests.records.disk_full_writer", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    report = json.loads(out.stdout)
    # EFBIG when a page write starts past the limit; LMDB reports a write cut short at the limit as EIO
    # (which of the two depends on where the pages fall, so on every earlier write)
    assert report["error"].startswith("unavailable: record store commit failed")
    assert "File too large" in report["error"] or "Input/output error" in report["error"], report
    assert len(report["acked"]) > 10
    with RecordEngine(tmp_path / "records", tmp_path / "evidence") as engine:
        assert all(engine.load_checkpoint(s) is not None for s in report["acked"])
