"""The messengers child's service in one process (a poller over fakes behind the real pykka actor and runner):
``messenger.send`` posts only to bound chats and never the same idempotency key twice, a platform without a
token is disabled with the reason while the child still serves, and ``runtime.status`` shows each poller."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.messengers import (
    MessengersChild,
    MessengersProcess,
    PlatformActor,
    make_translator,
    start_messengers,
)
from actors.tree.registry import ChildContext
from geode.home import GeodeHome
from geode.messengers.bindings import Bindings
from geode.messengers.config import MessengersSection
from geode.messengers.discord import DiscordTranslator
from geode.messengers.errors import PlatformError
from geode.messengers.slack import SlackTranslator
from geode.protocol import catalog, runtime
from geode.protocol import messengers as messengers_msg
from geode.protocol.envelope import Envelope
from geode.protocol.errors import BadRequest, ErrorCode, GeodeError, Unavailable
from geode.protocol.transport import Request
from tests.messengers.poller_fakes import BINDINGS, Rig
from tests.waiting import poll_for


def req(type_: str, body: Any) -> Request:
    env = Envelope(type=type_, body=catalog.dump(body), **{"from": "executor#1"})
    return Request(env, catalog.parse_body(type_, env.body))


def send(channel: str, key: str, text: str = "hello") -> messengers_msg.SendMessage:
    return messengers_msg.SendMessage(channel=channel, recipient="x", text=text, idempotency_key=key)


@pytest.fixture
def child() -> Iterator[tuple[MessengersChild, Rig]]:
    rig = Rig()
    section = MessengersSection(bindings=BINDINGS)
    c = MessengersChild("messengers", 1, section, Bindings(section.bindings))
    c.pollers["telegram"], c.runners["telegram"] = rig.poller, rig.runner
    c.actors["telegram"] = PlatformActor.start(rig.runner)
    poll_for(lambda: rig.poller.ready.is_set(), 5, what="the poller started")
    try:
        yield c, rig
    finally:
        c.actors["telegram"].stop()


def test_send_posts_to_a_bound_chat_once_per_key(child: tuple[MessengersChild, Rig]) -> None:
    c, rig = child
    d = c.dispatch()
    out = messengers_msg.MessageSent.model_validate(
        d.handle(req(messengers_msg.SEND, send("telegram:100", "k1")))
    )
    assert out.message_ids and not out.duplicate
    again = messengers_msg.MessageSent.model_validate(
        d.handle(req(messengers_msg.SEND, send("telegram:100", "k1")))
    )
    assert again.duplicate and again.message_ids == out.message_ids
    assert [p[:2] for p in rig.translator.posts] == [("100", "hello")]
    with pytest.raises(BadRequest, match="not a bound chat"):
        d.handle(req(messengers_msg.SEND, send("telegram:300", "k2")))
    with pytest.raises(Unavailable, match="no messenger platform is enabled for 'slack'"):
        d.handle(req(messengers_msg.SEND, send("slack:C0123", "k3")))
    assert len(rig.translator.posts) == 1


def test_a_post_that_may_have_gone_out_is_never_sent_again(child: tuple[MessengersChild, Rig]) -> None:
    c, rig = child
    d = c.dispatch()
    rig.translator.fail("send_text", PlatformError("connection reset"))
    with pytest.raises(GeodeError) as first:
        d.handle(req(messengers_msg.SEND, send("telegram:100", "k9")))
    assert first.value.code == ErrorCode.INTERNAL  # the executor marks the receipt uncertain
    with pytest.raises(GeodeError) as second:
        d.handle(req(messengers_msg.SEND, send("telegram:100", "k9")))
    assert second.value.code == ErrorCode.CONFLICT and rig.translator.posts == []


def test_status_shows_the_poller(child: tuple[MessengersChild, Rig]) -> None:
    c, _rig = child
    reply = c.dispatch().handle(req(runtime.STATUS, runtime.StatusQuery()))
    assert isinstance(reply, runtime.StatusReply)
    (tg,) = reply.detail["platforms"]
    assert tg["platform"] == "telegram" and tg["state"] in ("starting", "polling")
    assert {"last_poll_ok_at", "cursor", "in", "ignored", "replies_out", "last_error"} <= set(tg)


def test_without_a_token_the_platform_is_disabled_and_the_child_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in ("TELEGRAM_BOT_TOKEN", "SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "DISCORD_BOT_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    home = GeodeHome(tmp_path / "gh").ensure()
    ctx = ChildContext("messengers", 1, home)
    proc = start_messengers(None, ctx)  # type: ignore[arg-type]  # no bus is touched without a token
    d = proc.child.dispatch()
    reply = d.handle(req(runtime.STATUS, runtime.StatusQuery()))
    assert isinstance(reply, runtime.StatusReply)
    views = {p["platform"]: p for p in reply.detail["platforms"]}
    assert sorted(views) == ["discord", "slack", "telegram"]
    assert all(v["state"] == "disabled" for v in views.values())
    assert "TELEGRAM_BOT_TOKEN" in views["telegram"]["reason"]
    assert "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are not set" in views["slack"]["reason"]
    assert "DISCORD_BOT_TOKEN" in views["discord"]["reason"]
    with pytest.raises(Unavailable, match="TELEGRAM_BOT_TOKEN"):
        d.handle(req(messengers_msg.SEND, send("telegram:100", "k1")))
    assert isinstance(d.handle(req(runtime.PING, runtime.Ping())), runtime.Pong)


def test_each_platform_gets_its_translator_from_its_own_tokens() -> None:
    section = MessengersSection.model_validate({"slack": {"base_url": "http://127.0.0.1:9/api"}})
    only_bot = make_translator("slack", section, environ={"SLACK_BOT_TOKEN": "xoxb-1"}, dotenv={})
    assert only_bot == "SLACK_APP_TOKEN is not set (environment or $GEODE_HOME/.env)"
    slack = make_translator(
        "slack", section, environ={"SLACK_BOT_TOKEN": "xoxb-1"}, dotenv={"SLACK_APP_TOKEN": "xapp-1"}
    )
    assert isinstance(slack, SlackTranslator) and slack.platform == "slack"
    discord = make_translator("discord", section, environ={}, dotenv={"DISCORD_BOT_TOKEN": "d.t"})
    assert isinstance(discord, DiscordTranslator) and discord.platform == "discord"
    off = MessengersSection.model_validate({"discord": {"enabled": False}})
    assert make_translator("discord", off, environ={"DISCORD_BOT_TOKEN": "d.t"}, dotenv={}) == (
        "enabled = false in [messengers.discord]"
    )


def test_a_send_while_the_platform_is_still_starting_waits_for_it_and_posts() -> None:
    """The child serves its endpoint before it starts the platforms' actors: a reply delivered in that window
    (a scheduled job's, after a messengers restart) is posted once the platform is up, not refused as if the
    platform were not enabled (which the executor settles as not posted: the job's delivery_failed)."""
    rig = Rig()
    section = MessengersSection(bindings=BINDINGS)
    c = MessengersChild("messengers", 1, section, Bindings(section.bindings))
    c.pollers["telegram"], c.runners["telegram"] = rig.poller, rig.runner
    starting = threading.Timer(0.3, lambda: MessengersProcess(c, None).start())  # type: ignore[arg-type]
    starting.start()
    try:
        out = c.dispatch().handle(req(messengers_msg.SEND, send("telegram:100", "k-start")))
        assert messengers_msg.MessageSent.model_validate(out).message_ids
        assert [p[:2] for p in rig.translator.posts] == [("100", "hello")]
    finally:
        starting.join()
        poll_for(lambda: "telegram" in c.actors, 5, what="the platform started")
        c.actors["telegram"].stop()
