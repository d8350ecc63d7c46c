"""The dispatch table every service uses: types checked by the catalogue, handlers by their body models."""

from __future__ import annotations

import pytest

from geode.protocol import runtime, store
from geode.protocol.dispatch import Dispatch
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest
from geode.protocol.transport import Request


def _req(type_: str, body: object) -> Request:
    return Request(Envelope(type=type_, body={}, **{"from": "t#1"}), body)  # type: ignore[arg-type]


def test_routes_by_type_with_the_validated_body() -> None:
    def ping(body: runtime.Ping, request: Request) -> runtime.Pong:
        return runtime.Pong(name=request.sender, incarnation=1, pid=1)

    table = Dispatch("svc", {runtime.PING: ping})
    reply = table.handle(_req(runtime.PING, runtime.Ping()))
    assert isinstance(reply, runtime.Pong) and reply.name == "t#1"
    with pytest.raises(BadRequest, match=r"svc does not handle 'runtime\.status'"):
        table.handle(_req(runtime.STATUS, runtime.StatusQuery()))


def test_a_type_outside_the_catalogue_fails_at_build() -> None:
    with pytest.raises(ValueError, match=r"not in the protocol catalogue: svc\.nope"):
        Dispatch("svc", {"svc.nope": lambda b, r: None})


def test_a_handler_for_the_wrong_body_model_fails_at_build() -> None:
    def wrong(body: store.GetTurn, request: Request) -> None:
        return None

    with pytest.raises(TypeError, match="takes GetTurn"):
        Dispatch("svc", {runtime.PING: wrong})
