"""Sessions and workspaces per conversation on a real `geode serve` tree (the local Telegram, Slack and
Discord servers, the real SDKs, a scripted model, no ``[tools] roots``): each chat's turns run in its own
workspace (``$GEODE_HOME/workspaces/<platform>-<chat>``), so a file one chat's session writes is not
readable from another chat's session; Telegram forum topics keep their own sessions; a Slack binding with
``session = "channel"`` continues the channel's session across top-level messages (one with the default
``"thread"`` does not); channels bound in two Discord guilds are both answered.

The scripted model answers ``"<prompt> (turn n)"``, n counting the user messages its session has sent so
far: a turn continuing a session says ``turn 2``, a new session ``turn 1``. The tests share one tree."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.discord_server import LocalDiscord
from geode.testing.scripted import ScriptedServer
from geode.testing.slack_server import LocalSlack
from tests.actors.tree_kit import scripted_home
from tests.messengers.chat_tree_kit import pollers, prompt_of
from tests.messengers.platform_tree_kit import platform_sections, serving
from tests.waiting import poll_for

TG_A, TG_B = -100401, -100402
APPROVER = 1002
SLACK_CHANNEL, SLACK_THREADS = "C0CHANSES", "C0THRDSES"
GUILD_1, GUILD_2 = 1200000000000000001, 1200000000000000002
DC_1, DC_2 = 1300000000000000011, 1310000000000000021
Servers = tuple[LocalBotApi, LocalSlack, LocalDiscord]
Tree = tuple[GeodeHome, Servers]


def _user_turns(req: Any) -> int:
    """How many user prompts (not tool results) the request carries: the session's turns so far."""
    messages = req.body.get("messages", []) if isinstance(req.body, dict) else []
    return sum(
        1
        for m in messages
        if m.get("role") == "user"
        and (
            isinstance(m.get("content"), str)
            or not any(b.get("type") == "tool_result" for b in m.get("content") or [])
        )
    )


def _model(req: Any) -> Any:
    """ "write NAME": write_file NAME (relative: in the session's workspace); "read PATH": read_file PATH;
    after a tool, its result; else the prompt and the session's turn count."""
    prompt = prompt_of(req)
    last = req.body["messages"][-1].get("content")
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return {"text": "tool result: " + json.dumps(last)[:2000]}
    verb, _, arg = prompt.partition(" ")
    if verb == "write":
        return {"tool_calls": [{"name": "write_file", "input": {"file_path": arg, "content": "chat A only"}}]}
    if verb == "read":
        return {"tool_calls": [{"name": "read_file", "input": {"file_path": arg}}]}
    return {"text": f"{prompt} (turn {_user_turns(req)})"}


def _config(tg: LocalBotApi, slack: LocalSlack, dc: LocalDiscord) -> str:
    return f"""
[messengers]
approval_timeout_s = 30
{platform_sections(tg, slack, dc)}
[[messengers.bindings]]
platform = "telegram"
channel_id = "{TG_A}"
approvers = ["{APPROVER}"]
[[messengers.bindings]]
platform = "telegram"
channel_id = "{TG_B}"
[[messengers.bindings]]
platform = "slack"
channel_id = "{SLACK_CHANNEL}"
session = "channel"
[[messengers.bindings]]
platform = "slack"
channel_id = "{SLACK_THREADS}"
[[messengers.bindings]]
platform = "discord"
channel_id = "{DC_1}"
[[messengers.bindings]]
platform = "discord"
channel_id = "{DC_2}"
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("sessions")
    with (
        LocalBotApi() as tg,
        LocalSlack(redeliver_after_s=5.0) as slack,
        LocalDiscord(guilds={GUILD_1: [DC_1], GUILD_2: [DC_2]}, threads={}) as dc,
        ScriptedServer(_model) as model,
    ):
        home = scripted_home(base, model, extra=_config(tg, slack, dc))  # no [tools] roots
        with serving(home, tg, slack, dc, cwd=base):
            yield home, (tg, slack, dc)


def _starting(posts: list[dict[str, Any]], start: str) -> list[dict[str, Any]]:
    return [p for p in posts if p["text"].startswith(start)]


def _tg_reply(tg: LocalBotApi, chat: int, start: str) -> dict[str, Any]:
    found: dict[str, Any] = poll_for(lambda: _starting(tg.posts(chat), start), 90, what=start)[0]
    return found


def test_a_file_one_chats_session_writes_is_not_readable_from_another_chats(tree: Tree) -> None:
    home, (tg, _, _) = tree
    tg.push_message(TG_A, "write secret.txt", sender_id=APPROVER)
    kb: dict[str, Any] = poll_for(
        lambda: [p for p in tg.posts(TG_A) if p["reply_markup"]], 90, what="approval"
    )[0]
    approve = next(
        b["callback_data"]
        for row in kb["reply_markup"]["inline_keyboard"]
        for b in row
        if b["text"] == "Approve"
    )
    tg.push_callback(TG_A, kb["message_id"], approve, sender_id=APPROVER)
    _tg_reply(tg, TG_A, "tool result:")
    written = home.root / "workspaces" / f"telegram-{TG_A}" / "secret.txt"
    assert written.read_text() == "chat A only"  # the relative path landed in chat A's own workspace
    tg.push_message(TG_A, "read secret.txt")  # chat A reads it back by the same relative path
    poll_for(lambda: any("chat A only" in p["text"] for p in tg.posts(TG_A)), 90, what="chat A's read")

    tg.push_message(TG_B, "read secret.txt")  # chat B: its workspace has no such file
    first = _tg_reply(tg, TG_B, "tool result:")
    tg.push_message(TG_B, f"read {written}")  # nor may it reach into chat A's by the absolute path
    poll_for(lambda: len(tg.posts(TG_B)) >= 2, 90, what="chat B's second read")
    second = tg.posts(TG_B)[1]["text"]
    assert "chat A only" not in first["text"] + second, (first, second)
    assert '"is_error": true' in first["text"] and '"is_error": true' in second, (first, second)
    assert "outside the allowed roots" in second, second
    assert (home.root / "workspaces" / f"telegram-{TG_B}").is_dir()


def test_telegram_forum_topics_keep_their_own_sessions(tree: Tree) -> None:
    _, (tg, _, _) = tree
    for text, topic in (("topic seven", 7), ("topic eight", 8), ("topic seven again", 7)):
        tg.push_message(TG_B, text, thread_id=topic)
        post = _tg_reply(tg, TG_B, text + " (")
        assert post["thread_id"] == topic, post
    texts = [p["text"] for p in tg.posts(TG_B)]
    # topic 8's first message opens its own session; topic 7's second continues topic 7's
    assert {"topic seven (turn 1)", "topic eight (turn 1)", "topic seven again (turn 2)"} <= set(texts), texts


def _slack_reply(slack: LocalSlack, channel: str, start: str) -> dict[str, Any]:
    found: dict[str, Any] = poll_for(lambda: _starting(slack.posts(channel), start), 90, what=start)[0]
    return found


def test_slack_session_channel_continues_the_channels_session_thread_does_not(tree: Tree) -> None:
    _, (_, slack, _) = tree
    roots = {}
    for channel in (SLACK_CHANNEL, SLACK_THREADS):
        roots[channel] = slack.push_message(channel, "first top-level")["ts"]
        one = _slack_reply(slack, channel, "first top-level (")
        slack.push_message(channel, "second top-level")
        two = _slack_reply(slack, channel, "second top-level (")
        if channel == SLACK_CHANNEL:  # one session for the channel's top-level messages, answered flat
            assert (one["text"], two["text"]) == ("first top-level (turn 1)", "second top-level (turn 2)")
            assert one["thread_ts"] is None and two["thread_ts"] is None, (one, two)
        else:  # the default: each top-level message its own session, answered in its thread
            assert (one["text"], two["text"]) == ("first top-level (turn 1)", "second top-level (turn 1)")
            assert one["thread_ts"] and two["thread_ts"] and one["thread_ts"] != two["thread_ts"]
    # in a session = "channel" channel, a thread someone starts keeps its own session, answered there
    slack.push_message(SLACK_CHANNEL, "in a thread", thread_ts=roots[SLACK_CHANNEL])
    threaded = _slack_reply(slack, SLACK_CHANNEL, "in a thread (")
    assert threaded["text"] == "in a thread (turn 1)" and threaded["thread_ts"] == roots[SLACK_CHANNEL]


def test_channels_bound_in_two_discord_guilds_are_both_answered(tree: Tree) -> None:
    home, (_, _, dc) = tree
    sent = {ch: dc.push_message(ch, f"hello guild {i}") for i, ch in ((1, DC_1), (2, DC_2))}
    assert {int(m["guild_id"]) for m in sent.values()} == {GUILD_1, GUILD_2}

    def answered(channel: int, want: str) -> bool:
        return [p["content"] for p in dc.posts(channel)] == [want]

    poll_for(lambda: answered(DC_1, "hello guild 1 (turn 1)"), 90, what="the reply in guild 1")
    poll_for(lambda: answered(DC_2, "hello guild 2 (turn 1)"), 90, what="the reply in guild 2")
    assert pollers(home)["discord"]["ignored"].get("unbound", 0) == 0
