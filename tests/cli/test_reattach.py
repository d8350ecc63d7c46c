"""Re-attach: the last exchanges, the answer of a turn that ended while away (from the lanes replay or the
durable outcomes), following a turn still running, and the session picker."""

from __future__ import annotations

import io
import time
from typing import Any

from actors.cli.reattach import pick_session, show_where_you_are
from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.sessions.transcript import TranscriptWriter


class _Client:
    def __init__(self, replay: list[dict[str, Any]], reply: dict[str, Any]) -> None:
        self.session_id = "s-1"
        self.inbox: list[dict[str, Any]] = []
        self.replay, self.reply = replay, reply
        self.followed: list[tuple[str, list[dict[str, Any]]]] = []

    def request(self, type_: str, body: dict[str, Any], *, timeout_s: float, on_event: Any) -> dict[str, Any]:
        assert type_ == c.ATTACH and body == {"session_id": "s-1", "after_seq": 0}
        for ev in self.replay:
            on_event(ev)
        return self.reply

    def follow(self, turn_id: str, *, backlog: list[dict[str, Any]], **_kw: Any) -> dict[str, Any]:
        self.followed.append((turn_id, backlog))
        return {"text": "later", "termination_reason": "natural"}


def _ev(seq: int, turn: str, kind: str, **data: Any) -> dict[str, Any]:
    return {"session_id": "s-1", "turn_id": turn, "seq": seq, "kind": kind, "data": data}


def _home(tmp_path) -> GeodeHome:
    home = GeodeHome(tmp_path)
    user = {"role": "user", "content": [{"type": "text", "text": "first question"}]}
    answer = {"role": "assistant", "content": [{"type": "text", "text": "first answer"}]}
    TranscriptWriter(tmp_path).append("s-1", 0, [user, answer])
    return home


def test_prints_the_last_exchange_and_an_answer_that_arrived_while_away(tmp_path):
    done = _ev(
        5, "t-2", lanes_msg.TURN_DONE, result={"text": "the away answer", "termination_reason": "natural"}
    )
    cl = _Client([_ev(4, "t-2", "text_delta", text="the away answer"), done], {"running": None})
    out = io.StringIO()
    assert show_where_you_are(cl, _home(tmp_path), out=out) is None
    text = out.getvalue()
    assert "> first question" in text and "⏺ first answer" in text
    assert "finished while you were away (natural)" in text and "⏺ the away answer" in text


def test_uses_durable_outcomes_when_the_buffer_is_gone_and_follows_a_running_turn(tmp_path):
    outcome = {"turn_id": "t-3", "outcome": {"text": "from the record", "termination_reason": "natural"}}
    asked = _ev(7, "t-4", lanes_msg.APPROVAL_REQUEST, approval_id="a1")
    cl = _Client([asked], {"running": "t-4", "complete": False, "outcomes": [outcome]})
    out = io.StringIO()
    result = show_where_you_are(cl, _home(tmp_path), out=out)
    assert "⏺ from the record" in out.getvalue()
    assert result == {"text": "later", "termination_reason": "natural"}
    assert cl.followed == [("t-4", [asked])]  # the approval still pending is asked again


def test_the_picker_lists_recent_sessions_with_their_first_prompt(tmp_path):
    home = _home(tmp_path)
    now = time.time()
    sessions = [
        {"session_id": "s-0", "updated_at": now - 7200},
        {"session_id": "s-1", "updated_at": now - 90},
    ]
    out = io.StringIO()
    assert pick_session(home, sessions, tty=False, out=out) is None
    lines = out.getvalue().splitlines()
    assert "s-1" in lines[0] and "first question" in lines[0] and "1m ago" in lines[0]
    assert "s-0" in lines[1] and "2h ago" in lines[1]
    assert pick_session(home, sessions, tty=True, stdin=io.StringIO("7\n2\n"), out=io.StringIO()) == "s-0"
