"""Inbound files without a tree: the download URL check (the token goes only to the configured Bot API
host), safe file names, type limits, and a file saved before a restart taken again without a download."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from geode.messengers.config import MessengerBinding
from geode.messengers.inbox import Inbox, InboxLimits, safe_name
from geode.messengers.model import Attachment, InboundMessage
from geode.messengers.telegram_files import SavedFile, UnsafeFileUrl, file_base_url, file_url

BASE = "http://127.0.0.1:8081/bot"
TOKEN = "123:secret-token"


def test_the_file_url_is_on_the_configured_host_with_the_token_after_the_check() -> None:
    assert file_base_url("https://api.telegram.org/bot") == "https://api.telegram.org/file/bot"
    assert file_base_url("https://proxy.example/tg/bot") == "https://proxy.example/tg/file/bot"
    assert (
        file_url(BASE, "photos/file_1.jpg", TOKEN)
        == f"http://127.0.0.1:8081/file/bot{TOKEN}/photos/file_1.jpg"
    )


@pytest.mark.parametrize(
    "path",
    [
        "https://evil.example/file/x.jpg",
        "//evil.example/x.jpg",
        "http://127.0.0.1:8081/file/x.jpg",  # even the same host: a file path is relative
        "/etc/passwd",
        "photos/../../x",
        "photos\\x.jpg",
        "photos/x.jpg?u=1",
        "",
    ],
)
def test_a_file_path_that_is_not_relative_to_the_bot_api_host_is_refused_before_the_token(path: str) -> None:
    with pytest.raises(UnsafeFileUrl) as err:
        file_url(BASE, path, TOKEN)
    assert TOKEN not in str(err.value)


@pytest.mark.parametrize(
    ("name", "safe"),
    [
        ("../../etc/passwd", "____etc_passwd"),
        ("..", "_"),
        ("a/b\\c:d.txt", "a_b_c_d.txt"),
        (".hidden", "hidden"),
        ("", "file-1"),
        ("x" * 300 + ".pdf", "x" * 116 + ".pdf"),
    ],
)
def test_a_sent_file_name_becomes_one_safe_name(name: str, safe: str) -> None:
    assert safe_name(name, "file-1") == safe


def test_type_limits_match_exact_types_and_wildcards() -> None:
    limits = InboxLimits(100, ("image/jpeg", "text/*"))
    assert limits.allows("image/jpeg") and limits.allows("text/markdown")
    assert not limits.allows("application/pdf") and not limits.allows("image/png")


class _Fetcher:
    def __init__(self, data: bytes) -> None:
        self.data, self.fetched = data, 0

    async def fetch_file(self, att: Attachment, dest: Path, max_bytes: int) -> SavedFile:
        self.fetched += 1
        dest.write_bytes(self.data)
        return SavedFile(dest, hashlib.sha256(self.data).hexdigest(), len(self.data))


def test_a_file_saved_before_a_restart_is_taken_again_without_a_download(tmp_path: Path) -> None:
    binding = MessengerBinding(platform="telegram", channel_id="-1001")
    inbox = Inbox(lambda b: tmp_path / "ws", InboxLimits(1000, ("image/*",)))
    att = Attachment(kind="photo", file_id="f1", file_name="photo-1.jpg", media_type="image/jpeg", size=5)
    msg = InboundMessage(
        platform="telegram", chat_id="-1001", message_id="9", sender_id="1", text="hi", attachments=(att,)
    )
    fetcher = _Fetcher(b"\xff\xd8abc")
    first = asyncio.run(inbox.save(fetcher, msg, binding))
    again = asyncio.run(inbox.save(fetcher, msg, binding))  # the poller's retry after a crash
    assert fetcher.fetched == 1
    assert not isinstance(first, str) and not isinstance(again, str)
    assert first.refs() == again.refs()
    (image,) = first.images
    assert image.sha256 == hashlib.sha256(b"\xff\xd8abc").hexdigest()
    assert image.path == str(tmp_path / "ws" / "inbox" / "9" / "photo-1.jpg")
