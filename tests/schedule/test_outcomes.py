"""The occurrence contract's vocabulary: one terminal outcome per occurrence, ``uncertain`` follows only a
reconciled receipt (with history), and the occurrence/turn ids are stable and collision-free."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import TypeAdapter, ValidationError

from geode.schedule.occurrences import (
    OccurrenceId,
    occurrence_id,
    parse_occurrence_id,
    run_now_id,
    turn_id_for,
)
from geode.schedule.outcomes import (
    Delivering,
    DeliveryFailed,
    Done,
    Due,
    IllegalTransition,
    Missed,
    Outcome,
    Skipped,
    Uncertain,
    check_transition,
    counts_as_failure,
    done_for,
    follow,
)

T0 = datetime(2027, 10, 31, 0, 30, tzinfo=UTC)


def test_due_then_exactly_one_terminal_outcome() -> None:
    history = follow(follow((), Due()), Done(result="ok", reason="natural"))
    for second in (Done(result="error", reason="internal_error"), Skipped(), Due()):
        with pytest.raises(IllegalTransition, match="cannot become"):
            follow(history, second)
    assert follow(history, Done(result="ok", reason="natural")) == history  # a retried write is a no-op


def test_deferred_reply_is_delivering_not_final() -> None:
    history = follow(follow((), Due()), Delivering(reason="rate limited for 600 s"))
    history = follow(history, Delivering(reason="rate limited for 300 s"))
    history = follow(history, DeliveryFailed(reason="chat not found"))
    assert [o.kind for o in history] == ["due", "delivering", "delivering", "delivery_failed"]


def test_uncertain_follows_only_a_reconciled_receipt_and_keeps_its_history() -> None:
    history = follow(
        follow((), Due()), Uncertain(reason="post admitted, no commit", operation_id="reply-t-1")
    )
    with pytest.raises(IllegalTransition, match="reconciled receipt"):
        follow(history, Done(result="ok", reason="natural"))
    history = follow(history, Done(result="ok", reason="natural", reconciled="operator"))
    assert [o.kind for o in history] == ["due", "uncertain", "done"]
    with pytest.raises(IllegalTransition, match="only an uncertain"):
        follow(follow((), Due()), Done(result="ok", reason="natural", reconciled="observation"))


def test_missed_is_one_range_row_written_once() -> None:
    row = Missed(count=3, first=T0, last=T0 + timedelta(hours=2))
    assert check_transition(None, row) is True
    with pytest.raises(IllegalTransition):
        check_transition(row, Due())
    with pytest.raises(ValidationError):
        Missed(count=1, first=T0, last=T0 + timedelta(hours=1))
    with pytest.raises(IllegalTransition, match="nothing cannot become done"):
        check_transition(None, Done(result="ok", reason="natural"))


def test_outcomes_round_trip_by_kind() -> None:
    adapter = TypeAdapter(Outcome)
    for outcome in (Due(), Skipped(), Missed(count=1, first=T0, last=T0), done_for("time_budget_expired")):
        assert adapter.validate_python(outcome.model_dump(mode="json")) == outcome
    with pytest.raises(ValidationError):
        Done(result="ok", reason="two\nlines")


def test_done_result_and_backoff_counting_follow_the_termination_reason() -> None:
    assert done_for("natural").result == "ok"
    assert done_for("internal_error").result == "error"
    assert counts_as_failure(done_for("worker_lost")) is True
    assert counts_as_failure(done_for("natural")) is False
    assert counts_as_failure(Uncertain(reason="x", operation_id="op")) is None


def test_occurrence_ids_are_stable_strings_that_parse_back() -> None:
    occ = occurrence_id("backup", T0)
    assert occ == "backup@2027-10-31T00:30:00Z"
    assert parse_occurrence_id(occ) == OccurrenceId(job="backup", instant=T0)
    other_zone = T0.astimezone(datetime(2027, 1, 1).astimezone().tzinfo)
    assert occurrence_id("backup", other_zone) == occ  # the instant, not its spelling
    now = run_now_id("backup", "cli-7f3a")
    assert parse_occurrence_id(now).text == now == "backup@now:cli-7f3a"
    for bad in ("backup", "bad name@2027-10-31T00:30:00Z", "backup@2027-10-31 00:30"):
        with pytest.raises(ValueError):
            parse_occurrence_id(bad)
    with pytest.raises(ValueError, match="whole seconds"):
        occurrence_id("backup", T0 + timedelta(microseconds=5))


def test_turn_id_is_deterministic_per_occurrence_and_distinct_across_occurrences() -> None:
    occ = occurrence_id("backup", T0)
    assert (
        turn_id_for(occ)
        == turn_id_for(occurrence_id("backup", T0))
        == OccurrenceId(job="backup", instant=T0).turn_id
    )
    assert turn_id_for(occ).startswith("t-job-backup-20271031T003000Z-")
    ids = {
        turn_id_for(occurrence_id(job, T0 + timedelta(hours=h)))
        for job in ("backup", "backup.", "backup_", "report")
        for h in range(24)
    } | {turn_id_for(run_now_id("backup", f"r{i}")) for i in range(10)}
    assert len(ids) == 4 * 24 + 10
    assert all(len(t) <= 128 for t in ids)
    assert turn_id_for(run_now_id("backup", "r1")) == turn_id_for("backup@now:r1")
