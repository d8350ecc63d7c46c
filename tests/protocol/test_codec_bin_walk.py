"""Codec: only a frame that holds a bin value is walked for non-UTF-8 bytes; the marker bytes of a float's
or a text's bytes (0xc4-0xc6) no longer send a frame through the walk (issue 34, FRAMES)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from geode.protocol import codec, frame_unpack
from geode.protocol.errors import BadRequest

GOOD = {"v": 1, "id": "abc", "kind": "request", "type": "store.timeline.append", "from": "t#1"}


@pytest.fixture(autouse=True)
def no_bin_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts as if the last frame decoded held no bin value (after one, the next frame is walked
    at once: tests/protocol/test_frame_walk.py)."""
    monkeypatch.setattr(frame_unpack, "_bin_seen", False)


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every object codec walks for bin values (the walk still runs)."""
    seen: list[Any] = []
    walk = frame_unpack.refuse_non_text_bytes

    def counted(obj: Any) -> bool:
        seen.append(obj)
        return walk(obj)

    monkeypatch.setattr(frame_unpack, "refuse_non_text_bytes", counted)
    return seen


def test_a_frame_whose_float_and_text_bytes_hold_bin_markers_is_not_walked(walks: list[Any]) -> None:
    body = {"at": 1764917068.012, "text": "Ā Ł Ɔ", "n": [1.5, {"ts": 1764917068.012}]}
    data = msgpack.packb({**GOOD, "body": body}, use_bin_type=True)
    assert b"\xc4" in data and b"\xc5" in data and b"\xc6" in data  # what tripped the old byte scan
    env = codec.decode(data)
    assert env.body == body
    assert walks == []


def test_a_frame_with_a_bin_value_is_still_walked_and_a_non_utf8_one_refused(walks: list[Any]) -> None:
    ok = msgpack.packb({**GOOD, "body": {"b": [b"text as bytes"]}}, use_bin_type=True)
    assert codec.decode(ok).body == {"b": [b"text as bytes"]}
    assert len(walks) == 1
    frame_unpack._bin_seen = False  # (the frame after a bin frame is walked at once: test_frame_walk.py)
    empty = msgpack.packb({**GOOD, "body": {"b": b""}}, use_bin_type=True)  # an empty bin is UTF-8 text
    assert codec.decode(empty).body == {"b": b""} and len(walks) == 1
    for bad in ({"x": [{"y": b"\x80\xff"}]}, {"deep": {"k": [[b"ok", b"\xc4"]]}}):
        with pytest.raises(BadRequest, match="not UTF-8"):
            codec.decode(msgpack.packb({**GOOD, "body": bad}, use_bin_type=True))
    with pytest.raises(BadRequest, match="not UTF-8"):  # a bin map key (strict_map_key allows bytes)
        codec.decode_raw(msgpack.packb({**GOOD, "body": {b"\xff": 1}}, use_bin_type=True))
    assert len(walks) == 4


def test_a_malformed_frame_keeps_its_refusal() -> None:
    with pytest.raises(BadRequest, match="undecodable frame: ExtraData"):
        codec.decode_raw(msgpack.packb(GOOD) + b"\x00")
    with pytest.raises(BadRequest, match="undecodable frame"):  # a bin header longer than the frame
        codec.decode_raw(b"\x81\xa1b\xc6\xff\xff\xff\xff")
    with pytest.raises(BadRequest, match="not bytes"):
        codec.decode_raw("text")  # type: ignore[arg-type]
