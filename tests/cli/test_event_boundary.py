"""The CLI validates what control sends it before acting on it: a ``cli.event`` whose body is not a stream
event is dropped at the boundary (issue 34 moved the CLI's validation to pydantic-core validators built from
the protocol models' schemas, actors/cli/wire.py, and made it cover the events' bodies)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope
from tests.cli.fake_control import FakeControl, welcome


def test_a_malformed_event_from_control_is_dropped_and_the_turn_still_ends(tmp_path: Path) -> None:
    """A ``cli.event`` whose body is not a stream event (its seq not a number) is refused at the CLI's
    boundary like any malformed frame: not shown, not counted; the turn's real events still arrive. Before
    issue 34 the CLI validated only the envelope and died on ``int(seq)``."""
    home = GeodeHome(tmp_path / "gh").ensure()

    def answer(env: Envelope, ident: bytes) -> dict[str, Any] | None:
        if env.type == c.HANDSHAKE:
            return welcome()
        if env.type != c.PROMPT:
            return {"ok": True}
        turn = str(env.body["turn_id"])
        fc.send(ident, env.reply_ok({"turn_id": turn, "session_id": "s-1", "state": "accepted"}))
        ev = {"session_id": "s-1", "turn_id": turn}
        for body in (
            {**ev, "seq": "many", "kind": "text", "data": {"text": "forged"}},
            {**ev, "seq": 1, "kind": "text", "data": {"text": "real"}},
            {
                **ev,
                "seq": 2,
                "kind": lanes_msg.TURN_DONE,
                "data": {"result": {"termination_reason": "natural"}},
            },
        ):
            fc.send(ident, Envelope(kind="cast", type=c.CLI_EVENT, body=body))
        return None

    seen: list[dict[str, Any]] = []
    with FakeControl(home, answer=answer) as fc:
        cl = ControlClient(home)
        cl.connect()
        try:
            result = cl.run_prompt("hi", on_event=seen.append, timeout_s=10)
        finally:
            cl.close()
    assert result["termination_reason"] == "natural"
    assert [(e["seq"], e["kind"]) for e in seen] == [(1, "text"), (2, lanes_msg.TURN_DONE)]
