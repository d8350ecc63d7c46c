"""A deferred handler's reply is a view of its Later (``geode.protocol.later.Settled``), not a second Later:
the reply settles on the completing thread as the outcome passes (ok -> its body, a failure -> its error
code), ``result()`` waits for the source, ``drop()`` forgets the consumer there."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from geode.protocol import codec, runtime, typed_frames
from geode.protocol.envelope import Envelope
from geode.protocol.errors import Conflict, RequestTimeout
from geode.protocol.later import Later, Settled
from geode.protocol.transport import Request, dispatch, dispatch_wire


class Deferring:
    def __init__(self) -> None:
        self.later = Later()

    def handle(self, request: Request) -> Later:
        return self.later


def _request() -> tuple[Envelope, typed_frames.Received]:
    env = Envelope(type=runtime.PING, body={}, deadline=None, **{"from": "t#1"})
    return typed_frames.decode_request(codec.encode(env))


def test_a_deferred_reply_is_a_view_of_the_handlers_later_settled_as_it_completes() -> None:
    svc = Deferring()
    env, body = _request()
    reply = dispatch_wire(svc, env, sender="srv#1", body=body)
    assert isinstance(reply, Settled) and not reply.done()
    got: list[tuple[bool, Any, str]] = []
    reply.then(lambda ok, value: got.append((ok, value, threading.current_thread().name)))
    t = threading.Thread(
        target=svc.later.resolve, args=({"name": "x", "incarnation": 1, "pid": 2},), name="w"
    )
    t.start()
    t.join()
    assert reply.done()
    [(ok, wire, thread)] = got
    assert ok and thread == "w"
    assert wire["kind"] == "ok" and wire["corr"] == env.id and wire["body"]["name"] == "x"


def test_a_failure_settles_into_its_error_reply_and_result_waits_for_the_source() -> None:
    svc = Deferring()
    env, body = _request()
    reply = dispatch_wire(svc, env, sender="srv#1", body=body)
    assert isinstance(reply, Later)
    with pytest.raises(RequestTimeout):
        reply.result(0.01)
    svc.later.fail(Conflict("taken"))
    wire = reply.result(1.0)
    assert wire["kind"] == "error" and wire["body"]["code"] == "conflict"
    with pytest.raises(TypeError):
        reply.resolve({})


def test_a_dropped_reply_sends_nothing_and_dispatch_still_waits_for_it() -> None:
    svc = Deferring()
    env, body = _request()
    reply = dispatch_wire(svc, env, sender="srv#1", body=body)
    assert isinstance(reply, Later)
    got: list[object] = []
    reply.then(lambda ok, value: got.append(value))
    reply.drop()
    svc.later.resolve({"name": "x", "incarnation": 1, "pid": 2})
    assert got == []
    done = Deferring()
    done.later.resolve({"name": "y", "incarnation": 1, "pid": 3})
    out = dispatch(done, env, sender="srv#1", body=body)
    assert out is not None and out.kind == "ok" and out.body["name"] == "y"
