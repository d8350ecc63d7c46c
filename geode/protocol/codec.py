"""msgpack encoding of envelopes with explicit limits; anything malformed raises ``BadRequest``."""

from __future__ import annotations

from typing import Any

import msgpack
from pydantic import ValidationError

from geode.lone_surrogates import escape_tree
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest
from geode.protocol.frame_unpack import decode_map, unpack_map
from geode.work_tally import FRAME_BIN_WALK, FRAME_DECODED, FRAME_ENCODED, VALIDATION
from geode.work_tally import count as tally
from geode.work_tally import frame as tally_frame

MAX_FRAME_BYTES = 1024 * 1024  # 1 MiB: the bus and control-socket cap


def encode(env: Envelope, *, max_frame: int = MAX_FRAME_BYTES) -> bytes:
    """Pack an envelope; refuses one larger than ``max_frame`` (a sender-side ``BadRequest``)."""
    obj = _wire_map(env)
    try:
        try:
            try:
                data = msgpack.packb(obj, use_bin_type=True)
            except TypeError:  # a body holding something msgpack lacks (a model): as pydantic dumps it
                obj = env.model_dump(by_alias=True, exclude_none=True)
                data = msgpack.packb(obj, use_bin_type=True)
        except UnicodeEncodeError:  # a lone surrogate (model text, a file name's byte): sent escaped
            data = msgpack.packb(escape_tree(obj), use_bin_type=True)
    except (TypeError, OverflowError, ValueError) as exc:
        raise BadRequest(f"body is not encodable: {exc}") from exc
    if len(data) > max_frame:
        raise BadRequest(f"frame of {len(data)} bytes exceeds the {max_frame}-byte cap")
    tally_frame(FRAME_ENCODED, env.type)
    return data


_WIRE_FIELDS = ("v", "id", "kind", "type", "corr", "sender", "session", "deadline", "body", "trace")
if tuple(Envelope.model_fields) != _WIRE_FIELDS:  # a new envelope field must be added to _wire_map too
    raise RuntimeError(f"Envelope fields changed: {tuple(Envelope.model_fields)}; update codec._wire_map")


def _wire_map(env: Envelope) -> dict[str, Any]:
    """What ``env.model_dump(by_alias=True, exclude_none=True)`` gives (same keys in the same order, so the
    same bytes), read straight off the validated model instead of through pydantic's serializer."""
    d = env.__dict__
    out = {"v": d["v"], "id": d["id"], "kind": d["kind"], "type": d["type"]}
    if d["corr"] is not None:
        out["corr"] = d["corr"]
    out["from"] = d["sender"]
    if d["session"] is not None:
        out["session"] = d["session"]
    if d["deadline"] is not None:
        out["deadline"] = d["deadline"]
    out["body"] = d["body"]
    if d["trace"] is not None:
        out["trace"] = d["trace"]
    return out


def decode_raw(frame: bytes, *, max_frame: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """Unpack one frame into a map with bounded lengths; never trusts a length header."""
    return decode_map(frame, max_frame, on_walk=_walked)


def _walked() -> None:
    tally(FRAME_BIN_WALK)


def decode(frame: bytes, *, max_frame: int = MAX_FRAME_BYTES) -> Envelope:
    """Decode and validate an envelope (the body is validated later, by its type's model)."""
    return validate_envelope(decode_raw(frame, max_frame=max_frame))


def validate_envelope(obj: dict[str, Any]) -> Envelope:
    """The envelope of an unpacked frame (its body a map, not validated here); ``BadRequest`` if invalid."""
    try:
        env = Envelope.model_validate(obj)
    except ValidationError as exc:
        tally(VALIDATION, "-")  # the envelope of a frame refused
        raise BadRequest(f"invalid envelope: {exc.errors()[0].get('msg', 'invalid')}"[:300]) from exc
    tally_frame(FRAME_DECODED, env.type)
    tally(VALIDATION, env.type)  # the envelope's validation (the body's is counted where it is validated)
    return env


def peek_reply_address(frame: bytes) -> tuple[str | None, str | None]:
    """Best-effort (id, type) of a frame that failed validation, so a ``bad_request`` can correlate."""
    try:
        obj = unpack_map(frame, MAX_FRAME_BYTES)  # a map whose values are refused still has an id to answer
    except BadRequest:
        return None, None
    mid = obj.get("id") if isinstance(obj.get("id"), str) else None
    typ = obj.get("type") if isinstance(obj.get("type"), str) else None
    return mid, typ
