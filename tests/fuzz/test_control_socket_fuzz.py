"""Fuzz the real control socket (store, lanes and control as child processes, tests/control/procs.py):
random bytes, truncated msgpack, wrong shapes, oversized frames, random cli.* types and bodies, requests
before the handshake. Every frame is answered (bad_request / not_ready when bad, never internal) and the
control child keeps serving well-formed clients in the same incarnation (same pid, never restarted)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zmq
from hypothesis import example, given
from hypothesis import strategies as st

from geode.protocol import catalog, codec
from geode.protocol import control as c
from geode.protocol.errors import BadRequest, GeodeError
from tests.control.procs import Procs
from tests.fuzz.budget import fuzz, values
from tests.waiting import poll_for

CLI_TYPES = sorted(t for t in catalog.load_all() if t.startswith("cli."))
# a valid one of these would stop the tree or run a turn (there is no worker): sent only when invalid
DANGEROUS = {"cli.stop", "cli.restart", "cli.prompt", "cli.resume"}


def _pack(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


bodies = st.dictionaries(st.text(max_size=10), values, max_size=4) | st.fixed_dictionaries(
    {},
    optional={
        "session_id": st.text(max_size=20) | values,
        "turn_id": st.text(max_size=20) | values,
        "text": st.text(max_size=20) | values,
        "features": st.lists(st.text(max_size=8), max_size=70) | values,
        "protocol_version": st.text(max_size=8) | values,
        "after_seq": st.integers(-1, 2**64 - 1) | values,
        "limit": st.integers(-1, 2**64 - 1) | values,
        "decision": st.sampled_from(["allow", "deny", "always"]) | values,
    },
)
types = st.sampled_from(CLI_TYPES) | st.from_regex(r"\A[a-z][a-z0-9_]{0,6}(\.[a-z0-9_]{1,6}){0,2}\Z")
envelopes = st.fixed_dictionaries(
    {
        "v": st.just(1),
        "id": st.text(min_size=1, max_size=24),
        "kind": st.sampled_from(["request", "request", "request", "cast", "ok", "error"]),
        "type": types,
        "body": bodies,
    },
    optional={"corr": st.none() | st.text(max_size=64), "session": st.none() | st.text(max_size=40)},
)
shapes = st.dictionaries(
    st.sampled_from(["v", "id", "kind", "type", "body", "from", "deadline", "x"]) | st.text(max_size=5),
    values,
    max_size=6,
)
frames = st.one_of(
    st.binary(min_size=1, max_size=200),
    envelopes.map(_pack),
    envelopes.map(_pack),
    envelopes.map(_pack).flatmap(lambda b: st.integers(1, max(1, len(b) - 1)).map(lambda n: b[:n])),
    shapes.map(_pack),
    values.map(_pack),
    st.integers(codec.MAX_FRAME_BYTES + 1, codec.MAX_FRAME_BYTES + 4096).map(lambda n: b"\xc4" + b"x" * n),
)


def _classify(frame: bytes) -> tuple[bool, bool, str | None]:
    """(send it, a reply is owed, valid-or-None type) for one frame."""
    try:
        env = codec.decode(frame)
    except BadRequest:
        return True, True, None
    if env.kind != "request":
        return (
            True,
            False,
            None,
        )  # a heartbeat cast, or a cast/reply a client has no business sending: ignored
    if not env.type.startswith("cli."):
        return True, True, None
    try:
        catalog.parse_body(env.type, env.body)
    except BadRequest:
        return True, True, None
    return env.type not in DANGEROUS, True, env.type


@pytest.fixture(scope="module")
def procs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Procs]:
    p = Procs(Path(tmp_path_factory.mktemp("control-fuzz"))).up()
    yield p
    p.close()


def _dealer(procs: Procs) -> zmq.Socket:  # type: ignore[type-arg]
    s: zmq.Socket = zmq.Context.instance().socket(zmq.DEALER)  # type: ignore[type-arg]
    s.setsockopt(zmq.LINGER, 0)
    s.connect(f"ipc://{procs.home.cli_socket}")
    return s


def _well_formed_client_works(procs: Procs) -> None:
    cl = procs.client()
    try:
        assert cl.request(c.PING, {})["ok"] is True
    finally:
        cl.close()


@fuzz(50, shrink=False)
@given(batch=st.lists(frames, min_size=1, max_size=8))
@example(  # out of order: requests before the handshake, then a handshake, then the same requests again
    batch=[
        _pack({"v": 1, "id": "a1", "kind": "request", "type": "cli.attach", "body": {"session_id": "s"}}),
        _pack({"v": 1, "id": "s1", "kind": "request", "type": "cli.stop", "body": {}}),
        _pack({"v": 1, "id": "h1", "kind": "request", "type": c.HANDSHAKE, "body": {}}),
        _pack({"v": 1, "id": "h2", "kind": "request", "type": c.HANDSHAKE, "body": {"features": 5}}),
        _pack({"v": 1, "id": "a2", "kind": "request", "type": "cli.attach", "body": {"session_id": 7}}),
    ]
)
def test_every_control_frame_is_answered_and_control_lives(procs: Procs, batch: list[bytes]) -> None:
    pid = procs.procs["control"].pid
    sock = _dealer(procs)
    try:
        owed, valid = 0, set()
        for f in batch:
            send, reply_owed, typ = _classify(f)
            if not send:
                continue
            sock.send(f)
            owed += reply_owed
            if typ:
                valid.add(typ)
            if typ == c.EXIT:  # the client ended its connection: frames pipelined after it may go unanswered
                break
        replies: list[dict[str, Any]] = []
        deadline = time.monotonic() + 15
        while len(replies) < owed and time.monotonic() < deadline:
            if sock.poll(100):
                replies.append(codec.decode_raw(sock.recv()))
        assert len(replies) == owed, f"{len(replies)} replies to {owed} frames owed one"
        for r in replies:
            code = r.get("body", {}).get("code") if r.get("kind") == "error" else None
            assert code != "internal", r
            if r.get("kind") == "error" and r.get("type") not in valid:
                assert code in ("bad_request", "not_ready"), r
    finally:
        sock.close(0)
    assert procs.alive("control") and procs.procs["control"].pid == pid and procs.inc["control"] == 1
    _well_formed_client_works(procs)


def test_a_frame_past_the_wire_cap_drops_only_its_connection(procs: Procs) -> None:
    pid = procs.procs["control"].pid
    sock = _dealer(procs)
    sock.send(b"x" * (3 * codec.MAX_FRAME_BYTES))
    sock.close(0)
    _well_formed_client_works(procs)
    assert procs.alive("control") and procs.procs["control"].pid == pid


def test_status_after_the_fuzz_answers_from_the_first_incarnation(procs: Procs) -> None:
    pid = procs.procs["control"].pid
    cl = procs.client()
    try:
        try:
            cl.request(c.STATUS, {})
        except GeodeError as exc:  # no supervisor in this rig: a typed refusal is fine, a crash is not
            assert exc.code.value != "internal", exc
    finally:
        cl.close()
    assert procs.alive("control") and procs.procs["control"].pid == pid and procs.inc["control"] == 1


@fuzz(15, shrink=False)
@given(parts=st.lists(st.binary(max_size=40) | envelopes.map(_pack), min_size=2, max_size=4))
def test_a_multipart_message_is_dropped_with_a_log_line(procs: Procs, parts: list[bytes]) -> None:
    """The control socket takes one frame per message: a multipart one is dropped (no reply, no effect),
    logged (first and every 100th), and the same connection still gets its ping answered."""
    sock = _dealer(procs)
    try:
        sock.send_multipart(parts)
        sock.send(_pack({"v": 1, "id": "p1", "kind": "request", "type": c.PING, "body": {}}))
        assert sock.poll(10_000), "the ping after a multipart message was not answered"
        reply = codec.decode_raw(sock.recv())
        assert reply["corr"] == "p1" and reply["kind"] in ("ok", "error")
        assert not sock.poll(100)  # nothing for the multipart message itself
    finally:
        sock.close(0)
    log_file = procs.home.logs_dir / "control.log"
    poll_for(lambda: "control socket: dropped a" in log_file.read_text(), 5, what="the drop's log line")
