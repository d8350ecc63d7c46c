"""The messenger lines of `geode status` / `geode messengers`: what an operator reads about each poller."""

from __future__ import annotations

import time

from actors.cli.messengers_view import binding_lines, poller_lines


def test_a_poller_line_shows_state_counts_and_the_last_error() -> None:
    detail = {
        "platforms": [
            {
                "platform": "telegram",
                "state": "conflict",
                "last_poll_ok_at": time.time() - 3,
                "cursor": "1043",
                "in": 7,
                "ignored": {"unbound": 2, "sender": 1},
                "replies_out": 5,
                "last_error": "409 Conflict: terminated by other getUpdates request",
            },
            {"platform": "slack", "state": "disabled", "reason": "SLACK_BOT_TOKEN is not set"},
        ]
    }
    line, err, slack = poller_lines(detail)
    assert line.startswith("messenger telegram: conflict · last poll 3.")
    assert "cursor 1043 · in 7 · ignored 3 (sender 1, unbound 2) · replies out 5" in line
    assert err == "  last error: 409 Conflict: terminated by other getUpdates request"
    assert slack == "messenger slack: disabled (SLACK_BOT_TOKEN is not set)"


def test_no_answer_and_no_platform_are_said_plainly() -> None:
    assert poller_lines(None) == ["messengers: not answering"]
    assert poller_lines({"platforms": []}) == ["messengers: no platform configured"]


def test_bindings_list_their_sessions() -> None:
    rows = binding_lines(
        {
            "bindings": [
                {
                    "platform": "telegram",
                    "channel_id": "-1001:7",
                    "session_id": "tg-abc",
                    "require_mention": True,
                    "last_turn": {"turn_id": "tg-t1", "state": "done", "termination_reason": "natural"},
                }
            ]
        }
    )
    assert rows[1].split() == ["telegram", "-1001:7", "(mention)", "tg-abc", "tg-t1", "done", "natural"]
    assert "[[messengers.bindings]]" in binding_lines({"bindings": []})[0]


def test_a_started_poller_before_its_first_poll_answers_says_so() -> None:
    now = time.time()
    base = {"platform": "telegram", "last_poll_ok_at": None, "started_at": now - 2}
    (line,) = poller_lines({"platforms": [{**base, "state": "polling"}]})
    assert line.startswith("messenger telegram: polling · started 2.") and "first poll waiting" in line
    (again,) = poller_lines({"platforms": [{**base, "state": "starting"}]})  # restarting: no old start shown
    assert again.startswith("messenger telegram: starting · last poll never")
    (polled,) = poller_lines({"platforms": [{**base, "state": "polling", "last_poll_ok_at": now - 1}]})
    assert polled.startswith("messenger telegram: polling · last poll 1.")
