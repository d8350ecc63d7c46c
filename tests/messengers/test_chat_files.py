"""Slack and Discord file URLs are checked before any request (geode/messengers/chat_files.py): Slack's bot
token goes only to files.slack.com over https or to the configured API base's own host; Discord attachments
only from its CDN hosts or the API base's host; anything else is refused with a named error."""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace

import pytest

from geode.messengers.chat_files import (
    DISCORD_FILE_HOSTS,
    SLACK_FILE_HOSTS,
    UnsafeFileUrl,
    checked_url,
    discord_attachments,
    fetch_slack,
    slack_attachments,
)
from geode.messengers.errors import Rejected
from geode.messengers.model import Unhandled
from geode.messengers.slack_text import normalise
from geode.testing.slack_server import LocalSlack

BASE = "https://slack.com/api/"


@pytest.mark.parametrize(
    "url",
    [
        "https://files.slack.com/files-pri/T1-F1/a.png",
        "http://127.0.0.1:8123/files-pri/T1-F1/a.png",  # the configured base's own host and port
    ],
)
def test_slack_file_hosts_are_taken(url: str) -> None:
    base = "http://127.0.0.1:8123/api/" if url.startswith("http:") else BASE
    assert checked_url(url, SLACK_FILE_HOSTS, base) == url


@pytest.mark.parametrize(
    "url",
    [
        "http://files.slack.com/files-pri/T1-F1/a.png",  # not https: the token would go in clear
        "https://files.slack.com.evil.example/a.png",
        "https://files.slack.com@evil.example/a.png",
        "https://evil.example/files.slack.com/a.png",
        "https://files.slack.com:8443/a.png",
        "http://127.0.0.1:9999/files-pri/a.png",  # the base's host, another port
        "file:///etc/passwd",
        "",
    ],
)
def test_other_hosts_are_refused_before_any_request(url: str) -> None:
    with pytest.raises(UnsafeFileUrl, match="not on the platform's file host"):
        checked_url(url, SLACK_FILE_HOSTS, "http://127.0.0.1:8123/api/")


def test_discord_cdn_hosts_and_attachments() -> None:
    base = "https://discord.com/api/v10"
    for host in ("cdn.discordapp.com", "media.discordapp.net"):
        checked_url(f"https://{host}/attachments/1/2/a.png?ex=1&hm=2", DISCORD_FILE_HOSTS, base)
    with pytest.raises(UnsafeFileUrl):
        checked_url("https://discord.com.evil.example/a.png", DISCORD_FILE_HOSTS, base)
    msg = SimpleNamespace(
        attachments=[
            SimpleNamespace(url="https://cdn.discordapp.com/a/b/p.png", filename="p.png",
                            content_type="image/png", size=10),
            SimpleNamespace(url="https://cdn.discordapp.com/a/b/n", filename="", content_type=None, size=3),
        ]
    )  # fmt: skip
    photo, doc = discord_attachments(msg)
    assert (photo.kind, photo.media_type, photo.file_name) == ("photo", "image/png", "p.png")
    assert (doc.kind, doc.media_type, doc.file_name) == ("document", "application/octet-stream", "file")


def test_a_slack_file_event_without_a_readable_file_is_a_notice_not_an_empty_turn() -> None:
    event = {"type": "message", "subtype": "file_share", "channel": "C1", "user": "U1", "ts": "1.0",
             "text": "", "files": [{"id": "F1", "file_access": "check_file_info"}]}  # fmt: skip
    payload = {"type": "event_callback", "event": event}
    item = normalise("events_api", payload, bot_id="UBOT", bot_name="geode")
    assert isinstance(item, Unhandled) and (item.reason, item.kind) == ("unsupported", "file")


def test_a_slack_sign_in_page_is_refused_and_nothing_kept(tmp_path: Path) -> None:
    """Slack answers a private file asked with a token it will not honour (no files:read scope) with 200 and
    its sign-in page: that page is never saved as the file; the right token gets the bytes."""
    with LocalSlack() as slack:
        event = slack.push_file("C1", name="a.pdf", data=b"%PDF-1.4 x")["payload"]["event"]
        (att,) = slack_attachments(event)
        dest = tmp_path / "a.pdf"
        with pytest.raises(Rejected, match="answered a web page"):
            asyncio.run(fetch_slack(att, dest, 1_000, token="xoxb-wrong", base_url=slack.api_url))
        assert list(tmp_path.iterdir()) == []
        got = asyncio.run(fetch_slack(att, dest, 1_000, token=slack.bot_token, base_url=slack.api_url))
        assert dest.read_bytes() == b"%PDF-1.4 x" and got.size == 10
        assert [d["signin"] for d in slack.file_host.downloaded()] == [True, False]
