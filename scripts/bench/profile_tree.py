"""Profile a running `geode serve` tree per child with py-spy (issue 34 item 1: where the time goes).

Serves a tree on a fresh GEODE_HOME against the Anthropic-wire fake (scripts/bench/fake_anthropic.py);
measures `geode serve` time to ready, the tree's RSS/PSS at rest (`geode status --json`) and one restart
each of the executor and the store (SIGKILL -> the supervisor reports a new pid running); then runs a
workload while ``py-spy record --format raw --gil --nonblocking`` samples every child at once:

* ``rounds``: one control-socket session (as `geode ask`), turns of K read-only tool rounds (glob_files),
  the fake answering at once;
* ``sessions``: N concurrent sessions, ``--turn-rounds`` tool rounds per turn (default 2: three model calls
  and two tool calls a turn; 1 gives the issue's one-round turn), the fake answering after ``--latency`` s.

Per child: the CPU (/proc utime+stime) per tool round or turn over the window; samples of the thread that
holds the GIL (``--all-threads``: every thread, waits included); the top self frames; the inclusive share
of a few kinds of work matched on the stack (pydantic validation, msgpack, zmq, LMDB, logging,
hashing/redaction, thread hand-offs, json, asyncio). py-spy is a dev tool (``.venv/bin/pip install
py-spy``), not a project dependency. ``--no-profile`` gives the CPU figures without py-spy running.

Run: .venv/bin/python scripts/bench/profile_tree.py [--workload rounds|sessions] [--seconds 20] [--k 20]
     [--sessions 10] [--turn-rounds 2] [--latency 0.5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_anthropic import FakeProcess  # noqa: E402
from sessions_scale import cpu_s, processes, tree_config  # noqa: E402

from actors.cli.client import ControlClient  # noqa: E402
from actors.tree.client import stop_tree, tree_status  # noqa: E402
from geode.home import GeodeHome  # noqa: E402

# thread roots on every stack: not counted as a kind of work
ROOTS = ("_bootstrap", "Thread.run (", "_work (actors/bus/handler_pool", "_worker (concurrent")
PYSPY = Path(sys.executable).parent / "py-spy"
# (label, substrings of a frame's "function (file:line)" text); first match per kind, any frame on the stack
KINDS: list[tuple[str, tuple[str, ...]]] = [
    ("pydantic validation", ("pydantic", "model_validate", "validate_python", "validate_json")),
    ("msgpack", ("msgpack",)),
    ("zmq send/recv/poll", ("zmq/",)),
    ("LMDB", ("lmdb",)),
    ("logging", ("logging/",)),
    ("hashing/redaction", ("hashlib", "redact", "sha256", "blake2")),
    ("thread hand-offs (queue/threading/futures)", ("queue.py", "threading.py", "concurrent/futures")),
    ("json", ("json/",)),
    ("asyncio machinery", ("asyncio/",)),
    ("status/heartbeat", ("heartbeat", "status")),
]


def run_rounds(home: GeodeHome, ws: Path, k: int, stop: threading.Event, done: list[float]) -> None:
    cl = ControlClient(home, client_version="bench-profile")
    cl.connect(timeout_s=60.0, cwd=str(ws), is_tty=False, dangerously_skip_permissions=True, mode="IPC")
    i = 0
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            cl.run_prompt(
                f"bench-turn-p{i} k={k} find data-<round>.txt each round, then say done", timeout_s=60
            )
            done.append(time.monotonic() - t0)
            i += 1
    finally:
        cl.close()


def run_sessions(
    home: GeodeHome, ws: Path, n_k: tuple[int, int], stop: threading.Event, done: list[float]
) -> None:
    n, k = n_k
    threads = []
    for j in range(n):
        threads.append(threading.Thread(target=_session, args=(home, ws, j, k, stop, done), daemon=True))
        threads[-1].start()
    for t in threads:
        t.join(120)


def _session(home: GeodeHome, ws: Path, j: int, k: int, stop: threading.Event, done: list[float]) -> None:
    cl = ControlClient(home, client_version="bench-profile")
    cl.connect(timeout_s=60.0, cwd=str(ws), is_tty=False, dangerously_skip_permissions=True, mode="IPC")
    i = 0
    try:
        while not stop.is_set():
            t0 = time.monotonic()
            cl.run_prompt(
                f"bench-turn-s{j}x{i} k={k} find data-<round>.txt each round, then say done", timeout_s=60
            )
            done.append(time.monotonic() - t0)
            i += 1
    finally:
        cl.close()


def summarize(raw: Path, top: int) -> tuple[int, list[tuple[str, int]], list[tuple[str, int]]]:
    """Total samples, top self frames, inclusive samples per kind."""
    selfc: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, n = line.rpartition(" ")
        if not n.isdigit():
            continue
        cnt = int(n)
        frames = stack.split(";")
        total += cnt
        leaf = frames[-1]
        selfc[leaf.replace(str(ROOT) + "/", "").replace("/work/main/.venv/lib/", "")] += cnt
        text = ";".join(f for f in frames[1:] if not any(b in f for b in ROOTS))
        for label, keys in KINDS:
            if any(key in text for key in keys):
                kinds[label] += cnt
    return total, selfc.most_common(top), kinds.most_common()


def pss(env: dict[str, str]) -> str:
    out = subprocess.run(
        [str(Path(sys.executable).parent / "geode"), "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    try:
        data = json.loads(out.stdout)
    except ValueError:
        return out.stdout[:2000]
    return json.dumps(data, indent=None)[:4000]


def restart_time(home: GeodeHome, name: str) -> float:
    st = tree_status(home)
    assert st is not None
    old = next(c.pid for c in st.children if c.name == name) or 0
    t0 = time.monotonic()
    os.kill(old, signal.SIGKILL)
    while time.monotonic() - t0 < 30:
        st = tree_status(home)
        if st is not None:
            c = next((c for c in st.children if c.name == name), None)
            if c is not None and c.pid and c.pid != old and str(c.state).lower().endswith("running"):
                return time.monotonic() - t0
        time.sleep(0.01)
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--workload", choices=("rounds", "sessions"), default="rounds")
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--k", type=int, default=20)
    ap.add_argument("--sessions", type=int, default=10)
    ap.add_argument("--turn-rounds", type=int, default=2, help="sessions: tool rounds per turn")
    ap.add_argument("--latency", type=float, default=0.0)
    ap.add_argument("--rate", type=int, default=200)
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--all-threads", action="store_true", help="sample every thread, not only the GIL holder")
    ap.add_argument("--no-profile", action="store_true", help="only the CPU per child, no py-spy (--seconds)")
    ap.add_argument("--keep", default="", help="copy the raw profiles here")
    args = ap.parse_args()
    base = Path(tempfile.mkdtemp(prefix="geode-prof-", dir="/tmp"))
    ws = base / "ws"
    ws.mkdir()
    for i in range(args.k + 2):
        (ws / f"data-{i}.txt").write_text(f"line {i}\n")
    n = args.sessions if args.workload == "sessions" else 1
    with FakeProcess(str(ws / "data-0.txt"), delay_s=args.latency) as fake:
        home = GeodeHome(base / "gh").ensure()
        home.config_file.write_text(tree_config(fake.base_url, ws, 2, max(1, n), max(1, n)))
        home.env_file.write_text("ANTHROPIC_API_KEY=sk-bench-key\n")
        env = {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(ROOT)}
        t0 = time.monotonic()
        subprocess.run(
            [str(Path(sys.executable).parent / "geode"), "serve"],
            env=env,
            check=True,
            cwd=ws,
            stdout=subprocess.DEVNULL,
        )
        print(f"geode serve -> returned ready: {time.monotonic() - t0:.2f} s", flush=True)
        try:
            time.sleep(2)
            print("status --json at rest:", pss(env), flush=True)
            for name in ("executor", "store"):
                print(f"restart {name}: {restart_time(home, name) * 1000:.0f} ms", flush=True)
            time.sleep(1)
            procs = {
                k: v for k, v in processes(home, fake.pid).items() if k not in ("bench clients", "fake model")
            }
            stop, done = threading.Event(), []  # type: ignore[var-annotated]
            target = run_rounds if args.workload == "rounds" else run_sessions
            arg = args.k if args.workload == "rounds" else (args.sessions, args.turn_rounds)
            w = threading.Thread(target=target, args=(home, ws, arg, stop, done), daemon=True)
            w.start()
            time.sleep(2)  # warm
            done.clear()
            load0 = os.getloadavg()
            spies = {}
            cpu0 = {name: cpu_s(pid) for name, pid in procs.items()}
            t_prof = time.monotonic()
            for name, pid in procs.items():
                if args.no_profile:
                    break
                out = base / f"{name}.raw"
                cmd = [str(PYSPY), "record", "--pid", str(pid), "--format", "raw", "-d", str(args.seconds)]
                cmd += ["--rate", str(args.rate), "--nonblocking", "-o", str(out)]
                cmd += [] if args.all_threads else ["--gil"]
                spies[name] = (
                    subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL),
                    out,
                )
            for p, _ in spies.values():
                p.wait()
            if args.no_profile:
                time.sleep(args.seconds)
            cpu = {name: cpu_s(pid) - cpu0[name] for name, pid in procs.items()}
            n_done, window = len(done), time.monotonic() - t_prof
            stop.set()
            w.join(120)
            print(f"load average at start {load0}, at end {os.getloadavg()}; turns done: {len(done)}")
            if done:
                print(f"turn wall p50 {sorted(done)[len(done) // 2] * 1000:.0f} ms")
            per = "tool round" if args.workload == "rounds" else f"turn of {args.turn_rounds} tool round(s)"
            units = n_done * (args.k if args.workload == "rounds" else 1)
            print(f"CPU per {per} by child (ms; {n_done} turns in {window:.1f} s, /proc utime+stime):")
            for name, c in cpu.items():
                print(f"  {name:12s} {1000 * c / max(1, units):7.2f}")
            print(f"  {'tree total':12s} {1000 * sum(cpu.values()) / max(1, units):7.2f}")
            for name, (_, out) in spies.items():
                if not out.exists():
                    print(f"\n== {name}: no profile")
                    continue
                total, tops, kinds = summarize(out, args.top)
                print(f"\n== {name} (pid {procs[name]}): {total} samples at {args.rate}/s")
                for fr, c in tops:
                    print(f"  self {100 * c / max(1, total):5.1f}%  {fr[:150]}")
                for label, c in kinds:
                    print(f"  incl {100 * c / max(1, total):5.1f}%  {label}")
            if args.keep:
                Path(args.keep).mkdir(parents=True, exist_ok=True)
                for _, out in spies.values():
                    if out.exists():
                        shutil.copy(out, args.keep)
        finally:
            stop_tree(home, timeout_s=30)
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
