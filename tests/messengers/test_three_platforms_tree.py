"""Telegram, Slack and Discord bound at once in one real `geode serve` tree (the local servers, the real
SDKs): each platform's message gets its reply through the one messenger runtime (`messenger.send` to
"telegram:<chat>", "slack:<channel>:<thread>", "discord:<channel>"), `geode status --json` lists all three
pollers, and when one poller actor keeps failing (its platform refuses the token: the translator raises,
the poller is restarted in-process again and again) the other two keep answering."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.discord_server import CHANNELS, LocalDiscord
from geode.testing.scripted import ScriptedServer
from geode.testing.slack_server import LocalSlack
from tests.actors.tree_kit import geode, scripted_home, serve, stop
from tests.messengers.chat_tree_kit import echo_or_write, pollers, prompt_of, status_messengers
from tests.waiting import poll_for

TG_CHAT, SLACK_CHAN, DC_CHAN = -100321, "C0THREE01", CHANNELS[0]
TG_B, TG_UNBOUND = -100322, -100999  # a second bound Telegram chat (TG_CHAT's send_to), an unbound one
Servers = tuple[LocalBotApi, LocalSlack, LocalDiscord]
Tree = tuple[GeodeHome, Servers, ScriptedServer]


def _config(tg: LocalBotApi, slack: LocalSlack, dc: LocalDiscord) -> str:
    return f"""
[messengers.telegram]
base_url = "{tg.base_url}"
poll_timeout_s = 1
[messengers.slack]
base_url = "{slack.api_url}"
poll_timeout_s = 1
[messengers.discord]
base_url = "{dc.api_base}"
gateway_url = "{dc.gateway_url}"
poll_timeout_s = 1
[tools.send_message]
max_per_turn = 3
[[messengers.bindings]]
platform = "telegram"
channel_id = "{TG_CHAT}"
send_to = ["telegram:{TG_B}"]
[[messengers.bindings]]
platform = "telegram"
channel_id = "{TG_B}"
[[messengers.bindings]]
platform = "slack"
channel_id = "{SLACK_CHAN}"
[[messengers.bindings]]
platform = "discord"
channel_id = "{DC_CHAN}"
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("three")
    ws = base / "ws"
    ws.mkdir()
    with (
        LocalBotApi() as tg,
        LocalSlack(redeliver_after_s=5.0) as slack,
        LocalDiscord() as dc,
        ScriptedServer(echo_or_write(ws)) as model,
    ):
        home = scripted_home(base, model, ws, extra=_config(tg, slack, dc))
        with home.env_file.open("a") as f:
            f.write(
                f"TELEGRAM_BOT_TOKEN={tg.token}\nSLACK_BOT_TOKEN={slack.bot_token}\n"
                f"SLACK_APP_TOKEN={slack.app_token}\nDISCORD_BOT_TOKEN={dc.token}\n"
            )
        try:
            serve(home, cwd=ws)
            poll_for(dc.connected, 60, what="the Discord bot on the gateway")
            yield home, (tg, slack, dc), model
        finally:
            stop(home)


def _ask_all(servers: Servers, text: str) -> None:
    tg, slack, dc = servers
    tg.push_message(TG_CHAT, f"{text} via telegram", sender_id=1001)
    slack.push_message(SLACK_CHAN, f"{text} via slack")
    dc.push_message(DC_CHAN, f"{text} via discord")


def _answers(servers: Servers, text: str) -> dict[str, int]:
    tg, slack, dc = servers
    return {
        "telegram": sum(f"echo: {text} via telegram" == p["text"] for p in tg.posts(TG_CHAT)),
        "slack": sum(f"echo: {text} via slack" == p["text"] for p in slack.posts(SLACK_CHAN)),
        "discord": sum(f"echo: {text} via discord" == p["content"] for p in dc.posts(DC_CHAN)),
    }


def test_all_three_platforms_answer_and_status_lists_them(tree: Tree) -> None:
    home, servers, _ = tree
    _ask_all(servers, "hello")
    poll_for(lambda: all(_answers(servers, "hello").values()), 90, what="a reply on every platform")
    poll_for(
        lambda: all(p["pending_replies"] == 0 for p in pollers(home).values()),
        30,
        what="every reply settled",
        swallow=(AssertionError,),
    )
    assert _answers(servers, "hello") == {"telegram": 1, "slack": 1, "discord": 1}
    views = status_messengers(home)
    assert sorted(views) == ["discord", "slack", "telegram"]
    for platform, view in views.items():
        assert view["state"] == "polling" and view["in"] == 1 and view["replies_out"] == 1, (platform, view)


def _tg_texts(tg: LocalBotApi, chat: int) -> list[str]:
    return [p["text"] for p in tg.posts(chat)]


def _has(texts: list[str], part: str) -> int:
    return sum(part in t for t in texts)


def _results(model: ScriptedServer, prompt: str) -> list[str]:
    """The tool results the model got for the turn whose prompt is ``prompt`` (a chat's session keeps the
    earlier turns before it)."""
    for req in reversed(model.requests):
        last = req.body["messages"][-1].get("content") if isinstance(req.body, dict) else None
        if prompt_of(req) == prompt and isinstance(last, list):
            return [json.dumps(b) for b in last if b.get("type") == "tool_result"]
    return []


def test_a_chat_turn_posts_only_to_its_own_chat_and_its_send_to_and_at_most_max_per_turn(tree: Tree) -> None:
    """Breach 7: chat B's turn (the model proposing send_message into chat A, a fake approval text) is denied
    with a clear tool error and nothing reaches A; chat A's binding lists B in send_to, so A's turn posts
    there; a flood from A into its own chat stops at [tools.send_message] max_per_turn (3 here)."""
    home, (tg, _slack, _dc), model = tree
    fake = "FAKE Approve the tool run_bash? press Approve"
    tg.push_message(TG_B, f"send telegram:{TG_CHAT} {fake}", sender_id=1001)
    poll_for(lambda: _has(_tg_texts(tg, TG_B), "tool result:"), 90, what="chat B's turn answered")
    [denied] = _results(model, f"send telegram:{TG_CHAT} {fake}")
    assert "send_message_denied" in denied and "own chat" in denied and "Nothing was posted" in denied, denied
    assert not _has(_tg_texts(tg, TG_CHAT), fake)

    tg.push_message(TG_CHAT, f"send telegram:{TG_B} hello B from A", sender_id=1001)
    poll_for(lambda: _has(_tg_texts(tg, TG_B), "hello B from A"), 90, what="A's post in B (send_to)")

    flood = f"flood 5 telegram:{TG_CHAT}"
    tg.push_message(TG_CHAT, flood, sender_id=1001)
    poll_for(lambda: len(_results(model, flood)) == 5, 90, what="the flood's five results")
    settled = lambda: pollers(home)["telegram"]["pending_replies"] == 0  # noqa: E731
    poll_for(settled, 30, what="settled", swallow=(AssertionError,))
    assert sum(t.startswith("flood ") for t in _tg_texts(tg, TG_CHAT)) == 3
    capped = [r for r in _results(model, flood) if "max_per_turn" in r]
    assert len(capped) == 2 and all("send_message_denied" in r for r in capped), capped


def test_a_cli_session_asks_before_send_message(tree: Tree) -> None:
    """Breach 7: an IPC turn's send_message (even to a bound chat) asks; `geode ask` without a terminal
    cannot ask, so it is denied as such (not as a person's "no", exit 77) and nothing is posted."""
    home, (tg, _slack, _dc), model = tree
    r = geode(home, "ask", f"send telegram:{TG_B} from the cli", "--json", timeout=90)
    assert r.returncode == 77, r.stdout + r.stderr
    [result] = _results(model, f"send telegram:{TG_B} from the cli")
    assert "'send_message' needs approval and nobody could be asked" in result, result
    assert not _has(_tg_texts(tg, TG_B), "from the cli")


def test_a_telegram_message_that_cannot_be_handled_gets_one_error_and_the_poller_goes_on(tree: Tree) -> None:
    """Breach 8: a Telegram message over 64 KiB and one with a lone surrogate each get one short error (none
    in an unbound chat) and are counted in `geode messengers --json`; the next message gets its answer."""
    home, (tg, _slack, _dc), _model = tree
    tg.push_message(TG_UNBOUND, "y" * (64 * 1024 + 1), sender_id=1001)
    tg.push_message(TG_CHAT, "x" * (64 * 1024 + 1), sender_id=1001)
    tg.push_message(TG_CHAT, "lone \ud800 surrogate", sender_id=1001)
    tg.push_message(TG_CHAT, "after the bad ones", sender_id=1001)
    poll_for(lambda: _has(_tg_texts(tg, TG_CHAT), "echo: after the bad ones"), 90, what="the next message")
    errors = ("too long", "not valid Unicode")
    poll_for(lambda: all(_has(_tg_texts(tg, TG_CHAT), e) for e in errors), 60, what="the two error replies")
    settled = lambda: pollers(home)["telegram"]["pending_replies"] == 0  # noqa: E731
    poll_for(settled, 30, what="settled", swallow=(AssertionError,))
    texts = _tg_texts(tg, TG_CHAT)
    assert _has(texts, "too long") == 1 and _has(texts, "not valid Unicode") == 1, texts
    assert tg.posts(TG_UNBOUND) == []  # never to a stranger's chat
    r = geode(home, "messengers", "--json")
    assert r.returncode == 0, r.stderr
    view = next(p for p in json.loads(r.stdout)["platforms"] if p["platform"] == "telegram")
    assert view["unhandled"] == {"too_long": 2, "bad_text": 1} and view["state"] == "polling", view


def test_a_bad_message_on_discord_or_slack_is_answered_and_the_next_one_too(tree: Tree) -> None:
    """Breach 8 on the push platforms: a message with a lone surrogate gets one short error and the message
    after it its answer (Discord dropped the messages after it)."""
    home, (_tg, slack, dc), _model = tree
    dc.push_message(DC_CHAN, "lone \ud800 on discord")
    dc.push_message(DC_CHAN, "good after bad via discord")
    slack.push_message(SLACK_CHAN, "lone \ud800 on slack")
    slack.push_message(SLACK_CHAN, "good after bad via slack")
    poll_for(
        lambda: [p for p in dc.posts(DC_CHAN) if p["content"] == "echo: good after bad via discord"],
        90,
        what="Discord's next message answered",
    )
    poll_for(
        lambda: [p for p in slack.posts(SLACK_CHAN) if p["text"] == "echo: good after bad via slack"],
        90,
        what="Slack's next message answered",
    )
    poll_for(
        lambda: all(pollers(home)[p]["pending_replies"] == 0 for p in ("discord", "slack")), 30,
        what="settled", swallow=(AssertionError,),
    )  # fmt: skip
    assert sum("not valid Unicode" in p["content"] for p in dc.posts(DC_CHAN)) == 1
    assert sum("not valid Unicode" in p["text"] for p in slack.posts(SLACK_CHAN)) == 1
    views = pollers(home)
    assert views["discord"]["unhandled"] == {"bad_text": 1} == views["slack"]["unhandled"], views


def test_one_poller_failing_again_and_again_does_not_stop_the_other_two(tree: Tree) -> None:
    home, servers, _ = tree
    tg, _slack, _dc = servers
    tg.fail_next("getUpdates", status=401, description="Unauthorized", count=10_000)  # the token is refused
    poll_for(
        lambda: pollers(home)["telegram"]["restarts"] >= 2,
        60,
        what="the Telegram poller failing and restarted",
        swallow=(AssertionError,),
    )
    _ask_all(servers, "still there")
    poll_for(
        lambda: (a := _answers(servers, "still there"))["slack"] and a["discord"],
        90,
        what="Slack and Discord answering while Telegram fails",
    )
    views = status_messengers(home)
    assert views["telegram"]["state"] in ("failed", "starting") and views["telegram"]["last_error"]
    assert views["telegram"]["restarts"] >= 2
    assert views["slack"]["state"] == views["discord"]["state"] == "polling"
    assert _answers(servers, "still there") == {"telegram": 0, "slack": 1, "discord": 1}
