"""The lanes ↔ loop-worker messages validate at the boundary and round-trip through the codec."""

from __future__ import annotations

import pytest

from geode.protocol import catalog, codec, turns
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest


def test_messages_are_catalogued_with_their_models() -> None:
    for type_, body, reply in [
        (turns.WORKER_READY, turns.WorkerReady, turns.Ack),
        (turns.WORKER_HEARTBEAT, turns.WorkerHeartbeat, turns.HeartbeatAck),
        (turns.TURN_RUN, turns.TurnRun, turns.TurnRunAccepted),
        (turns.TURN_EVENT, turns.TurnEvent, None),
        (turns.TURN_DONE, turns.TurnDone, turns.Ack),
        (turns.TURN_CANCEL, turns.TurnCancel, turns.Ack),
    ]:
        spec = catalog.spec(type_)
        assert spec.body is body and spec.reply is reply and spec.area == "turns"


def test_bodies_round_trip_and_reject_bad_input() -> None:
    run = turns.TurnRun(turn_id="t", session_id="s", input=turns.TurnInput(text="hi", channel="slack:C1"))
    env = codec.decode(codec.encode(Envelope(type=turns.TURN_RUN, body=catalog.dump(run))))
    back = catalog.parse_body(turns.TURN_RUN, env.body)
    assert back == run and back.input.model_extra == {"channel": "slack:C1"}
    done = turns.TurnDone(turn_id="t", session_id="s", result=turns.TurnResult(termination_reason="natural"))
    assert catalog.parse_body(turns.TURN_DONE, catalog.dump(done)) == done
    with pytest.raises(BadRequest):
        catalog.parse_body(turns.TURN_EVENT, {"session_id": "s", "turn_id": "t", "seq": 1, "kind": "bogus"})
    with pytest.raises(BadRequest):
        catalog.parse_body(
            turns.TURN_DONE,
            {"turn_id": "t", "session_id": "s", "result": {"termination_reason": "not_a_reason"}},
        )
    with pytest.raises(BadRequest):
        catalog.parse_body(turns.TURN_RUN, {"turn_id": "", "session_id": "s"})


def test_termination_reasons_are_a_closed_documented_set() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "loop.md").read_text()
    for reason in turns.TerminationReason:
        assert f"| `{reason.value}` |" in doc, reason
