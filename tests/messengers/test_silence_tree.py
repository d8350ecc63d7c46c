"""Nothing ignored in silence, on a real `geode serve` tree through the real SDKs against the local servers
(issue 31 items 3 and 9): a message kind the bot does not handle (a sticker; a voice clip while
``[messengers] transcription`` is unset: "not enabled") gets one "not supported" reply per chat per kind per
hour — a second one within the hour none, also after the messengers
child was SIGKILLed between them (the claim is stored before the reply is asked); a binding's
``ack_reaction`` puts a reaction on each message taken as a turn; with ``on_edit = "rerun"`` an edited
message is a turn of its own (turn id keyed by the edit's version) with its own answer.

The tests share one tree and run in file order."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from actors.cli.messengers_view import messengers_detail
from geode.home import GeodeHome
from geode.messengers.sessions import turn_id_for
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.discord_server import CHANNELS, LocalDiscord
from geode.testing.scripted import ScriptedServer
from geode.testing.slack_server import LocalSlack
from tests.actors.tree_kit import children, scripted_home
from tests.messengers.chat_tree_kit import echo_or_write, pollers
from tests.messengers.platform_tree_kit import platform_sections, serving
from tests.waiting import poll_for

TG_CHAT, ALLOWED, STRANGER = -100431, 1001, 5555
SLACK_CHAN, DC_CHAN = "C0SILENT1", CHANNELS[0]
NOT_SUPPORTED = "Sorry, I can't handle sticker messages yet"
Tree = tuple[GeodeHome, LocalBotApi, LocalSlack, LocalDiscord]


def _config(tg: LocalBotApi, slack: LocalSlack, dc: LocalDiscord) -> str:
    return f"""
{platform_sections(tg, slack, dc)}
[[messengers.bindings]]
platform = "telegram"
channel_id = "{TG_CHAT}"
allowed_senders = ["{ALLOWED}"]
ack_reaction = "👀"
on_edit = "rerun"
[[messengers.bindings]]
platform = "slack"
channel_id = "{SLACK_CHAN}"
ack_reaction = "👀"
on_edit = "rerun"
[[messengers.bindings]]
platform = "discord"
channel_id = "{DC_CHAN}"
ack_reaction = "👀"
on_edit = "rerun"
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("silence")
    ws = base / "ws"
    ws.mkdir()
    with (
        LocalBotApi() as tg,
        LocalSlack(redeliver_after_s=5.0) as slack,
        LocalDiscord() as dc,
        ScriptedServer(echo_or_write(ws)) as model,
    ):
        home = scripted_home(base, model, ws, extra=_config(tg, slack, dc))
        with serving(home, tg, slack, dc, cwd=ws):
            yield home, tg, slack, dc


def _texts(tg: LocalBotApi) -> list[str]:
    return [p["text"] for p in tg.posts(TG_CHAT)]


def _seen(home: GeodeHome, update_id: int) -> bool:
    tg = pollers(home)["telegram"]
    return (tg["cursor"] or 0) > update_id and tg["pending_replies"] == 0


def _kill_messengers(home: GeodeHome) -> None:
    before = children(home)["messengers"]
    os.kill(before.pid, signal.SIGKILL)
    poll_for(
        lambda: (m := children(home)["messengers"]).incarnation > before.incarnation and m.state == "running",
        30,
        what="the messengers child back",
    )


def test_a_sticker_gets_one_not_supported_reply_per_hour_even_across_a_sigkill(tree: Tree) -> None:
    home, tg, _slack, _dc = tree
    first = tg.push_sticker(TG_CHAT, sender_id=ALLOWED)
    poll_for(lambda: any(NOT_SUPPORTED in t for t in _texts(tg)), 60, what="the not-supported reply")
    (post,) = tg.posts(TG_CHAT)
    assert post["reply_to"] == first["message"]["message_id"]
    second = tg.push_sticker(TG_CHAT, sender_id=ALLOWED)  # within the hour: nothing
    poll_for(lambda: _seen(home, second["update_id"]), 30, what="the second sticker read")
    _kill_messengers(home)
    third = tg.push_sticker(TG_CHAT, sender_id=ALLOWED)  # a new incarnation: the stored claim holds
    stranger = tg.push_sticker(TG_CHAT, sender_id=STRANGER)  # never answered
    tg.push_message(TG_CHAT, "text after stickers", sender_id=ALLOWED)
    poll_for(lambda: "echo: text after stickers" in _texts(tg), 60, what="the text's answer")
    poll_for(lambda: _seen(home, stranger["update_id"]), 30, what="the stickers read")
    assert third["update_id"] < stranger["update_id"]
    assert sum(NOT_SUPPORTED in t for t in _texts(tg)) == 1, _texts(tg)
    assert pollers(home)["telegram"]["unhandled"]["unsupported.sticker"] == 2  # this incarnation's two


def test_an_ack_reaction_is_put_on_a_message_taken_as_a_turn(tree: Tree) -> None:
    _home, tg, _slack, _dc = tree
    upd = tg.push_message(TG_CHAT, "react please", sender_id=ALLOWED)
    mid = upd["message"]["message_id"]
    poll_for(lambda: "echo: react please" in _texts(tg), 60, what="the answer")
    poll_for(
        lambda: {"chat_id": TG_CHAT, "message_id": mid, "emoji": "👀"} in tg.reactions(TG_CHAT),
        30,
        what="the ack reaction",
    )
    stickers = [m for m in tg.reactions(TG_CHAT) if m["message_id"] != mid]
    assert all(r["emoji"] == "👀" for r in stickers)


def test_an_edited_message_with_on_edit_rerun_is_its_own_turn_with_its_own_answer(tree: Tree) -> None:
    home, tg, _slack, _dc = tree
    upd = tg.push_message(TG_CHAT, "before the edit", sender_id=ALLOWED)
    mid = upd["message"]["message_id"]
    poll_for(lambda: "echo: before the edit" in _texts(tg), 60, what="the first answer")
    edit = tg.push_message(TG_CHAT, "after the edit", sender_id=ALLOWED, message_id=mid, edited=True)
    poll_for(lambda: "echo: after the edit" in _texts(tg), 60, what="the rerun's answer")
    poll_for(lambda: _seen(home, edit["update_id"]), 30, what="the edit settled")
    answers = [p for p in tg.posts(TG_CHAT) if p["text"] in ("echo: before the edit", "echo: after the edit")]
    assert [p["text"] for p in answers] == ["echo: before the edit", "echo: after the edit"]
    assert all(p["reply_to"] == mid for p in answers)
    version = str(edit["edited_message"]["edit_date"])
    rerun = turn_id_for("telegram", str(TG_CHAT), f"{mid}.edit-{version}")
    assert rerun != turn_id_for("telegram", str(TG_CHAT), str(mid))
    detail = messengers_detail(home)
    assert detail is not None
    (binding,) = [b for b in detail["bindings"] if b["platform"] == "telegram"]
    assert binding["last_turn"]["turn_id"] == rerun and binding["last_turn"]["state"] == "done"
    tg.push_update(edit)  # the same edit again: no third answer
    poll_for(lambda: pollers(home)["telegram"]["ignored"].get("duplicate", 0) >= 1, 30, what="dedupe")
    assert sum(t == "echo: after the edit" for t in _texts(tg)) == 1


def _slack_texts(slack: LocalSlack) -> list[str]:
    return [p["text"] for p in slack.posts(SLACK_CHAN)]


def test_slack_a_voice_clip_is_answered_once_an_ack_is_put_and_an_edit_reruns(tree: Tree) -> None:
    home, _tg, slack, _dc = tree
    first = slack.push_file(SLACK_CHAN, voice=True)  # an audio clip, [messengers] transcription unset
    slack.push_file(SLACK_CHAN, voice=True)  # the same kind within the hour: nothing
    msg = slack.push_message(SLACK_CHAN, "slack before the edit")
    poll_for(lambda: "echo: slack before the edit" in _slack_texts(slack), 60, what="the answer")
    slack.push_edit(SLACK_CHAN, msg["ts"], "slack after the edit")
    poll_for(lambda: "echo: slack after the edit" in _slack_texts(slack), 60, what="the rerun's answer")
    poll_for(lambda: pollers(home)["slack"]["pending_replies"] == 0, 30, what="the replies settled")
    not_supported = [p for p in slack.posts(SLACK_CHAN) if "voice notes are not enabled" in p["text"]]
    assert len(not_supported) == 1, _slack_texts(slack)
    assert not_supported[0]["thread_ts"] == first["payload"]["event"]["ts"]
    assert pollers(home)["slack"]["unhandled"]["unsupported.voice"] == 2
    assert slack.file_host.downloaded() == []  # nothing of an unsupported clip is fetched
    answers = [p for p in slack.posts(SLACK_CHAN) if p["text"].startswith("echo: slack")]
    assert [p["thread_ts"] for p in answers] == [msg["ts"], msg["ts"]]  # both in the message's thread
    assert slack.reactions(SLACK_CHAN) == [{"channel": SLACK_CHAN, "ts": msg["ts"], "name": "eyes"}]


def _dc_texts(dc: LocalDiscord) -> list[str]:
    return [p["content"] for p in dc.posts(DC_CHAN)]


def test_discord_a_sticker_is_answered_once_an_ack_is_put_and_an_edit_reruns(tree: Tree) -> None:
    home, _tg, _slack, dc = tree
    first = dc.push_sticker(DC_CHAN)
    dc.push_sticker(DC_CHAN)  # the same kind within the hour: nothing
    msg = dc.push_message(DC_CHAN, "discord before the edit")
    poll_for(lambda: "echo: discord before the edit" in _dc_texts(dc), 60, what="the answer")
    dc.push_edit(DC_CHAN, msg["id"], "discord after the edit")
    poll_for(lambda: "echo: discord after the edit" in _dc_texts(dc), 60, what="the rerun's answer")
    poll_for(lambda: pollers(home)["discord"]["pending_replies"] == 0, 30, what="the replies settled")
    not_supported = [p for p in dc.posts(DC_CHAN) if NOT_SUPPORTED in p["content"]]
    assert len(not_supported) == 1, _dc_texts(dc)
    assert str(not_supported[0]["reply_to"]) == first["id"]
    assert pollers(home)["discord"]["unhandled"]["unsupported.sticker"] == 2
    answers = [p for p in dc.posts(DC_CHAN) if p["content"].startswith("echo: discord")]
    assert [str(p["reply_to"]) for p in answers] == [msg["id"], msg["id"]]
    reaction = {"channel_id": DC_CHAN, "message_id": int(msg["id"]), "emoji": "👀"}
    assert dc.reactions(DC_CHAN) == [reaction]
