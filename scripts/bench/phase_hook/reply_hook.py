"""Where a store reply waits on its way to lanes: timestamps for ``sessions_scale.py --phases`` (bench only;
imported by sitecustomize).

A turn record put's ok reply, keyed ``<turn id>/<state>`` as lanes' ``putreply`` (its continuation):
handed to the store's bus (``rsend``: ``PollLoop._send_raw``, the writer thread completing the deferred
reply), handed to libzmq (``zsend``: the ``SharedSocket``'s send of the frame, alone or in a batch frame),
read by lanes' bus thread (``zrecv``: ``SharedSocket.recv`` / ``drain``). Also the lanes and store bus
threads' sleeps in ``poll`` (``poll-<name>``) and their passes' ``_hand_off`` / ``_run_ops``:
:func:`reply_report` tells a reply sent while lanes' bus thread slept (its wake) from one sent while it was
busy (the rest of its pass, or libzmq's transit).
"""

from __future__ import annotations

import bisect
import os
import time
from collections.abc import Callable
from itertools import pairwise
from typing import Any

_PUT = b"store.turn.put"
_NAMES = ("lanes", "store")
Write = Callable[[str], None]


def _put_replies(data: Any) -> list[str]:
    """``turn_id/state`` of each turn put's ok reply in a frame (a batch frame's parts too)."""
    if type(data) is not bytes or _PUT not in data:
        return []
    import msgpack

    try:
        parts = msgpack.unpackb(data, raw=True) if b"\x90" <= data[:1] <= b"\xdd" else [data]
        out = []
        for part in parts:
            if _PUT not in part:
                continue
            obj = msgpack.unpackb(part, raw=False, strict_map_key=False)
            turn = obj.get("body", {}).get("turn") if obj.get("kind") == "ok" else None
            if isinstance(turn, dict):
                out.append(f"{turn.get('turn_id')}/{turn.get('state')}")
        return out
    except Exception:
        return []


def _marks(write: Write, name: str, data: Any) -> None:
    t = time.monotonic()
    for k in _put_replies(data):
        write(f"{name} {k} {t:.6f} {t:.6f}\n")


class _TimedPoll:
    """A bus thread's ``select.poll`` whose every ``poll`` call is written (``poll-<name> pid t0 t1``)."""

    def __init__(self, poller: Any, name: str, write: Write) -> None:
        self._p, self._name, self._write = poller, name, write
        self.register, self.unregister, self.modify = poller.register, poller.unregister, poller.modify

    def poll(self, timeout: Any = None) -> Any:
        t0 = time.monotonic()
        try:
            return self._p.poll(timeout)
        finally:
            self._write(f"poll-{self._name} {os.getpid()} {t0:.6f} {time.monotonic():.6f}\n")


def _patch_wire(cls: Any, write: Write) -> None:
    init, recv, drain = cls.__init__, cls.recv, cls.drain

    def timed_init(self: Any, sock: Any) -> None:
        init(self, sock)
        send = self._send

        def timed_send(s: Any, data: Any, flags: int = 0, *a: Any) -> Any:
            try:
                return send(s, data, flags, *a)
            finally:
                _marks(write, "zsend", data)

        self._send = timed_send

    def timed_recv(self: Any) -> Any:
        parts = recv(self)
        if parts:
            _marks(write, "zrecv", parts[-1])
        return parts

    def timed_drain(self: Any, cap: int, look: bool = False) -> Any:
        out = drain(self, cap, look)
        for f in out or ():
            _marks(write, "zrecv", f)
        return out

    cls.__init__, cls.recv, cls.drain = timed_init, timed_recv, timed_drain


def _patch_pass(cls: Any, attr: str, write: Write) -> None:
    fn = getattr(cls, attr)

    def timed(self: Any) -> None:
        name = self.sender.split("#", 1)[0]
        if name not in _NAMES:
            return fn(self)  # type: ignore[no-any-return]
        t0 = time.monotonic()
        try:
            return fn(self)  # type: ignore[no-any-return]
        finally:
            write(f"{attr}-{name} {os.getpid()} {t0:.6f} {time.monotonic():.6f}\n")

    setattr(cls, attr, timed)


def patch(mod: Any, write: Write) -> None:
    """Wrap the functions of ``mod`` (one of :data:`TARGETS`) that mark a reply's way."""
    n = mod.__name__
    if n == "actors.bus.shared_socket":
        _patch_wire(mod.SharedSocket, write)
    elif n == "actors.bus.poll_loop":
        send_raw = mod.PollLoop._send_raw

        def timed_send_raw(self: Any, sock: Any, frames: list[bytes]) -> bool:
            _marks(write, "rsend", frames[-1])
            return send_raw(self, sock, frames)  # type: ignore[no-any-return]

        mod.PollLoop._send_raw = timed_send_raw
        for attr in ("_hand_off", "_run_ops"):
            _patch_pass(mod.PollLoop, attr, write)
    elif n == "actors.bus.socket_thread":
        init = mod.Bus.__init__

        def timed_init(self: Any, name: str, *a: Any, **k: Any) -> None:
            init(self, name, *a, **k)
            if name in _NAMES:
                self._poller = _TimedPoll(self._poller, name, write)

        mod.Bus.__init__ = timed_init


TARGETS = frozenset({"actors.bus.shared_socket", "actors.bus.poll_loop", "actors.bus.socket_thread"})

Spans = dict[str, list[tuple[str, float, float]]]


def reply_report(ev: Spans, lo: float, hi: float, pct: Callable[[list[float], float], float]) -> None:
    """Print, for the turn puts' replies sent in ``[lo, hi)``, how lanes' bus thread took them: asleep in
    ``poll`` when the store sent it (send → poll's return, then → the read) or busy (send → read), and its
    reply → continuation; the lanes and store bus threads' passes (poll's return → next poll)."""
    zs = {k: a for k, a, _ in ev["zsend"] if lo <= a < hi}
    zr = {k: a for k, a, _ in ev["zrecv"]}
    cb = {k: a for k, a, _ in ev["putreply"]}
    polls = sorted((a, b) for _, a, b in ev["poll-lanes"] if lo <= a < hi)
    ends = [b for _, b in polls]
    rows: dict[str, list[float]] = {n: [] for n in ("asleep: send → poll return", "asleep: return → read")}
    rows["busy: send → read"], rows["read → continuation"] = [], []
    for k, t in zs.items():
        r = zr.get(k)
        if r is None:
            continue
        i = bisect.bisect_right(ends, r) - 1  # the last poll that returned before the read
        if i >= 0 and polls[i][0] <= t <= polls[i][1]:
            rows["asleep: send → poll return"].append(polls[i][1] - t)
            rows["asleep: return → read"].append(r - polls[i][1])
        else:
            rows["busy: send → read"].append(r - t)
        if k in cb:
            rows["read → continuation"].append(cb[k] - r)
    for who in _NAMES:
        ps = sorted((a, b) for _, a, b in ev[f"poll-{who}"] if lo <= a < hi)
        rows[f"{who} bus thread's pass"] = [c - b for (_, b), (c, _) in pairwise(ps)]
    print("  a store reply at lanes' bus thread (reply_hook), ms p50 / p90 / p99, count:")
    for name, xs in rows.items():
        if xs:
            cells = " ".join(f"{pct(xs, q) * 1e3:7.1f}" for q in (0.5, 0.9, 0.99))
            print(f"    {name:30s} {cells} {len(xs):7d}")
