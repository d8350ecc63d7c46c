"""What a checkpoint save is stored as (its packed messages and state pieces) and the digest ``ck_seqfp``
keeps for its (session, seq) idempotency, taken over those packed pieces (issue 34).

The digest (``p1``) is the sha256 of the msgpack of the save's JSON dump in pieces: a head (ids, counts,
status, flags, the pending batch, cognitive state, guard counters, model settings, meta) then each new
message, as the store packs them to write them. It is order-sensitive (a map's key order is part of it):
a retry re-sends the same save object (``StoreClient._call``), and the loop never rebuilds a failed save
(the next turn restores and saves the stored seq + 1), so a retry is the same bytes. A digest written by an
earlier release (the sha256 hex of the save's canonical JSON, sorted keys) is recognised by its shape and
compared with that legacy digest, computed on that path only: a duplicate arriving after an upgrade is still
a ``noop``.

The pieces are packed with ``bytes`` as text (msgpack's raw string type, no bin): a frame's bin value (UTF-8
text: the bus refuses any other) is then stored and digested as the ``str`` that ``model_dump(mode="json")``
makes of it, as before. A NaN or an infinity (stored as ``None`` by that dump) sends the save down the full
dump; the packed bytes show one only as a float64 header followed by an all-ones exponent."""

from __future__ import annotations

import hashlib
from typing import Any

from geode.protocol.codec import ThreadPackers
from geode.records.models import CheckpointSave
from geode.redaction import plain_fingerprint

TAG = b"p1:"  # the stored digest's version: TAG + the sha256 in hex (ASCII: an older release reads it)
_LEGACY_LEN = 64  # an earlier release's digest: 64 hex characters (sha256 of the canonical JSON)
# ``pack_text(obj)``: ``msgpack.packb(obj, use_bin_type=False)`` on this thread's Packer (the store writes on
# its writer thread): ``bytes`` packed as a string (unpacked as ``str``), strings without the str8 header
# (msgpack's pre-2.0 raw: the same values read)
pack_text = ThreadPackers(use_bin_type=False).pack


# the save's free-form fields (JSON values), taken as they are when a frame's decoding made them
FREE = ("new_messages", "cognitive_state", "guard_counters", "model_settings", "meta")
_FREE_SET: set[str] = set(FREE)  # a set: what model_dump's exclude is typed for
_SAVE_FIELDS = tuple(CheckpointSave.model_fields)
_PLAIN_TYPES: dict[type, bool] = {}  # a save class dumped by its fields as CheckpointSave is (or not)
_NAN_OR_INF_1 = b"\xcb\x7f"  # a float64 whose exponent may be all ones (NaN, +inf) …
_NAN_OR_INF_2 = b"\xcb\xff"  # … (NaN, -inf)
_RECORD_MAP = b"\x8b"  # a map of 11 entries (the state record)


def packed_save(save: CheckpointSave, wire: bool) -> tuple[dict[str, Any], list[bytes], bytes, bytes]:
    """The save's JSON dump (``model_dump(mode="json")``'s values), its new messages packed, the state
    record's first eight fields packed (for :func:`record_bytes`) and the save's digest (``TAG`` + sha256
    hex). ``wire``: decoded from a frame (msgpack made its free-form values: dicts with str or bytes keys,
    lists, str, int, float, bool, None, UTF-8 bytes): a save without timeline rows is then dumped without
    pydantic walking its free-form fields, unless a value may be NaN or an infinity."""
    if wire and not save.timeline:
        dumped = _fixed_fields(save)
        for name in FREE:
            dumped[name] = getattr(save, name)
        msgs, core, blob = _pack(dumped)
        if _NAN_OR_INF_1 not in blob and _NAN_OR_INF_2 not in blob:
            return dumped, msgs, core, TAG + hashlib.sha256(blob).hexdigest().encode()
    dumped = save.model_dump(mode="json")
    msgs, core, blob = _pack(dumped)
    return dumped, msgs, core, TAG + hashlib.sha256(blob).hexdigest().encode()


def _pack(dumped: dict[str, Any]) -> tuple[list[bytes], bytes, bytes]:
    """The messages packed; the state record's session_id … model_settings as packed map entries; and what
    the digest is over: the save's own base_count, reopen, session_created_at and meta, then those entries,
    then the messages."""
    msgs = [pack_text(m) for m in dumped["new_messages"]]
    entries = pack_text(
        [
            "session_id",
            dumped["session_id"],
            "seq",
            dumped["seq"],
            "message_count",
            dumped["base_count"] + len(msgs),
            "status",
            dumped["status"],
            "cognitive_state",
            dumped["cognitive_state"],
            "guard_counters",
            dumped["guard_counters"],
            "pending_batch",
            dumped["pending_batch"],
            "model_settings",
            dumped["model_settings"],
        ]
    )[3:]  # without the list's header (16 items: array16, 3 bytes)
    own = pack_text((dumped["base_count"], dumped["reopen"], dumped["session_created_at"], dumped["meta"]))
    return msgs, entries, b"".join([own, entries, *msgs])


def record_bytes(entries: bytes, meta: dict[str, Any], created_at: float, updated_at: float) -> bytes:
    """``pack_text`` of the state record (a map of its 11 fields in ``CheckpointState``'s order) from the
    entries :func:`packed_save` packed and the three fields a save does not decide alone."""
    tail = pack_text(["meta", meta, "created_at", created_at, "updated_at", updated_at])
    return _RECORD_MAP + entries + tail[1:]  # the list's header (6 items: fixarray, 1 byte) left out


def same_save(seen: bytes, digest: bytes, save: CheckpointSave) -> bool:
    """Whether the stored digest ``seen`` is of this save: equal to ``digest`` (:func:`packed_save`'s), or
    an earlier release's digest equal to this save's legacy one (computed here only)."""
    if seen == digest:
        return True
    if len(seen) == _LEGACY_LEN and not seen.startswith(TAG):
        return seen.decode("ascii", "replace") == legacy_fingerprint(save)
    return False


def legacy_fingerprint(save: CheckpointSave) -> str:
    """The digest an earlier release stored: ``geode.redaction.fingerprint`` of the save's JSON dump (the
    sha256 hex of its canonical JSON, sorted keys)."""
    return plain_fingerprint(save.model_dump(mode="json"))


def _fixed_fields(save: CheckpointSave) -> dict[str, Any]:
    """``save.model_dump(mode="json", exclude=_FREE_SET)`` of a save without timeline rows: its other fields
    (ids, counts, status, flags, the pending batch) read from the model, not walked by the serializer (a
    subclass with other fields or a serializer of its own is dumped by pydantic)."""
    cls = type(save)
    plain = _PLAIN_TYPES.get(cls)
    if plain is None:
        deco = cls.__pydantic_decorators__
        plain = _PLAIN_TYPES.setdefault(
            cls,
            tuple(cls.model_fields) == _SAVE_FIELDS
            and not deco.field_serializers
            and not deco.model_serializers
            and not cls.model_config.get("extra"),
        )
    if not plain:
        return save.model_dump(mode="json", exclude=_FREE_SET)
    d = save.__dict__
    pending = d["pending_batch"]
    return {
        "session_id": d["session_id"],
        "seq": d["seq"],
        "base_count": d["base_count"],
        "status": d["status"].value,
        "reopen": d["reopen"],
        "pending_batch": None if pending is None else pending.model_dump(mode="json"),
        "session_created_at": d["session_created_at"],
        "timeline": [],
    }
