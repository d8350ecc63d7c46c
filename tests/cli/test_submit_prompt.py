"""reattach.submit_prompt: a lost cli.prompt reply is re-sent with the same turn id after a re-handshake;
giving up says which turn may run (TurnContinues, not 'daemon unavailable')."""

from __future__ import annotations

from typing import Any

import pytest

from actors.cli.reattach import TurnContinues, new_turn_id, submit_prompt
from geode.protocol import control as c
from geode.protocol.errors import BadRequest, GeodeError, RequestTimeout


class FakeClient:
    def __init__(self, answers: list[Any]) -> None:
        self.answers = answers
        self.sent: list[tuple[str, dict[str, Any]]] = []
        self.handshake_body: dict[str, Any] = {"protocol_version": "x"}
        self.session_id = "s-1"
        self.reattached = 0

    def request(self, type_: str, body: dict[str, Any], **_kw: Any) -> dict[str, Any]:
        self.sent.append((type_, body))
        if type_ == c.HANDSHAKE:
            return {"session_id": self.session_id}
        out = self.answers.pop(0) if self.answers else RequestTimeout("no reply")
        if isinstance(out, GeodeError):
            raise out
        return dict(out)


def test_a_lost_reply_is_resent_with_the_same_turn_id() -> None:
    tid = new_turn_id()
    cl = FakeClient([RequestTimeout("no reply"), {"turn_id": tid, "session_id": "s-1"}])
    got = submit_prompt(cl, {"text": "hi", "session_id": "s-1", "turn_id": tid}, [], give_up_s=5)
    assert got["turn_id"] == tid
    prompts = [b for t, b in cl.sent if t == c.PROMPT]
    assert [p["turn_id"] for p in prompts] == [tid, tid]
    assert [t for t, _ in cl.sent] == [c.PROMPT, c.HANDSHAKE, c.PROMPT] and cl.reattached == 1


def test_giving_up_names_the_turn() -> None:
    tid = new_turn_id()
    cl = FakeClient([])
    with pytest.raises(TurnContinues) as info:
        submit_prompt(cl, {"text": "hi", "session_id": "s-1", "turn_id": tid}, [], give_up_s=0.3)
    assert info.value.turn_id == tid and info.value.accepted is False
    assert tid in info.value.explain() and "geode --resume s-1" in info.value.explain()


def test_a_refused_prompt_is_not_resent() -> None:
    cl = FakeClient([BadRequest("too long")])
    with pytest.raises(BadRequest):
        submit_prompt(cl, {"text": "hi", "turn_id": new_turn_id()}, [], give_up_s=5)
    assert len(cl.sent) == 1
