"""The hand demos of docs/messengers.md run as written: each ``config.toml`` block is a valid config pointing
at its local server's default port (the three distinct), and every curl line of the file is sent as curl
sends it (parsed, not shelled out) to the local servers, in order, with the platform's real SDK client
(GEODE's translator) reading them: each message arrives as a message the doc's binding takes as a turn, and
each button press arrives as the press of the approval GEODE opened there, by a sender that binding lets
approve. The test stands in for `geode serve` only in posting the approval keyboard, as its outbox does."""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import tomllib
import urllib.request
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pytest

from geode.config_schema import GeodeConfig
from geode.messengers.approvals import ApprovalBoard, ask_parts, parse_data
from geode.messengers.bindings import Bindings, Turn
from geode.messengers.discord import DiscordTranslator
from geode.messengers.model import CallbackPress, InboundMessage
from geode.messengers.slack import SlackTranslator
from geode.messengers.telegram import TelegramTranslator
from geode.protocol import lanes as lanes_msg
from geode.testing import bot_api_server, discord_server, slack_server
from tests.actors.tree_kit import ROOT

DOC = ROOT / "docs" / "messengers.md"
SECTION = "## Hand demos with the local servers"
PORTS = {
    "telegram": bot_api_server.DEFAULT_PORT,
    "slack": slack_server.DEFAULT_PORT,
    "discord": discord_server.DEFAULT_PORT,
}


@dataclass
class Curl:
    url: str  # as written: host:port/path?query
    data: str | None

    @property
    def port(self) -> int:
        return int(re.match(r"(?:https?://)?[^/:]+:(\d+)/", self.url).group(1))  # type: ignore[union-attr]

    @property
    def path(self) -> str:
        return "/" + self.url.split("/", 1 if "://" not in self.url else 3)[-1]

    def body(self) -> dict[str, Any]:
        return json.loads(self.data) if self.data else {}


def _blocks(text: str, lang: str = "") -> list[str]:
    """The fenced blocks opened with ```<lang> (``lang`` "": a bare fence)."""
    out: list[str] = []
    inside: list[str] | None = None
    opened = ""
    for line in text.splitlines():
        if inside is None and line.startswith("```"):
            inside, opened = [], line[3:].strip()
        elif inside is not None and line.startswith("```"):
            if opened == lang:
                out.append("\n".join(inside))
            inside = None
        elif inside is not None:
            inside.append(line)
    return out


def curl_lines(text: str) -> list[Curl]:
    """Every curl command of the file's fenced blocks (a quoted argument may run onto the next lines)."""
    out = []
    for block in _blocks(text):
        lines = block.splitlines()
        while lines:
            cmd = lines.pop(0)
            if not cmd.startswith("curl "):
                continue
            while True:
                try:
                    argv = shlex.split(cmd, comments=True)
                    break
                except ValueError:  # an open quote: the command goes on
                    assert lines, f"a curl line never closes its quote: {cmd!r}"
                    cmd += "\n" + lines.pop(0)
            urls = [a for a in argv[1:] if not a.startswith("-") and "/" in a]
            data = argv[argv.index("-d") + 1] if "-d" in argv else None
            assert len(urls) == 1 and set(argv[1:]) - {*urls, data} <= {"-s", "-d"}, argv
            out.append(Curl(urls[0], data))
    return out


def send(base: str, curl: Curl) -> Any:
    """The request curl makes: POST with the body form-encoded (its default type) under ``-d``, else GET."""
    data = None if curl.data is None else curl.data.encode()
    req = urllib.request.Request(base + curl.path, data=data)
    if data is not None:
        req.add_header("Content-Type", "application/x-www-form-urlencoded")
    with urllib.request.urlopen(req, timeout=10) as resp:
        assert resp.status == 200, (curl, resp.status)
        answer = json.loads(resp.read())
    assert answer.get("ok", True) is True and "message" not in answer, (curl, answer)
    return answer.get("result")


def demo_configs() -> dict[str, GeodeConfig]:
    """Each platform's config.toml block of the demo section, validated as `geode serve` would."""
    section = DOC.read_text().split(SECTION, 1)[1].split("\n## ", 1)[0]
    configs: dict[str, GeodeConfig] = {}
    for block in _blocks(section, "toml"):
        config = GeodeConfig.from_raw(tomllib.loads(block))
        [binding] = config.messengers.bindings
        configs[binding.platform] = config
    return configs


def test_the_local_servers_default_to_distinct_ports_that_the_demo_configs_use() -> None:
    assert len(set(PORTS.values())) == 3, PORTS
    configs = demo_configs()
    assert set(configs) == set(PORTS)
    m = {p: c.messengers for p, c in configs.items()}
    assert m["telegram"].telegram.base_url == f"http://127.0.0.1:{PORTS['telegram']}/bot"
    assert m["slack"].slack.base_url == f"http://127.0.0.1:{PORTS['slack']}/api/"
    assert m["discord"].discord.base_url == f"http://127.0.0.1:{PORTS['discord']}/api/v10"
    assert m["discord"].discord.gateway_url == f"ws://127.0.0.1:{PORTS['discord']}/gw"
    lines = curl_lines(DOC.read_text())
    assert {c.port for c in lines} == set(PORTS.values())
    presses = [c for c in lines if c.path.startswith("/_local/press")]
    assert sorted(c.port for c in presses) == sorted(PORTS.values())  # one approval press per platform


@dataclass
class Demo:
    platform: str
    base: str
    tr: Any
    key_of: Callable[[InboundMessage], str]  # where GEODE asks a turn's approval
    cursor: Any = None
    seen: list[Any] = field(default_factory=list)

    async def next_item(self, want: Callable[[Any], bool]) -> Any:
        async with asyncio.timeout(15):
            while True:
                for item in self.seen:
                    if want(item):
                        self.seen.remove(item)
                        return item
                batch = await self.tr.poll(self.cursor)
                if self.platform == "telegram":
                    self.cursor = batch.next_cursor or self.cursor
                self.seen.extend(item for _, item in batch.items if item is not None)


@pytest.fixture
async def demos() -> AsyncIterator[dict[int, Demo]]:
    async with AsyncExitStack() as stack:
        tg = stack.enter_context(bot_api_server.LocalBotApi())
        slack = stack.enter_context(slack_server.LocalSlack(redeliver_after_s=60))
        dc = stack.enter_context(discord_server.LocalDiscord())
        tg_tr = TelegramTranslator(tg.token, base_url=tg.base_url, poll_timeout_s=1)
        slack_tr = SlackTranslator(slack.bot_token, slack.app_token, base_url=slack.api_url, poll_timeout_s=1)
        dc_tr = DiscordTranslator(
            dc.token, base_url=dc.api_base, gateway_url=dc.gateway_url, poll_timeout_s=1,
            connect_timeout_s=10, guild_ready_timeout_s=0.05,
        )  # fmt: skip
        for tr in (tg_tr, slack_tr, dc_tr):
            stack.push_async_callback(tr.close)
            await tr.start()
        yield {
            PORTS["telegram"]: Demo("telegram", tg.url, tg_tr, lambda m: m.channel_key),
            PORTS["slack"]: Demo("slack", slack.url, slack_tr, lambda m: f"{m.chat_id}:{m.message_id}"),
            PORTS["discord"]: Demo("discord", dc.url, dc_tr, lambda m: m.channel_key),
        }


def _is_message(text: str, item: Any) -> bool:
    return isinstance(item, InboundMessage) and item.text == text


def _is_press(item: Any) -> bool:
    return isinstance(item, CallbackPress)


async def test_every_curl_line_does_what_the_doc_says(demos: dict[int, Demo]) -> None:
    configs = demo_configs()
    board = ApprovalBoard()
    last_turn: dict[int, InboundMessage] = {}
    pressed = []
    for n, curl in enumerate(curl_lines(DOC.read_text())):
        demo = demos[curl.port]
        bindings = Bindings(configs[demo.platform].messengers.bindings)
        body, name = curl.body(), curl.path.split("?")[0].removeprefix("/_local/")
        if name == "press":  # geode serve asked an approval of the last turn's chat: its keyboard is there
            turn = last_turn[curl.port]
            ask = lanes_msg.ApprovalAsk(
                approval_id=f"ap-{n}", session_id="s", turn_id=turn.message_id, tool_name="write_file",
                detail='{"file_path": "note.txt", "content": "hi"}', always_covers="write_file here",
            )  # fmt: skip
            text = ask_parts(ask, demo.platform)[-1]
            _, buttons = board.open(ask, demo.key_of(turn), text)
            await demo.tr.ask_approval(demo.key_of(turn), text, buttons)
        result = await asyncio.to_thread(send, demo.base, curl)
        if name == "push_message":
            said = str(body.get("text", body.get("content")))
            msg = await demo.next_item(partial(_is_message, said))
            if not msg.edited:  # an edit is a turn only with on_edit = "rerun", as the line says
                assert isinstance(bindings.classify(msg, bot_username="geode_test_bot"), Turn), (curl, msg)
                last_turn[curl.port] = msg
        elif name == "press":
            press = await demo.next_item(_is_press)
            token, decision = parse_data(press.data) or ("", "")
            opened = board.get(token)
            assert opened is not None and opened.approval_id == f"ap-{n}" and decision == "y", (curl, press)
            binding = bindings.find_channel(demo.platform, press.channel_key)
            assert binding is not None and Bindings.may_approve(binding, press.sender_id), (curl, press)
            pressed.append(demo.platform)
        elif name == "posts":
            assert isinstance(result, list)
    assert sorted(pressed) == ["discord", "slack", "telegram"]
