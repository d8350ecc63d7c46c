"""msgpack encoding of envelopes with explicit limits; anything malformed raises ``BadRequest``."""

from __future__ import annotations

from typing import Any

import msgpack
from pydantic import ValidationError

from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest

MAX_FRAME_BYTES = 1024 * 1024  # 1 MiB: the bus and control-socket cap


def encode(env: Envelope, *, max_frame: int = MAX_FRAME_BYTES) -> bytes:
    """Pack an envelope; refuses one larger than ``max_frame`` (a sender-side ``BadRequest``)."""
    try:
        data = msgpack.packb(env.model_dump(by_alias=True, exclude_none=True), use_bin_type=True)
    except (TypeError, OverflowError, ValueError) as exc:
        raise BadRequest(f"body is not encodable: {exc}") from exc
    if len(data) > max_frame:
        raise BadRequest(f"frame of {len(data)} bytes exceeds the {max_frame}-byte cap")
    return data


def decode_raw(frame: bytes, *, max_frame: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """Unpack one frame into a map with bounded lengths; never trusts a length header."""
    if not isinstance(frame, bytes | bytearray | memoryview):
        raise BadRequest("frame is not bytes")
    n = len(frame)
    if n > max_frame:
        raise BadRequest(f"frame of {n} bytes exceeds the {max_frame}-byte cap")
    try:
        obj = msgpack.unpackb(
            frame,
            raw=False,
            strict_map_key=True,
            max_str_len=n,
            max_bin_len=n,
            max_array_len=min(n, 100_000),
            max_map_len=min(n, 100_000),
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises ValueError, ExtraData, StackError, FormatError, ...
        raise BadRequest(f"undecodable frame: {type(exc).__name__}: {exc}"[:300]) from exc
    if not isinstance(obj, dict):
        raise BadRequest("frame is not a map")
    return obj


def decode(frame: bytes, *, max_frame: int = MAX_FRAME_BYTES) -> Envelope:
    """Decode and validate an envelope (the body is validated later, by its type's model)."""
    obj = decode_raw(frame, max_frame=max_frame)
    try:
        return Envelope.model_validate(obj)
    except ValidationError as exc:
        raise BadRequest(f"invalid envelope: {exc.errors()[0].get('msg', 'invalid')}"[:300]) from exc


def peek_reply_address(frame: bytes) -> tuple[str | None, str | None]:
    """Best-effort (id, type) of a frame that failed validation, so a ``bad_request`` can correlate."""
    try:
        obj = decode_raw(frame)
    except BadRequest:
        return None, None
    mid = obj.get("id") if isinstance(obj.get("id"), str) else None
    typ = obj.get("type") if isinstance(obj.get("type"), str) else None
    return mid, typ
