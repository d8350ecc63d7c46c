"""Slack end to end on a real `geode serve` tree (scripted provider) against the local Slack server
(Web API and Socket Mode), with the real slack_sdk inside the messengers child: one reply per message of a
bound channel, in the message's thread; nothing for an unbound channel or another sender; an envelope
delivered twice (``retry_attempt``) is one turn and one reply, and every envelope is acked only after its
turn is recorded; ``@bot /new``; an approval by Block Kit button (only an approver decides; Deny → the tool
did not run); and (last: it restarts the tree with faults) SIGKILLs between the turn record and the ack,
after the post, and in the executor after the send: each message posted once, the replies whose commit was
lost `uncertain`; then SIGKILLs of lanes, the store and a loop worker around a reply, one message each: each
posted once, committed, and the chat's next message answered.

The tests share one tree and run in file order."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.messengers.sessions import reply_operation_id, turn_id_for
from geode.testing.scripted import ScriptedServer
from geode.testing.slack_server import DEFAULT_USER, LocalSlack
from tests.actors.tree_kit import children, scripted_home, serve, stop
from tests.messengers.chat_tree_kit import (
    FAULTS_AROUND_A_REPLY,
    FAULTS_AROUND_THE_TURN,
    Chat,
    echo_or_write,
    kill_around_each_turn,
    long_write,
    no_log_has,
    pollers,
    prompt_of,
    receipt_row,
    settled,
    shown_request,
    status_messengers,
    uncertain_operations,
    whole_request,
)
from tests.waiting import poll_for

CHAN, OTHER = "C0GEODE01", "C0OTHER01"
ALLOWED, APPROVER, STRANGER = DEFAULT_USER, "U0BOSS001", "U0EVE0001"
Tree = tuple[GeodeHome, LocalSlack, ScriptedServer, Path]


def _config(slack: LocalSlack) -> str:
    return f"""
[messengers]
approval_timeout_s = 20
observe_grace_s = 1
[messengers.slack]
base_url = "{slack.api_url}"
poll_timeout_s = 1
[[messengers.bindings]]
platform = "slack"
channel_id = "{CHAN}"
allowed_senders = ["{ALLOWED}", "{APPROVER}"]
approvers = ["{APPROVER}"]
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("slack")
    ws = base / "ws"
    ws.mkdir()
    with LocalSlack(redeliver_after_s=4.0) as slack, ScriptedServer(echo_or_write(ws)) as model:
        home = scripted_home(base, model, ws, extra=_config(slack))
        with home.env_file.open("a") as f:
            f.write(f"SLACK_BOT_TOKEN={slack.bot_token}\nSLACK_APP_TOKEN={slack.app_token}\n")
        try:
            serve(home, cwd=ws)
            yield home, slack, model, ws
        finally:
            stop(home)


def _texts(slack: LocalSlack, channel: str = CHAN) -> list[str]:
    return [p["text"] for p in slack.posts(channel)]


def _answered(slack: LocalSlack, text: str) -> int:
    return sum(text in t for t in _texts(slack))


def _replies_to(slack: LocalSlack, ts: str) -> list[dict[str, Any]]:
    return [p for p in slack.posts(CHAN) if p["thread_ts"] == ts]


def test_bound_channel_one_reply_in_the_thread_unbound_and_stranger_none(tree: Tree) -> None:
    home, slack, _, _ = tree
    first = slack.push_message(CHAN, "hello slack", user=ALLOWED)
    slack.push_message(OTHER, "hello other", user=ALLOWED)
    slack.push_message(CHAN, "hello stranger", user=STRANGER)
    poll_for(lambda: _answered(slack, "echo: hello slack"), 60, what="the reply", swallow=(AssertionError,))
    poller = poll_for(
        lambda: settled(home, "slack", min_in=1, min_ignored=2),
        30,
        what="the envelopes settled",
        swallow=(AssertionError,),
    )
    assert poller is not None and poller["ignored"] == {"unbound": 1, "sender": 1}
    (reply,) = slack.posts(CHAN)
    assert reply["text"] == "echo: hello slack" and reply["thread_ts"] == first["ts"]  # in its thread
    assert slack.posts(OTHER) == []
    assert first["envelope_id"] in slack.acks()
    views = status_messengers(home)
    assert sorted(views) == ["discord", "slack", "telegram"]
    assert views["slack"]["state"] == "polling" and views["slack"]["replies_out"] == 1
    assert views["telegram"]["state"] == views["discord"]["state"] == "disabled"
    assert views["discord"]["reason"] and views["telegram"]["reason"]


def test_same_envelope_twice_with_retry_attempt_is_one_turn_and_one_reply(tree: Tree) -> None:
    home, slack, model, _ = tree
    sent = slack.push_message(CHAN, "twice please", user=ALLOWED)
    poll_for(lambda: _answered(slack, "echo: twice please"), 60, what="the reply", swallow=(AssertionError,))
    poll_for(lambda: sent["envelope_id"] in slack.acks(), 15, what="the ack")
    before = pollers(home)["slack"]
    (envelope,) = [e for e in slack.envelopes() if e["envelope_id"] == sent["envelope_id"]]
    again = {**envelope, "envelope_id": str(uuid.uuid4()), "retry_attempt": 1, "retry_reason": "timeout"}
    slack.push_envelope(again)
    poll_for(lambda: again["envelope_id"] in slack.acks(), 30, what="the retried envelope acked")
    after = pollers(home)["slack"]
    assert after["in"] == before["in"]
    assert after["ignored"].get("duplicate", 0) > before["ignored"].get("duplicate", 0)
    assert _answered(slack, "echo: twice please") == 1
    assert [prompt_of(r) for r in model.requests].count("twice please") == 1  # one turn ran


def test_mention_then_new_starts_a_new_session(tree: Tree) -> None:
    _home, slack, _, _ = tree
    sent = slack.push_message(CHAN, "/new", user=ALLOWED, mention=True)  # "<@bot> /new"
    assert len(sent["event_ids"]) == 2  # a message and an app_mention event, like on Slack

    def both_acked() -> bool:
        ids = [
            e["envelope_id"] for e in slack.envelopes() if e["payload"].get("event_id") in sent["event_ids"]
        ]
        return len(ids) >= 2 and set(ids) <= set(slack.acks())

    poll_for(lambda: _replies_to(slack, sent["ts"]), 60, what="the /new answer")
    poll_for(both_acked, 30, what="both events acked")
    (answer,) = _replies_to(slack, sent["ts"])
    assert answer["text"].startswith("Started a new session") and "s-slack-" in answer["text"]


def _keyboards(slack: LocalSlack, after: int) -> list[dict[str, Any]]:
    return [p for p in slack.posts(CHAN)[after:] if p["blocks"]]


def _buttons(kb: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        e["text"]["text"]: (e["action_id"], e["value"])
        for block in kb["blocks"]
        for e in block.get("elements") or ()
        if e.get("type") == "button"
    }


def test_approval_by_button_only_an_approver_decides_and_deny_keeps_the_tool_from_running(tree: Tree) -> None:
    _home, slack, _, ws = tree
    n0 = len(slack.posts(CHAN))
    sent = slack.push_message(CHAN, "write alpha.txt", user=APPROVER)
    kb = poll_for(lambda: _keyboards(slack, n0), 60, what="the approval buttons")[0]
    assert kb["thread_ts"] == sent["ts"] and "write_file" in kb["text"]
    buttons = _buttons(kb)
    assert set(buttons) == {"Approve", "Deny", "Always for this session"}
    slack.push_action(CHAN, kb["ts"], *buttons["Approve"], user=ALLOWED)  # allowed to talk, not to approve
    poll_for(
        lambda: [e for e in slack.ephemerals(CHAN) if e["user"] == ALLOWED and "not allowed" in e["text"]],
        30,
        what="the refusal, to the presser alone",
    )
    slack.push_action(CHAN, kb["ts"], *buttons["Deny"], user=APPROVER)
    poll_for(lambda: _answered(slack, "tool result:"), 60, what="the turn's reply after Deny")
    assert not (ws / "alpha.txt").exists()
    (reply,) = [p for p in _replies_to(slack, sent["ts"]) if p["text"].startswith("tool result:")]
    assert "User denied" in reply["text"]
    poll_for(
        lambda: [p for p in slack.posts(CHAN) if p["ts"] == kb["ts"] and "Denied by" in p["text"]],
        15,
        what="the buttons replaced by the decision",
    )
    assert not next(p for p in slack.posts(CHAN) if p["ts"] == kb["ts"])["blocks"]


def _op(sent: dict[str, Any]) -> str:
    return reply_operation_id(turn_id_for("slack", f"{CHAN}:{sent['ts']}", sent["ts"]))


def test_a_3000_character_request_is_asked_whole_in_the_thread(tree: Tree) -> None:
    """Breach 5: the approval shows the whole request (a 3,000-character write), split in the thread, the
    buttons with the last part; Deny keeps it from being written; no log has it."""
    home, slack, _, ws = tree
    before = _answered(slack, "tool result:")
    n0 = len(slack.posts(CHAN))
    slack.push_message(CHAN, "long write", user=APPROVER)
    kb = poll_for(lambda: _keyboards(slack, n0), 60, what="the approval buttons")[0]
    asked = [p["text"] for p in slack.posts(CHAN)[n0:] if "request part" in p["text"] or p["blocks"]]
    assert len(asked) > 1 and whole_request("write_file", long_write(ws)) in shown_request(asked), asked
    slack.push_action(CHAN, kb["ts"], *_buttons(kb)["Deny"], user=APPROVER)
    poll_for(lambda: _answered(slack, "tool result:") == before + 1, 60, what="the turn's reply after Deny")
    assert not (ws / "long.txt").exists()
    assert no_log_has(home, "benign-benign-benign")


def _observed(home: GeodeHome, op: str, outcome: str, timeout_s: float) -> dict[str, Any]:
    """The reply's receipt once reconciled by observation (``geode receipts``), its outcome checked."""
    row = poll_for(
        lambda: receipt_row(home, op, reconciled_by="observation"), timeout_s, what=f"{op} observed"
    )
    assert row is not None and row["outcome"] == outcome, row
    assert row["observation"]["observed"] == ("posted" if outcome == "applied" else "absent"), row
    return row


def test_kills_between_store_and_ack_and_around_the_reply_never_post_twice(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serve again with faults. One message: the messengers child is SIGKILLed after its turn record, before
    the ack (Slack redelivers the envelope: still one turn), and once restarted right after posting the reply
    (the executor never hears back): one post, the receipt `uncertain`, then settled `applied` by
    observation (the post found by the operation id in its metadata) with no operator. A second message: the
    executor is SIGKILLed after the post, before committing its receipt: one post, settled the same way."""
    home, slack, model, ws = tree
    stop(home)
    monkeypatch.setenv("GEODE_FAULTS", FAULTS_AROUND_A_REPLY)
    serve(home, cwd=ws)
    incarnation = children(home)["messengers"].incarnation
    fired = home.root / "faults"

    sent = slack.push_message(CHAN, "kill me softly", user=ALLOWED)
    poll_for(
        lambda: (fired / "messengers.after_turn_record.fired").exists(), 60, what="the kill before the ack"
    )

    def redelivered() -> list[dict[str, Any]]:
        return [
            e
            for e in slack.envelopes()
            if e.get("retry_attempt") and e["payload"]["event_id"] == sent["event_id"]
        ]

    poll_for(redelivered, 60, what="Slack redelivers the unacked envelope")
    poll_for(lambda: (fired / "messengers.after_post.fired").exists(), 90, what="the kill after the post")
    poll_for(lambda: settled(home, "slack", min_in=0), 90, what="settled", swallow=(AssertionError,))
    assert children(home)["messengers"].incarnation >= incarnation + 2
    assert _answered(slack, "echo: kill me softly") == 1
    assert [prompt_of(r) for r in model.requests].count("kill me softly") == 1  # one turn ran
    assert len(_replies_to(slack, sent["ts"])) == 1
    # its receipt went uncertain; the restarted child found the post by its metadata: settled, no operator
    assert _observed(home, _op(sent), "applied", 60)["note"].endswith(_replies_to(slack, sent["ts"])[0]["ts"])

    second = slack.push_message(CHAN, "kill the executor", user=ALLOWED)
    poll_for(lambda: (fired / "executor.reply_after_send.fired").exists(), 90, what="the executor kill")
    _observed(home, _op(second), "applied", 90)
    poll_for(lambda: settled(home, "slack", min_in=1), 60, what="settled", swallow=(AssertionError,))
    assert _answered(slack, "echo: kill the executor") == 1
    assert len(_replies_to(slack, second["ts"])) == 1
    assert _op(sent) not in uncertain_operations(home) and _op(second) not in uncertain_operations(home)


def test_kills_in_lanes_store_and_loop_around_a_reply_never_post_twice(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serve again with FAULTS_AROUND_THE_TURN, one message per fault: lanes SIGKILLed with the turn stored,
    not pushed; the store after admitting the reply's receipt, and after committing it; a loop worker after
    a tool batch ran, before its checkpoint. Each message posted once in its thread, its receipt committed;
    the next message answered."""
    home, slack, _, ws = tree
    stop(home)
    monkeypatch.setenv("GEODE_FAULTS", FAULTS_AROUND_THE_TURN)
    serve(home, cwd=ws)
    chat = Chat(
        home,
        "slack",
        send=lambda text: slack.push_message(CHAN, text, user=ALLOWED),
        replies=lambda sent: [p["text"] for p in _replies_to(slack, sent["ts"])],
        operation=_op,
        observed=True,  # the executor killed before the send: observed absent, then posted as attempt 2
    )
    print(kill_around_each_turn(chat, ws))
