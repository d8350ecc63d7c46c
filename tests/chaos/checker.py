"""The chaos checker: from the client history, the kills, the status samples, the marker file and the store's
evidence, the violations of DESIGN.md §5 (duplicate / lost effects, unexplained uncertain receipts, unfinished
turns, stuck lanes) and the availability and latency figures; the last line is the one-line summary."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from geode.records.models import TurnRecord
from tests.chaos.chat import ChatVerdict
from tests.chaos.driver import Kill, Op, Record, Sample
from tests.chaos.evidence import Evidence
from tests.chaos.schedule import JobVerdict
from tests.chaos.slow import SlowTurn, breakdown, server_story, slow_turns

AVAIL_P50_S, AVAIL_P99_S, TURN_P99_FACTOR = 0.5, 2.0, 3.0


def pct(xs: list[float], q: float) -> float:
    """Nearest-rank percentile (0 for no data)."""
    if not xs:
        return 0.0
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s) + 0.5) - 1))]


@dataclass
class Report:
    seconds: float
    kills: int
    turns: int
    violations: dict[str, list[str]] = field(default_factory=dict)
    warnings: dict[str, list[str]] = field(default_factory=dict)
    kill_to_serving: list[float] = field(default_factory=list)
    back_by_child: dict[str, list[float]] = field(default_factory=dict)
    never_back: int = 0
    availability: float = 1.0
    turn_chaos: list[float] = field(default_factory=list)
    turn_calm: list[float] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    slow: list[str] = field(default_factory=list)  # where the slow turns spent their time
    slow_turns: list[SlowTurn] = field(default_factory=list)
    chat: ChatVerdict | None = None  # the chats' replies (None: the run had no chat)
    job: JobVerdict | None = None  # the scheduled job's instants (None: the run had no job)

    def violation(self, kind: str, detail: str) -> None:
        self.violations.setdefault(kind, []).append(detail)

    def warn(self, kind: str, detail: str) -> None:
        self.warnings.setdefault(kind, []).append(detail)

    def n(self, kind: str) -> int:
        return len(self.violations.get(kind, []))

    def availability_misses(self) -> list[str]:
        out = []
        p50, p99 = pct(self.kill_to_serving, 50), pct(self.kill_to_serving, 99)
        if p50 > AVAIL_P50_S:
            out.append(f"kill→serving p50 {p50:.2f}s > {AVAIL_P50_S}s")
        if p99 > AVAIL_P99_S or self.never_back:
            out.append(f"kill→serving p99 {p99:.2f}s > {AVAIL_P99_S}s (never back: {self.never_back})")
        calm, chaos = pct(self.turn_calm, 99), pct(self.turn_chaos, 99)
        if calm and chaos > TURN_P99_FACTOR * calm:
            out.append(f"turn p99 {chaos:.2f}s > {TURN_P99_FACTOR:g}x calm {calm:.2f}s")
        return out

    def summary(self) -> str:
        k2s = self.kill_to_serving
        calm = f"{pct(self.turn_calm, 99):.2f}s" if self.turn_calm else "n/a"
        return (
            f"chaos: {self.seconds:.0f}s, {self.kills} kills, {self.turns} turns "
            f"({self.counts['applied']} applied), {self.n('duplicate')} dup, {self.n('duplicate_post')} dup "
            f"posts, {self.n('lost') + self.n('lost_reply')} lost, "
            f"{self.n('unexplained_uncertain')} unexplained, {self.n('stuck') + self.n('unfinished')} stuck, "
            f"kill→serving p50 {pct(k2s, 50):.2f}s p99 {pct(k2s, 99):.2f}s, "
            f"availability {self.availability:.0%}, "
            f"turn p99 {pct(self.turn_chaos, 99):.2f}s (calm {calm})"
        )

    def add_stories(self, logs: Path, top: int = 5) -> None:
        """The server side (the children's log lines) of the slowest turns."""
        for s in self.slow_turns[:top]:
            self.slow += [f"  server side of {s.op.tag}:", *server_story(logs, s.op)]

    def lines(self) -> list[str]:
        out = []
        for kind, items in sorted(self.violations.items()):
            out.append(f"VIOLATION {kind}: {len(items)}")
            out += [f"  {d}" for d in items[:20]]
        for kind, items in sorted(self.warnings.items()):
            out.append(f"finding {kind}: {len(items)}")
            out += [f"  {d}" for d in items[:10]]
        per_child = ", ".join(
            f"{n} {len(xs)}x p50 {pct(xs, 50):.2f}s max {max(xs):.2f}s"
            for n, xs in sorted(self.back_by_child.items())
        )
        out.append(f"kill→serving by child: {per_child or '-'}")
        out.append(
            f"turn latency: calm p50 {pct(self.turn_calm, 50):.2f}s p99 {pct(self.turn_calm, 99):.2f}s "
            f"({len(self.turn_calm)}), chaos p50 {pct(self.turn_chaos, 50):.2f}s "
            f"p99 {pct(self.turn_chaos, 99):.2f}s ({len(self.turn_chaos)})"
        )
        out.append("outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items())))
        if self.chat is not None:
            out.append(self.chat.line())
        if self.job is not None:
            out.append(self.job.line())
        return out + self.slow

    def add_job(self, verdict: JobVerdict) -> None:
        """The scheduled job's verdict: each of its violations under its kind (duplicate, lost, ...)."""
        self.job = verdict
        for kind, detail in verdict.violations:
            self.violation(kind, f"job: {detail}")
        for kind, detail in verdict.findings:
            self.warn(f"job_{kind}", detail)

    def add_chat(self, verdict: ChatVerdict) -> None:
        """The chats' replies: a duplicate post and a reply neither posted nor uncertain are violations."""
        self.chat = verdict
        for d in verdict.duplicate:
            self.violation("duplicate_post", d)
        for d in verdict.lost:
            self.violation("lost_reply", d)
        for d in verdict.misdirected:
            self.violation("misdirected_reply", d)
        if verdict.unsettled:
            self.violation("stuck", f"messengers owe replies: {verdict.unsettled}")


def kills_during(kills: list[Kill], t0: float, t1: float) -> str:
    ks = [f"{k.name}#{k.incarnation}@{k.t - t0:+.2f}s" for k in kills if t0 - 0.5 <= k.t <= t1 + 0.5]
    more = f" and {len(ks) - 8} more" if len(ks) > 8 else ""
    return ", ".join(ks[:8]) + more if ks else "no kill"


def _op_line(op: Op, kills: list[Kill]) -> str:
    return (
        f"{op.tag} turn {op.turn_id} session {op.session_id} {op.kind}/{op.reason} "
        f"{(op.text or op.error)[:100]!r} kills: {kills_during(kills, op.t_invoke, op.t_end or op.t_invoke)}"
    )


def _store_verdict(op: Op, turns: list[TurnRecord]) -> str:
    mine = [
        t for t in turns if t.turn_id == op.turn_id or (op.turn_id is None and t.session_id == op.session_id)
    ]
    if not mine:
        return "no turn record (never admitted)"
    return "; ".join(
        f"{t.turn_id} {t.state.value} attempts {t.attempts} "
        f"{(t.outcome or {}).get('termination_reason')} {str((t.outcome or {}).get('text', ''))[:60]!r}"
        for t in mine
    )


def _availability(rep: Report, samples: list[Sample], kills: list[Kill], t0: float, t1: float) -> None:
    window = [s for s in samples if t0 <= s.t <= t1]
    if window:
        up = sum(1 for s in window if s.children and all(v[0] == "running" for v in s.children.values()))
        rep.availability = up / len(window)
    for k in kills:
        back = next(
            (
                s.t
                for s in samples
                if s.t > k.t
                and s.children is not None
                and (ch := s.children.get(k.name)) is not None
                and ch[0] == "running"
                and ch[2] > k.incarnation
            ),
            None,
        )
        if back is None:
            rep.never_back += 1
        else:
            rep.kill_to_serving.append(back - k.t)
            rep.back_by_child.setdefault(k.name, []).append(back - k.t)


def check(rec: Record, markers: list[tuple[str, str]], ev: Evidence, seconds: float) -> Report:
    ops, kills = rec.ops, rec.kills
    rep = Report(seconds=seconds, kills=len(kills), turns=len(ops))
    by_tag = {op.tag: op for op in ops}
    turns = ev.turns
    lines_by_tag: dict[str, list[str]] = defaultdict(list)
    for tag, call in markers:
        lines_by_tag[tag].append(call)
    for op in ops:
        rep.counts["applied" if op.applied else f"{op.kind}/{op.reason}" if op.kind == "ok" else op.kind] += 1
    # duplicated effects: one turn's effect line more than once (the same call twice, or the model re-asked)
    for tag, calls in lines_by_tag.items():
        if len(calls) > 1:
            owner = by_tag.get(tag)
            where = _op_line(owner, kills) if owner else "no client op"
            rep.violation("duplicate", f"{tag}: {len(calls)} effects {Counter(calls)}; {where}")
        if tag not in by_tag:
            rep.violation("lost", f"effect {tag} {calls} belongs to no client turn")
    # lost: an acknowledged effect absent, or an effect without its receipt
    for op in ops:
        if op.applied and op.tag not in lines_by_tag:
            rep.violation("lost", f"acknowledged, no effect: {_op_line(op, kills)}")
        checked = op.session_id in ev.receipts_checked
        if op.session_id and not checked:
            rep.counts["receipts_unchecked"] += 1
        if checked and op.tag in lines_by_tag and op.session_id and not ev.receipts.get(op.session_id):
            rep.violation("lost", f"effect without receipt: {_op_line(op, kills)}")
        if op.kind == "ok" and op.reason in {"natural", "forced_text"} and not op.applied:
            has_effect = op.tag in lines_by_tag
            kind = "answer_misreports_effect" if has_effect else "not_applied_ok"
            rep.warn(kind, f"{_op_line(op, kills)} effect in file: {has_effect}")
        if op.approvals_asked:
            rep.warn("skip_permissions_lost", f"asked {op.approvals_asked}x: {_op_line(op, kills)}")
        if op.kind == "ok" and op.reason not in {"natural", "forced_text"}:
            rep.warn("turn_ended_otherwise", _op_line(op, kills))
        if op.kind == "invoke":
            rep.violation("unfinished", f"client never returned: {_op_line(op, kills)}")
        if op.kind == "info":
            rep.warn("client_gave_up", f"{_op_line(op, kills)}; store: {_store_verdict(op, turns)}")
        receipts = ev.receipts.get(op.session_id or "", [])
        if op.tag not in lines_by_tag and any(r.state.value == "committed" for r in receipts):
            rep.violation("lost", f"receipt committed, no effect: {_op_line(op, kills)}")
    # uncertain receipts: each must be explained by a kill of its owner incarnation (or a kill in flight)
    killed = {f"{k.name}#{k.incarnation}" for k in kills}
    for r in ev.uncertain:
        in_flight = [k for k in kills if r.created_at - 0.5 <= k.wall <= r.updated_at + 0.5]
        if r.owner in killed:
            rep.counts["uncertain_explained"] += 1
            continue
        detail = f"{r.operation_id} owner {r.owner} turn {r.identity.turn_id} ({r.uncertain_reason})"
        if in_flight:
            rep.counts["uncertain_explained"] += 1
            rep.warn(
                "uncertain_owner_not_killed", f"{detail}; kills in flight: {[k.name for k in in_flight]}"
            )
        else:
            rep.violation("unexplained_uncertain", detail)
    # turns never finished, stuck lanes
    for t in ev.turns:
        if t.state.value != "done":
            rep.violation(
                "unfinished", f"turn {t.turn_id} session {t.session_id} {t.state.value} on {t.worker}"
            )
    if not ev.settled:
        rep.violation("stuck", f"tree not settled after {ev.settle_s:.0f}s: {ev.unsettled_why}")
    for note in ev.notes:
        rep.warn("store_at_scale", note)
    for sid in ev.paused_sessions:
        rep.warn("paused_session", sid)
    _availability(rep, rec.samples, kills, rec.t_chaos, rec.t_calm_end)
    for op in ops:
        if op.kind != "ok" or op.reason not in {"natural", "forced_text"}:
            continue
        d = op.t_end - op.t_invoke
        if op.t_end <= rec.t_chaos:
            rep.turn_calm.append(d)
        elif op.t_invoke >= rec.t_chaos:
            rep.turn_chaos.append(d)
    if rep.turn_calm:
        threshold = TURN_P99_FACTOR * pct(rep.turn_calm, 99)
        slow = slow_turns(ops, kills, threshold, rec.t_chaos)
        rep.slow_turns = slow
        ends = [op.t_invoke for op in ops if op.t_invoke >= rec.t_chaos]
        window = (rec.t_chaos, max(ends, default=rec.t_chaos))
        rep.slow = breakdown(slow, kills, threshold, len(rep.turn_chaos), window)
    return rep
