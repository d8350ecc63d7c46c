"""The CLI's control-socket frames without pydantic's model machinery: msgpack with the bus's limits, each
received envelope validated by a pydantic-core ``SchemaValidator`` built from the envelope model's own core
schema (stored as data in ``actors/cli/wire_data.py``, checked against the models by
tests/cli/test_wire_data.py), and a ``cli.event``'s body validated as the protocol's ``StreamEvent`` (the
client acts on its ``seq``, ``kind`` and ``turn_id``; a ``cli.events`` body as ``StreamEvents``, then
:func:`split` into one frame per event).

`geode ask` and `geode status` import this instead of ``geode.protocol.codec`` / ``envelope`` / ``control``:
creating the first pydantic model class and the protocol's ~30 models cost the CLI ~90 ms before its first
frame. What is accepted is what ``Envelope.model_validate`` accepts; a frame that fails is a ``BadRequest``
(the caller drops it, as before).
"""

from __future__ import annotations

import os
import random
import time
from typing import TYPE_CHECKING, Any

import msgpack

from actors.cli import wire_data as d
from geode.lone_surrogates import escape_tree
from geode.protocol.errors import BadRequest, error_from_reply
from geode.protocol.frame_unpack import decode_map

if TYPE_CHECKING:  # pydantic-core is imported at the first frame received: `geode ask` sends its handshake
    from pydantic_core import SchemaValidator  # first, and the import overlaps the daemon's answer

_rng = random.Random(os.urandom(32))
os.register_at_fork(after_in_child=lambda: _rng.seed(os.urandom(32)))


def new_id() -> str:
    """A unique message id, as ``geode.protocol.envelope.new_id`` makes them (time-ordered prefix)."""
    return f"{time.time_ns() // 1_000_000:011x}{_rng.getrandbits(56):014x}"[:24]


FACTORIES = {"dict": dict, "list": list, "new_id": new_id}
_validators: dict[str, SchemaValidator] = {}


def _resolved(schema: Any) -> Any:
    """A stored schema with its default factories' names turned back into the callables."""
    if isinstance(schema, dict):
        out = {k: _resolved(v) for k, v in schema.items()}
        if isinstance(out.get("default_factory"), str):
            out["default_factory"] = FACTORIES[out["default_factory"]]
        return out
    if isinstance(schema, list):
        return [_resolved(v) for v in schema]
    return schema


def validator(name: str, source: Any = d) -> SchemaValidator:
    """The validator of a stored schema (``ENVELOPE_SCHEMA`` … of ``source``, a generated data module:
    ``wire_data`` or ``status_wire_data``), built once."""
    v = _validators.get(name)
    if v is None:
        from actors.cli.schema_core import core

        v = _validators[name] = core().SchemaValidator(_resolved(getattr(source, name)))
    return v


def prepare() -> None:
    """Build the receiving validators now (pydantic-core's compiled module, ~10 ms): called right after a
    first request is sent, so the work overlaps the daemon's answer instead of preceding the send."""
    validator("ENVELOPE_SCHEMA")
    validator("STREAM_EVENT_SCHEMA")


class Frame:
    """A received (validated) envelope, read like ``geode.protocol.envelope.Envelope``."""

    __slots__ = ("body", "corr", "deadline", "id", "kind", "sender", "session", "trace", "type", "v")
    v: int
    id: str
    kind: str
    type: str
    corr: str | None
    sender: str
    session: str | None
    deadline: int | None
    body: dict[str, Any]
    trace: str | None

    def __init__(self, fields: dict[str, Any]) -> None:
        for name in self.__slots__:
            setattr(self, name, fields[name])

    def __repr__(self) -> str:
        return f"Frame({self.kind} {self.type} id={self.id} corr={self.corr})"


def encode(
    type_: str,
    body: Any = None,
    *,
    kind: str = "request",
    session: str | None = None,
    sender: str = "",
    deadline: int | None = None,
) -> tuple[str, bytes]:
    """A frame as ``codec.encode(Envelope(...))`` packs it (``None`` fields left out), and its id. A body
    may be a dict or a model (dumped as ``catalog.dump`` does); refused over the frame cap."""
    if body is None:
        body = {}
    elif not isinstance(body, dict):
        body = body.model_dump(mode="json", exclude_none=True)
    mid = new_id()
    obj: dict[str, Any] = {"v": 1, "id": mid, "kind": kind, "type": type_, "from": sender}
    if session is not None:
        obj["session"] = session
    if deadline is not None:
        obj["deadline"] = deadline
    obj["body"] = body
    try:
        try:
            data = msgpack.packb(obj, use_bin_type=True)
        except UnicodeEncodeError:  # a lone surrogate (a file name's byte): sent escaped
            data = msgpack.packb(escape_tree(obj), use_bin_type=True)
    except (TypeError, OverflowError, ValueError) as exc:
        raise BadRequest(f"body is not encodable: {exc}") from exc
    if len(data) > d.MAX_FRAME_BYTES:
        raise BadRequest(f"frame of {len(data)} bytes exceeds the {d.MAX_FRAME_BYTES}-byte cap")
    return mid, data


def decode(frame: bytes) -> Frame:
    """Unpack one frame with bounded lengths (never trusting a length header) and validate it as an
    envelope; a ``cli.event``'s body as a stream event too. Anything malformed: ``BadRequest``."""
    obj = decode_map(frame, d.MAX_FRAME_BYTES)
    envelope = validator("ENVELOPE_SCHEMA")
    from actors.cli.schema_core import core  # loaded by validator(): dictionary look-ups

    ValidationError = core().ValidationError

    try:
        fields = envelope.validate_python(obj)
        if fields["type"] == d.CLI_EVENT:
            fields["body"] = validator("STREAM_EVENT_SCHEMA").validate_python(fields["body"])
        elif fields["type"] == d.CLI_EVENTS:  # several stream events in one frame (``event_batches``)
            fields["body"] = validator("STREAM_EVENTS_SCHEMA").validate_python(fields["body"])
    except ValidationError as exc:
        raise BadRequest(f"invalid envelope: {exc.errors()[0].get('msg', 'invalid')}"[:300]) from exc
    return Frame(fields)


def split(frame: Frame) -> list[Frame]:
    """A ``cli.events`` frame as the ``cli.event`` frames it stands for (its envelope, one event each, in
    order); any other frame as itself. Whoever reads the stream then sees one event at a time, as before."""
    if frame.type != d.CLI_EVENTS:
        return [frame]
    fields = {name: getattr(frame, name) for name in Frame.__slots__}
    return [Frame({**fields, "type": d.CLI_EVENT, "body": ev}) for ev in frame.body["events"]]


def unwrap(reply: Frame) -> dict[str, Any]:
    """The body of an ``ok`` reply, or the matching exception for an ``error`` reply."""
    if reply.kind == "error":
        raise error_from_reply(str(reply.body.get("code", "internal")), str(reply.body.get("message", "")))
    body: dict[str, Any] = reply.body
    return body
