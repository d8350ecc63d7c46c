"""Where a turn waits: the per-phase report of ``sessions_scale.py --phases`` (bench only).

Reads the lines ``phase_hook/sitecustomize.py`` wrote in the tree's processes and joins them, by turn id and
by the turn's thread in its loop worker, with the client's turns (prompt sent, result taken). Per phase, p50 /
p90 / p99 / mean in ms: the hops before the first model request (client → lanes' submit → running record
stored → pushed to the worker → the turn's thread → open save → request), a tool round's gap in the worker
(its pending-batch save, the tools, prepare), the model call's time beyond the scripted latency (HTTP both
ways, the fake, the wake), and the tail (final save → ``turn.done`` at lanes → done record stored → client).
The store writer: each write's wait in its queue and its group commit.
"""

from __future__ import annotations

import math
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

from phase_hook.executor_hook import hop_report
from phase_hook.reply_hook import reply_report

Span = tuple[str, float, float]  # key, t0, t1
Op = tuple[float, float, float, float]  # a store write: queued, commit start, commit end, answered


def load(d: Path) -> tuple[dict[str, list[Span]], list[Op]]:
    ev: dict[str, list[Span]] = defaultdict(list)
    ops: list[Op] = []
    for f in d.glob("*.txt"):
        for line in f.read_text().splitlines():
            p = line.split()
            if p[0] == "op" and len(p) == 5:
                ops.append((float(p[1]), float(p[2]), float(p[3]), float(p[4])))
            elif len(p) == 4:
                ev[p[0]].append((p[1], float(p[2]), float(p[3])))
    return ev, ops


def _pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))] if s else float("nan")


def _first(spans: list[Span]) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    for k, a, b in spans:
        if k not in out or a < out[k][0]:
            out[k] = (a, b)
    return out


def phases(
    ev: dict[str, list[Span]], ops: list[Op], turns: list[tuple[str, float, float]], latency: float
) -> dict[str, list[float]]:
    """Per phase, the durations (s) over ``turns`` (turn id, prompt sent, result taken)."""
    sub, sta, acc, rep, done, dst = (
        _first(ev[n]) for n in ("submit", "started", "accept", "report", "done", "donestored")
    )
    puts = {k: a for k, a, _ in ev["put"]}
    at_store = {k: (a, b) for k, a, b in ev["storeput"]}
    by_queued = sorted(ops)
    replied = {k: a for k, a, _ in ev["putreply"]}
    rsend, zsend, zrecv = ({k: a for k, a, _ in ev[n]} for n in ("rsend", "zsend", "zrecv"))
    run: dict[str, tuple[float, float, str]] = {}
    for k, a, b in ev["turn"]:
        tid, thread = k.split("@", 1)
        run[tid] = (a, b, thread)
    by_thread: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for n in ("open", "model", "finish", "save", "tools", "prepare"):
        for k, a, b in ev[n]:
            by_thread[k].append((n, a, b))
    r: dict[str, list[float]] = defaultdict(list)
    for tid, c0, c1 in turns:
        if tid not in sub or tid not in run or tid not in sta or tid not in acc:
            continue
        ta, tb, thread = run[tid]
        es = sorted((e for e in by_thread[thread] if ta <= e[1] <= tb), key=lambda e: e[1])
        op = [e for e in es if e[0] == "open"]
        md = [e for e in es if e[0] == "model"]
        fi = [e for e in es if e[0] == "finish"]
        if not (op and md and fi):
            continue
        r["client → lanes submit"].append(sub[tid][0] - c0)
        put = f"{tid}/running"
        if put in puts:
            r["lanes: running record put"].append(sta[tid][0] - puts[put])
            if put in at_store and put in replied:
                h0, h1 = at_store[put]
                r["  put: lanes → store handler"].append(h0 - puts[put])
                wr = next((o for o in by_queued if h0 <= o[0] <= h1), None)  # queued by that handler
                if wr is not None:
                    r["  put: store handler → queued"].append(wr[0] - h0)
                    r["  put: queued → commit start"].append(wr[1] - wr[0])
                    r["  put: group commit"].append(wr[2] - wr[1])
                    r["  put: committed → batch answered"].append(wr[3] - wr[2])
                    r["  put: answered → reply at lanes"].append(replied[put] - wr[3])
                if put in rsend and put in zsend and put in zrecv:
                    r["    reply: to the bus → zmq send"].append(zsend[put] - rsend[put])
                    r["    reply: zmq send → lanes recv"].append(zrecv[put] - zsend[put])
                    r["    reply: lanes recv → callback"].append(replied[put] - zrecv[put])
                r["  put: reply → lanes actor"].append(sta[tid][0] - replied[put])
        r["stored → worker accept"].append(acc[tid][0] - sta[tid][0])
        r["accept → turn thread"].append(ta - acc[tid][0])
        r["thread → open"].append(op[0][1] - ta)
        r["open (its save)"].append(op[0][2] - op[0][1])
        r["open → model request"].append(md[0][1] - op[0][2])
        r["FIRST: prompt → model"].append(md[0][1] - c0)
        for x, y in pairwise(md):
            inside = [e for e in es if e[1] >= x[2] and e[2] <= y[1]]
            r["GAP in the worker"].append(y[1] - x[2])
            for n in ("save", "tools", "prepare"):
                r[f"  gap: {n}"].append(sum(e[2] - e[1] for e in inside if e[0] == n))
        r["model call - latency"].extend(m[2] - m[1] - latency for m in md)
        r["model → finish"].append(fi[0][1] - md[-1][2])
        r["finish (final save)"].append(fi[0][2] - fi[0][1])
        if tid in rep and tid in done:
            r["finish → lanes turn_done"].append(done[tid][0] - fi[0][2])
        if tid in done and tid in dst:
            r["lanes: done record put"].append(dst[tid][0] - done[tid][0])
            r["done stored → client"].append(c1 - dst[tid][0])
        r["TAIL: model → client"].append(c1 - md[-1][2])
        r["OVERHEAD (wall - model calls)"].append(c1 - c0 - sum(m[2] - m[1] for m in md))
    return r


def report(d: Path, levels: list[tuple[int, list[tuple[str, float, float]]]], latency: float) -> None:
    ev, all_ops = load(d)
    print(f"\nwhere a turn waits (--phases, {d}): ms p50 / p90 / p99 / mean")
    for n, turns in levels:
        r = phases(ev, all_ops, turns, latency)
        print(f"{n} sessions: {len(r['OVERHEAD (wall - model calls)'])} turns traced")
        for name, xs in r.items():
            cells = " ".join(f"{v * 1e3:7.1f}" for v in (_pct(xs, 0.5), _pct(xs, 0.9), _pct(xs, 0.99)))
            print(f"  {name:32s} {cells} {sum(xs) / len(xs) * 1e3:7.1f}")
        if not turns:
            continue
        lo, hi = min(t[1] for t in turns), max(t[2] for t in turns)
        hop_report(ev, lo, hi, _pct)
        reply_report(ev, lo, hi, _pct)
        ops = [o for o in all_ops if lo <= o[1] < hi and o[0] > 0]
        if ops:
            parts: list[str] = []
            for what, i, j in (("queued", 0, 1), ("group commit", 1, 2), ("answering the batch", 2, 3)):
                xs = [o[j] - o[i] for o in ops]
                parts.append(f"{what} p50 {_pct(xs, 0.5) * 1e3:.1f} p90 {_pct(xs, 0.9) * 1e3:.1f}")
            print(f"  store writes: {len(ops)}, ms " + ", ".join(parts))
