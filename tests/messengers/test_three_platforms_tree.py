"""Telegram, Slack and Discord bound at once in one real `geode serve` tree (the local servers, the real
SDKs): each platform's message gets its reply through the one messenger runtime (`messenger.send` to
"telegram:<chat>", "slack:<channel>:<thread>", "discord:<channel>"), `geode status --json` lists all three
pollers, and when one poller actor keeps failing (its platform refuses the token: the translator raises,
the poller is restarted in-process again and again) the other two keep answering."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from geode.home import GeodeHome
from geode.messengers.bot_api_server import LocalBotApi
from geode.messengers.discord_server import CHANNELS, LocalDiscord
from geode.messengers.slack_server import LocalSlack
from geode.providers.scripted import ScriptedServer
from tests.actors.tree_kit import scripted_home, serve, stop
from tests.messengers.chat_tree_kit import echo_or_write, pollers, status_messengers
from tests.waiting import poll_for

TG_CHAT, SLACK_CHAN, DC_CHAN = -100321, "C0THREE01", CHANNELS[0]
Servers = tuple[LocalBotApi, LocalSlack, LocalDiscord]


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
[[messengers.bindings]]
platform = "telegram"
channel_id = "{TG_CHAT}"
[[messengers.bindings]]
platform = "slack"
channel_id = "{SLACK_CHAN}"
[[messengers.bindings]]
platform = "discord"
channel_id = "{DC_CHAN}"
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, Servers]]:
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
            yield home, (tg, slack, dc)
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


def test_all_three_platforms_answer_and_status_lists_them(tree: tuple[GeodeHome, Servers]) -> None:
    home, servers = tree
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


def test_one_poller_failing_again_and_again_does_not_stop_the_other_two(
    tree: tuple[GeodeHome, Servers],
) -> None:
    home, servers = tree
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
