"""Voice notes below the tree (issue 31 item 2): the ``command:<argv>`` transcription backend (no shell, the
saved file's path appended, stdout the transcript; a non-zero exit, silence or a timeout a clear error), the
``[messengers] transcription`` setting's checks, the inbox transcribing a saved voice note once (a redelivery
neither downloads nor transcribes again; a failure keeps nothing), and Discord's voice-message flag as a
voice note (discord.py against the local server). Telegram and Slack through the tree: test_voice_tree.py."""

from __future__ import annotations

import asyncio
import hashlib
import sys
import warnings
from pathlib import Path

import pytest
from pydantic import ValidationError

from geode.messengers.config import MessengerBinding, MessengersSection
from geode.messengers.inbox import Inbox, InboxLimits
from geode.messengers.model import Attachment, InboundMessage
from geode.messengers.telegram_files import SavedFile
from geode.messengers.transcription import CommandTranscriber, TranscriptionFailed, transcriber_for
from geode.messengers.voice_notes import FAILED

with warnings.catch_warnings():  # discord.py imports audioop (deprecated); see geode/messengers/discord.py
    warnings.filterwarnings("ignore", "'audioop' is deprecated", DeprecationWarning)
    from geode.messengers.discord import DiscordTranslator
    from geode.testing.discord_server import CHANNELS, LocalDiscord

SCRIPT = """
import pathlib, sys
mode, path = sys.argv[1], pathlib.Path(sys.argv[-1])
if mode == "say":
    log = pathlib.Path(sys.argv[2])
    log.write_text(log.read_text() + "x" if log.exists() else "x")
    print("heard", len(path.read_bytes()), "bytes from", path.name)
elif mode == "fail":
    print("model file missing: /opt/whisper/ggml.bin", file=sys.stderr)
    sys.exit(3)
elif mode == "sleep":
    import time
    time.sleep(30)
"""


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "my transcriber.py"  # a space: the argv is shlex-split, never a shell line
    path.write_text(SCRIPT)
    return path


def _command(script: Path, *args: str, timeout_s: float = 20.0) -> CommandTranscriber:
    section = MessengersSection(
        transcription=f"command:{sys.executable} '{script}' {' '.join(args)}",
        transcription_timeout_s=timeout_s,
    )
    made = transcriber_for(section, environ={}, dotenv={}, config=None)  # type: ignore[arg-type]
    assert isinstance(made, CommandTranscriber)
    return made


def test_a_command_backend_gets_the_path_appended_and_its_stdout_is_the_transcript(
    script: Path, tmp_path: Path
) -> None:
    audio = tmp_path / "voice $(touch pwned).ogg"
    audio.write_bytes(b"OggS" + b"\0" * 60)
    said = asyncio.run(_command(script, "say", str(tmp_path / "calls")).transcribe(audio, "audio/ogg"))
    assert said == "heard 64 bytes from voice $(touch pwned).ogg"
    assert not (tmp_path / "pwned").exists()


def test_a_command_that_fails_or_hangs_is_a_clear_error(script: Path, tmp_path: Path) -> None:
    audio = tmp_path / "v.ogg"
    audio.write_bytes(b"OggS")
    with pytest.raises(TranscriptionFailed, match=r"exited with status 3: model file missing"):
        asyncio.run(_command(script, "fail").transcribe(audio, "audio/ogg"))
    with pytest.raises(TranscriptionFailed, match=r"longer than 0.5 s \(killed\)"):
        asyncio.run(_command(script, "sleep", timeout_s=0.5).transcribe(audio, "audio/ogg"))
    with pytest.raises(TranscriptionFailed, match="empty"):
        asyncio.run(_command(script, "quiet").transcribe(audio, "audio/ogg"))
    missing = CommandTranscriber(("/nonexistent/whisper-cli",), 5.0)
    with pytest.raises(TranscriptionFailed, match="could not start"):
        asyncio.run(missing.transcribe(audio, "audio/ogg"))


@pytest.mark.parametrize(
    ("value", "why"),
    [("whisper", "transcription is"), ("command:", "name a command"), ("command:'open", "cannot be split")],
)
def test_a_transcription_setting_that_names_no_backend_is_refused(value: str, why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        MessengersSection(transcription=value)
    assert MessengersSection().transcription == ""  # unset by default: "not enabled"


class _Fetcher:
    def __init__(self, data: bytes) -> None:
        self.data, self.fetched = data, 0

    async def fetch_file(self, att: Attachment, dest: Path, max_bytes: int) -> SavedFile:
        self.fetched += 1
        dest.write_bytes(self.data)
        return SavedFile(dest, hashlib.sha256(self.data).hexdigest(), len(self.data))


def _voice_message(mid: str, text: str = "") -> InboundMessage:
    att = Attachment(kind="voice", file_id="v1", file_name="voice-1.ogg", media_type="audio/ogg", size=68)
    return InboundMessage(
        platform="telegram", chat_id="-1001", message_id=mid, sender_id="1", text=text, attachments=(att,)
    )


def test_the_inbox_transcribes_a_voice_note_once_and_a_failure_keeps_nothing(
    script: Path, tmp_path: Path
) -> None:
    binding = MessengerBinding(platform="telegram", channel_id="-1001")
    calls = tmp_path / "calls"
    limits = InboxLimits(1000, ("image/*",))  # no audio type listed: a voice note is taken by its kind
    inbox = Inbox(lambda b: tmp_path / "ws", limits, _command(script, "say", str(calls)))
    fetcher = _Fetcher(b"OggS" + b"\1" * 64)
    msg = _voice_message("9", "a caption")
    first = asyncio.run(inbox.save(fetcher, msg, binding))
    again = asyncio.run(inbox.save(fetcher, msg, binding))  # the poller's retry after a crash
    assert not isinstance(first, str) and not isinstance(again, str)
    assert (fetcher.fetched, calls.read_text()) == (1, "x")  # downloaded once, transcribed once
    saved = tmp_path / "ws" / "inbox" / "9" / "voice-1.ogg"
    expected = (
        f"a caption\n[transcript of a voice note (saved: {saved}, audio/ogg, 68 bytes)]\n"
        "heard 68 bytes from voice-1.ogg\n[end of transcript]"
    )
    assert first.prompt(msg.text) == again.prompt(msg.text) == expected
    assert first.images == []  # audio is no picture
    assert first.refs()["files"][0]["sha256"] == hashlib.sha256(fetcher.data).hexdigest()
    broken = Inbox(lambda b: tmp_path / "ws", limits, _command(script, "fail"))
    assert asyncio.run(broken.save(fetcher, _voice_message("10"), binding)) == FAILED
    assert not (tmp_path / "ws" / "inbox" / "10").exists()


async def test_a_discord_voice_message_is_a_voice_note_and_other_audio_a_file() -> None:
    """Through discord.py against the local server: the IS_VOICE_MESSAGE flag (8192) makes the audio a voice
    note; the same audio without the flag is a file."""
    with LocalDiscord() as dc:
        tr = DiscordTranslator(
            dc.token, base_url=dc.api_base, gateway_url=dc.gateway_url, poll_timeout_s=5,
            connect_timeout_s=10, guild_ready_timeout_s=0.05,
        )  # fmt: skip
        try:
            await tr.start()
            ogg = b"OggS" + b"\2" * 100
            voice = dc.push_file(CHANNELS[0], ogg, filename="voice-message.ogg", content_type="audio/ogg",
                                 flags=8192)  # fmt: skip
            plain = dc.push_file(CHANNELS[0], ogg, filename="song.ogg", content_type="audio/ogg")
            got: dict[str, InboundMessage] = {}
            async with asyncio.timeout(10):
                while len(got) < 2:
                    for _, item in (await tr.poll(None)).items:
                        if isinstance(item, InboundMessage):
                            got[item.message_id] = item
        finally:
            await tr.close()
    (att,) = got[voice["id"]].attachments
    assert (att.kind, att.media_type, att.size, got[voice["id"]].text) == ("voice", "audio/ogg", 104, "")
    assert [a.kind for a in got[plain["id"]].attachments] == ["document"]
