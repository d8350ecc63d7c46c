"""msgpack encoding of envelopes with explicit limits; anything malformed raises ``BadRequest``."""

from __future__ import annotations

import threading
from typing import Any

import msgpack
from pydantic import ValidationError
from pydantic_core import SchemaValidator

from geode.lone_surrogates import escape_tree
from geode.protocol.envelope import Envelope, from_wire, wire_map
from geode.protocol.errors import BadRequest
from geode.protocol.frame_unpack import decode_map, unpack_map
from geode.work_tally import FRAME_BIN_WALK, FRAME_DECODED, FRAME_ENCODED, VALIDATION
from geode.work_tally import ON as TALLY_ON
from geode.work_tally import count as tally
from geode.work_tally import frame as tally_frame

MAX_FRAME_BYTES = 1024 * 1024  # 1 MiB: the bus and control-socket cap
PACKER_KEEP_BYTES = 64 * 1024  # a thread keeps its packer (its buffer's touched pages) after frames this big


# one msgpack Packer per thread: ``msgpack.packb`` builds a Packer, with a 256 KiB buffer, for every call
# (~1.5-2 us of a 1 KB frame's 3.5-4). A Packer resets its buffer after each pack, a failed one too.
class ThreadPackers:
    """``pack(obj)``: ``msgpack.packb(obj, use_bin_type=...)`` on this thread's Packer (``local.p``), dropped
    after a pack larger than :data:`PACKER_KEEP_BYTES` (so no thread keeps a large buffer)."""

    def __init__(self, use_bin_type: bool) -> None:
        self.use_bin_type = use_bin_type
        self.local = threading.local()

    def fresh(self) -> msgpack.Packer:
        """A new Packer for this thread (kept as ``local.p``)."""
        packer = self.local.p = msgpack.Packer(use_bin_type=self.use_bin_type)
        return packer

    def pack(self, obj: Any) -> bytes:
        local = self.local
        try:
            packer = local.p
        except AttributeError:
            packer = self.fresh()
        data: bytes = packer.pack(obj)
        if len(data) > PACKER_KEEP_BYTES:
            del local.p
        return data


_FRAMES = ThreadPackers(use_bin_type=True)
packb = _FRAMES.pack  # ``msgpack.packb(obj, use_bin_type=True)``, on this thread's Packer


def encode(env: Envelope, *, max_frame: int = MAX_FRAME_BYTES) -> bytes:
    """Pack an envelope; refuses one larger than ``max_frame`` (a sender-side ``BadRequest``)."""
    return encode_wire(wire_map(env), max_frame=max_frame, env=env)


def encode_wire(
    obj: dict[str, Any], *, max_frame: int = MAX_FRAME_BYTES, env: Envelope | None = None
) -> bytes:
    """Pack the wire map of an envelope (``envelope.outgoing_wire``, ``reply_wire``: what :func:`encode`
    packs, built straight from checked values; ``env``, when there is one) the same way, same refusals."""
    local = _FRAMES.local  # this thread's packer, as packb takes it (not through its call: every frame sent)
    try:
        packer = local.p
    except AttributeError:
        packer = _FRAMES.fresh()
    try:
        try:
            try:
                data: bytes = packer.pack(obj)
                if len(data) > PACKER_KEEP_BYTES:
                    del local.p
            except TypeError:  # a body holding something msgpack lacks (a model): as pydantic dumps it
                obj = (env or from_wire(obj)).model_dump(by_alias=True, exclude_none=True)
                data = packb(obj)
        except UnicodeEncodeError:  # a lone surrogate (model text, a file name's byte): sent escaped
            data = packb(escape_tree(obj))
    except (TypeError, OverflowError, ValueError) as exc:
        raise BadRequest(f"body is not encodable: {exc}") from exc
    if len(data) > max_frame:
        raise BadRequest(f"frame of {len(data)} bytes exceeds the {max_frame}-byte cap")
    if TALLY_ON:  # (a call to a no-op otherwise, on every frame)
        tally_frame(FRAME_ENCODED, obj["type"])
    return data


def decode_raw(frame: bytes, *, max_frame: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """Unpack one frame into a map with bounded lengths; never trusts a length header."""
    return decode_map(frame, max_frame, on_walk=bin_walked)


def decode_fast(frame: bytes, max_frame: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """:func:`decode_raw` with one call fewer on the way (every received frame: see typed_frames)."""
    return decode_map(frame, max_frame, bin_walked)


def bin_walked() -> None:
    """Count a frame walked for its bin values (work tally ``frame.bin_walk``)."""
    tally(FRAME_BIN_WALK)


def decode(frame: bytes, *, max_frame: int = MAX_FRAME_BYTES) -> Envelope:
    """Decode and validate an envelope (the body is validated later, by its type's model)."""
    return validate_envelope(decode_raw(frame, max_frame=max_frame))


_validate_envelope = (
    Envelope.__pydantic_validator__.validate_python
    if isinstance(Envelope.__pydantic_validator__, SchemaValidator)
    else Envelope.model_validate  # a model not built yet (pydantic's deferred build): its wrapper builds it
)


def validate_envelope(obj: dict[str, Any]) -> Envelope:
    """The envelope of an unpacked frame (its body a map, not validated here); ``BadRequest`` if invalid."""
    try:
        env = _validate_envelope(obj)  # Envelope.model_validate without its Python wrapper
    except ValidationError as exc:
        raise envelope_refused(exc) from exc
    if TALLY_ON:
        tally_frame(FRAME_DECODED, env.type)
        tally(VALIDATION, env.type)  # the envelope's validation (the body's is counted where it is validated)
    return env


def envelope_refused(exc: ValidationError) -> BadRequest:
    """The ``BadRequest`` for a frame whose envelope ``Envelope`` refused (counted: work tally)."""
    tally(VALIDATION, "-")  # the envelope of a frame refused
    return BadRequest(f"invalid envelope: {exc.errors()[0].get('msg', 'invalid')}"[:300])


# Several envelopes to one ZeroMQ message (docs/protocol.md, "Batched frames"): a msgpack array of the packed
# envelopes' bytes. An envelope's frame is a msgpack map (first byte 0x80-0x8f, 0xde, 0xdf); an array's first
# byte (0x90-0x9f, 0xdc, 0xdd) marks a batch. Only peers of one tree (ipc/inproc) send them.
BATCH_HEADS = frozenset(bytes([b]) for b in (*range(0x90, 0xA0), 0xDC, 0xDD))
_BYTES_ONLY = {bytes}
BATCH_MAX_PARTS = 1024  # a receiver refuses a batch of more parts (a sender holds far fewer: actors/bus)


def encode_batch(frames: list[bytes]) -> bytes:
    """Packed envelopes (each as :func:`encode` made it) as one batch frame."""
    return packb(frames)


def split_batch(frame: bytes) -> list[bytes]:
    """The packed envelopes of a batch frame (``frame[:1] in BATCH_HEADS``), each to be decoded and validated
    as a frame of its own; ``BadRequest`` when it is not an array of 1 to ``BATCH_MAX_PARTS`` bins."""
    try:
        parts = msgpack.unpackb(
            frame,
            raw=True,
            max_bin_len=MAX_FRAME_BYTES,
            max_str_len=0,
            max_array_len=BATCH_MAX_PARTS,
            max_map_len=0,
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack's errors (ValueError, ExtraData, ...): a malformed frame
        raise BadRequest(f"malformed batch frame: {type(exc).__name__}") from exc
    if type(parts) is not list or not parts or {*map(type, parts)} != _BYTES_ONLY:  # (no generator)
        raise BadRequest("malformed batch frame: not an array of packed envelopes")
    return parts


def peek_reply_address(frame: bytes) -> tuple[str | None, str | None]:
    """Best-effort (id, type) of a frame that failed validation, so a ``bad_request`` can correlate."""
    try:
        obj = unpack_map(frame, MAX_FRAME_BYTES)  # a map whose values are refused still has an id to answer
    except BadRequest:
        return None, None
    mid = obj.get("id") if isinstance(obj.get("id"), str) else None
    typ = obj.get("type") if isinstance(obj.get("type"), str) else None
    return mid, typ
