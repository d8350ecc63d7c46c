"""Durable writes/s of the record store: 1 client vs 50 concurrent clients (group commit), beside raw LMDB.

Same run, same disk (a temp dir under the repo's filesystem):
  * raw LMDB, one 1 KB put per sync commit            (the ceiling for one-at-a-time durable writes)
  * raw LMDB, N puts in one transaction + one sync     (the ceiling for batching)
  * engine in-process: 1 client thread, then 50 client threads (timeline appends, each acked after sync)
  * over the bus to a real store child process: 1 client, then 50 concurrent clients
  * admit+commit latency of one receipt, p50/p99, in-process and over the bus
  * the floor: a raw pyzmq ROUTER child (msgpack unpack, one LMDB group commit, reply; and without LMDB),
    its process CPU per write beside the store child's (store_floor.py; ``--no-floor`` skips it)

With ``--old DIR`` (a checkout of older code: ``git archive <rev> geode actors | tar -x -C DIR``) a second
store child runs that code, and the bus rounds alternate between the two children in the same run (the
baseline beside the figure). ``--payload tool`` appends what the executor appends per tool call (a
``tool.completed`` row with arguments and a 500-character summary) instead of a two-key payload;
``--payload call`` sends a tool call's two rows (``tool.called`` and ``tool.completed``) in one
``store.timeline.append_many`` request, as the executor does, and the figures are per request.

    .venv/bin/python scripts/bench/store_commit.py [--seconds 3] [--clients 50] [--old DIR] [--payload tool]
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import lmdb

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from geode.home import GeodeHome  # noqa: E402
from geode.protocol.transport import LocalTransport  # noqa: E402
from geode.records.engine import RecordEngine  # noqa: E402
from geode.records.models import CheckpointSave, ReceiptIdentity, TimelineEvent  # noqa: E402
from geode.records.service import StoreService  # noqa: E402
from geode.records.store_client import StoreClient  # noqa: E402
from scripts.bench.store_floor import floor_rate  # noqa: E402
from scripts.bench.thread_cpu import busiest, thread_cpu  # noqa: E402


def raw_sync_commits(path: Path, seconds: float) -> float:
    env = lmdb.open(str(path), map_size=1 << 30, sync=True)
    n, end = 0, time.perf_counter() + seconds
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        with env.begin(write=True) as txn:
            txn.put(b"%010d" % n, b"x" * 1024)
        n += 1
    rate = n / (time.perf_counter() - t0)
    env.close()
    return rate


def raw_batch(path: Path, n: int = 50_000) -> float:
    env = lmdb.open(str(path), map_size=1 << 30, sync=True)
    t0 = time.perf_counter()
    with env.begin(write=True) as txn:
        for i in range(n):
            txn.put(b"%010d" % i, b"x" * 1024)
    rate = n / (time.perf_counter() - t0)
    env.close()
    return rate


def proc_sample(pid: int) -> tuple[float, int, float]:
    """(CPU seconds, voluntary context switches over all threads, kernel CPU seconds) of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    kernel = int(fields[12]) / os.sysconf("SC_CLK_TCK")
    switches = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            status = Path(f"/proc/{pid}/task/{task}/status").read_text()
        except OSError:
            continue
        switches += sum(int(ln.split()[1]) for ln in status.splitlines() if ln.startswith("voluntary_ctxt"))
    return cpu, switches, kernel


FILES = "\n".join(f"src/pkg/module_{i}.py" for i in range(40))[:500]


def payload(kind: str, n: int) -> dict[str, object]:
    """What one durable write carries: a two-key payload, or a tool call's ``tool.completed`` row."""
    if kind == "small":
        return {"tool": "write_file", "n": n}
    return {
        "tool_name": "glob_files",
        "tool_use_id": f"toolu_{n:020d}",
        "operation_id": f"op-{n:032x}",
        "turn_id": "turn-0001",
        "step_id": f"step-{n}",
        "mode": "IPC",
        "arguments": {"pattern": "**/*.py", "path": "."},
        "status": "ok",
        "error_type": None,
        "executed": True,
        "summary": FILES,
    }


def clients_rate(
    client: StoreClient,
    clients: int,
    seconds: float,
    tag: str,
    profile: list[str] | None = None,
    pid: int = 0,
    kind: str = "small",
) -> tuple[float, float]:
    """Durable timeline appends/s with ``clients`` threads; also the mean group-commit batch seen.

    With ``pid`` (the store child), appends to ``profile`` its and this process's CPU per write."""
    counts = [0] * clients
    stop = threading.Event()
    start = threading.Barrier(clients + 1)

    def worker(i: int) -> None:
        start.wait()
        n = 0
        while not stop.is_set():
            if kind == "call":  # a tool call's two rows in one request
                rows = [
                    TimelineEvent(
                        session_id=f"{tag}-{i}",
                        event_id=f"e{n}:{row}",
                        kind=row,
                        ts=time.time(),
                        payload=payload("tool", n),
                    )
                    for row in ("tool.called", "tool.completed")
                ]
                client.append_timelines(rows)
            else:
                ev = TimelineEvent(
                    session_id=f"{tag}-{i}",
                    event_id=f"e{n}",
                    kind="tool.called",
                    ts=time.time(),
                    payload=payload(kind, n),
                )
                client.append_timeline(ev)
            n += 1
            counts[i] = n

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    before = client.stats()["writer"]
    start.wait()
    t0 = time.perf_counter()
    none = (0.0, 0, 0.0)
    s0, c0 = (proc_sample(pid), proc_sample(os.getpid())) if pid else (none, none)
    t0s = thread_cpu(pid) if pid else {}
    sent0 = sum(counts)
    time.sleep(seconds)
    s1, c1 = (proc_sample(pid), proc_sample(os.getpid())) if pid else (none, none)
    t1s = thread_cpu(pid) if pid else {}
    sent = max(1, sum(counts) - sent0)  # requests answered in the sampled window
    stop.set()
    for t in threads:
        t.join(30)
    dt = time.perf_counter() - t0
    after = client.stats()["writer"]
    batches = max(1, after["batches"] - before["batches"])
    writes = max(1.0, (after["ops"] - before["ops"]) / dt * seconds)  # in the sampled window
    if kind == "call":  # per request (its writer ops differ by version: one per row, or one)
        writes = float(sent)
    if pid and profile is not None:
        store_cpu, client_cpu = s1[0] - s0[0], c1[0] - c0[0]
        unit = "request" if kind == "call" else "write"
        profile.append(
            f"{tag.split('-')[0]:>4} {clients:>3} clients: "
            f"store child {store_cpu / writes * 1e6:4.0f} us CPU/{unit} "
            f"(kernel {(s1[2] - s0[2]) / writes * 1e6:3.0f}; {store_cpu / seconds:.2f} cores), "
            f"{(s1[1] - s0[1]) / writes:4.1f} ctx switches/write; "
            f"client {client_cpu / writes * 1e6:4.0f} us CPU/{unit} ({client_cpu / seconds:.2f} cores)"
            f"\n           store threads (us/{unit}, by thread id): {busiest(t0s, t1s, writes)}"
        )
    return sum(counts) / dt, (after["ops"] - before["ops"]) / batches


def admit_commit_latency(client: StoreClient, n: int, tag: str) -> tuple[float, float]:
    lat = []
    for i in range(n):
        ident = ReceiptIdentity(
            session_id=f"{tag}-lat", turn_id="t", step_id="s", tool_name="write_file", fingerprint=f"{i}"
        )
        t0 = time.perf_counter()
        client.admit(f"{tag}-op{i}", ident, owner="bench#1", effect="write")
        client.commit(f"{tag}-op{i}", {"ok": True})
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1]


def checkpoint_cost(
    client: StoreClient, sizes: tuple[int, ...] = (100, 10_000), saves: int = 100
) -> list[float]:
    """Median ms per incremental save (one new message) once a session already holds N messages."""
    out = []
    for n in sizes:
        sid = f"ck{n}"
        msgs = [{"role": "user", "content": f"message {i} " * 20} for i in range(n)]
        for i in range(0, n, 2000):
            client.save_checkpoint(
                CheckpointSave(
                    session_id=sid, seq=i // 2000 + 1, base_count=i, new_messages=msgs[i : i + 2000]
                )
            )
        seq, count, lat = n // 2000 + 2, n, []
        for _ in range(saves):
            t0 = time.perf_counter()
            client.save_checkpoint(
                CheckpointSave(
                    session_id=sid,
                    seq=seq,
                    base_count=count,
                    new_messages=[{"role": "assistant", "content": "ok"}],
                )
            )
            lat.append((time.perf_counter() - t0) * 1000)
            seq, count = seq + 1, count + 1
        out.append(statistics.median(lat))
    return out


def median_rates(run: Callable[[int], tuple[float, float]], clients: int, rounds: int) -> dict[int, float]:
    """Alternate 1-client and N-client runs ``rounds`` times (the machine is shared: load drifts)."""
    out: dict[int, list[float]] = {1: [], clients: []}
    batches: dict[int, list[float]] = {1: [], clients: []}
    for _ in range(rounds):
        for c in (1, clients):
            rate, batch = run(c)
            out[c].append(rate)
            batches[c].append(batch)
    return {c: statistics.median(v) for c, v in out.items()} | {
        -c: statistics.median(v) for c, v in batches.items()
    }


def report(label: str, rates: dict[int, float], clients: int, raw: float) -> float:
    one, many = rates[1], rates[clients]
    print(
        f"  {label:28} 1 client {one:7.0f}/s   {clients} clients {many:7.0f}/s "
        f"(mean batch {rates[-clients]:4.1f})"
        f"   ratio {many / one:5.1f}x   ({many / raw:4.1f}x raw sync commits)"
    )
    return many / one


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=2.0, help="per measurement")
    ap.add_argument("--rounds", type=int, default=3, help="alternating 1-client / N-client rounds (median)")
    ap.add_argument("--clients", type=int, default=50)
    ap.add_argument("--latency-samples", type=int, default=500)
    ap.add_argument("--switch", type=float, default=0.0, help="sys.setswitchinterval for the bench process")
    ap.add_argument("--old", type=Path, help="a tree of older geode/actors: its store child as the baseline")
    ap.add_argument("--payload", choices=("small", "tool", "call"), default="small")
    ap.add_argument("--bus-only", action="store_true", help="skip the raw LMDB and in-process figures")
    ap.add_argument(
        "--no-floor", action="store_true", help="skip the raw pyzmq ROUTER child (store_floor.py)"
    )
    args = ap.parse_args()
    if args.switch:
        sys.setswitchinterval(args.switch)
    venv = ROOT / ".venv"  # the repo's filesystem (a worktree without a venv: the system's temp dir)
    tmp = Path(tempfile.mkdtemp(prefix="bench-store-", dir=venv if venv.is_dir() else None))
    print(f"record store group commit ({os.cpu_count()} cores, dir {tmp}, load {os.getloadavg()[:3]})")
    raw = statistics.median(raw_sync_commits(tmp / f"raw{i}", args.seconds / 2) for i in range(args.rounds))
    print(
        f"  raw LMDB sync commit (1 put/commit): {raw:8.0f} commits/s ({1000 / raw:.3f} ms), "
        f"median of {args.rounds}"
    )
    n = iter(range(1_000_000))
    if not args.bus_only:
        in_process(tmp, args, raw, n)
    try:
        over_the_bus(tmp, args, raw, n)
    finally:
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
    print(f"  load average at the end: {os.getloadavg()[:3]}")


def in_process(tmp: Path, args: argparse.Namespace, raw: float, n: Iterator[int]) -> None:
    print(f"  raw LMDB one-transaction batch:      {raw_batch(tmp / 'rawb'):8.0f} puts/s")
    home = GeodeHome(tmp / "local").ensure()
    engine = RecordEngine.for_home(home).open()
    local = StoreClient(LocalTransport({"store": StoreService(engine)}))
    rates = median_rates(
        lambda c: clients_rate(local, c, args.seconds, f"l{next(n)}", kind=args.payload),
        args.clients,
        args.rounds,
    )
    report("in-process (LocalTransport)", rates, args.clients, raw)
    p50, p99 = admit_commit_latency(local, args.latency_samples, "l")
    print(f"  admit+commit latency in-process:   p50 {p50:.3f} ms   p99 {p99:.3f} ms")
    small, big = checkpoint_cost(local)
    print(
        f"  checkpoint save (+1 message), in-process: {small:.3f} ms at 100 messages, {big:.3f} ms at 10,000"
    )
    engine.close()


def start_child(home: GeodeHome, code: Path) -> subprocess.Popen[str]:
    """A store child process running the code under ``code`` (this checkout, or an older tree)."""
    env = {**os.environ, "GEODE_HOME": str(home.root), "GEODE_CHILD_NAME": "store", "GEODE_INCARNATION": "1"}
    if code != ROOT:
        env["PYTHONPATH"] = str(code)
    proc = subprocess.Popen(
        [sys.executable, "-m", "actors.tree.child_main", "store"],
        cwd=code,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def over_the_bus(tmp: Path, args: argparse.Namespace, raw: float, n: Iterator[int]) -> None:
    """1 vs N clients against the store child (and the ``--old`` one, round by round in turn)."""
    from actors.bus import Bus

    codes = {"new": ROOT, **({"old": args.old.resolve()} if args.old else {})}
    children: dict[str, tuple[subprocess.Popen[str], Any, StoreClient]] = {}
    try:
        for label, code in codes.items():
            home = GeodeHome(tmp / f"bus-{label}").ensure()
            proc = start_child(home, code)
            bus = Bus("bench", 1, home).start()
            children[label] = (proc, bus, StoreClient(bus.transport, timeout_s=30.0))
        out = {label: {1: [], args.clients: []} for label in children}  # type: dict[str, dict[int, list[float]]]
        batches = {label: {1: [], args.clients: []} for label in children}  # type: dict[str, dict[int, list[float]]]
        profile: list[str] = []
        floors: list[str] = []
        for _ in range(args.rounds):
            if not args.no_floor:  # the raw ROUTER child's rows, in the same rounds (store_floor.py)
                body = functools.partial(payload, "small" if args.payload == "small" else "tool")
                for lmdb_on, c, two in (
                    (True, 1, False),
                    (True, args.clients, False),
                    (False, args.clients, False),
                    (True, 1, True),
                    (True, args.clients, True),
                ):
                    floors.append(floor_rate(tmp, lmdb_on, c, args.seconds, body, proc_sample, two))
            for label, (proc, _bus, client) in children.items():
                for c in (1, args.clients):
                    rate, mean_batch = clients_rate(
                        client, c, args.seconds, f"{label}-{next(n)}", profile, proc.pid, args.payload
                    )
                    out[label][c].append(rate)
                    batches[label][c].append(mean_batch)
        for line in sorted(floors):
            print(f"    {line}")
        for label, (_proc, _bus, client) in children.items():
            rates = {c: statistics.median(v) for c, v in out[label].items()}
            rates |= {-c: statistics.median(v) for c, v in batches[label].items()}
            ratio = report(f"over the bus, {label} store child", rates, args.clients, raw)
            for line in profile:
                if line.lstrip().startswith(label):
                    print(f"    {line}")
            p50, p99 = admit_commit_latency(client, args.latency_samples, f"b{label}")
            print(f"  admit+commit latency over the bus ({label}): p50 {p50:.3f} ms   p99 {p99:.3f} ms")
            print(
                f"  target >= 15x single-client with {args.clients} clients over the bus ({label}): "
                f"{'MET' if ratio >= 15 else 'NOT MET'} ({ratio:.1f}x)"
            )
    finally:
        for proc, bus, _client in children.values():
            bus.stop()
            proc.terminate()
            proc.wait(10)


if __name__ == "__main__":
    main()
