"""Live progress on a real `geode serve` tree serving Telegram (python-telegram-bot), Slack (slack_sdk, Socket
Mode) and Discord (discord.py) against the local servers, with short thresholds (``progress_after_s`` 0.3,
``progress_every_s`` 0.5) and a scripted model whose steps wait on the test's events (no sleeps): a long turn
gets ONE status message (notifications off: Telegram disable_notification, Discord SUPPRESS_NOTIFICATIONS;
Slack, which has no such flag, in the message's thread) edited in place at the interval (the tool running,
"awaiting approval" while the approval waits), then the final answer as a new notifying message, and the
status deleted; a 12,000-character answer arrives split on paragraph boundaries (Telegram at 4,096, Discord at
2,000); SIGKILL of the messengers child mid-turn (the restarted child edits the same status message) and of
lanes mid-turn still leave exactly one status message and one final answer; killed right after the status
post, before its id is recorded (``messengers.after_status_post``), no second status message and no edit.

The tests share one tree and run in file order (the armed fault fires at the tree's first status post: the
first test's)."""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Iterator
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.discord_server import CHANNELS, LocalDiscord
from geode.testing.scripted import ScriptedServer
from geode.testing.slack_server import LocalSlack
from tests.actors.tree_kit import children, scripted_home
from tests.messengers.chat_tree_kit import pollers
from tests.messengers.platform_tree_kit import platform_sections, serving
from tests.messengers.progress_kit import LONG, PARAGRAPHS, STATUS, Model
from tests.waiting import poll_for

CHAT, USER = -100777, 1002
SLACK_CHAN, DC_CHAN = "C0PROGRESS", CHANNELS[0]
Tree = tuple[GeodeHome, LocalBotApi, Model, LocalSlack, LocalDiscord]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("progress")
    ws = base / "ws"
    ws.mkdir()
    model = Model(ws)
    with LocalBotApi() as api, LocalSlack() as slack, LocalDiscord() as dc, ScriptedServer(model) as server:
        extra = f"""
[messengers]
progress_after_s = 0.3
progress_every_s = 0.5
{platform_sections(api, slack, dc)}
[[messengers.bindings]]
platform = "telegram"
channel_id = "{CHAT}"
allowed_senders = ["{USER}"]
approvers = ["{USER}"]
workspace = "{ws}"
[[messengers.bindings]]
platform = "slack"
channel_id = "{SLACK_CHAN}"
[[messengers.bindings]]
platform = "discord"
channel_id = "{DC_CHAN}"
"""
        home = scripted_home(base, server, ws, extra=extra)
        try:
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("GEODE_FAULTS", "messengers@messengers.after_status_post:kill")  # the first test's
                with serving(home, api, slack, dc, cwd=ws):
                    yield home, api, model, slack, dc
        finally:
            for gate in list(model.gates.values()):  # no model step left waiting
                gate.set()


def _silent(call: dict[str, Any]) -> bool:
    return str(call["params"].get("disable_notification", "")).lower() == "true"


def _status_posts(api: LocalBotApi) -> list[dict[str, Any]]:
    return [p for p in api.posts(CHAT) if p["text"].startswith(STATUS)]


def _edits_of(api: LocalBotApi, message_id: int) -> list[dict[str, Any]]:
    return [c for c in api.calls("editmessagetext") if int(c["params"]["message_id"]) == message_id]


def _answers(api: LocalBotApi, text: str) -> list[dict[str, Any]]:
    return [p for p in api.posts(CHAT) if p["text"] == text]


def _ask(api: LocalBotApi, text: str) -> tuple[int, dict[str, Any]]:
    """Send ``text``; the message's id and the turn's status message (once posted)."""
    before = {p["message_id"] for p in _status_posts(api)}
    mid = api.push_message(CHAT, text, sender_id=USER)["message"]["message_id"]
    status = poll_for(
        lambda: [p for p in _status_posts(api) if p["message_id"] not in before],
        60,
        what="the status message",
    )
    assert len(status) == 1, status
    return mid, status[0]


def _finished(api: LocalBotApi, model: Model, tag: str, asked: int, status: dict[str, Any]) -> None:
    """Release ``tag``: one notifying final answer replying to the message, then the status deleted."""
    model.gate(tag).set()
    [answer] = poll_for(lambda: _answers(api, f"done {tag}"), 60, what=f"the final answer to {tag}")
    assert answer["reply_to"] == asked
    poll_for(
        lambda: [p for p in _status_posts(api) if p["message_id"] == status["message_id"] and p["deleted"]],
        30,
        what="the status message deleted",
    )
    assert len(_answers(api, f"done {tag}")) == 1
    assert not _silent(next(c for c in api.calls("sendmessage") if c["params"].get("text") == f"done {tag}"))


def test_a_status_post_cut_by_a_kill_is_never_posted_again_nor_edited(tree: Tree) -> None:
    """The messengers child is SIGKILLed right after the status message is posted, before its id is recorded
    (``messengers.after_status_post``): the restarted child finds the marker "?" and posts no second status
    message and edits none; the answer is posted once; that status message stays (never deleted)."""
    home, api, model, slack, _dc = tree
    asked = api.push_message(CHAT, "wait u", sender_id=USER)["message"]["message_id"]
    poll_for((home.root / "faults" / "messengers.after_status_post.fired").exists, 60, what="the kill")
    poll_for(
        lambda: (c := children(home)["messengers"]).incarnation > 1 and c.state == "running",
        60,
        what="the messengers child back",
        swallow=(Exception,),
    )
    # the control: a Slack turn of the restarted child gets its status message edited meanwhile
    slack.push_message(SLACK_CHAN, "wait v")
    poll_for(
        lambda: [p for p in slack.posts(SLACK_CHAN) if p["text"].startswith(STATUS) and p["edited"]],
        60,
        what="the restarted child editing another turn's status",
    )
    [status] = _status_posts(api)
    assert _edits_of(api, status["message_id"]) == []
    model.gate("u").set()
    model.gate("v").set()
    [answer] = poll_for(lambda: _answers(api, "done u"), 60, what="the final answer")
    assert answer["reply_to"] == asked
    poll_for(
        lambda: pollers(home)["telegram"]["pending_replies"] == 0,
        30,
        what="the reply settled",
        swallow=(Exception,),
    )
    assert _status_posts(api) == [status] and not status["deleted"]  # one, never edited, never deleted
    assert _edits_of(api, status["message_id"]) == []
    assert sum(map(_silent, api.calls("sendmessage"))) == 1
    poll_for(
        lambda: not [p for p in slack.posts(SLACK_CHAN) if p["text"].startswith(STATUS)],
        60,
        what="the Slack turn answered, its status deleted",
    )


def test_slack_a_long_turn_shows_a_status_in_its_thread_edited_then_deleted(tree: Tree) -> None:
    _home, _api, model, slack, _dc = tree
    asked = slack.push_message(SLACK_CHAN, "wait s")["ts"]

    def status() -> list[dict[str, Any]]:
        return [p for p in slack.posts(SLACK_CHAN) if p["text"].startswith(STATUS)]

    [first] = poll_for(status, 60, what="the Slack status message")
    assert first["thread_ts"] == asked  # in the message's thread
    poll_for(lambda: [p for p in status() if p["edited"] and p["text"] != first["text"]], 30, what="an edit")
    model.gate("s").set()
    [answer] = poll_for(
        lambda: [p for p in slack.posts(SLACK_CHAN) if p["text"] == "done s"], 60, what="the answer"
    )
    assert answer["thread_ts"] == asked and answer["ts"] != first["ts"]  # a new message
    poll_for(lambda: not status(), 30, what="the status message deleted (chat.delete)")


def test_discord_a_long_turn_shows_a_silent_status_edited_then_deleted(tree: Tree) -> None:
    _home, _api, model, _slack, dc = tree
    asked = int(dc.push_message(DC_CHAN, "wait d")["id"])

    def status() -> list[dict[str, Any]]:
        return [p for p in dc.posts(DC_CHAN) if p["content"].startswith(STATUS)]

    [first] = poll_for(status, 60, what="the Discord status message")
    assert first["silent"] and first["reply_to"] is None
    poll_for(lambda: [p for p in status() if p["edited"]], 30, what="an edit of the status message")
    model.gate("d").set()
    [answer] = poll_for(
        lambda: [p for p in dc.posts(DC_CHAN) if p["content"] == "done d"], 60, what="the answer"
    )
    assert str(answer["reply_to"]) == str(asked) and not answer["silent"]  # the reply, notifying
    poll_for(lambda: not status(), 30, what="the status message deleted")
    assert len(dc.calls("delete_message")) == 1


def test_discord_a_12000_character_answer_arrives_in_paragraphs_of_at_most_2000(tree: Tree) -> None:
    _home, _api, _model, _slack, dc = tree
    dc.push_message(DC_CHAN, "long")
    poll_for(
        lambda: any(p["content"].endswith(PARAGRAPHS[-1]) for p in dc.posts(DC_CHAN)),
        60,
        what="the last part",
    )
    parts = [p["content"] for p in dc.posts(DC_CHAN) if p["content"].startswith("Paragraph")]
    assert len(LONG) > 12_000 and len(parts) > 6 and all(len(p) <= 2000 for p in parts), parts
    # each part is filled: the next part's first paragraph would not have fit
    assert all(len(a) + 2 + len(b.split("\n\n")[0]) > 2000 for a, b in itertools.pairwise(parts))
    assert [para for p in parts for para in p.split("\n\n")] == PARAGRAPHS  # whole paragraphs, in order


def test_a_long_turn_shows_one_silent_status_edited_in_place_then_the_answer(tree: Tree) -> None:
    _home, api, model, _slack, _dc = tree
    silent_before = sum(map(_silent, api.calls("sendmessage")))
    asked, status = _ask(api, "slow a.txt")
    kb = poll_for(
        lambda: [p for p in api.posts(CHAT) if p["reply_markup"]], 60, what="the approval keyboard"
    )[0]
    shown = poll_for(
        lambda: [
            p["text"]
            for p in _status_posts(api)
            if p["message_id"] == status["message_id"] and "awaiting approval" in p["text"]
        ],
        30,
        what="the status saying the approval waits",
    )
    assert "Running write_file (awaiting approval)" in shown[0], shown
    buttons = {b["text"]: b["callback_data"] for row in kb["reply_markup"]["inline_keyboard"] for b in row}
    api.push_callback(CHAT, kb["message_id"], buttons["Approve"], sender_id=USER)
    # the tool ran; the model's next step waits: the status keeps being edited, no approval in it
    poll_for(
        lambda: [e for e in _edits_of(api, status["message_id"]) if "approval" not in e["params"]["text"]][
            1:
        ],
        30,
        what="two status edits after the approval",
    )
    edits = _edits_of(api, status["message_id"])
    gaps = [b["at"] - a["at"] for a, b in itertools.pairwise(edits)]
    assert all(g >= 0.45 for g in gaps), gaps  # progress_every_s = 0.5 per chat
    _finished(api, model, "a.txt", asked, status)
    assert sum(map(_silent, api.calls("sendmessage"))) == silent_before + 1  # the one status message


def test_a_12000_character_answer_arrives_split_on_paragraph_boundaries(tree: Tree) -> None:
    _home, api, _model, _slack, _dc = tree
    mid = api.push_message(CHAT, "long", sender_id=USER)["message"]["message_id"]
    first = poll_for(
        lambda: [p for p in api.posts(CHAT) if p["text"].startswith("Paragraph 0:")], 60, what="the answer"
    )[0]
    poll_for(
        lambda: any(p["text"].endswith(PARAGRAPHS[-1]) for p in api.posts(CHAT)), 60, what="the last part"
    )
    posts = api.posts(CHAT)
    parts = [p["text"] for p in posts[posts.index(first) :] if p["text"].startswith("Paragraph")]
    assert first["reply_to"] == mid and len(parts) > 2 and all(len(p) <= 4096 for p in parts), parts
    # each part is filled: the next part's first paragraph would not have fit
    assert all(len(a) + 2 + len(b.split("\n\n")[0]) > 4096 for a, b in itertools.pairwise(parts))
    assert [para for p in parts for para in p.split("\n\n")] == PARAGRAPHS  # whole paragraphs, in order


def _kill(home: GeodeHome, child: str) -> None:
    before = children(home)[child]
    os.kill(before.pid or 0, signal.SIGKILL)
    poll_for(
        lambda: (c := children(home)[child]).incarnation > before.incarnation and c.state == "running",
        60,
        what=f"{child} back after the SIGKILL",
        swallow=(Exception,),
    )


def test_a_killed_messengers_child_edits_the_same_status_and_posts_no_second_one(tree: Tree) -> None:
    home, api, model, _slack, _dc = tree
    silent_before = sum(map(_silent, api.calls("sendmessage")))
    asked, status = _ask(api, "wait m")
    poll_for(lambda: _edits_of(api, status["message_id"]), 30, what="a first edit (the id is recorded)")
    _kill(home, "messengers")
    n = len(_edits_of(api, status["message_id"]))
    poll_for(lambda: len(_edits_of(api, status["message_id"])) > n, 60, what="the restarted child's edit")
    _finished(api, model, "m", asked, status)
    assert sum(map(_silent, api.calls("sendmessage"))) == silent_before + 1
    later = [p["message_id"] for p in _status_posts(api) if p["message_id"] >= status["message_id"]]
    assert later == [status["message_id"]]


def test_killed_lanes_mid_turn_leave_one_status_and_one_answer(tree: Tree) -> None:
    home, api, model, _slack, _dc = tree
    silent_before = sum(map(_silent, api.calls("sendmessage")))
    asked, status = _ask(api, "wait l")
    _kill(home, "lanes")
    _finished(api, model, "l", asked, status)
    assert sum(map(_silent, api.calls("sendmessage"))) == silent_before + 1
