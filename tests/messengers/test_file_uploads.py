"""send_file's upload through each platform's real SDK against its local server, at the translator: Slack's
files_upload_v2 (the upload URL on the server's own host, no token sent there; the share in the chat's
thread with the caption; a refusal of any step is "not posted", nothing shared) and Discord's attachment
(multipart ``files[0]``, the caption as content, in the thread; discord.py's own retry after a lost answer
finds the message already created by its nonce; a refusal is Rejected, nothing posted)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from geode.messengers.discord import DiscordTranslator
from geode.messengers.errors import NotPosted, Rejected
from geode.messengers.slack import SlackTranslator
from geode.testing.discord_server import CHANNELS, THREADS, LocalDiscord
from geode.testing.slack_server import LocalSlack

CHANNEL, THREAD_TS = "C0FILES01", "1733220000.000100"
PAYLOAD = b"\x00binary \xffpayload\n" * 64


@pytest.fixture(scope="module")
def slack() -> Iterator[LocalSlack]:
    with LocalSlack() as server:
        yield server


@pytest.fixture
async def tr(slack: LocalSlack) -> AsyncIterator[SlackTranslator]:
    translator = SlackTranslator(slack.bot_token, slack.app_token, base_url=slack.api_url, poll_timeout_s=5)
    try:
        await translator.start()
        yield translator
    finally:
        await translator.close()


async def test_slack_shares_the_bytes_in_the_thread_with_the_caption_and_no_token_to_the_upload_url(
    slack: LocalSlack, tr: SlackTranslator
) -> None:
    ids = await tr.send_file(
        f"{CHANNEL}:{THREAD_TS}", "report.bin", PAYLOAD, caption="numbers <!channel> & co"
    )
    (share,) = slack.uploads.of(CHANNEL)
    assert ids == [share["file_id"]] and share["data"] == PAYLOAD and share["filename"] == "report.bin"
    assert share["thread_ts"] == THREAD_TS
    assert share["comment"] == "numbers &lt;!channel&gt; &amp; co"  # mrkdwn: the caption pings nobody
    (upload,) = slack.uploads.upload_posts()
    assert upload["status"] == 200 and upload["authorization"] == ""  # the bot token never went there
    assert [c["status"] for c in slack.calls("files.getUploadURLExternal")] == [200]
    (post,) = [p for p in slack.posts(CHANNEL) if p["ts"] == share["ts"]]  # the share is in the channel
    assert post["text"] == share["comment"] and post["thread_ts"] == THREAD_TS


async def test_slack_a_refused_step_is_not_posted_and_nothing_is_shared(
    slack: LocalSlack, tr: SlackTranslator
) -> None:
    before = len(slack.uploads.of())
    slack.fail_next("files.getUploadURLExternal", status=500)
    with pytest.raises(NotPosted):
        await tr.send_file(CHANNEL, "a.txt", b"a")
    with pytest.raises(Rejected, match="channel_not_found"):  # step 3 refused: uploaded, never shared
        await tr.send_file("nochannel", "b.txt", b"b")
    completions = len(slack.calls("files.completeUploadExternal"))
    slack.uploads.fail_uploads = 1  # the upload URL does not take the bytes: never completed
    with pytest.raises(NotPosted, match=r"files\.upload: Failed to upload a file"):
        await tr.send_file(CHANNEL, "c.txt", b"c")
    assert len(slack.calls("files.completeUploadExternal")) == completions
    assert len(slack.uploads.of()) == before


@pytest.fixture
def dc() -> Iterator[LocalDiscord]:
    with LocalDiscord() as server:
        yield server


async def test_discord_attaches_the_bytes_with_the_caption_in_the_thread(dc: LocalDiscord) -> None:
    thread = next(iter(THREADS))
    tr = DiscordTranslator(
        dc.token, base_url=dc.api_base, gateway_url=dc.gateway_url, poll_timeout_s=5, connect_timeout_s=10,
        guild_ready_timeout_s=0.05,
    )  # fmt: skip
    try:
        await tr.start()
        ids = await tr.send_file(f"{CHANNELS[0]}:{thread}", "report.bin", PAYLOAD, caption="the numbers")
        # posted, then its answer lost (a 500): discord.py posts again by itself, the same nonce: no 2nd copy
        dc.fail_next("send_message", status=500, applied=True)
        again = await tr.send_file(str(CHANNELS[1]), "again.bin", b"again")
        with pytest.raises(Rejected):  # an unknown channel: nothing posted
            await tr.send_file("1399999999999999999", "x.txt", b"x")
    finally:
        await tr.close()
    upload, retried = dc.uploads.of()
    assert ids == [str(upload["message_id"])] and upload["channel_id"] == thread
    assert again == [str(retried["message_id"])] and retried["data"] == b"again"
    assert [c["status"] for c in dc.calls("send_message")] == [200, 500, 200, 404]  # retried: the same one
    assert upload["data"] == PAYLOAD and upload["filename"] == "report.bin"
    assert upload["content"] == "the numbers"
    (post,) = dc.posts(thread)
    assert post["content"] == "the numbers" and str(post["message_id"]) == ids[0]
