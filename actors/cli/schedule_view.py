"""What `geode schedule list|show|runs`, `geode status` and `geode doctor` show of scheduled jobs: the jobs
(from the scheduler child when it answers, else from the occurrence ledger read directly, read-only, with no
daemon), each job's last occurrence with its outcome and lag, a job's runs, and an occurrence's turn answer.

The ledger is read through a :class:`RecordReader` (a read-only LMDB handle beside the store, or with none);
the rows are the ones ``store.schedule.*`` would return, so both paths print the same thing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from geode.home import GeodeHome
from geode.protocol import schedule as sched_msg
from geode.protocol.errors import GeodeError, NotFound
from geode.records.reader import RecordReader
from geode.records.schedule_jobs import JobTable
from geode.records.schedule_models import JobEntry, MissedRange, OccurrenceRow, Runs
from geode.records.writer import GroupWriter
from geode.schedule.occurrences import OccurrenceId, utc_text
from geode.schedule.outcomes import Outcome
from geode.visible_text import visible


class Ledger:
    """The occurrence ledger and turn records, read-only (no writer is ever started)."""

    def __init__(self, reader: RecordReader) -> None:
        self.reader = reader
        self.table = JobTable(reader.renv, GroupWriter(reader.renv))

    def entries(self) -> list[JobEntry]:
        """Jobs that exist (a cursor whose job was removed is not a job)."""
        return [e for e in self.table.jobs() if e.job is not None]

    def runs(self, name: str | None, limit: int) -> Runs:
        return self.table.runs(name, limit=limit)

    def row(self, occ: OccurrenceId) -> OccurrenceRow | None:
        return self.table.occurrence(occ)

    def turn(self, turn_id: str) -> Any:
        from geode.records.turns import TurnStore

        return TurnStore(self.reader.renv, GroupWriter(self.reader.renv)).get(turn_id)


@contextmanager
def open_ledger(home: GeodeHome) -> Iterator[Ledger | None]:
    """The home's ledger, or None when nothing was ever recorded there; unreadable records raise
    ``GeodeError`` (a line for the caller)."""
    reader = RecordReader.for_home(home)
    try:
        reader.open()
    except NotFound:
        yield None
        return
    try:
        yield Ledger(reader)
    finally:
        reader.close()


def read_ledger(home: GeodeHome, fn: Callable[[Ledger], Any], empty: Any) -> Any:
    with open_ledger(home) as ledger:
        return empty if ledger is None else fn(ledger)


# jobs ---------------------------------------------------------------------------------------------------
def local_view(entry: JobEntry) -> sched_msg.JobView:
    """A job as the scheduler would list it, from the ledger alone: its next instant is the first after the
    last one decided (with the daemon down it may lie in the past: the catch-up policy decides it)."""
    declarative = bool(entry.job.definition.get("declarative")) if entry.job is not None else False
    return sched_msg.JobView(entry=entry, next_instant=_next_instant(entry), declarative=declarative)


def _next_instant(entry: JobEntry) -> str | None:
    from geode.schedule.instants import next_instant
    from geode.schedule.jobs import Job

    if entry.job is None or entry.cursor.paused or entry.cursor.disabled:
        return None
    fields = {k: v for k, v in entry.job.definition.items() if k in Job.model_fields}
    try:
        job = Job.model_validate({**fields, "created_at": entry.job.created_at})
        nxt = next_instant(job, entry.cursor.last_instant or job.created_at)
    except (ValidationError, ValueError):
        return None
    return utc_text(nxt) if nxt is not None else None


def ask_jobs(home: GeodeHome, timeout_s: float = 3.0) -> list[sched_msg.JobView] | None:
    """The scheduler child's ``schedule.list``, or None when it does not answer."""
    from actors.tree.client import client_bus

    try:
        with client_bus(home) as bus:
            raw = bus.transport.call("scheduler", sched_msg.LIST, sched_msg.ListJobs(), timeout_s=timeout_s)
        return sched_msg.JobsReply.model_validate(raw).jobs
    except (GeodeError, ValidationError):
        return None


def last_rows(ledger: Ledger, names: list[str]) -> dict[str, OccurrenceRow | MissedRange | None]:
    """Each job's newest occurrence row or missed range (by instant)."""
    out: dict[str, OccurrenceRow | MissedRange | None] = {}
    for name in names:
        runs = ledger.runs(name, 1)
        out[name] = next(iter(merged(runs)), None)
    return out


def job_summaries(home: GeodeHome, views: list[sched_msg.JobView]) -> list[dict[str, Any]]:
    """Per job: its view (JSON), its schedule in words, and its last occurrence (outcome, lag, turn)."""
    names = [v.entry.cursor.job_id for v in views]
    last = read_ledger(home, lambda ledger: last_rows(ledger, names), {})
    out = []
    for v in views:
        item = v.model_dump(mode="json")
        item["name"], item["when"], item["state"] = v.entry.cursor.job_id, when_text(v), state_text(v.entry)
        item["next_instant"] = utc_shown(v.next_instant)
        item["last"] = run_json(last[item["name"]]) if last.get(item["name"]) is not None else None
        out.append(item)
    return out


def utc_shown(text: str | None) -> str | None:
    """An ISO instant as the ledger writes instants (``2027-03-01T08:06:00Z``), whichever way it came."""
    try:
        return utc_text(datetime.fromisoformat(text).replace(microsecond=0)) if text else None
    except ValueError:
        return text


def when_text(view: sched_msg.JobView) -> str:
    d = view.entry.job.definition if view.entry.job is not None else {}
    tz = d.get("tz") or "UTC"
    if d.get("cron"):
        return f"cron {d['cron']} {tz}"
    if d.get("every") is not None:
        return f"every {d['every']}s"
    return f"at {d.get('at') or '?'}"


def state_text(entry: JobEntry) -> str:
    c = entry.cursor
    if c.disabled:
        return f"disabled ({c.disabled_reason or 'no reason recorded'})"
    state = "paused" if c.paused else "active"
    return f"{state}, {c.consecutive_failures} failures in a row" if c.consecutive_failures else state


def job_lines(items: list[dict[str, Any]]) -> list[str]:
    if not items:
        return ["no scheduled jobs: `geode schedule add NAME --cron|--every|--at ... --prompt TEXT`"]
    out = [f"{'NAME':<20} {'NEXT':<21} {'LAST':<34} {'LAG':>8}  SCHEDULE · STATE"]
    for it in items:
        last = it.get("last") or {}
        out.append(
            f"{it['name']:<20} {it.get('next_instant') or '-':<21} {last.get('outcome_text', '-'):<34} "
            f"{lag_text(last.get('lag_s')):>8}  {visible(it['when'], one_line=True)} · {it['state']}"
        )
    return out


# runs ---------------------------------------------------------------------------------------------------
def merged(runs: Runs) -> list[OccurrenceRow | MissedRange]:
    """Occurrence rows and missed ranges in one list, newest instant first."""

    def at(r: OccurrenceRow | MissedRange) -> datetime:
        return r.missed.last if isinstance(r, MissedRange) else (r.instant or r.claimed_at)

    return sorted([*runs.occurrences, *runs.missed], key=at, reverse=True)


def outcome_text(outcome: Outcome | None) -> str:
    if outcome is None:
        return "claimed"
    kind = outcome.kind
    if kind == "done":
        return f"done {outcome.result} ({outcome.reason})"  # type: ignore[union-attr]
    if kind == "missed":
        return f"missed {outcome.count}"  # type: ignore[union-attr]
    reason = getattr(outcome, "reason", "")
    return f"{kind} ({reason})" if reason else kind


def lag_text(lag: float | None) -> str:
    return "-" if lag is None else f"{lag:.3f}s"


def run_json(r: OccurrenceRow | MissedRange) -> dict[str, Any]:
    """One run as JSON: the stored row, plus its outcome in words and its lag in seconds (an occurrence)."""
    item = r.model_dump(mode="json")
    if isinstance(r, MissedRange):
        item.update(type="missed", outcome="missed", outcome_text=outcome_text(r.missed))
        return item
    item.update(
        type="occurrence",
        outcome=r.kind.value if r.kind else "claimed",
        outcome_text=outcome_text(r.outcome),
        lag_s=r.lag_s(),
    )
    return item


def newest(runs: Runs, limit: int) -> tuple[list[OccurrenceRow | MissedRange], bool]:
    """The newest ``limit`` rows and ranges together (the ledger gives up to ``limit`` of each), and
    whether more are recorded."""
    rows = merged(runs)
    return rows[:limit], runs.truncated or len(rows) > limit


def runs_json(runs: Runs, limit: int) -> dict[str, Any]:
    rows, more = newest(runs, limit)
    return {"runs": [run_json(r) for r in rows], "truncated": more}


def run_lines(runs: Runs, limit: int) -> list[str]:
    rows, more = newest(runs, limit)
    if not rows:
        return ["no occurrences recorded"]
    out, unacked = [f"{'OCCURRENCE':<46} {'OUTCOME':<34} {'LAG':>8}  TURN"], False
    for r in rows:
        if isinstance(r, MissedRange):
            m = r.missed
            span = f"{utc_text(m.first)} .. {utc_text(m.last)}"
            out.append(f"{r.job_id + '@' + span:<46} {outcome_text(m):<34} {'-':>8}  ({m.reason}: not run)")
            continue
        lag = lag_text(r.lag_s())
        if r.submitted_at is None and r.kind is not None and r.kind.value not in ("skipped", "missed"):
            lag, unacked = "unacked", True  # the ledger has no acknowledged submit for it (not yet, or never)
        out.append(f"{r.occurrence_id:<46} {outcome_text(r.outcome):<34} {lag:>8}  {r.turn_id}")
    if unacked:
        out.append("unacked: lanes has not acknowledged the turn's durable submit (yet): no lag to show")
    if more:
        out.append("… more runs are recorded: --limit to see more")
    return out


def answer_of(ledger: Ledger, occurrence: str) -> dict[str, Any]:
    """An occurrence with its turn's answer (the turn record's outcome); ``ValueError`` / ``NotFound``."""
    from geode.schedule.occurrences import parse_occurrence_id

    row = ledger.row(parse_occurrence_id(occurrence))
    if row is None:
        raise NotFound(f"no occurrence {occurrence} in the ledger (see `geode schedule runs`)")
    turn = ledger.turn(row.turn_id)
    result = (turn.outcome or {}) if turn is not None else {}
    return {
        **run_json(row),
        "turn_state": turn.state.value if turn is not None else None,
        "session_id": turn.session_id if turn is not None else None,
        "answer": result.get("text"),
        "termination_reason": result.get("termination_reason"),
        "error": result.get("error"),
    }


def answer_lines(item: dict[str, Any]) -> list[str]:
    out = [
        f"occurrence {item['occurrence_id']}: {item['outcome_text']} · lag {lag_text(item.get('lag_s'))}",
        f"turn {item['turn_id']}"
        + (f" ({item['turn_state']}, session {item['session_id']})" if item.get("turn_state") else ""),
    ]
    if item.get("turn_state") is None:
        return [*out, "no turn record: the turn was never submitted, or its record was pruned"]
    if item.get("error"):
        out.append(f"error: {visible(str(item['error']), one_line=True)}")
    answer = item.get("answer")
    out.append(
        visible(answer) if answer else "(no answer yet)" if item["turn_state"] != "done" else "(empty)"
    )
    return out


# status and doctor ---------------------------------------------------------------------------------------
def status_summaries(home: GeodeHome, ask_scheduler: bool) -> list[dict[str, Any]]:
    """`geode status`'s jobs (none: an empty list, and status prints nothing of them)."""
    try:
        views = ask_jobs(home, timeout_s=2.0) if ask_scheduler else None
        if views is None:
            views = [local_view(e) for e in read_ledger(home, Ledger.entries, [])]
        return job_summaries(home, views) if views else []
    except GeodeError:
        return []


def status_lines(items: list[dict[str, Any]]) -> list[str]:
    return [f"schedule: {len(items)} jobs", *(f"  {line}" for line in job_lines(items))]


def doctor_checks(home: GeodeHome) -> list[dict[str, Any]]:
    """One check per disabled job (an error) and per failing job (a warning); none when all run fine."""
    try:
        entries = read_ledger(home, Ledger.entries, [])
    except GeodeError as exc:
        return [{"name": "schedule", "ok": False, "detail": f"ledger unreadable: {exc}", "warn": True}]
    out = []
    for e in entries:
        c = e.cursor
        if c.disabled:
            why = c.disabled_reason or "no reason recorded"
            detail = f"job {c.job_id} is disabled ({why}): fix it, then `geode schedule resume {c.job_id}`"
            out.append({"name": "schedule", "ok": False, "detail": detail, "warn": False})
        elif c.consecutive_failures > 0:
            detail = (
                f"job {c.job_id} failed its last {c.consecutive_failures} runs "
                f"(`geode schedule runs {c.job_id}`)"
            )
            out.append({"name": "schedule", "ok": True, "detail": detail, "warn": True})
    return out
