"""The client following a turn whose done event was lost (lanes restarted: its stream buffer is gone): the
quiet-stream catch-up asks control to replay, the replay says it does not reach back and carries the turn's
durable outcome, and the client answers with it within a second or so. Before, a catch-up ignored the
outcomes and the client waited until its own deadline although the turn had long ended."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import zmq

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.protocol import codec
from geode.protocol import control as c
from geode.protocol.envelope import Envelope

OUTCOME = {"termination_reason": "natural", "text": "done while lanes restarted"}


def _fake_control(home: GeodeHome, stop: threading.Event, ready: threading.Event) -> None:
    """A control socket that answers handshake, prompt, ping and attach; it never streams the turn's events
    (they died with the previous lanes); attach replays nothing and names the turn's durable outcome."""
    ctx: zmq.Context = zmq.Context.instance()  # type: ignore[type-arg]
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(f"ipc://{home.cli_socket}")
    ready.set()
    try:
        while not stop.is_set():
            if not sock.poll(50):
                continue
            ident, frame = sock.recv_multipart()
            env = codec.decode(frame)
            if env.kind != "request":
                continue
            body: dict[str, object] = {}
            if env.type == c.HANDSHAKE:
                body = c.Welcome(
                    protocol_version=c.CONTROL_PROTOCOL,
                    features=[],
                    server_version="fake",
                    connection_id="k1",
                    session_id="s-1",
                    model="m",
                    provider="p",
                    workspace="/",
                ).model_dump()
            elif env.type == c.PROMPT:
                body = {"turn_id": "t-1", "session_id": "s-1", "position": 0}
            elif env.type == c.PING:
                body = {"ok": True}
            elif env.type == c.ATTACH:
                body = c.Attached(
                    session_id="s-1",
                    replayed=0,
                    complete=False,
                    outcomes=[{"turn_id": "t-1", "state": "done", "outcome": OUTCOME}],
                ).model_dump()
            sock.send_multipart([ident, codec.encode(env.reply_ok(body))])
    finally:
        sock.close(0)


def test_a_turn_that_ended_while_lanes_restarted_is_answered_from_its_durable_outcome(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    home.cli_socket.parent.mkdir(parents=True, exist_ok=True)
    stop, ready = threading.Event(), threading.Event()
    server = threading.Thread(target=_fake_control, args=(home, stop, ready), daemon=True)
    server.start()
    assert ready.wait(5)
    cl = ControlClient(home, client_version="test")
    try:
        cl.connect(timeout_s=5.0, is_tty=False, mode="IPC")
        accepted = cl.request(c.PROMPT, {"text": "hi", "session_id": "s-1"})
        t0 = time.monotonic()
        result = cl.follow(accepted["turn_id"], timeout_s=10.0)
        took = time.monotonic() - t0
    finally:
        cl.close()
        stop.set()
        server.join(timeout=5)
    assert result["termination_reason"] == "natural" and result["turn_id"] == "t-1", result
    assert took < 1.6, f"answered after {took:.2f}s"  # one quiet-stream catch-up (1 s), not a deadline


def _restarted_control(home: GeodeHome, stop: threading.Event, ready: threading.Event) -> None:
    """After the prompt, this control 'restarted': it answers each ping late (only when the next one arrives)
    with ok: false, refuses attach until a new handshake, then replays the turn's done event."""
    ctx: zmq.Context = zmq.Context.instance()  # type: ignore[type-arg]
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.bind(f"ipc://{home.cli_socket}")
    ready.set()
    handshakes, held = 0, None
    try:
        while not stop.is_set():
            if not sock.poll(50):
                continue
            ident, frame = sock.recv_multipart()
            env = codec.decode(frame)
            if env.kind != "request":
                continue
            if env.type == c.PING:
                if held is not None:  # the previous ping's answer, late: the client sent another meanwhile
                    sock.send_multipart([ident, codec.encode(held.reply_ok({"ok": handshakes > 1}))])
                held = env
                continue
            if env.type == c.HANDSHAKE:
                handshakes += 1
                body: dict[str, object] = c.Welcome(
                    protocol_version=c.CONTROL_PROTOCOL,
                    features=[],
                    server_version="fake",
                    connection_id="k1",
                    session_id="s-1",
                    model="m",
                    provider="p",
                    workspace="/",
                ).model_dump()
            elif env.type == c.PROMPT:
                body = {"turn_id": "t-1", "session_id": "s-1", "position": 0}
            elif env.type == c.ATTACH and handshakes < 2:
                err = env.reply_error("not_ready", "send cli.handshake first")
                sock.send_multipart([ident, codec.encode(err)])
                continue
            elif env.type == c.ATTACH:
                done = {"session_id": "s-1", "turn_id": "t-1", "seq": 7, "kind": "turn_done"}
                event = Envelope(kind="cast", type=c.CLI_EVENT, body={**done, "data": {"result": OUTCOME}})
                sock.send_multipart([ident, codec.encode(event)])
                body = c.Attached(session_id="s-1", replayed=1, complete=True).model_dump()
            else:
                body = {}
            sock.send_multipart([ident, codec.encode(env.reply_ok(body))])
    finally:
        sock.close(0)


def test_a_control_restart_answered_late_still_makes_the_client_reattach(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    home.cli_socket.parent.mkdir(parents=True, exist_ok=True)
    stop, ready = threading.Event(), threading.Event()
    server = threading.Thread(target=_restarted_control, args=(home, stop, ready), daemon=True)
    server.start()
    assert ready.wait(5)
    cl = ControlClient(home, client_version="test")
    try:
        cl.connect(timeout_s=5.0, is_tty=False, mode="IPC")
        accepted = cl.request(c.PROMPT, {"text": "hi", "session_id": "s-1"})
        t0 = time.monotonic()
        result = cl.follow(accepted["turn_id"], timeout_s=8.0)  # before: RequestTimeout (never re-attached)
        took = time.monotonic() - t0
    finally:
        cl.close()
        stop.set()
        server.join(timeout=5)
    assert result["termination_reason"] == "natural" and cl.reattached >= 1, result
    assert took < 2.5, f"answered after {took:.2f}s"
