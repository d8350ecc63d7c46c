"""The CLI's control-socket wire without pydantic models (actors/cli/wire.py): its stored data must be what
the protocol's models say (regenerate with `.venv/bin/python scripts/wire_schemas`), and it must accept and
refuse the very frames ``codec.decode`` (``Envelope.model_validate``) and ``StreamEvent`` do — the boundary
rule holds in `geode ask` with pydantic-core validators instead of model classes (issue 34)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from actors.cli import wire, wire_data
from actors.cli.wire_schema_gen import data
from geode.protocol import codec
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest, NotFound
from geode.protocol.lanes import StreamEvent


def test_the_stored_wire_data_says_what_the_models_say() -> None:
    stored = {name: getattr(wire_data, name, None) for name in data()}
    assert stored == data(), "geode.protocol changed: regenerate with `.venv/bin/python scripts/wire_schemas`"


EVENT = {"session_id": "s-1", "turn_id": "t-1", "seq": 3, "kind": "text", "data": {"t": "x"}}
FRAMES: list[Any] = [
    {"v": 1, "id": "a1", "kind": "ok", "type": "cli.handshake", "corr": "c1", "from": "control", "body": {}},
    {"type": "cli.ping"},  # every default filled (a new id, kind request, from "", body {})
    {"v": 1, "id": "a1", "kind": "cast", "type": "cli.event", "body": EVENT},
    {"v": 1, "id": "a1", "kind": "cast", "type": "cli.event", "body": {**EVENT, "seq": 0}},  # seq ≥ 1
    {"v": 1, "id": "a1", "kind": "cast", "type": "cli.event", "body": {**EVENT, "seq": "many"}},
    {"v": 1, "id": "a1", "kind": "cast", "type": "cli.event", "body": {"seq": 2}},  # no session, turn, kind
    {"v": 1, "id": "a1", "kind": "cast", "type": "cli.event", "body": {**EVENT, "kind": "k" * 65}},
    {"v": 2, "id": "a1", "type": "cli.ping"},  # another protocol version
    {"v": 1, "id": "", "type": "cli.ping"},  # an empty id
    {"v": 1, "id": "x" * 65, "type": "cli.ping"},
    {"v": 1, "id": "a1", "kind": "reply", "type": "cli.ping"},
    {"v": 1, "id": "a1", "type": "Cli.Ping"},  # not a dotted lower-case type
    {"v": 1, "id": "a1", "type": "cli.ping", "extra": 1},  # a field the envelope does not have
    {"v": 1, "id": "a1", "type": "cli.ping", "sender": "x"},  # the field's name is not its wire name
    {"v": 1, "id": "a1", "type": "cli.ping", "from": "x" * 129},
    {"v": 1, "id": "a1", "type": "cli.ping", "body": []},
    {"v": 1, "id": "a1", "type": "cli.ping", "deadline": "soon"},
    {"v": 1, "id": "a1", "type": "cli.ping", "trace": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"},
    {"v": 1, "id": "a1", "type": "cli.ping", "trace": "not a traceparent"},
    {"v": 1, "id": "a1", "type": "cli.ping", "session": None, "corr": None},
    {"v": 1, "id": "a1", "type": "cli.ping", "body": {"b": b"\xff\xfe"}},  # not UTF-8 text
    ["not", "a", "map"],
]


def _model_view(frame: bytes) -> dict[str, Any] | None:
    """What the models make of a frame: the envelope's fields (a cli.event's body as a StreamEvent)."""
    try:
        env = codec.decode(frame)
        fields = {name: getattr(env, name) for name in Envelope.model_fields}
        if env.type == "cli.event":
            fields["body"] = StreamEvent.model_validate(env.body).model_dump()
    except (BadRequest, ValueError):
        return None
    return fields


@pytest.mark.parametrize("obj", FRAMES, ids=[str(i) for i in range(len(FRAMES))])
def test_the_wire_accepts_and_refuses_what_the_models_do(obj: Any) -> None:
    frame = msgpack.packb(obj, use_bin_type=True)
    expected = _model_view(frame)
    try:
        got = wire.decode(frame)
    except BadRequest:
        assert expected is None, f"the models accept {obj!r}; the CLI's wire refuses it"
        return
    assert expected is not None, f"the models refuse {obj!r}; the CLI's wire accepts it"
    fields = {name: getattr(got, name) for name in Envelope.model_fields}
    if "id" not in obj:  # a default id is new on each side
        assert len(fields.pop("id")) == len(expected.pop("id")) == 24
    assert fields == expected


def test_a_frame_the_wire_encodes_is_the_envelope_codec_encodes() -> None:
    mid, frame = wire.encode("cli.prompt", {"text": "hi", "x": None}, session="s-1")
    env = codec.decode(frame)
    assert (env.id, env.type, env.kind, env.session) == (mid, "cli.prompt", "request", "s-1")
    assert env.body == {"text": "hi", "x": None}
    same = Envelope(id=mid, type="cli.prompt", session="s-1", body={"text": "hi", "x": None})
    assert msgpack.unpackb(frame) == msgpack.unpackb(codec.encode(same))
    with pytest.raises(BadRequest):
        wire.encode("cli.prompt", {"text": "x" * (codec.MAX_FRAME_BYTES + 1)})


def test_an_error_reply_is_its_exception() -> None:
    _, frame = wire.encode("cli.resume", {})
    env = codec.decode(frame).reply_error("not_found", "no such session")
    with pytest.raises(NotFound, match="no such session"):
        wire.unwrap(wire.decode(codec.encode(env)))
