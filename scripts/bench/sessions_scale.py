"""Scale with sessions: turns/s and host overhead per turn at 1, 10 and 100 concurrent sessions on a real
`geode serve` tree over ipc, each session running turns back to back against a model with a fixed latency.

Scenario per turn: 2 read-only tool rounds (glob_files) then a text: 3 model calls of 0.5 s each (the fake,
scripts/bench/fake_anthropic.py, runs in its own process). Each session is one control-socket client (as
`geode ask` uses: handshake once, then ``cli.prompt`` + follow per turn). "Host overhead" = the turn's wall
time at the client minus the scripted model time (3 x 0.5 s); it is split, from the fake's timestamps, into
prompt → first model request, the gaps between model calls, and last reply → result at the client.
The tree is configured so that every level can run at once: ``[lanes] global_cap`` = the largest level,
``[loop] workers`` x ``capacity`` >= it. A warm-up round at the largest level runs first (not counted).
All sessions start at once and, with a fixed model latency, stay in lockstep (the worst case: every turn's
prompt arrives in the same instant); ``--stagger S`` spreads their first turns over S seconds instead.

Run: .venv/bin/python scripts/bench/sessions_scale.py [--quick] [--levels 1,10,100] [--workers 4]
     [--stagger 1.5] [--keep] [--phases]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_anthropic import FakeProcess, Hit  # noqa: E402

from actors.cli.client import ControlClient  # noqa: E402
from actors.tree.client import stop_tree, tree_status  # noqa: E402
from geode.home import GeodeHome  # noqa: E402

MODEL = "claude-sonnet-5"
ROUNDS = 2  # tool rounds per turn; model calls per turn = ROUNDS + 1


@dataclass
class Turn:
    tag: str
    t0: float
    t1: float = 0.0
    reason: str = ""
    error: str = ""
    reattached: int = 0  # the client's re-handshakes during this turn (an unanswered cli.prompt re-sent)
    turn_id: str = ""


def tree_config(url: str, ws: Path, workers: int, capacity: int, cap: int) -> str:
    return (
        f'[providers]\nmodel = "{MODEL}"\n[providers.anthropic]\nbase_url = "{url}"\n'
        f'[tools]\nroots = ["{ws}"]\n'
        f"[loop]\nworkers = {workers}\ncapacity = {capacity}\n"
        f"[lanes]\nglobal_cap = {cap}\n"
    )


TURN_TIMEOUT_S = 30.0  # a turn takes 1.5 s of model time; one without a result by then is reported stuck


def session_loop(
    home: GeodeHome,
    ws: Path,
    name: str,
    turns: int,
    start: threading.Barrier,
    out: list[Turn],
    offset_s: float = 0.0,
) -> None:
    cl = ControlClient(home, client_version="bench-scale")
    try:
        cl.connect(timeout_s=60.0, cwd=str(ws), is_tty=False, dangerously_skip_permissions=True, mode="IPC")
        start.wait()
        if offset_s:
            threading.Event().wait(offset_s)  # --stagger: this session's first turn starts later
        for i in range(turns):
            tag = f"{name}-{i}"
            turn, before = Turn(tag, time.monotonic()), cl.reattached
            try:
                prompt = f"bench-turn-{tag} k={ROUNDS} find data-<round>.txt each round, then say done"
                res = cl.run_prompt(prompt, timeout_s=TURN_TIMEOUT_S)
                turn.reason = str(res.get("termination_reason"))
                turn.error = str(res.get("error") or "")
                turn.turn_id = str(res.get("turn_id") or "")
            except Exception as exc:  # a failed turn is reported, not fatal to the run
                turn.error = f"{type(exc).__name__}: {str(exc)[:120]}"
            turn.t1 = time.monotonic()
            turn.reattached = cl.reattached - before
            out.append(turn)
    except threading.BrokenBarrierError:
        return
    finally:
        cl.close()


def run_level(
    home: GeodeHome, ws: Path, n: int, turns: int, label: str, stagger_s: float = 0.0
) -> tuple[list[Turn], float]:
    """``n`` sessions, ``turns`` turns each, released at once (session j's first turn ``j/n * stagger_s``
    later); returns the turns and the level's wall."""
    out: list[Turn] = []
    start = threading.Barrier(n + 1, timeout=120)
    threads = [
        threading.Thread(
            target=session_loop,
            args=(home, ws, f"{label}{n}s{j}", turns, start, out, j / n * stagger_s),
            daemon=True,
        )
        for j in range(n)
    ]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.monotonic()
    for t in threads:
        t.join(600)
    return out, time.monotonic() - t0


def cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` and its threads (s); 0 if gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def processes(home: GeodeHome, fake_pid: int) -> dict[str, int]:
    """The tree's processes by name (supervisor, children), the fake and this process."""
    st = tree_status(home)
    out = {"bench clients": os.getpid(), "fake model": fake_pid}
    if st is not None:
        out["supervisor"] = st.pid
        out |= {c.name: c.pid for c in st.children if c.pid}
    return out


def cpu_by_group(procs: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far, loop-N and the like summed per kind of process."""
    out: dict[str, float] = {}
    for name, pid in procs.items():
        kind = name.rstrip("0123456789").rstrip("-") or name
        out[kind] = out.get(kind, 0.0) + cpu_s(pid)
    return out


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, math.ceil(q * len(s)) - 1))] if s else float("nan")


def peak_in_flight(hits: list[Hit]) -> int:
    edges = sorted([(h.t_in, 1) for h in hits] + [(h.t_out, -1) for h in hits])
    peak = cur = 0
    for _, d in edges:
        cur += d
        peak = max(peak, cur)
    return peak


@dataclass
class Row:
    n: int
    turns: int
    failed: int
    wall: float
    overhead: list[float]
    host: list[float]  # turn wall - the fake's own time for its model calls (its excess over the latency)
    first: list[float]
    gaps: list[float]
    tail: list[float]
    model: list[float]
    peak: int
    reattached: int
    load: tuple[float, float]
    cpu: dict[str, float]  # CPU seconds per kind of process during the level


def analyse(
    n: int,
    turns: list[Turn],
    hits: list[Hit],
    wall: float,
    latency: float,
    load: float,
    cpu: dict[str, float],
) -> Row:
    by_tag: dict[str, list[Hit]] = {}
    for h in hits:
        if h.main:
            by_tag.setdefault(h.tag, []).append(h)
    ok = [t for t in turns if t.reason == "natural" and len(by_tag.get(t.tag, [])) == ROUNDS + 1]
    first, gaps, tail, model = [], [], [], []
    for t in ok:
        hs = sorted(by_tag[t.tag], key=lambda h: h.round)
        first.append(hs[0].t_in - t.t0)
        gaps += [b.t_in - a.t_out for a, b in itertools.pairwise(hs)]
        tail.append(t.t1 - hs[-1].t_out)
        model.append(sum(h.t_out - h.t_in for h in hs))
    overhead = [(t.t1 - t.t0) - (ROUNDS + 1) * latency for t in ok]
    host = [(t.t1 - t.t0) - m for t, m in zip(ok, model, strict=True)]
    return Row(
        n, len(turns), len(turns) - len(ok), wall, overhead, host, first, gaps, tail, model,
        peak_in_flight([h for h in hits if h.main]), sum(t.reattached for t in turns),
        (load, os.getloadavg()[0]), cpu,
    )  # fmt: skip


def ms(x: float) -> str:
    return f"{x * 1000:8.1f}"


IDLE_S = 3.0  # the tree's idle CPU is measured for this long after the warm-up


def report(rows: list[Row], latency: float, config: str, idle: dict[str, float]) -> None:
    print(
        f"\nscenario: {ROUNDS} glob_files rounds + text = {ROUNDS + 1} model calls of {latency:g} s per turn"
    )
    print("tree: " + config.replace("\n", " ").strip())
    print(
        f"\n{'sessions':>8} {'turns':>6} {'failed':>6} {'turns/s':>8} {'ideal':>6}"
        f" {'ovh p50':>8} {'ovh p99':>8} {'host p50':>8}"
        f" {'→1st req':>8} {'gap p50':>8} {'gap p99':>8} {'tail p50':>8} {'model p50':>9} {'peak':>5}"
        f" {'resent':>6} load"
    )
    for r in rows:
        ideal = r.n / ((ROUNDS + 1) * latency)
        print(
            f"{r.n:8d} {r.turns:6d} {r.failed:6d} {(r.turns - r.failed) / r.wall:8.2f} {ideal:6.1f}"
            f" {ms(pct(r.overhead, 0.5))} {ms(pct(r.overhead, 0.99))} {ms(pct(r.host, 0.5))}"
            f" {ms(pct(r.first, 0.5))}"
            f" {ms(pct(r.gaps, 0.5))} {ms(pct(r.gaps, 0.99))} {ms(pct(r.tail, 0.5))}"
            f" {pct(r.model, 0.5):9.3f} {r.peak:5d} {r.reattached:6d} {r.load[0]:.1f}→{r.load[1]:.1f}"
        )
    kinds = sorted({k for r in rows for k in r.cpu}, key=lambda k: -sum(r.cpu.get(k, 0) for r in rows))
    print("\nCPU ms per turn, by process (the level's CPU time / its turns):")
    print(
        f"{'sessions':>8} " + " ".join(f"{k[:12]:>12}" for k in kinds) + f" {'total':>8} {'cores busy':>10}"
    )
    for r in rows:
        tot = sum(r.cpu.values())
        cells = " ".join(f"{r.cpu.get(k, 0) * 1000 / max(1, r.turns):12.1f}" for k in kinds)
        net = tot - sum(idle.values()) * r.wall
        print(
            f"{r.n:8d} {cells} {tot * 1000 / max(1, r.turns):8.1f} {tot / r.wall:10.2f}"
            f"   net of idle: {net * 1000 / max(1, r.turns):.1f}"
        )
    idle_ms = " ".join(f"{k} {v * 1000:.0f}" for k, v in sorted(idle.items(), key=lambda kv: -kv[1]) if v)
    print(f"idle CPU (ms per s, measured {IDLE_S:g} s with no turns): {idle_ms or '0'}")
    base = rows[0]
    for r in rows[1:]:
        p50 = pct(r.overhead, 0.5) / pct(base.overhead, 0.5)
        p99 = pct(r.overhead, 0.99) / pct(base.overhead, 0.99)
        host = pct(r.host, 0.5) / pct(base.host, 0.5)
        print(
            f"overhead at {r.n} vs {base.n} sessions: p50 {p50:.2f}x, p99 {p99:.2f}x  (goal <= 2x);"
            f" host p50 {host:.2f}x"
        )
    print("ms columns: ovh = turn wall - scripted model time (3 x latency); host = turn wall - the fake's")
    print(
        "own time for the turn's calls (its excess over the latency grows with concurrency in its process);"
    )
    print("→1st req = prompt sent → first model request;")
    print("gap = model reply written → next model request; tail = last reply → result at the client;")
    print("model = the fake's own time per turn (s); peak = most model calls in flight at once;")
    print(
        "resent = re-handshakes to re-send an unanswered cli.prompt;"
        f" failed = no natural end in {TURN_TIMEOUT_S:g} s (or an error)"
    )


def measure(
    base: Path,
    levels: list[int],
    per: list[int],
    cap: int,
    capacity: int,
    workers: int,
    latency: float,
    stagger_s: float = 0.0,
    phases: bool = False,
) -> tuple[list[Row], str, dict[str, float]]:
    """Serve a tree in ``base``, warm it up, run every level; the rows, the tree's config and its idle CPU
    (s per s, by kind of process)."""
    ws = base / "ws"
    ws.mkdir()
    for i in range(ROUNDS + 1):
        (ws / f"data-{i}.txt").write_text(f"line {i}\n")
    with FakeProcess(str(ws / "data-0.txt"), delay_s=latency) as fake:
        home = GeodeHome(base / "gh").ensure()
        config = tree_config(fake.base_url, ws, workers, capacity, cap)
        home.config_file.write_text(config)
        home.env_file.write_text("ANTHROPIC_API_KEY=sk-bench-key\n")
        extra = [x for x in os.environ.get("PYTHONPATH", "").split(os.pathsep) if x and x != str(ROOT)]
        traced: list[tuple[int, list[tuple[str, float, float]]]] = []
        if phases:  # turn_phases.py: the tree's processes write per-phase timestamps there
            (base / "phases").mkdir()
            extra.append(str(Path(__file__).resolve().parent / "phase_hook"))
        env = {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": os.pathsep.join([str(ROOT), *extra])}
        if phases:
            env["GEODE_PHASES"] = str(base / "phases")
        geode = Path(sys.executable).parent / "geode"
        subprocess.run([str(geode), "serve"], env=env, check=True, cwd=ws, stdout=subprocess.DEVNULL)
        rows: list[Row] = []
        print(f"GEODE_HOME={home.root}", flush=True)
        try:
            print(f"warm-up: {cap} sessions, 1 turn each", flush=True)
            run_level(home, ws, cap, 1, "warm")
            fake.collect()
            procs = processes(home, fake.pid)
            idle0 = cpu_by_group(procs)
            time.sleep(IDLE_S)  # the tree's background CPU (heartbeats, timers) with no turns
            idle = {k: (v - idle0.get(k, 0.0)) / IDLE_S for k, v in cpu_by_group(procs).items()}
            for n, turns in zip(levels, per, strict=True):
                load = os.getloadavg()[0]
                print(f"{n} sessions x {turns} turns ...", flush=True)
                procs = processes(home, fake.pid)
                cpu0 = cpu_by_group(procs)
                done, wall = run_level(home, ws, n, turns, "m", stagger_s)
                cpu = {k: v - cpu0.get(k, 0.0) for k, v in cpu_by_group(procs).items()}
                hits, _ = fake.collect()
                rows.append(analyse(n, done, hits, wall, latency, load, cpu))
                traced.append((n, [(t.turn_id, t.t0, t.t1) for t in done if t.turn_id]))
                errs = [t.error or t.reason for t in done if t.reason != "natural"]
                if errs:
                    print(f"  {len(errs)} not natural, e.g. {sorted(set(errs))[:3]}")
        finally:
            stop_tree(home, timeout_s=30)
    if phases:
        from turn_phases import report as phase_report

        try:  # a report that fails (a renamed function traced nothing) must not lose the run's table
            phase_report(base / "phases", traced, latency)
        except Exception as exc:
            print(f"phase report failed: {type(exc).__name__}: {exc}")
    return rows, config, idle


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--levels", default="1,10,100")
    ap.add_argument("--quick", action="store_true", help="a few turns per level")
    ap.add_argument("--latency", type=float, default=0.5, help="model latency per call (s)")
    ap.add_argument("--workers", type=int, default=4, help="[loop] workers")
    ap.add_argument("--turns", default="", help="turns per session per level, e.g. 20,4,2")
    ap.add_argument("--keep", action="store_true", help="keep the temporary GEODE_HOME (logs) afterwards")
    ap.add_argument(
        "--phases",
        action="store_true",
        help="time each phase of every turn in the tree's processes (phase_hook/) and print where turns wait",
    )
    ap.add_argument(
        "--stagger",
        type=float,
        default=0.0,
        help="spread the sessions' first turns over this many seconds (0: all at once, in lockstep)",
    )
    args = ap.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    if args.turns:
        per = [int(x) for x in args.turns.split(",")]
    else:
        per = [max(1 if args.quick else 2, math.ceil((8 if args.quick else 30) / n)) for n in levels]
    cap = max(levels)
    capacity = math.ceil(cap / args.workers)
    base = Path(tempfile.mkdtemp(prefix="geode-scale-", dir="/tmp"))
    try:
        rows, config, idle = measure(
            base, levels, per, cap, capacity, args.workers, args.latency, args.stagger, args.phases
        )
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
    print(
        f"\nsessions' first turns spread over {args.stagger:g} s"
        if args.stagger
        else "\nall sessions in lockstep"
    )
    report(rows, args.latency, config.split("[loop]")[1], idle)


if __name__ == "__main__":
    main()
