"""Where the slow turns of a chaos run spent their time: for each turn slower than 3x the calm p99, the
longest gap of its client-side timeline (invoke, prompt accepted, turn_started/queued, tool_start/end,
turn_done, end) and the children killed in that gap; summed up by gap and by killed child."""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from itertools import pairwise
from pathlib import Path

from tests.chaos.driver import Kill, Op


@dataclass(frozen=True)
class SlowTurn:
    op: Op
    seconds: float
    gap: str  # "<from>→<to>" of the longest gap
    gap_s: float
    gap_at: tuple[float, float]  # the gap's bounds (monotonic)
    killed: tuple[str, ...]  # child kinds killed within the gap (loop-N → loop)
    starts: int  # turn_started events seen (more than one: it was re-queued)

    def line(self, kills: list[Kill]) -> str:
        t0 = self.op.t_invoke
        steps = [f"accepted {self.op.t_accepted - t0:.2f}"] if self.op.t_accepted else []
        steps += [f"{k}{'(' + d + ')' if d else ''} {t - t0:.2f}" for t, k, d in self.op.events]
        where = ", ".join(_killed_in(kills, *self.gap_at) or ["no kill"])
        return (
            f"{self.op.tag} ({self.op.turn_id}) {self.seconds:.2f}s: "
            f"longest gap {self.gap} {self.gap_s:.2f}s "
            f"(killed in it: {where}); starts {self.starts}, reattached {self.op.reattached}; "
            f"timeline: {', '.join(steps)}, end {self.op.t_end - t0:.2f}"
        )


def timeline(op: Op) -> list[tuple[float, str]]:
    points = [(op.t_invoke, "invoke")]
    if op.t_accepted:
        points.append((op.t_accepted, "accepted"))
    points += [(t, "requeued" if d == "requeue" else k) for t, k, d in op.events]
    points.append((op.t_end, "end"))
    return points


def kind_of(name: str) -> str:
    return name.rstrip("0123456789").rstrip("-")


def _killed_in(kills: list[Kill], t0: float, t1: float, limit: int = 10) -> list[str]:
    hit = [f"{k.name}@{k.t - t0:+.2f}s" for k in kills if t0 - 0.3 <= k.t <= t1]
    return hit[:limit] + ([f"and {len(hit) - limit} more"] if len(hit) > limit else [])


def slow_turns(ops: list[Op], kills: list[Kill], threshold_s: float, t_chaos: float) -> list[SlowTurn]:
    out = []
    for op in ops:
        d = op.t_end - op.t_invoke
        if op.kind != "ok" or op.t_invoke < t_chaos or d <= threshold_s:
            continue
        points = timeline(op)
        (ta, a), (tb, b) = max(pairwise(points), key=lambda p: p[1][0] - p[0][0])
        killed = tuple(sorted({kind_of(k.name) for k in kills if ta - 0.3 <= k.t <= tb}))
        starts = sum(1 for _, k, _ in op.events if k == "turn_started")
        out.append(SlowTurn(op, d, f"{a}→{b}", tb - ta, (ta, tb), killed, starts))
    return sorted(out, key=lambda s: -s.seconds)


def by_tenth(slow: list[SlowTurn], t0: float, t1: float) -> str:
    """How many slow turns were invoked in each tenth of the chaos phase: a run that slows as the store
    grows has its slow turns late."""
    span = max(t1 - t0, 1e-9)
    counts = [0] * 10
    for s in slow:
        counts[min(9, max(0, int((s.op.t_invoke - t0) / span * 10)))] += 1
    return "slow turns by tenth of the run: " + " ".join(str(n) for n in counts)


def breakdown(
    slow: list[SlowTurn], kills: list[Kill], threshold_s: float, of: int, window: tuple[float, float]
) -> list[str]:
    """The report lines: totals by longest gap, by killed child and by tenth of the run, then the slowest
    turns one by one."""
    if not slow:
        return [f"slow turns (> {threshold_s:.2f}s, 3x calm p99): 0 of {of}"]
    gaps: Counter[str] = Counter()
    gap_s: dict[str, float] = {}
    by_child: Counter[str] = Counter()
    for s in slow:
        gaps[s.gap] += 1
        gap_s[s.gap] = gap_s.get(s.gap, 0.0) + s.gap_s
        for k in s.killed or ("none",):
            by_child[k] += 1
    out = [
        f"slow turns (> {threshold_s:.2f}s, 3x calm p99): {len(slow)} of {of}; "
        f"re-queued {sum(1 for s in slow if s.starts > 1)}, "
        f"client re-attached {sum(1 for s in slow if s.op.reattached)}",
        "slow turns by longest gap: "
        + ", ".join(f"{g} {n}x (mean {gap_s[g] / n:.2f}s)" for g, n in gaps.most_common()),
        "slow turns by child killed in that gap: " + ", ".join(f"{k} {n}" for k, n in by_child.most_common()),
        by_tenth(slow, *window),
    ]
    out += [f"  {s.line(kills)}" for s in slow[:25]]
    return out


LOG_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (\S+) pid=\d+ \w+ [\w.]+: (.*)$")


def server_story(logs: Path, op: Op, limit: int = 14) -> list[str]:
    """The children's log lines about this turn (lanes pushes and re-queues, workers' acceptances and done
    reports), as seconds after the client invoked it: where a slow turn was on the server side."""
    if not op.turn_id or not logs.is_dir():
        return []
    rows = []
    for f in sorted(logs.glob("*.log")):
        try:
            text = f.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            if op.turn_id not in line:
                continue
            m = LOG_LINE.match(line)
            if m is None:
                continue
            t = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()
            rows.append((t - op.wall_invoke, m.group(2), m.group(3).replace(op.turn_id, "T")[:110]))
    rows.sort()
    out = [f"      {dt:+.2f}s {who}: {msg}" for dt, who, msg in rows[:limit]]
    return out + ([f"      … {len(rows) - limit} more"] if len(rows) > limit else [])
