"""Codec: round trip (hypothesis), every limit rejects with bad_request, unknown types are bad_request."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geode.protocol import catalog, codec, runtime
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest, ErrorCode
from geode.protocol.transport import dispatch

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text(max_size=50)
    | st.text(max_size=20).map(str.encode)  # bin values travel; non-UTF-8 ones are refused (below)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=20,
)
types = st.from_regex(r"\A[a-z][a-z0-9_]{0,8}(\.[a-z0-9_]{1,8}){0,3}\Z")
envelopes = st.builds(
    lambda t, k, corr, sender, session, deadline, body: Envelope(
        type=t, kind=k, corr=corr, session=session, deadline=deadline, body=body, **{"from": sender}
    ),
    types,
    st.sampled_from(["request", "cast", "ok", "error"]),
    st.none() | st.text(min_size=1, max_size=64),
    st.text(max_size=128),
    st.none() | st.text(max_size=128),
    st.none() | st.integers(0, 2**62),
    st.dictionaries(st.text(max_size=10), values, max_size=6),
)


@settings(max_examples=120, deadline=None)
@given(envelopes)
def test_round_trip(env: Envelope) -> None:
    assert codec.decode(codec.encode(env)) == env


def frame(obj: Any) -> bytes:
    return msgpack.packb(obj, use_bin_type=True)


GOOD = {"v": 1, "id": "abc", "kind": "request", "type": "runtime.ping", "from": "t#1", "body": {}}

BAD_FRAMES = {
    "oversized": b"\x80" + b"\x00" * codec.MAX_FRAME_BYTES,
    "not msgpack": b"\xc1",
    "truncated": frame(GOOD)[:-3],
    "trailing data": frame(GOOD) + b"\x00",
    "not a map": frame([1, 2]),
    "non-str key": frame({1: "x"}),
    "ext type": frame({"x": msgpack.ExtType(1, b"abc")}),
    "too many array items": frame({"body": {"a": [0] * 100_001}}),
    "deep nesting": b"\x91" * 2000 + b"\x00",
    "missing type": frame({k: v for k, v in GOOD.items() if k != "type"}),
    "bad kind": frame({**GOOD, "kind": "shout"}),
    "bad version": frame({**GOOD, "v": 2}),
    "extra field": frame({**GOOD, "extra": 1}),
    "id too long": frame({**GOOD, "id": "x" * 65}),
    "type pattern": frame({**GOOD, "type": "Runtime Ping"}),
    "type too long": frame({**GOOD, "type": "a" * 65}),
    "body not a map": frame({**GOOD, "body": [1]}),
    "non-utf8 bin value": frame({**GOOD, "body": {"x": [{"y": b"\x80\xff"}]}}),
}


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_every_limit_is_bad_request(name: str) -> None:
    with pytest.raises(BadRequest) as info:
        codec.decode(BAD_FRAMES[name])
    assert info.value.code == ErrorCode.BAD_REQUEST


def test_custom_frame_cap_and_non_bytes() -> None:
    with pytest.raises(BadRequest):
        codec.decode(frame(GOOD), max_frame=10)
    with pytest.raises(BadRequest):
        codec.decode("not bytes")  # type: ignore[arg-type]


def test_encode_refuses_oversized_and_unencodable() -> None:
    with pytest.raises(BadRequest, match="exceeds"):
        codec.encode(Envelope(type="x.y", body={"b": b"\x00" * codec.MAX_FRAME_BYTES}))
    with pytest.raises(BadRequest, match="not encodable"):
        codec.encode(Envelope(type="x.y", body={"o": object()}))


def test_peek_reply_address_of_invalid_envelope() -> None:
    assert codec.peek_reply_address(BAD_FRAMES["bad kind"]) == ("abc", "runtime.ping")
    assert codec.peek_reply_address(b"\xc1") == (None, None)
    assert codec.peek_reply_address(BAD_FRAMES["non-utf8 bin value"]) == ("abc", "runtime.ping")


class _Echo:
    def handle(self, request: Any) -> dict[str, Any]:
        return {}


def test_unknown_type_is_bad_request() -> None:
    with pytest.raises(BadRequest, match="unknown message type"):
        catalog.parse_body("no.such.type", {})
    reply = dispatch(_Echo(), Envelope(type="no.such.type", **{"from": "t#1"}))
    assert reply is not None and reply.kind == "error" and reply.body["code"] == "bad_request"


def test_invalid_body_is_bad_request() -> None:
    reply = dispatch(_Echo(), Envelope(type=runtime.CHILD_DIED, body={"name": 5}, **{"from": "t#1"}))
    assert reply is not None and reply.body["code"] == "bad_request" and "name" in reply.body["message"]


def test_a_threads_reused_packer_gives_packbs_bytes_after_failures_and_large_frames() -> None:
    """``encode`` packs on one msgpack Packer per thread (not ``packb``'s new one per frame): a pack that
    failed (an int too large, a lone surrogate sent escaped) or a large frame leaves nothing behind in it."""

    def packb(env: Envelope) -> bytes:
        return msgpack.packb(env.model_dump(by_alias=True, exclude_none=True), use_bin_type=True)  # type: ignore[no-any-return]

    small = Envelope(type="a.b", session="s", body={"t": "ok", "n": [1, 2.5, None]}, **{"from": "x"})
    assert codec.encode(small) == packb(small)
    with pytest.raises(BadRequest, match="not encodable"):
        codec.encode(Envelope(type="a.b", body={"n": [1, 2**70]}))
    assert codec.encode(small) == packb(small)
    escaped = codec.decode_raw(codec.encode(Envelope(type="a.b", body={"t": "bad \ud800 text"})))
    assert escaped["body"]["t"] != "bad \ud800 text"  # sent escaped, as before
    assert codec.encode(small) == packb(small)
    large = Envelope(type="a.b", body={"t": "y" * (codec.PACKER_KEEP_BYTES * 2)})
    assert codec.encode(large) == packb(large)
    assert codec.encode(small) == packb(small)
