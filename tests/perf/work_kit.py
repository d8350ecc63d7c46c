"""Counting a tree's work per turn and per tool round with the work tally (geode/work_tally.py).

A served tree with ``GEODE_WORK_TALLY`` set, one control-socket session (as ``geode ask``) against the
scripted model, turns of K read-only tool rounds (``glob_files``). Each turn is one window: the tally of every
process is read before and after it (after the tree has settled), the background traffic is left out by
message type, and each measure is the smallest over the repeats (a sweep that happened to land in one window
is not the turn's work). Per tool round = (turn with K rounds - turn with 1 round) / (K - 1); per turn = the
one-round turn.

Run it by hand (prints the table; ``PYTHONPATH`` may point at an older checkout with the same hooks):

    .venv/bin/python -m tests.perf.work_kit
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.work_tally import ENV, read_all
from tests.actors.tree_kit import scripted_tree
from tests.waiting import poll_for

# periodic traffic that is no turn's work: heartbeats, hellos, pings (the CLI pings while it follows a turn)
BACKGROUND = frozenset({"worker.heartbeat", "runtime.hello", "runtime.ping", "cli.ping"})
# the measures a guard asserts: (name, the tally kinds summed, typed: leave out the background types)
MEASURES: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("frames decoded", ("frame.decoded",), True),
    ("frames encoded", ("frame.encoded",), True),
    ("validations", ("validation", "validation.reply"), True),
    ("hand-offs", ("handoff.pool", "handoff.post", "handoff.reply"), True),
    ("store round trips", ("store.call",), True),
    ("LMDB write txns", ("lmdb.write_txn",), False),  # fewer than ops when the group writer batched some
    ("LMDB write ops", ("lmdb.write_op",), False),
    ("checkpoint saves", ("checkpoint.save",), False),
    ("timeline appends", ("timeline.append",), False),
)
WAKES = (
    "eventfd wakes",
    ("handoff.wake",),
    True,
)  # timing-dependent (only an idle bus thread is woken): shown
THREADS = ("threads started", ("thread.start",), False)  # geode/work_tally.py counts every Thread.start
ROLES = ("control", "lanes", "loop", "executor", "store")
K = 6
Counts = dict[str, dict[str, int]]  # role -> counter -> n


def reply(req: Any) -> Any:
    """The scripted model: the last prompt's ``rounds=K`` glob_files rounds, then a text answer."""
    k, done = 0, 0
    for m in req.body.get("messages", []) if isinstance(req.body, dict) else []:
        text = json.dumps(m)
        found = re.findall(r"rounds=(\d+)", text) if m.get("role") == "user" else []
        if found:
            k, done = int(found[-1]), 0
        done += text.count('"tool_result"')
    if done < k:
        return {"tool_calls": [{"name": "glob_files", "input": {"pattern": f"data-{done}.txt"}}]}
    return {"text": "done"}


@contextmanager
def counted_tree(base: Path) -> Iterator[tuple[GeodeHome, Path, Path]]:
    """A served scripted tree whose every process counts into ``base/tally``: (home, workspace, tally dir)."""
    ws, tally = base / "ws", base / "tally"
    ws.mkdir()
    for i in range(K + 2):
        (ws / f"data-{i}.txt").write_text(f"line {i}\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(ENV, str(tally))  # only `geode serve` (and so the tree) inherits it
        with scripted_tree(base, reply, ws, cwd=ws) as (home, _server):
            mp.delenv(ENV)
            yield home, ws, tally


def snapshot(tally: Path) -> Counts:
    """Every process's counts summed per role (loop-1 and loop-2 are ``loop``)."""
    out: Counts = {}
    for role, counts in read_all(tally).values():
        name = "loop" if role.startswith("loop-") else role if role in ROLES else "other"
        into = out.setdefault(name, {})
        for key, n in counts.items():
            into[key] = into.get(key, 0) + n
    return out


def measure(before: Counts, after: Counts) -> dict[str, dict[str, int]]:
    """``{role: {measure: n}}`` of the work done between two snapshots, background types left out."""
    out: dict[str, dict[str, int]] = {}
    for role in ROLES:
        a, b = before.get(role, {}), after.get(role, {})
        row = out.setdefault(role, {})
        for name, kinds, typed in (*MEASURES, WAKES, THREADS):
            total = 0
            for key, n in b.items():
                kind, _, detail = key.partition(":")
                if kind in kinds and bool(detail) == typed and detail not in BACKGROUND:
                    total += n - a.get(key, 0)
            row[name] = total
    return out


UNTYPED = frozenset(k for _name, kinds, typed in MEASURES if not typed for k in kinds)


def _turn_work(tally: Path) -> tuple[tuple[str, int], ...]:
    """The counters a turn moves: per message type (background types left out), and the untyped kinds."""
    snap = snapshot(tally)
    return tuple(sorted((f"{r}/{k}", n) for r, c in snap.items() for k, n in c.items() if _turn_key(k)))


def _turn_key(key: str) -> bool:
    kind, _, detail = key.partition(":")
    return detail not in BACKGROUND if detail else kind in UNTYPED


def settled(tally: Path) -> Counts:
    """A snapshot once the turn's trailing work (relays, store writes after turn_done) has stopped."""
    last: list[Any] = [None]

    def still() -> bool:
        now = _turn_work(tally)
        same = now == last[0]
        last[0] = now
        return same

    poll_for(still, 30.0, interval_s=0.25, what="the tree's counts to settle after the turn")
    return snapshot(tally)


def run_windows(
    home: GeodeHome, ws: Path, tally: Path, repeats: int = 3
) -> dict[int, dict[str, dict[str, int]]]:
    """``{rounds: {role: {measure: smallest n over the repeats}}}`` for turns of 1 and ``K`` tool rounds."""
    cl = ControlClient(home, client_version="work-guards")
    cl.connect(timeout_s=60.0, cwd=str(ws), is_tty=False, dangerously_skip_permissions=True, mode="IPC")
    best: dict[int, dict[str, dict[str, int]]] = {}
    try:
        cl.run_prompt(
            "warm up rounds=1", timeout_s=120
        )  # first contacts (hellos, connections) are not a turn's
        for i in range(repeats):
            for k in (1, K):
                before = settled(tally)
                cl.run_prompt(f"turn {i} rounds={k}", timeout_s=120)
                got = measure(before, settled(tally))
                into = best.setdefault(k, {})
                for role, row in got.items():
                    cur = into.setdefault(role, dict(row))
                    for name, n in row.items():
                        cur[name] = min(cur[name], n)
    finally:
        cl.close()
    return best


def per_round_and_turn(best: dict[int, dict[str, dict[str, int]]]) -> dict[str, dict[str, dict[str, float]]]:
    """``{"per tool round" | "per turn": {role | "tree": {measure: n}}}``."""
    rnd: dict[str, dict[str, float]] = {}
    turn: dict[str, dict[str, float]] = {}
    for role in ROLES:
        one, many = best[1][role], best[K][role]
        rnd[role] = {m: (many[m] - one[m]) / (K - 1) for m in one}
        turn[role] = {m: float(one[m]) for m in one}
    for table in (rnd, turn):
        names = table[ROLES[0]]
        table["tree"] = {m: sum(table[r][m] for r in ROLES) for m in names}
    return {"per tool round": rnd, "per turn": turn}


def render(figures: dict[str, dict[str, dict[str, float]]]) -> str:
    names = [m[0] for m in (*MEASURES, WAKES, THREADS)]
    lines = []
    for title, table in figures.items():
        lines.append(f"{title:16s} " + " | ".join(f"{n:>17s}" for n in names))
        for role in (*ROLES, "tree"):
            lines.append(f"  {role:14s} " + " | ".join(f"{table[role][n]:17.1f}" for n in names))
    return "\n".join(lines)


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="geode-work-"))
    t0 = time.monotonic()
    with counted_tree(base) as (home, ws, tally):
        t1 = time.monotonic()
        figures = per_round_and_turn(run_windows(home, ws, tally))
        t2 = time.monotonic()
        print(render(figures), flush=True)
    print(f"serve {t1 - t0:.1f} s, turns {t2 - t1:.1f} s, stop {time.monotonic() - t2:.1f} s", flush=True)


if __name__ == "__main__":
    main()
