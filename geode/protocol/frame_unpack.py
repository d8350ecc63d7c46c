"""A frame unpacked into a map with bounded lengths (never trusting a length header) and its binary values
checked: shared by the bus codec and the CLI's light wire (which imports no pydantic model). Bodies are
JSON-shaped, so a bin value must at least be UTF-8 text."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from geode.protocol.errors import BadRequest


def decode_map(frame: bytes, max_frame: int, on_walk: Callable[[], None] | None = None) -> dict[str, Any]:
    """Unpack ``frame`` into a map; a frame without a non-empty bin value (nearly all) unpacks at once and is
    not walked, one with a bin value is unpacked again with bins allowed and walked (``on_walk`` told)."""
    try:
        return unpack_map(frame, max_frame, max_bin=0)
    except BadRequest:  # a bin value (or a malformed frame): unpacked again with bins allowed, then walked
        return decode_walked(frame, max_frame, on_walk)


def decode_walked(frame: bytes, max_frame: int, on_walk: Callable[[], None] | None = None) -> dict[str, Any]:
    """The second half of :func:`decode_map`, for a frame its bin-free unpack refused: unpacked with bins
    allowed, then walked (``on_walk`` told)."""
    obj = unpack_map(frame, max_frame)
    if on_walk is not None:
        on_walk()
    refuse_non_text_bytes(obj)
    return obj


_BYTES_LIKE = (bytes, bytearray, memoryview)
_unpackb = msgpack.unpackb


def unpack_map(frame: bytes, max_frame: int, max_bin: int | None = None) -> dict[str, Any]:
    """One bounded unpack (``max_bin`` 0: any non-empty bin value raises); malformed: ``BadRequest``."""
    if not isinstance(frame, _BYTES_LIKE):
        raise BadRequest("frame is not bytes")
    n = len(frame)
    if n > max_frame:
        raise BadRequest(f"frame of {n} bytes exceeds the {max_frame}-byte cap")
    items = n if n < 100_000 else 100_000
    try:
        obj = _unpackb(
            frame,
            raw=False,
            strict_map_key=True,
            max_str_len=n,
            max_bin_len=n if max_bin is None else max_bin,
            max_array_len=items,
            max_map_len=items,
            max_ext_len=0,
        )
    except Exception as exc:  # msgpack raises ValueError, ExtraData, StackError, FormatError, ...
        raise BadRequest(f"undecodable frame: {type(exc).__name__}: {exc}"[:300]) from exc
    if not isinstance(obj, dict):
        raise BadRequest("frame is not a map")
    return obj


def refuse_non_text_bytes(obj: Any) -> None:
    """Raise ``BadRequest`` when a bin value anywhere in ``obj`` is not UTF-8 text (records dump bodies as
    JSON: a non-UTF-8 one used to pass validation and fail later, inside a store write, as ``internal``)."""
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
