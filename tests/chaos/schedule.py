"""The chaos run's scheduled job (`scripts/chaos --schedule`): an operator job ``every 1s`` in config.toml
whose turn appends one line ``job <call id>`` to a file outside the records (run_bash, granted by
``allowed_tools``) and whose answer ``applied <call id>`` is delivered to a bound Telegram chat, while the
killer SIGKILLs children (the scheduler among them). After the kills the job is paused and the tree settles;
then, from `geode schedule runs --json` (the ledger), the effect file, the chat and the receipts:

- every instant of the window (the first instant to the pause) has exactly one terminal outcome: one row, or
  a place in a ``missed`` range (``catch_up = "all"`` with the largest max runs every instant a restart
  finds late, so a range only appears past 100 late instants), never both, never two rows;
- no occurrence's effect happens twice, and every effect line has its receipt (its call maps to the turn);
- no occurrence's reply is posted twice; a ``done`` delivery is posted once, a not-posted one is
  ``uncertain`` (or ``delivery_failed``);
- every ``uncertain`` occurrence has its reply receipt uncertain (or since reconciled), admitted by an
  incarnation the killer killed, or whose reason names one (the messengers child killed with the post in
  flight), as the generic check of every uncertain receipt explains them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from actors.cli.child_view import ask_child
from geode.home import GeodeHome
from geode.protocol import schedule as sched
from geode.records.models import Receipt
from geode.records.schedule_models import Runs
from tests.chaos.driver import Kill

JOB = "chaos-job"
PROMPT = "chaos-job-effect"  # what the MarkerModel answers with one run_bash call (tests/chaos/rig.py)
APPLIED = re.compile(r"applied (toolu_chaos_job_\d+)")  # "applied <id>" or "not-applied <id>: why"
ROOT = Path(__file__).resolve().parents[2]
OPEN = {"due", "delivering", "claimed"}
INCARNATION = re.compile(r"\b([a-z][a-z0-9-]*#\d+)\b")  # "messengers#3" in a receipt's uncertain reason


def job_config(base: Path, chat: int) -> str:
    """The ``[[schedule.jobs]]`` table of the chaos job (delivering to ``chat``, a bound chat)."""
    return (
        f'[[schedule.jobs]]\nname = "{JOB}"\nevery = 1\nprompt = "{PROMPT}"\n'
        'catch_up = "all"\ncatch_up_max = 100\nallowed_tools = ["run_bash"]\n'
        f'deliver = "telegram:{chat}"\nworkspace = "{base / "jobws"}"\n'
    )


def read_effects(path: Path) -> list[str]:
    """The call id of every effect line ``job <call id>``."""
    if not path.exists():
        return []
    lines = (ln.split() for ln in path.read_text().splitlines())
    return [p[1] for p in lines if len(p) == 2 and p[0] == "job"]


def _decided_up_to(home: GeodeHome) -> datetime | None:
    got = ask_child(home, "scheduler", sched.RUNS, sched.ListRuns(name=JOB, limit=5), Runs, 5.0)
    if got is None:
        return None
    return max((o.instant for o in Runs.model_validate(got).occurrences if o.instant), default=None)


def pause_job(home: GeodeHome, end: datetime, timeout_s: float) -> tuple[datetime | None, str]:
    """Once the scheduler has decided past ``end`` (the kills' end), pause the job (retried while the
    scheduler restarts): the job's creation instant (its ``every`` anchor), or None and why not."""
    deadline = time.monotonic() + timeout_s
    why = "the scheduler never decided past the kills' end"
    while time.monotonic() < deadline:
        last = _decided_up_to(home)
        if last is not None and last >= end:
            got = ask_child(home, "scheduler", sched.PAUSE, sched.PauseJob(name=JOB), sched.StateReply, 5.0)
            job = sched.StateReply.model_validate(got).job.entry.job if got else None
            if job is not None:
                return job.created_at, ""
            why = "pause not answered"
        time.sleep(0.5)
    return None, why


def settle_job(home: GeodeHome, timeout_s: float) -> str:
    """Wait (bounded) until no occurrence of the job is open (claimed, due, delivering); '' or why not."""
    deadline = time.monotonic() + timeout_s
    why = "not asked"
    while time.monotonic() < deadline:
        got = ask_child(home, "scheduler", sched.RUNS, sched.ListRuns(name=JOB, limit=500), Runs, 5.0)
        if got is None:
            why = "the scheduler does not answer"
        else:
            open_ = [o for o in Runs.model_validate(got).occurrences if not o.terminal]
            if not open_:
                return ""
            why = f"{len(open_)} open: {', '.join(f'{o.occurrence_id} {o.kind}' for o in open_[:5])}"
        time.sleep(0.5)
    return why


def runs_json(home: GeodeHome) -> dict[str, Any]:
    """`geode schedule runs chaos-job --json --limit 500`, as the operator reads it."""
    from tests.actors.tree_kit import env

    r = subprocess.run(
        [sys.executable, "-m", "actors.cli.main", "schedule", "runs", JOB, "--json", "--limit", "500"],
        env=env(home),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if r.returncode != 0:
        raise RuntimeError(f"geode schedule runs failed ({r.returncode}): {r.stderr.strip()[:300]}")
    return json.loads(r.stdout)


@dataclass
class JobVerdict:
    instants: int = 0  # instants of the window
    outcomes: Counter[str] = field(default_factory=Counter)
    effects: int = 0
    posts: int = 0
    violations: list[tuple[str, str]] = field(default_factory=list)  # (kind, detail)
    findings: list[tuple[str, str]] = field(default_factory=list)  # (kind, detail): reported, not failed

    def line(self) -> str:
        oc = ", ".join(f"{k} {v}" for k, v in sorted(self.outcomes.items()))
        return (
            f"schedule: {self.instants} instants decided once ({oc}), {self.effects} effects, "
            f"{self.posts} posts, {len(self.violations)} violations"
        )


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _instants(runs: list[dict[str, Any]], v: JobVerdict, start: datetime, end: datetime) -> None:
    """Exactly one terminal outcome per instant in [start, end]."""
    rows: dict[datetime, list[dict[str, Any]]] = defaultdict(list)
    missed: Counter[datetime] = Counter()
    for r in runs:
        if r["type"] == "missed":
            first, last = _ts(r["missed"]["first"]), _ts(r["missed"]["last"])
            t = first
            while t <= last:
                missed[t] += 1
                t += timedelta(seconds=1)
            v.outcomes["missed"] += r["missed"]["count"]
        elif r.get("instant"):
            rows[_ts(r["instant"])].append(r)
    t = start
    while t <= end:
        v.instants += 1
        mine, ranges = rows.get(t, []), missed.get(t, 0)
        at = t.isoformat()
        if len(mine) + ranges == 0:
            v.violations.append(("undecided", f"instant {at}: no row and no missed range"))
        elif len(mine) + ranges > 1:
            v.violations.append(("decided_twice", f"instant {at}: {len(mine)} rows, {ranges} missed ranges"))
        for r in mine:
            if r["outcome"] in OPEN:
                v.violations.append(("undecided", f"{r['occurrence_id']} still {r['outcome_text']}"))
            elif not ranges:
                v.outcomes[r["outcome"]] += 1
        t += timedelta(seconds=1)


def check_job(
    runs: dict[str, Any],
    window: tuple[datetime, datetime],
    effects: list[str],
    calls: dict[str, str],
    receipts: list[Receipt],
    posts: list[dict[str, Any]],
    kills: list[Kill],
) -> JobVerdict:
    """The verdict over the ledger's runs (`geode schedule runs --json`), the effect file's call ids, the
    model's calls (call id → fingerprint of its run_bash input), every receipt, the chat's posts and the
    kills. ``window``: the first instant of the job and the last one before the pause."""
    v = JobVerdict(effects=len(effects))
    rows = [r for r in runs["runs"] if r["type"] == "occurrence" and r.get("instant")]
    if runs.get("truncated"):
        window = (max(window[0], min(_ts(r["instant"]) for r in rows)), window[1])
    _instants(runs["runs"], v, *window)
    by_turn = {r["turn_id"]: r for r in rows}
    by_fp: dict[str, list[Receipt]] = defaultdict(list)
    for rc in receipts:
        by_fp[rc.identity.fingerprint].append(rc)
    turn_of: dict[str, str] = {}  # call id → turn id, through the receipt of its run_bash call
    for call, fp in calls.items():
        for rc in by_fp.get(fp, []):
            turn_of[call] = rc.identity.turn_id
    per_turn: dict[str, list[str]] = defaultdict(list)
    for call, n in Counter(effects).items():
        if n > 1:
            v.violations.append(("duplicate", f"effect of {call} {n} times (turn {turn_of.get(call)})"))
        turn = turn_of.get(call)
        if turn is None:
            v.violations.append(("lost", f"effect {call} without a receipt (no turn owns it)"))
            continue
        per_turn[turn].append(call)
    for turn, mine in per_turn.items():
        occ = by_turn.get(turn, {}).get("occurrence_id", f"turn {turn} (no ledger row)")
        if len(mine) > 1:
            v.violations.append(("duplicate", f"{occ}: {len(mine)} effects {mine}"))
    # the chat: each occurrence's reply at most once, a posted delivery exactly once
    v.posts = len(posts)
    posted: dict[str, list[str]] = defaultdict(list)  # turn → post texts
    for p in posts:
        m = APPLIED.search(p["text"])
        if m is None:
            continue
        turn = turn_of.get(m.group(1))
        posted[turn or f"call {m.group(1)}"].append(p["text"][:60])
    for turn, texts in posted.items():
        occ = by_turn.get(turn, {}).get("occurrence_id", turn)
        if len(texts) > 1:
            v.violations.append(("duplicate_post", f"{occ}: {len(texts)} posts {texts}"))
    by_op = {rc.operation_id: rc for rc in receipts}
    killed = {f"{k.name}#{k.incarnation}" for k in kills}
    for r in rows:
        hist = [s["outcome"]["kind"] for s in r.get("history", [])]
        if (
            r["outcome_text"].startswith("done ok")
            and "uncertain" not in hist
            and not posted.get(r["turn_id"])
            and any(turn_of.get(c) == r["turn_id"] for c in calls)
        ):
            # the turn answered after its call (which the receipt ties to it): a delivered done is one post
            v.violations.append(("lost_reply", f"{r['occurrence_id']} done, its reply never posted"))
        if r["outcome"] == "delivery_failed":  # the local chat refuses nothing: a restart made it permanent
            v.findings.append(("delivery_failed", f"{r['occurrence_id']}: {r['outcome_text']}"))
        if "uncertain" in hist:
            reply = by_op.get(f"reply-{r['turn_id']}")
            occ = r["occurrence_id"]
            if reply is None:
                v.violations.append(("unexplained_uncertain", f"{occ}: no reply receipt"))
            elif reply.owner not in killed:
                why = f"{occ}: reply receipt owner {reply.owner} not killed ({reply.uncertain_reason})"
                # as the generic check: the owner killed, or a kill in flight — here the one the reason names
                # (the messengers child killed with the owner's post in flight: its outcome is unknown)
                if killed & set(INCARNATION.findall(reply.uncertain_reason or "")):
                    v.findings.append(("uncertain_owner_not_killed", why))
                else:
                    v.violations.append(("unexplained_uncertain", why))
    return v


def verdict(w: Any, kills: list[Kill], end: datetime, timeout_s: float) -> JobVerdict:
    """After the kills (``end``: their wall end): pause the job, let its open occurrences finish, read the
    ledger through `geode schedule runs --json` and judge. ``w``: the chaos World."""
    created, why = pause_job(w.home, end, timeout_s)
    if created is None:
        v = JobVerdict()
        v.violations.append(("stuck", f"schedule: {why}"))
        return v
    open_ = settle_job(w.home, timeout_s)
    runs = runs_json(w.home)
    turns = [r["turn_id"] for r in runs["runs"] if r["type"] == "occurrence"]
    window = (created + timedelta(seconds=1), end)
    v = check_job(
        runs,
        window,
        read_effects(w.model.job_effects),
        dict(w.model.calls),
        job_receipts(w.home, turns),
        w.api.posts(w.chats[0]),
        kills,
    )
    if open_:
        v.violations.append(("stuck", f"schedule not settled: {open_}"))
    return v


def job_receipts(home: GeodeHome, turn_ids: list[str]) -> list[Receipt]:
    """Every receipt of the job's turns, their calls' and their replies' (their sessions' lists: the
    newest-2000 list of all receipts may not reach them in a long run with clients)."""
    import os

    from actors.bus import Bus
    from geode.records.store_client import StoreClient

    bus = Bus(f"chaos-job-{os.getpid()}", 1, home).start()
    try:
        store = StoreClient(bus.transport, timeout_s=10.0, attempts=3)
        sessions = {t.session_id for tid in turn_ids if (t := store.get_turn(tid)) is not None}
        keys = [k for sid in sorted(sessions) for k in (sid, f"{sid}#replies")]  # a reply's: "#replies"
        return [r for k in keys for r in store.list_receipts(session_id=k, limit=2000)]
    finally:
        bus.stop()
