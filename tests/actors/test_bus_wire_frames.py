"""The bus packs a request, a cast and a served reply straight from their fields: no ``Envelope`` is built on
the sending side only to be read back when encoding (the receiver still validates every frame once)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol import codec, envelope
from geode.protocol.envelope import Envelope, outgoing, outgoing_wire, reply_wire, wire_map
from geode.protocol.errors import GeodeError
from tests.actors.bus_fixtures import BOOM, ECHO, FixtureService
from tests.waiting import poll_for


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Bus, Bus, FixtureService]]:
    home = GeodeHome(tmp_path / "h").ensure()
    server = Bus("srv", 1, home, single_process=True).start()
    client = Bus("cli", 1, home, single_process=True).start()
    svc = FixtureService("srv", 1)
    server.serve("svc", svc)
    try:
        yield server, client, svc
    finally:
        client.stop()
        server.stop()


def test_no_envelope_is_built_to_be_encoded(pair: tuple[Bus, Bus, FixtureService], monkeypatch: Any) -> None:
    """Per round trip, before: the client built its request's Envelope (``outgoing``) and the server its
    reply's (``_reply``), each only to be read back by ``codec.encode``: 2 envelopes and 2 ``encode``
    calls."""
    _, client, svc = pair
    tr = client.transport
    assert tr.call("svc", ECHO, {"text": "warm"}, timeout_s=5)["text"] == "warm"
    tr.cast("svc", ECHO, {"text": "warm cast"})
    poll_for(lambda: len(svc.casts) == 2)
    made: list[str] = []
    trusted, encode = envelope.trusted, codec.encode

    def counting_trusted(fields: dict[str, Any], fields_set: set[str] | None = None) -> Envelope:
        made.append("envelope")
        return trusted(fields, fields_set)

    def counting_encode(env: Envelope, **kw: Any) -> bytes:
        made.append("encode")
        return encode(env, **kw)

    monkeypatch.setattr(envelope, "trusted", counting_trusted)  # what outgoing and _reply build with
    monkeypatch.setattr(codec, "encode", counting_encode)
    for i in range(5):
        assert tr.call("svc", ECHO, {"text": f"t{i}"}, timeout_s=5) == {"text": f"t{i}", "from": "cli#1"}
        tr.cast("svc", ECHO, {"text": f"c{i}"}, session="s1")
    with pytest.raises(GeodeError) as err:
        tr.call("svc", BOOM, {}, timeout_s=5)
    assert err.value.code.value == "internal" and "boom" in err.value.message
    poll_for(lambda: len(svc.casts) == 12)
    assert made == []
    got = sorted((r.body.text, r.session, r.envelope.kind) for r in svc.casts[2:])  # type: ignore[attr-defined]
    assert got == sorted(
        [(f"t{i}", None, "request") for i in range(5)] + [(f"c{i}", "s1", "cast") for i in range(5)]
    )


def test_wire_maps_pack_the_same_bytes_as_the_envelopes() -> None:
    """``outgoing_wire`` and ``reply_wire`` give what ``wire_map`` of ``outgoing`` and ``reply_*`` give (same
    keys, same order), on the checked path and on the model's path (a trace, a type not sent before)."""
    packb = lambda obj: msgpack.packb(obj, use_bin_type=True)  # noqa: E731
    trace = "00-" + "a" * 32 + "-" + "b" * 16 + "-01"
    for kw in (
        {"type": "test.echo", "body": {"text": "x"}},
        {"type": "test.echo", "body": {"text": "x"}, "session": "s", "deadline": 12},
        {"type": "test.echo", "body": {}, "trace": trace},
        {"type": "test.never_sent_before_here", "body": {"a": [1]}},
    ):
        for kind in ("request", "cast"):
            args: dict[str, Any] = {"id": "m1", "kind": kind, "sender": "me#1", **kw}
            assert packb(outgoing_wire(**args)) == packb(wire_map(outgoing(**args)))
    request = outgoing(id="m2", kind="request", type="test.echo", body={}, sender="a#1", session="s2")
    for kind, body, sender in (("ok", {"text": "y"}, "b#1"), ("error", {"code": "x", "message": "m"}, "b#1")):
        got = reply_wire(request, kind, body, sender)  # type: ignore[arg-type]
        want = wire_map(envelope._reply(request, kind, body, sender))  # type: ignore[arg-type]
        assert got.pop("id") and want.pop("id")  # a fresh id each
        assert packb(got) == packb(want)
    with pytest.raises(ValueError):  # not a map: the model refuses it, as before
        reply_wire(request, "ok", [1], "b#1")


def test_a_body_model_is_dumped_as_model_dump_gives() -> None:
    """``catalog.dump`` calls the model's serializer itself: the same map, keys in the same order."""
    from geode.protocol import catalog
    from geode.protocol.runtime import Pong
    from tests.actors.bus_fixtures import Echo

    for model in (Pong(name="n", incarnation=3, pid=4), Echo(text="é\ud800", delay_s=0.5), Echo()):
        got = catalog.dump(model)
        assert got == model.model_dump(mode="json", exclude_none=True)
        assert list(got) == list(model.model_dump(mode="json", exclude_none=True))
    assert catalog.dump(None) == {} and catalog.dump({"a": 1}) == {"a": 1}
