"""decode_request validates envelope and body in one pass and answers exactly as the two-step path did; the
fast encode and the envelopes built without a second validation are the same envelopes, byte for byte."""

from __future__ import annotations

import random
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from pydantic import BaseModel, ValidationError

from geode.protocol import catalog, codec, runtime, typed_frames
from geode.protocol.envelope import Envelope, outgoing
from geode.protocol.errors import BadRequest
from geode.protocol.transport import dispatch
from tests.protocol.test_codec import envelopes

HELLO = {"name": "loop-1", "incarnation": 3, "pid": 42}
GOOD = {"v": 1, "id": "abc", "kind": "cast", "type": runtime.HELLO, "from": "t#1", "body": HELLO}


def frame(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


def two_step(obj: dict[str, Any]) -> tuple[Envelope, Any]:
    """What a receiver did before: the envelope, then the body by its type's model."""
    env = codec.decode(frame(obj))
    try:
        return env, catalog.parse_body(env.type, env.body)
    except BadRequest as exc:
        return env, exc.message


def test_a_valid_request_is_one_validation_with_the_same_result() -> None:
    env, body = typed_frames.decode_request(frame(GOOD))
    before_env, before_body = two_step(GOOD)
    assert env == before_env and env.body == HELLO
    assert isinstance(body, runtime.Hello) and body == before_body
    env, body = typed_frames.decode_request(
        frame({**GOOD, "kind": "request", "body": {}, "type": runtime.PING})
    )
    assert env.kind == "request" and isinstance(body, runtime.Ping)  # a missing body is the model's defaults


@pytest.mark.parametrize(
    "body",
    [
        {"name": 5, "incarnation": 3, "pid": 1},
        {"name": "x"},
        {**HELLO, "incarnation": "3a"},
        {**HELLO, "pid": "a"},
    ],
)
def test_a_refused_body_keeps_its_envelope_and_its_message(body: dict[str, Any]) -> None:
    obj = {**GOOD, "kind": "request", "session": "s1", "body": body}
    env, refusal = typed_frames.decode_request(frame(obj))
    before_env, before_message = two_step(obj)
    assert env == before_env and isinstance(refusal, BadRequest) and refusal.message == before_message
    reply = dispatch(_Echo(), env, body=refusal)  # answered as bad_request, correlated, in its session
    assert reply is not None and reply.kind == "error" and reply.corr == "abc" and reply.session == "s1"
    assert reply.body == {"code": "bad_request", "message": before_message}
    assert dispatch(_Echo(), env.model_copy(update={"kind": "cast"}), body=refusal) is None  # casts: no reply


@pytest.mark.parametrize(
    "change",
    [{"kind": "shout"}, {"v": 2}, {"extra": 1}, {"id": "x" * 65}, {"body": [1]}, {"from": 7}, {"trace": "x"}],
)
def test_an_invalid_envelope_raises_what_decode_raises(change: dict[str, Any]) -> None:
    data = frame({**GOOD, **change})
    with pytest.raises(BadRequest) as before:
        codec.decode(data)
    with pytest.raises(BadRequest) as after:
        typed_frames.decode_request(data)
    assert after.value.message == before.value.message


def test_replies_and_unknown_types_are_left_to_dispatch() -> None:
    for obj in ({**GOOD, "kind": "ok", "corr": "x"}, {**GOOD, "type": "no.such.type"}):
        env, body = typed_frames.decode_request(frame(obj))
        assert body is None and env == codec.decode(frame(obj))
    reply = dispatch(
        _Echo(), typed_frames.decode_request(frame({**GOOD, "kind": "request", "type": "no.such"}))[0]
    )
    assert (
        reply is not None
        and reply.body["code"] == "bad_request"
        and "unknown message type" in reply.body["message"]
    )


class _Echo:
    def handle(self, request: Any) -> dict[str, Any]:
        return {}


@settings(max_examples=80, deadline=None)
@given(envelopes)
def test_encode_gives_the_bytes_pydantic_gave(env: Envelope) -> None:
    assert codec.encode(env) == msgpack.packb(
        env.model_dump(by_alias=True, exclude_none=True), use_bin_type=True
    )


def test_a_model_inside_a_body_is_encoded_as_before() -> None:
    env = Envelope(type="a.b", body={"hello": runtime.Hello(name="x", incarnation=1, pid=2)})
    assert codec.decode(codec.encode(env)).body["hello"] == {
        "name": "x",
        "incarnation": 1,
        "pid": 2,
        "trace": False,
    }


def test_envelopes_built_without_a_second_validation_equal_validated_ones() -> None:
    kw: dict[str, Any] = {"id": "i1", "type": runtime.PING, "body": {"a": [1]}, "session": "s", "deadline": 9}
    for _ in range(2):  # the first builds through the model, the second from the remembered type
        sent = outgoing(kind="request", sender="me#1", **kw)
        assert sent == Envelope(kind="request", **kw, **{"from": "me#1"})
    reply = sent.reply_ok({"x": 1}, sender="srv#1")
    assert reply == Envelope.model_validate(reply.model_dump(by_alias=True))
    assert (reply.kind, reply.corr, reply.session, reply.type) == ("ok", "i1", "s", runtime.PING)
    error = sent.reply_error("timeout", "m" * 3000, sender="srv#1")
    assert error.body == {"code": "timeout", "message": "m" * 2048} and error.corr == "i1"
    for bad in ({"session": "s" * 129}, {"id": ""}, {"type": "Not A Type"}, {"body": {1: "x"}}):
        with pytest.raises(ValidationError):  # our own mistakes still fail where they are made
            outgoing(kind="cast", sender="me#1", **{**kw, **bad})
    with pytest.raises(ValidationError):
        sent.reply_ok([1], sender="srv#1")  # type: ignore[arg-type]
    assert isinstance(reply, BaseModel)


def test_every_catalogued_type_is_answered_as_the_two_step_path_did() -> None:
    """Assorted bodies (missing, extra and wrongly typed fields) for every message type in the catalogue: the
    one-pass validator accepts, refuses and words its refusal exactly as envelope-then-body did."""
    rnd = random.Random(34)
    values: list[Any] = [None, 0, -1, 2**40, "x", "", [], {}, ["a", 1], {"a": 1}, True, 1.5]
    checked = 0
    for type_, spec in catalog.load_all().items():
        names = list(spec.body.model_fields)
        for i in range(8):
            body = {} if i == 0 else {n: rnd.choice(values) for n in names if rnd.random() < 0.7}
            if i % 4 == 3:
                body["unknown_field"] = 1
            obj = {**GOOD, "kind": "request", "type": type_, "body": body}
            after_env, after = typed_frames.decode_request(frame(obj))
            before_env, before = two_step(obj)
            assert after_env == before_env, (type_, body)
            assert (after.message if isinstance(after, BadRequest) else after) == before, (type_, body)
            checked += 1
    assert checked > 800
