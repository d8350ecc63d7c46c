"""Slack files and Discord attachments on a real `geode serve` tree through slack_sdk and discord.py against
the local servers (issue 31 item 2): a picture shared with text reaches the model as an image block and is
answered once; the file is saved under the chat's workspace (inbox/<message-id>/), 0600, named in the prompt;
Slack's download carries the bot token and Discord's none; a file URL on another host is refused with a clear
reply, nothing requested there (no token leaves).

The tests share one tree and run in file order."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.discord_server import CHANNELS, LocalDiscord
from geode.testing.scripted import ScriptedServer
from geode.testing.slack_server import LocalSlack
from tests.actors.tree_kit import scripted_home
from tests.messengers.chat_tree_kit import pollers, prompt_of
from tests.messengers.platform_tree_kit import platform_sections, serving
from tests.waiting import poll_for

SLACK_CHAN, DC_CHAN = "C0FILES01", CHANNELS[0]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8  # the adapters never decode it
PDF = b"%PDF-1.4\n" + b"0123456789" * 50
REFUSED = "Sorry, I could not fetch that file from the chat; it was not read."
Tree = tuple[GeodeHome, LocalSlack, LocalDiscord, ScriptedServer]


def _reply(req: Any) -> dict[str, Any]:
    last = [m for m in req.body["messages"] if m["role"] == "user"][-1]["content"]
    images = (
        [p for p in last if isinstance(p, dict) and p.get("type") == "image"]
        if isinstance(last, list)
        else []
    )
    if images:
        return {"text": "saw " + " ".join(i["media_type"] + ":" + i["sha256"][:12] for i in req.images)}
    return {"text": "echo: " + prompt_of(req)}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("chat-files")
    with LocalSlack() as slack, LocalDiscord() as dc, ScriptedServer(_reply) as model:
        extra = f"""
{platform_sections(slack=slack, dc=dc)}
[[messengers.bindings]]
platform = "slack"
channel_id = "{SLACK_CHAN}"
[[messengers.bindings]]
platform = "discord"
channel_id = "{DC_CHAN}"
"""
        home = scripted_home(base, model, extra=extra)
        with serving(home, slack=slack, dc=dc):
            yield home, slack, dc, model


def _saved(home: GeodeHome, message_id: str) -> list[Path]:
    return sorted(home.root.glob(f"workspaces/*/inbox/{message_id}/*"))


def _slack_answers(home: GeodeHome, slack: LocalSlack, ts: str) -> list[str] | None:
    texts = [p["text"] for p in slack.posts(SLACK_CHAN) if p.get("thread_ts") == ts]
    return texts if texts and pollers(home)["slack"]["pending_replies"] == 0 else None


def _dc_answers(home: GeodeHome, dc: LocalDiscord, mid: str) -> list[str] | None:
    texts = [p["content"] for p in dc.posts(DC_CHAN) if str(p.get("reply_to")) == mid]
    return texts if texts and pollers(home)["discord"]["pending_replies"] == 0 else None


def test_slack_a_picture_and_a_pdf_reach_the_model_and_are_answered_once(tree: Tree) -> None:
    home, slack, _dc, model = tree
    env = slack.push_file(SLACK_CHAN, name="chart.png", data=PNG, mimetype="image/png", text="look at this")
    ts = env["payload"]["event"]["ts"]
    sha = hashlib.sha256(PNG).hexdigest()
    texts = poll_for(lambda: _slack_answers(home, slack, ts), 60, what="the picture's answer")
    assert texts == [f"saw image/png:{sha[:12]}"]
    (saved,) = _saved(home, ts)
    assert saved.name == "chart.png" and saved.read_bytes() == PNG and saved.stat().st_mode & 0o077 == 0
    (req,) = [r for r in model.requests if r.images]
    assert req.images == [{"media_type": "image/png", "sha256": sha}]
    assert f"[photo saved: {saved} (image/png, {len(PNG):,} bytes)]" in prompt_of(req)
    (got,) = slack.file_host.downloaded()
    assert got["status"] == 200 and got["authorization"] == f"Bearer {slack.bot_token}"

    env = slack.push_file(SLACK_CHAN, name="../../report.pdf", data=PDF)  # a file without text
    ts = env["payload"]["event"]["ts"]
    texts = poll_for(lambda: _slack_answers(home, slack, ts), 60, what="the pdf's answer")
    (saved,) = _saved(home, ts)
    assert saved.name == "____report.pdf" and saved.read_bytes() == PDF
    assert texts == [f"echo: [document saved: {saved} (application/pdf, {len(PDF):,} bytes)]"]


def test_slack_a_file_url_on_another_host_is_refused_and_no_token_leaves(tree: Tree) -> None:
    home, slack, dc, _model = tree
    before = len(slack.file_host.downloaded())
    elsewhere = f"{dc.url}/attachments/1/2/secret.pdf"  # another host: it records any request
    dc.file_host.add("/attachments/1/2/secret.pdf", PDF)
    env = slack.push_file(SLACK_CHAN, name="secret.pdf", data=PDF, url=elsewhere)
    ts = env["payload"]["event"]["ts"]
    texts = poll_for(lambda: _slack_answers(home, slack, ts), 60, what="the refusal")
    assert texts == [REFUSED]
    assert dc.file_host.downloaded() == [] and len(slack.file_host.downloaded()) == before
    assert _saved(home, ts) == []


def test_discord_an_attachment_reaches_the_model_without_a_token_and_another_host_is_refused(
    tree: Tree,
) -> None:
    home, slack, dc, model = tree
    msg = dc.push_file(DC_CHAN, PNG, filename="pic.png", content_type="image/png", content="what is it?")
    sha = hashlib.sha256(PNG).hexdigest()
    texts = poll_for(lambda: _dc_answers(home, dc, msg["id"]), 60, what="the attachment's answer")
    assert texts == [f"saw image/png:{sha[:12]}"]
    (saved,) = _saved(home, msg["id"])
    assert saved.read_bytes() == PNG
    req = [r for r in model.requests if r.images][-1]
    assert prompt_of(req).startswith("what is it?")
    (got,) = dc.file_host.downloaded()
    assert got["status"] == 200 and got["authorization"] == ""  # Discord's CDN gets no token

    before = len(slack.file_host.downloaded())
    msg = dc.push_file(DC_CHAN, PDF, filename="x.pdf", content_type="application/pdf",
                       url=f"{slack.url}/files-pri/T-F1/x.pdf")  # fmt: skip
    texts = poll_for(lambda: _dc_answers(home, dc, msg["id"]), 60, what="the refusal")
    assert texts == [REFUSED]
    assert len(slack.file_host.downloaded()) == before and len(dc.file_host.downloaded()) == 1
