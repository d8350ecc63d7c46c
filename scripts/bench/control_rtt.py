"""Control-socket round trip (``cli.ping`` through ControlSocket + ControlCore) beside a raw pyzmq
ROUTER echo on the same kind of ipc socket, in the same run; plus LaneQueue admit+grant+release cost.

Run: ``.venv/bin/python scripts/bench/control_rtt.py [N]``
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import zmq

from actors.control import ControlSocket
from geode.control.core import ControlCore
from geode.home import GeodeHome
from geode.lanes.queue import LaneQueue
from geode.protocol import codec
from geode.protocol import control as c
from geode.protocol.envelope import Envelope
from geode.protocol.transport import LocalTransport


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1e6


def _measure(addr: str, frame: bytes, n: int) -> list[float]:
    s = zmq.Context.instance().socket(zmq.DEALER)
    s.setsockopt(zmq.LINGER, 0)
    s.connect(addr)
    for _ in range(50):  # warm up
        s.send(frame)
        s.recv()
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        s.send(frame)
        s.recv()
        out.append(time.perf_counter() - t0)
    s.close(0)
    return out


def _raw_echo(addr: str, stop: threading.Event) -> None:
    r = zmq.Context.instance().socket(zmq.ROUTER)
    r.setsockopt(zmq.LINGER, 0)
    r.bind(addr)
    while not stop.is_set():
        if r.poll(100):
            rid, frame = r.recv_multipart()
            env = codec.decode(frame)  # decode + encode like a real server, without the control logic
            r.send_multipart([rid, codec.encode(env.reply_ok({"ok": True}))])
    r.close(0)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    tmp = Path(tempfile.mkdtemp(prefix="geode-bench-"))
    home = GeodeHome(tmp).ensure()
    ping = codec.encode(Envelope(type=c.PING, body={}))

    stop = threading.Event()
    raw_addr = f"ipc://{tmp}/raw.sock"
    th = threading.Thread(target=_raw_echo, args=(raw_addr, stop), daemon=True)
    th.start()
    time.sleep(0.2)
    raw = _measure(raw_addr, ping, n)
    stop.set()

    sock = ControlSocket(home)
    core = ControlCore(LocalTransport(), sock.send, home=home)
    sock.start(core)
    ctl = _measure(f"ipc://{home.cli_socket}", ping, n)
    sock.stop()

    print(f"control ping rtt  p50 {_pct(ctl, 0.5):7.1f} µs  p99 {_pct(ctl, 0.99):7.1f} µs  (n={n})")
    print(f"raw ROUTER echo   p50 {_pct(raw, 0.5):7.1f} µs  p99 {_pct(raw, 0.99):7.1f} µs")
    r50, r99 = _pct(ctl, 0.5) / _pct(raw, 0.5), _pct(ctl, 0.99) / _pct(raw, 0.99)
    print(f"ratio control/raw p50 {r50:.2f}x  p99 {r99:.2f}x")

    q = LaneQueue(global_cap=64, session_queue_max=64, max_queued=100_000)
    t0 = time.perf_counter()
    m = 50_000
    for i in range(m):
        q.enqueue(f"t{i}", f"s{i % 100}")
        for g in q.grant(limit=1):
            q.release(g.turn_id)
    while grants := q.grant():
        for g in grants:
            q.release(g.turn_id)
    dt = time.perf_counter() - t0
    base = time.perf_counter()
    d: dict[str, int] = {}
    for i in range(m):  # baseline: a dict insert + pop per turn
        d[f"t{i}"] = i
        d.pop(f"t{i}")
    base = time.perf_counter() - base
    print(
        f"LaneQueue enqueue+grant+release {dt / m * 1e6:.1f} µs/turn "
        f"(dict baseline {base / m * 1e6:.2f} µs, {dt / base:.0f}x)"
    )
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
