"""The occurrence ledger in a real LMDB store (through the store service's messages, in-process): one due per
occurrence, one terminal outcome, the claim's compare-and-set with leases on an injectable clock, due and
the cursor in one transaction, missed ranges as one row, failure backoff, job definitions, retention."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from geode.home import GeodeHome
from geode.protocol import runtime as rt
from geode.protocol.errors import BadRequest, Conflict, NotFound
from geode.protocol.transport import LocalTransport
from geode.records.engine import RecordEngine
from geode.records.schedule_client import LedgerClient
from geode.records.schedule_models import ClaimKind, ClaimLost, MissedOverlap, OutcomeConflict
from geode.records.service import StoreService
from geode.records.settings import StoreConfig
from geode.schedule.occurrences import OccurrenceId, turn_id_for
from geode.schedule.outcomes import Delivering, DeliveryFailed, Done, Missed, Skipped, Uncertain

T0 = datetime(2027, 3, 28, 0, 0, tzinfo=UTC)


@dataclass
class Clock:
    t: float = 1_800_000_000.0

    def __call__(self) -> float:
        return self.t


@dataclass
class Rig:
    engine: RecordEngine
    client: LedgerClient
    clock: Clock


@pytest.fixture
def rig(home: GeodeHome) -> Iterator[Rig]:
    engine = RecordEngine.for_home(home, StoreConfig(schedule_keep_per_job=3)).open()
    clock = Clock()
    engine.schedule.clock = clock
    client = LedgerClient(LocalTransport({"store": StoreService(engine)}, sender="scheduler#1"), attempts=1)
    try:
        yield Rig(engine, client, clock)
    finally:
        engine.close()


def at(hours: int, job: str = "backup") -> OccurrenceId:
    return OccurrenceId(job=job, instant=T0 + timedelta(hours=hours))


def kinds(row: object) -> list[str]:
    return [step.outcome.kind for step in getattr(row, "history")]  # noqa: B009


def test_due_then_exactly_one_terminal_outcome(rig: Rig) -> None:
    c, occ = rig.client, at(1)
    assert c.claim(occ, holder="A").fire
    row = c.due(occ, holder="A")
    assert kinds(row) == ["due"] and row.turn_id == turn_id_for(occ.text) and row.occurrence_id == occ.text
    assert kinds(c.due(occ, holder="A")) == ["due"]  # a retried due is the same row, not a second one
    c.outcome(occ, Delivering(reason="telegram rate limit 30 s"), by="A")
    done = c.outcome(occ, Done(result="ok", reason="natural"), by="A")
    assert done.changed and kinds(done.row) == ["due", "delivering", "done"]
    again = c.outcome(occ, Done(result="ok", reason="natural"), by="A")
    assert not again.changed and kinds(again.row) == ["due", "delivering", "done"]
    with pytest.raises(OutcomeConflict, match="already ended done \\(ok\\); refusing delivery_failed"):
        c.outcome(occ, DeliveryFailed(reason="chat not found"), by="A")
    with pytest.raises(OutcomeConflict):
        c.outcome(occ, Done(result="error", reason="max_steps"), by="A")
    with pytest.raises(OutcomeConflict, match="never due again"):
        c.due(occ, holder="A")
    assert c.claim(occ, holder="B").kind == ClaimKind.DECIDED
    stored = c.occurrence(occ)
    assert stored is not None and kinds(stored) == ["due", "delivering", "done"]
    assert stored.outcome == Done(result="ok", reason="natural")


def test_a_terminal_outcome_needs_a_due_and_a_reason_is_redacted(rig: Rig) -> None:
    c, occ = rig.client, at(2)
    with pytest.raises(OutcomeConflict, match="at nothing cannot become done"):
        c.outcome(occ, Done(result="ok", reason="natural"), by="A")
    assert c.occurrence(occ) is None  # a refusal writes nothing
    c.due(occ, holder="A")
    secret = "sk-ant-api03-" + "x" * 40
    res = c.outcome(occ, DeliveryFailed(reason=f"403 for token {secret}"), by="A")
    assert secret not in res.row.model_dump_json() and "403 for token" in res.row.model_dump_json()


def test_uncertain_follows_its_reconciled_receipt_with_history(rig: Rig) -> None:
    c, occ = rig.client, at(3)
    c.due(occ, holder="A")
    c.outcome(occ, Uncertain(reason="poster died after admit", operation_id="op-1"), by="A")
    with pytest.raises(OutcomeConflict, match="only by a reconciled receipt"):
        c.outcome(occ, Done(result="ok", reason="natural"), by="A")
    settled = c.outcome(occ, Done(result="ok", reason="natural", reconciled="operator"), by="geode reconcile")
    assert kinds(settled.row) == ["due", "uncertain", "done"]
    assert settled.row.history[1].outcome == Uncertain(reason="poster died after admit", operation_id="op-1")
    with pytest.raises(OutcomeConflict):  # followed once: final now
        c.outcome(occ, DeliveryFailed(reason="x", reconciled="observation"), by="A")


def test_claim_is_a_compare_and_set_with_leases_that_expire(rig: Rig) -> None:
    c, occ = rig.client, at(4)
    assert c.claim(occ, holder="A", lease_s=30).kind == ClaimKind.CLAIMED
    assert c.claim(occ, holder="A", lease_s=30).kind == ClaimKind.CLAIMED  # renewed by its holder
    assert c.claim(occ, holder="B", lease_s=30).kind == ClaimKind.HELD
    with pytest.raises(ClaimLost, match="claimed by A, not B"):
        c.due(occ, holder="B")
    rig.clock.t += 31  # A stopped (SIGSTOP): its lease expires, B takes the claim over before any due
    taken = c.claim(occ, holder="B", lease_s=30)
    assert taken.kind == ClaimKind.CLAIMED and taken.fire
    with pytest.raises(ClaimLost):  # A wakes up: its due is refused, nothing fires twice
        c.due(occ, holder="A")
    c.due(occ, holder="B")
    assert c.claim(occ, holder="A").kind == ClaimKind.HELD
    rig.clock.t += 31  # now B stops after its due: A may follow the occurrence, never fire it again
    follow = c.claim(occ, holder="A")
    assert follow.kind == ClaimKind.FOLLOW and not follow.fire
    with pytest.raises(ClaimLost):
        c.due(occ, holder="B")
    row = c.occurrence(occ)
    assert row is not None and kinds(row) == ["due"] and row.holder == "A"


def test_a_dead_schedulers_leases_are_released_and_its_open_occurrences_listed(rig: Rig) -> None:
    c, old, new = rig.client, "scheduler#1:4101", "scheduler#2:4202"
    c.claim(at(1), holder=old)
    c.due(at(2), holder=old)
    c.due(at(3), holder=old)
    c.outcome(at(3), Done(result="ok", reason="natural"), by=old)
    assert sorted(r.occurrence_id for r in c.open_occurrences()) == [at(1).text, at(2).text]
    assert c.claim(at(1), holder=new).kind == ClaimKind.HELD
    died = rt.ChildDied(name="lanes", incarnation=9, reason="killed")  # another child: nothing released
    c.transport.call("store", rt.CHILD_DIED, died)
    assert c.claim(at(1), holder=new).kind == ClaimKind.HELD
    died = rt.ChildDied(name="scheduler", incarnation=1, reason="killed")  # the supervisor tells the store
    c.transport.call("store", rt.CHILD_DIED, died)
    assert c.claim(at(1), holder=new).kind == ClaimKind.CLAIMED  # at once, not after the 30 s lease
    assert c.claim(at(2), holder=new).kind == ClaimKind.FOLLOW  # due already: followed, never re-fired
    c.outcome(at(2), Done(result="ok", reason="natural"), by=new)
    assert [r.occurrence_id for r in c.open_occurrences()] == [at(1).text]


def test_due_and_the_cursor_advance_in_one_transaction(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    c = rig.client
    c.due(at(5), holder="A")
    assert c.jobs()[0].cursor.last_instant == at(5).instant
    ledger = rig.engine.schedule

    def broken(*_a: object) -> None:
        raise OSError("disk gone after the cursor moved")

    monkeypatch.setattr(ledger, "_put_row", broken)
    with pytest.raises(Exception, match="disk gone"):
        c.due(at(6), holder="A")
    monkeypatch.undo()
    assert c.jobs()[0].cursor.last_instant == at(5).instant  # the cursor moved back with the failed due
    assert c.occurrence(at(6)) is None
    c.due(at(6), holder="A")
    c.due(at(0), holder="A")  # an earlier instant (a clock jumped back) never moves the cursor back
    assert c.jobs()[0].cursor.last_instant == at(6).instant


def test_missed_instants_of_a_window_are_one_range_row(rig: Rig) -> None:
    c = rig.client
    c.due(at(0), holder="A")
    window = Missed(count=120, first=T0 + timedelta(hours=1), last=T0 + timedelta(hours=120))
    rng = c.missed("backup", window, by="A")
    assert c.missed("backup", window, by="A") == rng  # a retried request
    runs = c.runs("backup")
    assert [r.missed.count for r in runs.missed] == [120] and len(runs.occurrences) == 1
    assert c.jobs()[0].cursor.last_instant == window.last
    assert c.claim(at(50), holder="B").kind == ClaimKind.DECIDED
    with pytest.raises(MissedOverlap):
        c.due(at(50), holder="B")
    with pytest.raises(MissedOverlap):
        c.outcome(at(51), Skipped(), by="B")
    with pytest.raises(MissedOverlap, match="overlaps"):
        c.missed("backup", Missed(count=2, first=T0 + timedelta(hours=120), last=T0 + timedelta(hours=121)))
    with pytest.raises(MissedOverlap, match="has its own row"):
        c.missed("backup", Missed(count=1, first=T0, last=T0))
    assert len(c.runs("backup").missed) == 1
    c.claim(at(200), holder="A")  # a bare claim the catch-up then decides as missed: the range takes it
    late = Missed(count=2, first=T0 + timedelta(hours=199), last=T0 + timedelta(hours=200))
    c.missed("backup", late, by="A")
    assert c.occurrence(at(200)) is None and [r.occurrence_id for r in c.open_occurrences()] == [at(0).text]


def test_skipped_is_decided_by_the_claim_holder_and_advances_the_cursor(rig: Rig) -> None:
    c, occ = rig.client, at(7)
    c.claim(occ, holder="A")
    with pytest.raises(ClaimLost):
        c.outcome(occ, Skipped(), by="B")
    res = c.outcome(occ, Skipped(reason="overlap"), by="A")
    assert kinds(res.row) == ["skipped"] and res.cursor is not None and res.cursor.last_instant == occ.instant
    with pytest.raises(OutcomeConflict):
        c.due(occ, holder="A")


def test_failures_in_a_row_disable_the_job_once(rig: Rig) -> None:
    c = rig.client
    c.put_job("backup", {"cron": "0 * * * *", "prompt": "back up"})
    replies = []
    for h in range(4):
        c.due(at(h), holder="A")
        replies.append(c.outcome(at(h), Done(result="error", reason="max_steps"), by="A", disable_after=3))
    assert [r.disabled_now for r in replies] == [False, False, True, False]
    cursor = replies[-1].cursor
    assert cursor is not None and cursor.disabled and cursor.consecutive_failures == 4
    assert "3 consecutive failures" in cursor.disabled_reason
    again = c.outcome(at(3), Done(result="error", reason="max_steps"), by="A", disable_after=3)
    assert not again.changed and c.jobs()[0].cursor.consecutive_failures == 4  # a repeat counts nothing
    resumed = c.set_job_state("backup", disabled=False, reset_failures=True)
    assert not resumed.disabled and resumed.consecutive_failures == 0
    c.due(at(4), holder="A")
    ok = c.outcome(at(4), Done(result="ok", reason="natural"), by="A", disable_after=3)
    assert ok.cursor is not None and ok.cursor.consecutive_failures == 0


def test_run_now_is_keyed_by_its_request_and_leaves_the_cursor(rig: Rig) -> None:
    c = rig.client
    c.due(at(1), holder="A")
    now = OccurrenceId(job="backup", request_id="cli-7f3a")
    first = c.due(now, holder="A")
    assert first.occurrence_id == "backup@now:cli-7f3a" and first.turn_id == turn_id_for(first.occurrence_id)
    assert c.claim(now, holder="A").kind == ClaimKind.FOLLOW  # a retried command is the same run
    assert c.jobs()[0].cursor.last_instant == at(1).instant


def test_job_definitions_have_revisions_and_a_kept_creation_instant(rig: Rig) -> None:
    c = rig.client
    made = T0 - timedelta(days=1)
    one = c.put_job("digest", {"every": "1h", "prompt": "x"}, created_at=made)
    assert one.job is not None and (one.job.revision, one.job.created_at) == (1, made)
    assert c.put_job("digest", {"every": "1h", "prompt": "x"}, expect_revision=0).job == one.job  # a retry
    with pytest.raises(Conflict, match="revision 1, not 0"):
        c.put_job("digest", {"every": "2h", "prompt": "x"}, expect_revision=0)
    two = c.put_job("digest", {"every": "2h", "prompt": "x", "api_key": "hunter2"}, expect_revision=1)
    assert two.job is not None and (two.job.revision, two.job.created_at) == (2, made)
    assert "hunter2" not in two.job.model_dump_json()
    c.set_job_state("digest", paused=True)
    assert c.remove_job("digest") and not c.remove_job("digest")
    [entry] = c.jobs()
    assert entry.job is None and entry.cursor.paused  # the cursor stays: decided instants stay decided
    with pytest.raises(NotFound):
        c.set_job_state("nope", paused=True)


def test_bad_occurrences_are_refused_by_name(rig: Rig) -> None:
    c = rig.client
    with pytest.raises(BadRequest, match="whole seconds"):
        c._ledger("store.schedule.claim", {"job_id": "a", "instant": "2027-01-01T00:00:00.5Z", "holder": "A"})
    with pytest.raises(BadRequest):
        c._ledger("store.schedule.claim", {"job_id": "a", "instant": "2027-01-01T00:00:00", "holder": "A"})
    with pytest.raises(BadRequest):
        c._ledger("store.schedule.due", {"job_id": "a b", "instant": "2027-01-01T00:00:00Z", "holder": "A"})
    with pytest.raises(BadRequest, match="exactly one"):
        c._ledger("store.schedule.due", {"job_id": "a", "holder": "A"})
    assert c.runs().occurrences == []


def test_retention_drops_old_and_surplus_decided_rows_only(rig: Rig) -> None:
    c = rig.client
    for h in range(5):
        c.due(at(h), holder="A")
        c.outcome(at(h), Done(result="ok", reason="natural"), by="A")
    c.due(at(5), holder="A")  # still running: never pruned
    c.missed("backup", Missed(count=1, first=at(6).instant or T0, last=at(6).instant or T0))
    assert rig.engine.prune()["occurrences"] == 2  # keep_per_job=3 of the 5 decided rows
    assert [r.instant for r in c.runs("backup").occurrences] == [at(h).instant for h in (5, 4, 3, 2)]
    rig.clock.t += 31 * 86400  # past schedule_retention_days (30)
    assert rig.engine.prune()["occurrences"] == 4  # the 3 decided rows and the missed range
    runs = c.runs("backup")
    assert [r.instant for r in runs.occurrences] == [at(5).instant] and runs.missed == []
