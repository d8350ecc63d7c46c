"""Discord end to end on a real `geode serve` tree (scripted provider) against the local Discord server (REST
and gateway), with the real discord.py inside the messengers child: one reply per message of a bound channel,
replying to the message, in its thread when it came from one; nothing for an unbound channel or another
sender; a gateway drop (4000) and RESUME, even one that replays the session's messages, answers no old
message again; an approval by button (only an approver decides; Deny → the tool did not run); messages
sent while the messengers child is SIGKILLed and restarting answered once each (read back from history);
and (last: it restarts the tree with faults) SIGKILLs after the turn record, after the post, and in the
executor after the send: each message posted once, the replies whose commit was lost `uncertain`; then
SIGKILLs of lanes, the store and a loop worker around a reply, one message each: each posted once,
committed, and the chat's next message answered.

The tests share one tree and run in file order."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.messengers.sessions import reply_operation_id, turn_id_for
from geode.testing.discord_server import CHANNELS, THREADS, USER_ID, LocalDiscord
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import children, scripted_home, serve, stop, wait_children
from tests.messengers.chat_tree_kit import (
    FAULTS_AROUND_A_REPLY,
    FAULTS_AROUND_THE_TURN,
    Chat,
    echo_or_write,
    kill_around_each_turn,
    long_write,
    no_log_has,
    observed,
    pollers,
    prompt_of,
    settled,
    shown_request,
    status_messengers,
    uncertain_operations,
    whole_request,
)
from tests.waiting import poll_for

CHAN, OTHER = CHANNELS
THREAD = next(t for t, parent in THREADS.items() if parent == CHAN)
ALLOWED, APPROVER, STRANGER = USER_ID, USER_ID + 1, USER_ID + 8
Tree = tuple[GeodeHome, LocalDiscord, ScriptedServer, Path]


def _config(dc: LocalDiscord) -> str:
    return f"""
[messengers]
approval_timeout_s = 20
observe_grace_s = 1
[messengers.discord]
base_url = "{dc.api_base}"
gateway_url = "{dc.gateway_url}"
poll_timeout_s = 1
[[messengers.bindings]]
platform = "discord"
channel_id = "{CHAN}"
allowed_senders = ["{ALLOWED}", "{APPROVER}"]
approvers = ["{APPROVER}"]
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("discord")
    ws = base / "ws"
    ws.mkdir()
    with LocalDiscord() as dc, ScriptedServer(echo_or_write(ws)) as model:
        home = scripted_home(base, model, ws, extra=_config(dc))
        with home.env_file.open("a") as f:
            f.write(f"DISCORD_BOT_TOKEN={dc.token}\n")
        try:
            serve(home, cwd=ws)
            poll_for(dc.connected, 60, what="the bot on the gateway")
            yield home, dc, model, ws
        finally:
            stop(home)


def _answered(dc: LocalDiscord, text: str, channel: int = CHAN) -> int:
    return sum(text in p["content"] for p in dc.posts(channel))


def _replies_to(dc: LocalDiscord, message: dict[str, Any], channel: int = CHAN) -> list[dict[str, Any]]:
    return [p for p in dc.posts(channel) if str(p["reply_to"]) == str(message["id"])]


def test_bound_channel_one_reply_to_the_message_in_its_thread_unbound_and_stranger_none(tree: Tree) -> None:
    home, dc, _, _ = tree
    first = dc.push_message(CHAN, "hello discord", author_id=ALLOWED)
    in_thread = dc.push_message(CHAN, "hello thread", author_id=ALLOWED, thread_id=THREAD)
    dc.push_message(OTHER, "hello other", author_id=ALLOWED)
    dc.push_message(CHAN, "hello stranger", author_id=STRANGER, author_name="eve")
    poll_for(lambda: _answered(dc, "echo: hello discord"), 60, what="the reply")
    poll_for(lambda: _answered(dc, "echo: hello thread", THREAD), 60, what="the reply in the thread")
    poller = poll_for(
        lambda: settled(home, "discord", min_in=2, min_ignored=2),
        30,
        what="the messages settled",
        swallow=(AssertionError,),
    )
    assert poller is not None and poller["ignored"] == {"unbound": 1, "sender": 1}
    assert [p["content"] for p in _replies_to(dc, first)] == ["echo: hello discord"]
    assert [p["content"] for p in _replies_to(dc, in_thread, THREAD)] == ["echo: hello thread"]
    assert [p["content"] for p in dc.posts(CHAN)] == ["echo: hello discord"]  # the thread's reply stays there
    assert dc.posts(OTHER) == []
    views = status_messengers(home)
    assert views["discord"]["state"] == "polling" and views["discord"]["replies_out"] == 2
    assert views["telegram"]["state"] == views["slack"]["state"] == "disabled"


def test_gateway_drop_and_resume_answers_no_old_message_again(tree: Tree) -> None:
    home, dc, model, _ = tree
    before = {p["message_id"]: p["content"] for p in dc.posts(CHAN) + dc.posts(THREAD)}
    resumes = dc.resume_count()
    dc.drop_gateway(4000, replay_seen=True)  # the RESUME replays every message of the session
    poll_for(lambda: dc.resume_count() > resumes and dc.connected(), 60, what="the RESUME")
    after_drop = dc.push_message(CHAN, "after the drop", author_id=ALLOWED)
    poll_for(lambda: _replies_to(dc, after_drop), 60, what="a reply after the resume")
    poll_for(lambda: settled(home, "discord", min_in=3), 30, what="settled", swallow=(AssertionError,))
    now = {p["message_id"]: p["content"] for p in dc.posts(CHAN) + dc.posts(THREAD)}
    assert sorted(set(now) - set(before)) == [p["message_id"] for p in _replies_to(dc, after_drop)]
    assert _answered(dc, "echo: hello discord") == 1 and _answered(dc, "echo: hello thread", THREAD) == 1
    assert [prompt_of(r) for r in model.requests].count("hello discord") == 1
    assert dc.identify_count() == 1  # resumed, not a new session


def _keyboards(dc: LocalDiscord, after: int) -> list[dict[str, Any]]:
    return [p for p in dc.posts(CHAN)[after:] if p["components"]]


def _buttons(kb: dict[str, Any]) -> dict[str, str]:
    return {b["label"]: b["custom_id"] for row in kb["components"] for b in row["components"]}


def test_approval_by_button_only_an_approver_decides_and_deny_keeps_the_tool_from_running(tree: Tree) -> None:
    _home, dc, _, ws = tree
    n0 = len(dc.posts(CHAN))
    sent = dc.push_message(CHAN, "write alpha.txt", author_id=APPROVER, author_name="boss")
    kb = poll_for(lambda: _keyboards(dc, n0), 60, what="the approval buttons")[0]
    assert "write_file" in kb["content"]
    buttons = _buttons(kb)
    assert set(buttons) == {"Approve", "Deny", "Always for this session"}
    refused = dc.push_button(CHAN, kb["message_id"], buttons["Approve"], user_id=ALLOWED)  # not an approver
    poll_for(
        lambda: [
            r
            for r in dc.interaction_responses()
            if str(r["interaction_id"]) == str(refused["id"]) and "not allowed" in json.dumps(r["data"])
        ],
        30,
        what="the refusal, to the presser alone",
    )
    dc.push_button(CHAN, kb["message_id"], buttons["Deny"], user_id=APPROVER, user_name="boss")
    poll_for(lambda: _answered(dc, "tool result:"), 60, what="the turn's reply after Deny")
    assert not (ws / "alpha.txt").exists()
    (reply,) = [p for p in _replies_to(dc, sent) if p["content"].startswith("tool result:")]
    assert "User denied" in reply["content"]
    poll_for(
        lambda: [
            p for p in dc.posts(CHAN) if p["message_id"] == kb["message_id"] and "Denied by" in p["content"]
        ],
        15,
        what="the buttons replaced by the decision",
    )
    assert not next(p for p in dc.posts(CHAN) if p["message_id"] == kb["message_id"])["components"]


def _op(message: dict[str, Any]) -> str:
    return reply_operation_id(turn_id_for("discord", str(CHAN), str(message["id"])))


def test_a_3000_character_request_is_asked_whole_in_the_channel(tree: Tree) -> None:
    """Breach 5: the approval shows the whole request (a 3,000-character write) over several messages of at
    most 2,000 characters (the buttons with the last); Deny keeps it from being written; no log has it."""
    home, dc, _, ws = tree
    before = _answered(dc, "tool result:")
    n0 = len(dc.posts(CHAN))
    dc.push_message(CHAN, "long write", author_id=APPROVER, author_name="boss")
    kb = poll_for(lambda: _keyboards(dc, n0), 60, what="the approval buttons")[0]
    asked = [p["content"] for p in dc.posts(CHAN)[n0:] if "request part" in p["content"] or p["components"]]
    assert len(asked) > 1 and whole_request("write_file", long_write(ws)) in shown_request(asked), asked
    dc.push_button(CHAN, kb["message_id"], _buttons(kb)["Deny"], user_id=APPROVER, user_name="boss")
    poll_for(lambda: _answered(dc, "tool result:") == before + 1, 60, what="the turn's reply after Deny")
    assert not (ws / "long.txt").exists()
    assert no_log_has(home, "benign-benign-benign")


def test_messages_sent_while_the_messengers_child_is_down_are_each_answered_once(tree: Tree) -> None:
    """Issue 27 item 8: the messengers child SIGKILLed; messages posted in the bound channel and its thread
    while it is dead and while it restarts (Discord delivers none of them to the new gateway session) are
    read back from the history after the stored positions and each answered once, in order, with the
    message sent once it is back; nothing answered before is answered again."""
    home, dc, model, _ = tree
    before = children(home)["messengers"]
    identifies = dc.identify_count()
    old_posts = {p["message_id"] for p in dc.posts(CHAN) + dc.posts(THREAD)}
    assert before.pid is not None
    os.kill(before.pid, signal.SIGKILL)
    poll_for(lambda: not dc.connected(), 30, what="the gateway session gone with the child")
    away = [dc.push_message(CHAN, f"while away {i}", author_id=ALLOWED) for i in range(3)]
    away.append(dc.push_message(CHAN, "away in the thread", author_id=ALLOWED, thread_id=THREAD))
    away.append(dc.push_message(OTHER, "away unbound", author_id=ALLOWED))  # unbound: never answered
    wait_children(home, lambda kids: kids["messengers"].incarnation > before.incarnation, timeout_s=60)
    away.append(dc.push_message(CHAN, "while restarting", author_id=ALLOWED))  # maybe before its READY
    poll_for(lambda: dc.identify_count() > identifies and dc.connected(), 60, what="a new gateway session")
    back = dc.push_message(CHAN, "back again", author_id=ALLOWED)
    *bound, unbound, restarting = away
    for message in [*bound, restarting, back]:
        where = THREAD if message is away[3] else CHAN
        poll_for(lambda m=message, w=where: _replies_to(dc, m, w), 60, what=f"the reply to {message}")
    poll_for(lambda: settled(home, "discord", min_in=0), 30, what="settled", swallow=(AssertionError,))
    for message in [*bound, restarting, back]:
        where = THREAD if message is away[3] else CHAN
        assert [p["content"] for p in _replies_to(dc, message, where)] == [f"echo: {message['content']}"]
        assert [prompt_of(r) for r in model.requests].count(message["content"]) == 1
    assert dc.posts(OTHER) == [] and not _replies_to(dc, unbound, OTHER)
    prompts = [prompt_of(r) for r in model.requests]
    order = [prompts.index(m["content"]) for m in away[:3]]
    assert order == sorted(order)  # read back oldest first
    new_posts = [p for p in dc.posts(CHAN) + dc.posts(THREAD) if p["message_id"] not in old_posts]
    assert len(new_posts) == 6  # one reply each, nothing old answered again


def test_kills_around_a_reply_never_post_twice(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve again with faults. One message: the messengers child is SIGKILLed after its turn record (the
    restarted child owes the reply from its journal; Discord does not deliver the message again), and once
    restarted right after posting the reply: one post, the receipt `uncertain`, then settled `applied` by
    observation (the bot's message replying to it with its text) with no operator. A second message: the
    executor is SIGKILLed after the post, before committing its receipt: one post, settled the same way."""
    home, dc, model, ws = tree
    stop(home)
    monkeypatch.setenv("GEODE_FAULTS", FAULTS_AROUND_A_REPLY)
    serve(home, cwd=ws)
    poll_for(dc.connected, 60, what="the bot on the gateway")
    incarnation = children(home)["messengers"].incarnation
    fired = home.root / "faults"

    sent = dc.push_message(CHAN, "kill me softly", author_id=ALLOWED)
    poll_for(
        lambda: (fired / "messengers.after_turn_record.fired").exists(), 60, what="the kill after the record"
    )
    poll_for(lambda: (fired / "messengers.after_post.fired").exists(), 90, what="the kill after the post")
    poll_for(lambda: settled(home, "discord", min_in=0), 90, what="settled", swallow=(AssertionError,))
    assert children(home)["messengers"].incarnation >= incarnation + 2
    assert [p["content"] for p in _replies_to(dc, sent)] == ["echo: kill me softly"]
    assert [prompt_of(r) for r in model.requests].count("kill me softly") == 1  # one turn ran
    # uncertain, then found by its author, reply reference and text: settled with no operator
    row = observed(home, _op(sent), "applied", 60)
    assert row["note"].endswith(str(_replies_to(dc, sent)[0]["message_id"]))

    poll_for(dc.connected, 60, what="the bot on the gateway again")
    second = dc.push_message(CHAN, "kill the executor", author_id=ALLOWED)
    poll_for(lambda: (fired / "executor.reply_after_send.fired").exists(), 90, what="the executor kill")
    observed(home, _op(second), "applied", 90)
    poll_for(lambda: settled(home, "discord", min_in=1), 60, what="settled", swallow=(AssertionError,))
    assert [p["content"] for p in _replies_to(dc, second)] == ["echo: kill the executor"]
    assert _answered(dc, "echo: kill me softly") == 1
    assert pollers(home)["discord"]["state"] == "polling"
    assert _op(sent) not in uncertain_operations(home) and _op(second) not in uncertain_operations(home)


def test_kills_in_lanes_store_and_loop_around_a_reply_never_post_twice(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Serve again with FAULTS_AROUND_THE_TURN, one message per fault: lanes SIGKILLed with the turn stored,
    not pushed; the store after admitting the reply's receipt, and after committing it; a loop worker after
    a tool batch ran, before its checkpoint. Each message answered once (a reply to it), its receipt
    committed; the next message answered."""
    home, dc, _, ws = tree
    stop(home)
    monkeypatch.setenv("GEODE_FAULTS", FAULTS_AROUND_THE_TURN)
    serve(home, cwd=ws)
    poll_for(dc.connected, 60, what="the bot on the gateway")
    chat = Chat(
        home,
        "discord",
        send=lambda text: dc.push_message(CHAN, text, author_id=ALLOWED),
        replies=lambda message: [p["content"] for p in _replies_to(dc, message)],
        operation=_op,
        observed=True,  # the executor killed before the send: observed absent, then posted as attempt 2
    )
    print(kill_around_each_turn(chat, ws))
