"""Timeline and evidence ledger contracts: append-only, idempotent, redacted, bounded, hash-checked."""

from __future__ import annotations

import json
import time

import pytest

from geode.protocol.errors import Conflict
from geode.records.lmdb_env import key, pack, unpack
from geode.records.models import TimelineEvent
from tests.records.conftest import StoreUnderTest
from tests.waiting import poll_for


def ev(
    sid: str, eid: str, payload: dict[str, object] | None = None, kind: str = "tool.called"
) -> TimelineEvent:
    return TimelineEvent(session_id=sid, event_id=eid, kind=kind, ts=1.5, payload=payload or {})


def test_append_only_in_order_and_idempotent(store: StoreUnderTest, uid: str) -> None:
    c, sid = store.client, f"s-{uid}"
    for i in range(5):
        c.append_timeline(ev(sid, f"e{i}", {"i": i}))
    c.append_timeline(ev(sid, "e2", {"i": 2}))  # retried
    rows = c.read_timeline(sid)
    assert [r.seq for r in rows] == [1, 2, 3, 4, 5]
    assert [r.event.payload["i"] for r in rows] == [0, 1, 2, 3, 4]
    assert not any(r.corrupt for r in rows)
    with pytest.raises(Conflict):
        c.append_timeline(ev(sid, "e2", {"i": 99}))
    assert c.read_timeline(f"other-{uid}") == []


def test_secrets_are_redacted_before_write(store: StoreUnderTest, uid: str) -> None:
    c, sid = store.client, f"s-{uid}"
    c.append_timeline(ev(sid, "e1", {"api_key": "k-123", "text": "auth Bearer abc.def.123", "n": 1}))
    p = c.read_timeline(sid)[0].event.payload
    assert p["api_key"] == "[REDACTED]" and "abc.def" not in p["text"] and p["n"] == 1


def test_payloads_are_bounded(store: StoreUnderTest, uid: str) -> None:
    c, sid = store.client, f"s-{uid}"
    c.append_timeline(ev(sid, "e1", {"blob": ["z" * 16000] * 40}))
    p = c.read_timeline(sid)[0].event.payload
    assert p.get("truncated") is True and len(json.dumps(p)) < 70_000


def test_tampered_row_is_reported_corrupt(home, uid: str) -> None:  # type: ignore[no-untyped-def]
    from tests.records.harness import local_store

    ls = local_store(home)
    try:
        ls.client.append_timeline(ev("s", "e1", {"amount": 10}))
        ls.client.append_timeline(ev("s", "e2", {"amount": 20}))
        db = ls.engine.renv.db("timeline")

        def tamper(txn):  # type: ignore[no-untyped-def]
            row = unpack(txn.get(key("s", 1), db=db))
            row["payload_json"] = row["payload_json"].replace("10", "99999")
            txn.put(key("s", 1), pack(row), db=db)
            txn.put(key("s", 3), b"\xc1garbage", db=db)

        ls.engine.writer.run(tamper)
        rows = ls.client.read_timeline("s")
        assert [(r.seq, r.corrupt) for r in rows] == [(1, True), (2, False), (3, True)]
        assert rows[0].event.payload == {}  # corrupt data is never returned as good data
        lines = [json.loads(x) for x in ls.engine.timeline.export_jsonl("s").splitlines()]
        assert [x["corrupt"] for x in lines] == [True, False, True]
    finally:
        ls.close()


def test_jsonl_export(home) -> None:  # type: ignore[no-untyped-def]
    from tests.records.harness import local_store

    ls = local_store(home)
    try:
        for i in range(3):
            ls.client.append_timeline(ev("s", f"e{i}", {"i": i}))
        lines = ls.engine.timeline.export_jsonl("s").splitlines()
        assert [json.loads(x)["event"]["event_id"] for x in lines] == ["e0", "e1", "e2"]
    finally:
        ls.close()


def test_long_timeline_reads_back_in_pages(store: StoreUnderTest, uid: str) -> None:
    c, sid = store.client, f"s-{uid}"
    for i in range(40):
        c.append_timeline(ev(sid, f"e{i}", {"blob": "q" * 15000, "i": i}))
    rows = c.read_timeline(sid)
    assert [r.event.payload["i"] for r in rows] == list(range(40))


def test_evidence_ledger_is_redacted_hashed_jsonl(store: StoreUnderTest, uid: str) -> None:
    c, sid = store.client, f"s/{uid}"
    assert c.append_evidence(
        sid, "final_result", {"password": "hunter2", "ok": True}, summary="sk-abcdefghijkl", wait=True
    )
    assert c.append_evidence(sid, "verification_policy", {"n": 1})  # a cast: never blocks the caller
    path = store.home.evidence_dir / f"s_{uid}.jsonl"
    written = lambda: path.read_text().count("\n") >= 2  # noqa: E731
    poll_for(written, 10, interval_s=0.01, what="the cast evidence row written")
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    assert [r["seq"] for r in rows] == [1, 2] and rows[0]["payload"] == {"password": "[REDACTED]", "ok": True}
    assert "abcdefghijkl" not in path.read_text()
    from geode.redaction import fingerprint

    assert rows[1]["payload_hash"] == fingerprint({"n": 1})


def test_evidence_failure_is_counted_never_raised(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from geode.records.evidence import EvidenceLedger

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    ledger = EvidenceLedger(blocker / "evidence")
    assert ledger.append("s", "k", {"a": 1}) is False
    assert ledger.stats()["failures"] == 1 and ledger.stats()["last_error"]


def test_evidence_never_blocks_when_the_store_is_down(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from actors.bus import Bus
    from geode.home import GeodeHome
    from geode.records.store_client import StoreClient

    home = GeodeHome(tmp_path / "h").ensure()  # no store serves this home
    bus = Bus("lonely", 1, home).start()
    try:
        c = StoreClient(bus.transport)
        t0 = time.monotonic()
        c.append_evidence("s", "k", {"a": 1})
        assert c.append_evidence("s", "k", {"a": 1}, wait=True) is False
        assert time.monotonic() - t0 < 3 and c.evidence_failures == 1
    finally:
        bus.stop()
