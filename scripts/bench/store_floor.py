"""The floor under the store's CPU per durable write: a raw pyzmq ROUTER child, none of GEODE's code.

Per request from N concurrent DEALER clients over ipc, the child unpacks the msgpack body, puts one record
per request into LMDB in one group commit (sync and metasync on, as the store opens its file) and replies
with a small msgpack map; with ``lmdb=False`` it only unpacks and replies. Its process CPU per write is what
zmq, the kernel and a commit cost before any of our code (``store_commit.py`` prints it beside the store
child's figure, in the same run). The child is one thread: it drains every request waiting, commits them
together, then replies to each. A third row has the store's shape (``serve_threaded``): a reading thread
that queues each request to a writer thread, which commits a batch and sends the replies under a lock.

    .venv/bin/python scripts/bench/store_floor.py serve ENDPOINT DIR|-      (run by store_commit.py)
"""

from __future__ import annotations

import os
import queue
import select
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgpack
import zmq

ProcSample = Callable[[int], tuple[float, int, float]]


def serve(endpoint: str, path: str) -> None:
    """The ROUTER loop: drain, unpack, one commit for the lot (or none with path ``-``), reply to each."""
    env = None
    if path != "-":
        import lmdb

        env = lmdb.open(path, map_size=1 << 30, sync=True, metasync=True)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind(endpoint)
    print("ready", flush=True)
    unpackb, packb, again = msgpack.unpackb, msgpack.packb, zmq.Again
    commits = 0
    while True:
        batch = [sock.recv_multipart()]
        try:
            while len(batch) < 256:
                batch.append(sock.recv_multipart(zmq.NOBLOCK))
        except again:
            pass
        bodies = [unpackb(parts[-1]) for parts in batch]
        if env is not None:
            with env.begin(write=True) as txn:
                for body in bodies:
                    txn.put(f"{body['sid']}\x00{body['n']}".encode(), packb(body["payload"]))
        commits += 1
        reply = packb({"ok": True, "commits": commits})
        for parts in batch:
            sock.send_multipart([parts[0], reply])


def serve_threaded(endpoint: str, path: str) -> None:
    """The store's shape without its code: the main thread receives (ZMQ_FD + ZMQ_EVENTS under a lock, as
    the bus shares a socket) and unpacks each request, a writer thread takes what is queued, commits it in
    one transaction and sends each reply under the lock (a frame that came meanwhile wakes the reader)."""
    import lmdb

    env = lmdb.open(path, map_size=1 << 30, sync=True, metasync=True)
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.bind(endpoint)
    lock, jobs, wake = threading.Lock(), queue.SimpleQueue(), os.eventfd(0, os.EFD_NONBLOCK)
    unpackb, packb = msgpack.unpackb, msgpack.packb

    def writer() -> None:
        commits = 0
        while True:
            batch = [jobs.get()]
            while not jobs.empty():
                batch.append(jobs.get_nowait())
            with env.begin(write=True) as txn:
                for _rid, body in batch:
                    txn.put(f"{body['sid']}\x00{body['n']}".encode(), packb(body["payload"]))
            commits += 1
            reply = packb({"ok": True, "commits": commits})
            for rid, _body in batch:
                with lock:
                    sock.send_multipart([rid, reply])
                    waiting = sock.getsockopt(zmq.EVENTS) & zmq.POLLIN
                if waiting:
                    os.eventfd_write(wake, 1)

    threading.Thread(target=writer, daemon=True).start()
    poller = select.poll()
    poller.register(sock.getsockopt(zmq.FD), select.POLLIN)
    poller.register(wake, select.POLLIN)
    print("ready", flush=True)
    while True:
        for fd, _ev in poller.poll():
            if fd == wake:
                os.eventfd_read(wake)
        while True:
            with lock:
                if not sock.getsockopt(zmq.EVENTS) & zmq.POLLIN:
                    break
                parts = sock.recv_multipart(zmq.NOBLOCK)
            jobs.put((parts[0], unpackb(parts[-1])))


def floor_rate(
    tmp: Path,
    lmdb_on: bool,
    clients: int,
    seconds: float,
    body: Callable[[int], dict[str, object]],
    sample: ProcSample,
    threaded: bool = False,
) -> str:
    """One run against a fresh floor child: its line (writes/s, child CPU per write, client CPU)."""
    endpoint = f"ipc://{tmp}/floor-{os.getpid()}-{time.monotonic_ns()}.sock"
    path = str(tmp / f"floor-{time.monotonic_ns()}") if lmdb_on else "-"
    if lmdb_on:
        os.makedirs(path)
    proc = subprocess.Popen(
        [sys.executable, __file__, "serve-threaded" if threaded else "serve", endpoint, path],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    ctx = zmq.Context()
    counts = [0] * clients
    commits = [0] * clients  # the child's commit count in each client's last reply
    stop = threading.Event()
    start = threading.Barrier(clients + 1)

    def worker(i: int) -> None:
        sock = ctx.socket(zmq.DEALER)
        sock.connect(endpoint)
        start.wait()
        n = 0
        while not stop.is_set():
            sock.send(msgpack.packb({"sid": f"c{i}", "n": n, "payload": body(n)}))
            commits[i] = msgpack.unpackb(sock.recv())["commits"]
            n += 1
            counts[i] = n
        sock.close(0)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(clients)]
    for t in threads:
        t.start()
    start.wait()
    time.sleep(0.2)  # connected and running
    s0, c0, n0, k0 = sample(proc.pid), sample(os.getpid()), sum(counts), max(commits)
    time.sleep(seconds)
    s1, c1, n1, k1 = sample(proc.pid), sample(os.getpid()), sum(counts), max(commits)
    stop.set()
    for t in threads:
        t.join(10)
    proc.terminate()
    proc.wait(10)
    ctx.term()
    writes = max(1, n1 - n0)
    label = ("zmq+msgpack+LMDB" if lmdb_on else "zmq+msgpack only") + (", 2 threads" if threaded else "")
    return (
        f"floor {label:29} {clients:>3} clients: {writes / seconds:7.0f}/s (mean batch "
        f"{writes / max(1, k1 - k0):4.1f}), child "
        f"{(s1[0] - s0[0]) / writes * 1e6:4.0f} us CPU/write (kernel {(s1[2] - s0[2]) / writes * 1e6:3.0f}), "
        f"{(s1[1] - s0[1]) / writes:4.1f} ctx switches/write; client {(c1[0] - c0[0]) / writes * 1e6:4.0f} us"
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"]:
        serve(sys.argv[2], sys.argv[3])
    elif sys.argv[1:2] == ["serve-threaded"]:
        serve_threaded(sys.argv[2], sys.argv[3])
