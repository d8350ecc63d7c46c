"""The scheduler driver in-process on a fake clock over a real LMDB store (the store service's messages):
each run is due once and ends with one outcome; a restarted driver follows the open occurrences (a due one is
never fired again, a claimed one is not left silent); catch-up decides a downtime window as one range row;
a delivered reply's receipt decides the outcome."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from geode.home import GeodeHome
from geode.protocol.errors import BadRequest
from geode.protocol.transport import LocalTransport
from geode.records.engine import RecordEngine
from geode.records.schedule_client import LedgerClient
from geode.records.schedule_models import OccurrenceRow
from geode.records.service import StoreService
from geode.records.settings import StoreConfig
from geode.schedule.driver import Driver, reply_operation_id
from geode.schedule.jobs import Job, JobSpec
from geode.schedule.occurrences import OccurrenceId
from geode.schedule.ports import Delivery, Reconciled, TurnEnd
from tests.schedule.driver import FakeClock

T0 = datetime(2027, 3, 28, 12, 0, tzinfo=UTC)


@dataclass
class FakeLanes:
    """Lanes as the driver sees it: a repeated turn id is admitted once (as lanes does)."""

    submits: list[str] = field(default_factory=list)
    admitted: list[str] = field(default_factory=list)
    ended_turns: dict[str, TurnEnd] = field(default_factory=dict)

    refuse: str = ""  # a prompt lanes refuses for good

    def submit(self, job: Job, row: OccurrenceRow) -> None:
        if self.refuse and job.prompt == self.refuse:
            raise BadRequest(f"invalid lanes.submit body at settings: {job.prompt}")
        self.submits.append(row.turn_id)
        if row.turn_id not in self.admitted:
            self.admitted.append(row.turn_id)

    def ended(self, turn_id: str) -> TurnEnd | None:
        return self.ended_turns.get(turn_id)

    def finish_all(self, reason: str = "natural", text: str = "ok") -> None:
        for t in self.admitted:
            self.ended_turns.setdefault(t, TurnEnd(termination_reason=reason, text=text))


@dataclass
class FakeChat:
    answers: list[str] = field(default_factory=list)
    posts: dict[str, str] = field(default_factory=dict)  # operation id -> text (a receipt: posted once)
    settled: dict[str, Reconciled] = field(default_factory=dict)

    def reconciled(self, operation_id: str) -> Reconciled | None:
        return self.settled.get(operation_id)

    def post(self, job: Job, row: OccurrenceRow, text: str, *, operation_id: str) -> Delivery:
        state = self.answers.pop(0) if self.answers else "posted"
        if state == "posted":
            self.posts.setdefault(operation_id, text)
        return Delivery(state=state, reason="" if state == "posted" else f"the chat said {state}")  # type: ignore[arg-type]


@dataclass
class Rig:
    engine: RecordEngine
    ledger: LedgerClient
    clock: FakeClock
    lanes: FakeLanes
    chat: FakeChat
    incarnation: int = 0

    def driver(self) -> Driver:
        """A new scheduler incarnation (the store released the previous one's leases, as when it died)."""
        if self.incarnation:
            self.engine.schedule.release_later("scheduler", self.incarnation).result(5)
        self.incarnation += 1
        d = Driver(self.ledger, self.lanes, self.chat, self.clock.now, f"scheduler#{self.incarnation}:1")
        d.start()
        return d

    def step(self, d: Driver, seconds: float) -> None:
        self.clock.advance(seconds=seconds)
        d.tick()

    def rows(self, job: str = "j") -> list[OccurrenceRow]:
        return self.ledger.runs(job).occurrences


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    home = GeodeHome(tmp_path / "h").ensure()
    engine = RecordEngine.for_home(home, StoreConfig()).open()
    clock = FakeClock(T0)
    engine.schedule.clock = lambda: clock.now().timestamp()
    ledger = LedgerClient(LocalTransport({"store": StoreService(engine)}, sender="scheduler#1"), attempts=1)
    try:
        yield Rig(engine, ledger, clock, FakeLanes(), FakeChat())
    finally:
        engine.close()


def spec(**kw: object) -> JobSpec:
    return JobSpec.model_validate({"name": "j", "prompt": "do it", **kw})


def kinds(row: OccurrenceRow) -> list[str]:
    return [s.outcome.kind for s in row.history]


def test_each_instant_is_due_once_submitted_and_done(rig: Rig) -> None:
    d = rig.driver()
    d.define(spec(every=10, overlap="allow"), declarative=True)
    for _ in range(3):
        rig.step(d, 10)
    assert len(rig.lanes.admitted) == 3 and all(kinds(r) == ["due"] for r in rig.rows())
    rig.lanes.finish_all()
    d.tick()
    rows = rig.rows()
    assert [r.instant for r in rows] == [T0 + timedelta(seconds=s) for s in (30, 20, 10)]
    assert all(kinds(r) == ["due", "done"] and r.submitted_at is not None for r in rows)
    assert sorted(rig.lanes.admitted) == sorted(r.turn_id for r in rows)


def test_a_restarted_driver_follows_a_due_occurrence_and_never_fires_it_again(rig: Rig) -> None:
    d1 = rig.driver()
    d1.define(spec(every=10), declarative=True)
    rig.step(d1, 10)  # instant +10 is due and its turn submitted; then the scheduler dies
    [row] = rig.rows()
    assert kinds(row) == ["due"]
    # the next incarnation: a claimed-but-not-due occurrence left by the dead one too (died between the two)
    orphan = OccurrenceId(job="j", instant=T0 + timedelta(seconds=20))
    rig.clock.advance(seconds=10)
    assert rig.ledger.claim(orphan, holder="scheduler#1:1").fire
    d2 = rig.driver()
    assert set(d2.following) == {row.occurrence_id, orphan.text}
    d2.tick()
    rig.lanes.finish_all()
    d2.tick()
    rows = rig.rows()
    assert [r.instant for r in rows] == [T0 + timedelta(seconds=20), T0 + timedelta(seconds=10)]
    assert all(kinds(r) == ["due", "done"] for r in rows)  # one due, one outcome each: none silent
    assert rig.lanes.admitted == [rows[1].turn_id, rows[0].turn_id]  # the resubmission was the same turn
    # a third incarnation starts with nothing open and decides no instant twice
    d3 = rig.driver()
    assert d3.following == {}
    d3.tick()
    assert len(rig.rows()) == 2


def test_downtime_is_one_missed_range_row_under_skip_and_one_run_under_once(rig: Rig) -> None:
    d = rig.driver()
    d.define(spec(name="s", cron="0 * * * *", catch_up="skip"), declarative=True)
    d.define(spec(name="o", cron="0 * * * *", catch_up="once"), declarative=True)
    rig.clock.advance(hours=5, minutes=2)  # down for five hourly instants (past the 60 s grace)
    d = rig.driver()
    d.tick()
    skipped = rig.ledger.runs("s")
    assert skipped.occurrences == [] and len(skipped.missed) == 1
    assert skipped.missed[0].missed.count == 5
    once = rig.ledger.runs("o")
    assert [r.instant for r in once.occurrences] == [T0 + timedelta(hours=5)]
    assert [(m.missed.count, m.missed.first, m.missed.last) for m in once.missed] == [
        (4, T0 + timedelta(hours=1), T0 + timedelta(hours=4))
    ]
    d.tick()  # nothing is decided twice
    assert len(rig.ledger.runs("o").occurrences) == 1 and len(rig.ledger.runs("s").missed) == 1


def test_the_reply_receipt_decides_the_outcome_and_is_posted_once(rig: Rig) -> None:
    d = rig.driver()
    d.define(spec(every=10, deliver="telegram:42", overlap="allow"), declarative=True)
    rig.chat.answers = ["deferred", "posted", "uncertain", "refused"]
    rig.step(d, 10)
    rig.lanes.finish_all(text="the answer")
    d.tick()  # deferred: delivering
    first = rig.rows()[0]
    assert kinds(first) == ["due", "delivering"]
    rig.step(d, 5)  # the retry posts it: done
    assert kinds(rig.ledger.runs("j").occurrences[-1]) == ["due", "delivering", "done"]
    assert rig.chat.posts == {reply_operation_id(first.turn_id): "the answer"}
    rig.step(d, 15)  # +20 and +30 fire (overlap allow)
    rig.lanes.finish_all(text="the answer")
    d.tick()
    by_instant = {r.instant: kinds(r) for r in rig.rows()}
    assert by_instant[T0 + timedelta(seconds=20)] == ["due", "uncertain"]
    assert by_instant[T0 + timedelta(seconds=30)] == ["due", "delivery_failed"]


def test_a_paused_job_has_no_occurrences_and_resumes_from_the_resume_instant(rig: Rig) -> None:
    d = rig.driver()
    d.define(spec(every=10, catch_up="all"), declarative=False)
    d.set_paused("j", True)
    rig.step(d, 35)
    assert rig.rows() == []
    d.set_paused("j", False)  # at +35
    d = rig.driver()  # a restart right after the resume still knows where the job continues
    rig.step(d, 90)
    runs = rig.ledger.runs("j")
    assert runs.missed == [] and [r.instant for r in runs.occurrences][-1] == T0 + timedelta(seconds=40)


def test_run_now_is_one_run_per_request_id_and_a_retimed_job_keeps_its_due_occurrence(rig: Rig) -> None:
    d = rig.driver()
    d.define(spec(every=10, overlap="allow"), declarative=True)
    row, dup = d.run_now("j", "req-1")
    again, dup2 = d.run_now("j", "req-1")
    assert not dup and dup2 and again.occurrence_id == row.occurrence_id == "j@now:req-1"
    rig.step(d, 10)  # +10 is due
    d.define(spec(every=60, overlap="allow"), declarative=True)  # a reload changes the timing at +10
    rig.lanes.finish_all()
    rig.step(d, 50)
    rows = {r.occurrence_id: kinds(r) for r in rig.rows()}
    assert rows == {"j@now:req-1": ["due", "done"], "j@2027-03-28T12:00:10Z": ["due", "done"]}
    rig.step(d, 10)  # +70: the new interval counts from the change (+10)
    assert next(r.instant for r in rig.rows() if r.instant) == T0 + timedelta(seconds=70)
    assert len(rig.lanes.admitted) == 3


def test_an_uncertain_occurrence_follows_its_reconciled_receipt(rig: Rig) -> None:
    d = rig.driver()
    d.define(spec(every=10, deliver="telegram:42"), declarative=True)
    rig.chat.answers = ["uncertain"]
    rig.step(d, 10)
    rig.lanes.finish_all(text="the answer")
    d.tick()
    [row] = rig.rows()
    assert kinds(row) == ["due", "uncertain"]
    rig.chat.settled[reply_operation_id(row.turn_id)] = Reconciled(posted=True, by="operator")
    rig.step(d, 31)  # the next look at uncertain occurrences
    got = next(r for r in rig.rows() if r.occurrence_id == row.occurrence_id)
    assert (
        kinds(got) == ["due", "uncertain", "done"] and getattr(got.outcome, "reconciled", None) == "operator"
    )


def test_failures_disable_the_job_and_say_so_once_in_its_chat(rig: Rig) -> None:
    d = rig.driver()
    d.define(spec(every=10, deliver="telegram:42", disable_after_failures=2), declarative=True)
    for _ in range(2):
        rig.step(d, 10)
        rig.lanes.finish_all(reason="max_steps", text="")
        d.tick()
    assert [kinds(r) for r in rig.rows()] == [["due", "done"], ["due", "done"]]
    notices = [t for op, t in rig.chat.posts.items() if op.startswith("disabled-")]
    assert len(notices) == 1 and "disabled after 2 consecutive failures" in notices[0]
    rig.step(d, 30)
    assert len(rig.rows()) == 2  # a disabled job fires no more
    d.set_paused("j", False)  # resume re-enables it, from now
    rig.step(d, 10)
    assert len(rig.rows()) == 3


def test_a_turn_lanes_refuses_for_good_ends_its_occurrence_with_an_error(rig: Rig) -> None:
    rig.lanes.refuse = "bad"
    d = rig.driver()
    d.define(spec(every=10, prompt="bad"), declarative=True)
    rig.step(d, 10)
    [row] = rig.rows()
    assert kinds(row) == ["due", "done"] and getattr(row.outcome, "result", None) == "error"
    assert "not submitted: invalid lanes.submit body" in getattr(row.outcome, "reason", "")


class Counting:
    """A transport that counts the ledger requests made through it (by message type)."""

    def __init__(self, inner: LocalTransport) -> None:
        self.inner, self.calls = inner, Counter[str]()

    def call(self, target, type_, body=None, *, session=None, timeout_s=5.0):  # type: ignore[no-untyped-def]
        self.calls[type_] += 1
        return self.inner.call(target, type_, body, session=session, timeout_s=timeout_s)


def test_a_tick_decides_many_jobs_windows_in_a_bounded_number_of_ledger_requests(rig: Rig) -> None:
    n = 150
    d = rig.driver()
    for i in range(n):
        d.define(spec(name=f"c{i:03d}", every=60, catch_up="once"), declarative=False)
    rig.clock.advance(
        hours=1, seconds=30
    )  # restarted an hour later: a range, a catch-up run, the on-time one
    on_time = T0 + timedelta(hours=1)
    other = rig.ledger.claim(OccurrenceId(job="c007", instant=on_time), holder="scheduler#9:1")
    assert other.fire  # another live scheduler holds one job's on-time instant
    counting = Counting(rig.ledger.transport)  # type: ignore[arg-type]
    rig.ledger.transport = counting  # type: ignore[assignment]
    d = rig.driver()
    counting.calls.clear()
    d.tick()  # the range and the catch-up run (due, submitted; the on-time one is queued behind it)
    rig.lanes.finish_all()
    d.tick()  # the catch-up runs' outcomes, then the on-time runs (due, submitted)
    writes = {t: c for t, c in counting.calls.items() if t != "store.schedule.runs"}
    assert sum(writes.values()) <= 14, writes  # a few batches per 100 jobs, not ~7 requests per job
    for i in range(n):
        runs = rig.ledger.runs(f"c{i:03d}")
        assert [m.missed.count for m in runs.missed] == [58]
        due = {r.instant: r for r in runs.occurrences}
        mine = [on_time - timedelta(minutes=1)] + ([] if i == 7 else [on_time])
        assert all(due[t].submitted_at is not None and due[t].holder == d.holder for t in mine), i
    assert rig.ledger.occurrence(OccurrenceId(job="c007", instant=on_time)).holder == "scheduler#9:1"  # type: ignore[union-attr]
    assert len(rig.lanes.admitted) == 2 * n - 1  # the held one was refused alone, the others ran
