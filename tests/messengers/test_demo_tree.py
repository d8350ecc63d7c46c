"""The hand demos of docs/messengers.md end to end on a served tree (GEODE_SLOW=1; ~20 s): the doc's three
``config.toml`` blocks (their ports moved to free ones), the README's offline model, `geode serve`, then every
curl line of the doc in order, as curl sends it: each message is answered, "write note.txt hi" asks its
approval with a keyboard, the press approves it (the keyboard says so), the file lands in that chat's
workspace and the answer follows; the sticker gets its "not supported" reply. The fast check of the same
lines, without a tree, is test_demo_curl_lines.py."""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from geode.testing import bot_api_server, discord_server, offline_model, slack_server
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import make_home
from tests.messengers.platform_tree_kit import serving
from tests.messengers.test_demo_curl_lines import DOC, PORTS, SECTION, _blocks, curl_lines, send
from tests.waiting import poll_for

pytestmark = pytest.mark.skipif(not os.environ.get("GEODE_SLOW"), reason="a served tree: GEODE_SLOW=1")


def _texts(server: Any) -> list[str]:
    """The bot's posts in their current state (edits applied), as text."""
    if isinstance(server, slack_server.LocalSlack):
        return [p["text"] for p in server.posts()]
    if isinstance(server, discord_server.LocalDiscord):
        return [p["content"] for p in server.posts()]
    return [p["text"] for p in server.posts()]


def _shows(expect: Callable[[list[str]], bool], server: Any) -> bool:
    return expect(_texts(server))


def test_the_demos_run_as_written_on_a_served_tree(tmp_path: Path) -> None:
    text = DOC.read_text()
    section = text.split(SECTION, 1)[1].split("\n## ", 1)[0]
    with (
        bot_api_server.LocalBotApi() as tg,
        slack_server.LocalSlack() as slack,
        discord_server.LocalDiscord() as dc,
        ScriptedServer(offline_model.reply) as model,
    ):
        by_port: dict[int, Any] = {PORTS["telegram"]: tg, PORTS["slack"]: slack, PORTS["discord"]: dc}
        config = (
            f'[providers]\nmodel = "claude-offline"\n[providers.anthropic]\nbase_url = "{model.base_url}"\n'
        )
        for block in _blocks(section, "toml"):
            for port, server in by_port.items():
                block = block.replace(f"127.0.0.1:{port}", f"127.0.0.1:{server.port}")
            tomllib.loads(block)
            config += block + "\n"
        home = make_home(tmp_path, config)
        home.env_file.write_text("ANTHROPIC_API_KEY=offline\n")
        with serving(home, tg, slack, dc):
            poll_for(lambda: tg.polling and slack.connections() > 0, 60, what="the Telegram and Slack bots")
            for curl in curl_lines(text):
                server = by_port[curl.port]
                before = len(_texts(server))
                body, name = curl.body(), curl.path.split("?")[0].removeprefix("/_local/")
                send(server.url, curl)
                said = str(body.get("text", body.get("content", "")))
                expect: Callable[[list[str]], bool] | None = None
                if name == "push_message" and said.startswith("write "):  # the keyboard is its answer
                    expect = lambda ts, n=before: len(ts) > n and "Approve the tool 'write_file'" in ts[-1]  # noqa: E731
                elif name == "push_message" and not body.get("edited"):
                    expect = lambda ts, n=before: len(ts) > n  # noqa: E731
                elif name == "press":
                    expect = lambda ts: (  # noqa: E731
                        any("Approved by" in t for t in ts) and any("write_file returned" in t for t in ts)
                    )
                elif name == "push_sticker":
                    expect = lambda ts: any("sticker" in t for t in ts)  # noqa: E731
                if expect is not None:
                    poll_for(partial(_shows, expect, server), 60, what=f"what {curl.url} does")
        for chat in ("telegram--1001", "slack-C0GENERAL1", "discord-1300000000000000001"):
            assert (home.root / "workspaces" / chat / "note.txt").read_text().strip() == "hi"
