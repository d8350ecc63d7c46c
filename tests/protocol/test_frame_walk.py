"""The bin-value walk (frame_unpack.refuse_non_text_bytes) refuses exactly what the plain walk refused, and a
frame with a bin value is decoded without a ``BadRequest`` built for its first, bin-free unpack (issue 34,
session 9, BUSLAT: a bin value took ~11 us more than text per decode)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from geode.protocol import frame_unpack, typed_frames
from geode.protocol.errors import BadRequest
from geode.protocol.frame_unpack import decode_map, refuse_non_text_bytes

GOOD = {"v": 1, "id": "abc", "kind": "request", "type": "store.timeline.append", "from": "t#1"}


def plain_walk(obj: Any) -> None:
    """The walk as it was: every key and value pushed, by ``isinstance``."""
    stack = [obj]
    while stack:
        o = stack.pop()
        if isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, list):
            stack.extend(o)
        elif isinstance(o, bytes):
            try:
                o.decode("utf-8")
            except UnicodeDecodeError:
                raise BadRequest("not UTF-8") from None


leaves = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), st.binary(max_size=6)
)
trees = st.recursive(
    leaves,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=4), st.binary(max_size=3)), kids, max_size=4),
    ),
    max_leaves=30,
)


def verdict(walk: Any, obj: Any) -> bool:
    try:
        walk(obj)
    except BadRequest:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(trees)
def test_the_walk_refuses_what_the_plain_walk_refused(obj: Any) -> None:
    assert verdict(refuse_non_text_bytes, obj) == verdict(plain_walk, obj)


class Odd(dict):  # type: ignore[type-arg]
    """A subclass (msgpack makes none): walked by isinstance, as before."""


def test_subclasses_and_keys_are_still_walked() -> None:
    for bad in (Odd(x=[b"\xff"]), [Odd({b"\xff": 1})], {"a": {b"\xc4": "k"}}):
        assert not verdict(refuse_non_text_bytes, bad)
    for ok in (Odd(x=[b"ok"]), {b"key": [1, 2.5, None, True]}, {}, [], "text"):
        assert verdict(refuse_non_text_bytes, ok)


@pytest.fixture(autouse=True)
def no_bin_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(frame_unpack, "_bin_seen", False)


def test_after_a_bin_frame_the_next_is_unpacked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    unpacks: list[int] = []
    walks: list[bool] = []
    unpackb, walk = frame_unpack._unpackb, frame_unpack.refuse_non_text_bytes

    def counted_unpack(frame: bytes, **kw: Any) -> Any:
        unpacks.append(kw["max_bin_len"])
        return unpackb(frame, **kw)

    def counted_walk(obj: Any) -> bool:
        walks.append(found := walk(obj))
        return found

    monkeypatch.setattr(frame_unpack, "_unpackb", counted_unpack)
    monkeypatch.setattr(frame_unpack, "refuse_non_text_bytes", counted_walk)
    binf = msgpack.packb({**GOOD, "body": {"data": b"x" * 300}}, use_bin_type=True)
    text = msgpack.packb({**GOOD, "body": {"text": "x" * 300}}, use_bin_type=True)
    for _ in range(3):
        assert decode_map(binf, 1 << 20)["body"] == {"data": b"x" * 300}
    assert len(unpacks) == 4 and walks == [True] * 3  # the first: refused, again with bins; then one each
    for _ in range(2):
        assert decode_map(text, 1 << 20)["body"] == {"text": "x" * 300}
    assert len(unpacks) == 6 and unpacks[-1] == 0 and walks == [True] * 3 + [False]  # walked once, then not
    with pytest.raises(BadRequest, match="not UTF-8"):  # still refused on either path
        decode_map(msgpack.packb({**GOOD, "body": {"data": b"\xff"}}, use_bin_type=True), 1 << 20)
    assert frame_unpack._bin_seen is False  # (a refused frame leaves the hint as it was)
    decode_map(binf, 1 << 20)
    with pytest.raises(BadRequest, match="not UTF-8"):
        decode_map(msgpack.packb({**GOOD, "body": {"data": b"\xff"}}, use_bin_type=True), 1 << 20)


def test_a_bin_frame_is_decoded_without_a_bad_request_built(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[str] = []

    class Counted(BadRequest):
        def __init__(self, message: str, **kw: Any) -> None:
            built.append(message)
            super().__init__(message, **kw)

    monkeypatch.setattr(frame_unpack, "BadRequest", Counted)
    frame = msgpack.packb({**GOOD, "body": {"data": b"x" * 1024}}, use_bin_type=True)
    assert decode_map(frame, 1 << 20)["body"] == {"data": b"x" * 1024}
    env, _ = typed_frames.decode_request(frame)
    assert env.body == {"data": b"x" * 1024}
    assert built == []  # (the old path built one for its bin-free unpack, then unpacked again)
    with pytest.raises(Counted, match="not UTF-8"):
        decode_map(msgpack.packb({**GOOD, "body": {"data": b"\xff"}}, use_bin_type=True), 1 << 20)
    with pytest.raises(Counted, match="undecodable frame"):  # malformed: refused as before
        decode_map(msgpack.packb(GOOD) + b"\x00", 1 << 20)
