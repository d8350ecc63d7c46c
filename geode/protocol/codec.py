"""msgpack encoding of envelopes with explicit limits; anything malformed raises ``BadRequest``."""

from __future__ import annotations

from typing import Any

import msgpack
from pydantic import ValidationError

from geode.lone_surrogates import escape_tree
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest
from geode.work_tally import FRAME_DECODED, FRAME_ENCODED, VALIDATION
from geode.work_tally import count as tally

MAX_FRAME_BYTES = 1024 * 1024  # 1 MiB: the bus and control-socket cap


def encode(env: Envelope, *, max_frame: int = MAX_FRAME_BYTES) -> bytes:
    """Pack an envelope; refuses one larger than ``max_frame`` (a sender-side ``BadRequest``)."""
    obj = env.model_dump(by_alias=True, exclude_none=True)
    try:
        try:
            data = msgpack.packb(obj, use_bin_type=True)
        except UnicodeEncodeError:  # a lone surrogate (model text, a file name's byte): sent escaped
            data = msgpack.packb(escape_tree(obj), use_bin_type=True)
    except (TypeError, OverflowError, ValueError) as exc:
        raise BadRequest(f"body is not encodable: {exc}") from exc
    if len(data) > max_frame:
        raise BadRequest(f"frame of {len(data)} bytes exceeds the {max_frame}-byte cap")
    tally(FRAME_ENCODED, env.type)
    return data


def decode_raw(frame: bytes, *, max_frame: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """Unpack one frame into a map with bounded lengths; never trusts a length header."""
    obj = _unpack(frame, max_frame)
    if any(m in frame for m in _BIN_MARKERS):  # only then can a bin value be in there: most frames skip this
        _refuse_non_text_bytes(obj)
    return obj


def _unpack(frame: bytes, max_frame: int) -> dict[str, Any]:
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


_BIN_MARKERS = (b"\xc4", b"\xc5", b"\xc6")  # msgpack bin 8/16/32


def _refuse_non_text_bytes(obj: Any) -> None:
    """Bodies are JSON-shaped: records dump them as JSON, so a bin value must at least be UTF-8 text
    (a non-UTF-8 one used to pass validation and fail later, inside a store write, as ``internal``)."""
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
                raise BadRequest("a binary value is not UTF-8 text (bodies are JSON-shaped)") from None


def decode(frame: bytes, *, max_frame: int = MAX_FRAME_BYTES) -> Envelope:
    """Decode and validate an envelope (the body is validated later, by its type's model)."""
    obj = decode_raw(frame, max_frame=max_frame)
    tally(VALIDATION, "Envelope")
    try:
        env = Envelope.model_validate(obj)
    except ValidationError as exc:
        raise BadRequest(f"invalid envelope: {exc.errors()[0].get('msg', 'invalid')}"[:300]) from exc
    tally(FRAME_DECODED, env.type)
    return env


def peek_reply_address(frame: bytes) -> tuple[str | None, str | None]:
    """Best-effort (id, type) of a frame that failed validation, so a ``bad_request`` can correlate."""
    try:
        obj = _unpack(frame, MAX_FRAME_BYTES)  # a map whose values are refused still has an id to answer
    except BadRequest:
        return None, None
    mid = obj.get("id") if isinstance(obj.get("id"), str) else None
    typ = obj.get("type") if isinstance(obj.get("type"), str) else None
    return mid, typ
