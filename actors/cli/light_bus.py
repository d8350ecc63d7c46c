"""`geode status`'s reads of a running tree without the bus (``actors.bus`` and its settings, ~110 ms of
imports for one request per child): a DEALER per child on its ipc endpoint speaking the bus's frames (one
msgpack envelope per ZeroMQ message, as a bus client sends them), every request sent at once, each reply's
envelope validated by :func:`actors.cli.wire.decode` (its body by the caller, with a stored schema).

Only for a tree whose children all listen on ipc under the home's run directory (the caller checks: no
``[bus]`` settings, not a worker host); the run directory is verified as the bus verifies it.
"""

from __future__ import annotations

import os
import time

import zmq

from actors.cli import wire
from actors.cli import wire_data as d
from actors.cli.wire import Frame
from geode.home import GeodeHome
from geode.protocol.errors import BadRequest

Request = tuple[str, dict[str, object], float]  # type, body, seconds to wait for the reply


def ask_children(home: GeodeHome, requests: dict[str, Request]) -> dict[str, Frame | None]:
    """Each child's reply frame (ok or error) to its request, or None when none came within its wait."""
    home.ensure_run_dir()  # never talk to sockets in a run dir someone else controls (as Endpoints.connect)
    ctx: zmq.Context = zmq.Context.instance()  # type: ignore[type-arg]
    sender = f"cli-{os.getpid()}-{os.urandom(3).hex()}"
    poller = zmq.Poller()
    waiting: dict[zmq.Socket, tuple[str, str, float]] = {}  # type: ignore[type-arg]
    got: dict[str, Frame | None] = dict.fromkeys(requests)
    opened: list[zmq.Socket] = []  # type: ignore[type-arg]
    now = time.monotonic()
    try:
        for child, (type_, body, wait_s) in requests.items():
            sock = ctx.socket(zmq.DEALER)
            opened.append(sock)
            for opt, value in ((zmq.LINGER, 0), (zmq.MAXMSGSIZE, 2 * d.MAX_FRAME_BYTES)):
                sock.setsockopt(opt, value)
            sock.setsockopt(zmq.ROUTING_ID, f"{sender}-{child}".encode())
            sock.connect(home.ipc_endpoint(child))
            deadline_ms = time.time_ns() // 1_000_000 + int(wait_s * 1000)
            mid, frame = wire.encode(type_, body, sender=sender, deadline=deadline_ms)
            sock.send(frame, zmq.NOBLOCK)
            waiting[sock] = (child, mid, now + wait_s)
            poller.register(sock, zmq.POLLIN)
        wire.prepare()  # the first time: pydantic-core's import overlaps the children's answers
        while waiting:
            now = time.monotonic()
            for sock in [s for s, (_, _, until) in waiting.items() if until <= now]:
                poller.unregister(sock)
                del waiting[sock]
            if not waiting:
                break
            left = min(until for _, _, until in waiting.values()) - now
            for sock, _ in poller.poll(max(1, int(left * 1000))):
                child, mid, _ = waiting[sock]
                try:
                    env = wire.decode(sock.recv(zmq.NOBLOCK))
                except (BadRequest, zmq.Again):
                    continue  # a frame that fails validation is dropped, as the bus drops it
                if env.corr == mid and env.kind in ("ok", "error"):
                    got[child] = env
                    poller.unregister(sock)
                    del waiting[sock]
    finally:
        for sock in opened:
            sock.close(0)
    return got
