"""The CLI's control-socket wire without pydantic models (actors/cli/wire.py): its stored data must be what
the protocol's models say (regenerate with `.venv/bin/python scripts/wire_schemas`), and it must accept and
refuse the very frames ``codec.decode`` (``Envelope.model_validate``) and ``StreamEvent`` do — the boundary
rule holds in `geode ask` with pydantic-core validators instead of model classes (issue 34)."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from actors.cli import status_wire_data, wire, wire_data
from actors.cli.wire_schema_gen import data, status_data
from geode.protocol import codec
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest, NotFound
from geode.protocol.lanes import StreamEvent
from geode.protocol.messengers import BindingsReply
from geode.protocol.runtime import TreeStatus


def test_the_stored_wire_data_says_what_the_models_say() -> None:
    for module, values in ((wire_data, data()), (status_wire_data, status_data())):
        stored = {name: getattr(module, name, None) for name in values}
        assert stored == values, (
            "geode.protocol changed: regenerate with `.venv/bin/python scripts/wire_schemas`"
        )


TREE = {
    "pid": 7,
    "incarnation": 2,
    "state": "running",
    "children": [
        {"name": "store", "pid": 9, "state": "running", "uptime_s": 1.5, "rss_bytes": 10},
        {"name": "lanes", "state": "backoff", "next_try_s": 0.4, "restarts": 3},
    ],
    "zygote": {"pid": 8, "rss_bytes": 1, "pss_bytes": 2},
}
BINDINGS = {
    "platforms": [{"platform": "telegram", "state": "disabled", "reason": "no token"}],
    "bindings": [{"platform": "slack", "channel_id": "C1", "session_id": "s-1"}],
}


@pytest.mark.parametrize(
    ("name", "raw", "dumped"),
    [
        ("TREE_STATUS_SCHEMA", TREE, lambda raw: TreeStatus.model_validate(raw).model_dump()),
        (
            "BINDINGS_REPLY_SCHEMA",
            BINDINGS,
            lambda raw: BindingsReply.model_validate(raw).model_dump(mode="json"),
        ),
        ("TREE_STATUS_SCHEMA", {**TREE, "pid": "seven"}, None),
        ("TREE_STATUS_SCHEMA", {**TREE, "children": [{"pid": 3}]}, None),
        ("BINDINGS_REPLY_SCHEMA", {"platforms": "none"}, None),
    ],
)
def test_status_replies_read_as_the_models_read_them(name: str, raw: dict[str, Any], dumped: Any) -> None:
    """`geode status`'s light reads give the very data the models give (its JSON is theirs), and refuse
    what they refuse."""
    check = wire.validator(name, status_wire_data)
    if dumped is None:
        with pytest.raises(ValueError):
            check.validate_python(raw)
    else:
        assert check.validate_python(raw) == dumped(raw)


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
