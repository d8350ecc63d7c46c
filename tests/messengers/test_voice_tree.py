"""Telegram voice notes on a real `geode serve` tree through python-telegram-bot against the local Bot API
server, transcribed through the official OpenAI SDK against the scripted provider's
``/v1/audio/transcriptions`` (issue 31 item 2, ``[messengers] transcription = "openai"``): the model's
request carries the caption and the transcript, marked as a voice note's; the voice note is downloaded and
transcribed once, also when the messengers child is SIGKILLed once its turn is recorded; a failed
transcription gets a short reply and no turn; a Slack audio clip through slack_sdk is fetched with the bot
token and reaches the model as its transcript. (Transcription unset: tests/messengers/test_silence_tree.py.)

The tests share one tree and run in file order."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.messengers.voice_notes import FAILED
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scenario import ScriptedError
from geode.testing.scripted import ScriptedServer
from geode.testing.slack_server import LocalSlack
from tests.actors.tree_kit import children, scripted_home
from tests.messengers.chat_tree_kit import pollers, prompt_of
from tests.messengers.platform_tree_kit import platform_sections, serving
from tests.waiting import poll_for

CHAT, ALLOWED, SLACK_CHAN = -100732, 1001, "C0VOICE01"
WEBM = b"\x1aE\xdf\xa3" + bytes(range(256)) * 4
OGG = b"OggS\x00\x02" + bytes(range(256)) * 8  # never decoded: the scripted endpoint only records it
SAID = "please remind me to water the plants"
Tree = tuple[GeodeHome, LocalBotApi, ScriptedServer, LocalSlack]


def _reply(req: Any) -> dict[str, Any]:
    return {"text": "heard: " + prompt_of(req)[-60:]}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("voice")
    with LocalBotApi() as tg, LocalSlack() as slack, ScriptedServer(_reply) as model:
        model.audio.set_answer(SAID)
        extra = f"""
[providers.openai]
base_url = "{model.openai_base_url}"
[messengers]
transcription = "openai"
transcription_model = "whisper-1"
{platform_sections(tg=tg, slack=slack)}
[[messengers.bindings]]
platform = "telegram"
channel_id = "{CHAT}"
allowed_senders = ["{ALLOWED}"]
[[messengers.bindings]]
platform = "slack"
channel_id = "{SLACK_CHAN}"
"""
        home = scripted_home(base, model, extra=extra)
        with home.env_file.open("a") as f:
            f.write("OPENAI_API_KEY=sk-test-openai\n")
        with pytest.MonkeyPatch.context() as mp:  # the first message's batch: killed once recorded
            mp.setenv("GEODE_FAULTS", "messengers@messengers.after_turn_record:kill")
            with serving(home, tg=tg, slack=slack):
                mp.delenv("GEODE_FAULTS")  # only the served tree has it
                yield home, tg, model, slack


def _inbox(home: GeodeHome) -> Path:
    return home.root / "workspaces" / f"telegram-{CHAT}" / "inbox"


def _answered(home: GeodeHome, tg: LocalBotApi, mid: int) -> list[str] | None:
    texts = [p["text"] for p in tg.posts(CHAT) if p["reply_to"] == mid]
    return texts if texts and pollers(home)["telegram"]["pending_replies"] == 0 else None


def test_a_voice_note_reaches_the_model_as_its_transcript_once_across_a_kill(tree: Tree) -> None:
    home, tg, model, _slack = tree
    incarnation = children(home)["messengers"].incarnation
    upd = tg.push_voice(CHAT, OGG, caption="from the garden", sender_id=ALLOWED)
    mid = upd["message"]["message_id"]
    fired = home.root / "faults" / "messengers.after_turn_record.fired"
    poll_for(fired.exists, 30, what="the kill after the turn record")
    texts = poll_for(lambda: _answered(home, tg, mid), 60, what="the voice note's answer") or []
    assert children(home)["messengers"].incarnation > incarnation
    (saved,) = [p for p in (_inbox(home) / str(mid)).iterdir() if not p.name.startswith(".")]
    assert saved.read_bytes() == OGG and saved.stat().st_mode & 0o077 == 0
    kept = saved.with_name(f".{saved.name}.transcript")  # what a redelivery reads instead of transcribing
    assert kept.read_text() == f"{hashlib.sha256(OGG).hexdigest()}\n{SAID}"
    prompts = [prompt_of(r) for r in model.requests]
    assert prompts == [
        "from the garden\n"
        f"[transcript of a voice note (saved: {saved}, audio/ogg, {len(OGG):,} bytes)]\n"
        f"{SAID}\n[end of transcript]"
    ]
    assert len(texts) == 1 and texts[0].startswith("heard: ")
    # downloaded once and transcribed once, by the real SDK: the exact bytes, the configured model, a key
    assert [d["path"] for d in tg.files.downloaded()] == [f"voice/file_{mid}.oga"]
    (up,) = model.audio.uploads
    assert (up["model"], up["content_type"], up["sha256"], up["authorized"]) == (
        "whisper-1",
        "audio/ogg",
        hashlib.sha256(OGG).hexdigest(),
        True,
    )


def test_a_failed_transcription_gets_a_short_reply_and_no_turn(tree: Tree) -> None:
    home, tg, model, _slack = tree
    model.audio.set_answer(ScriptedError(status=500, message="the scripted transcriber broke"))
    before = len(model.requests)
    upd = tg.push_voice(CHAT, OGG[:900], sender_id=ALLOWED)
    mid = upd["message"]["message_id"]
    texts = poll_for(lambda: _answered(home, tg, mid), 60, what="the failure's reply")
    assert texts == [FAILED]
    assert len(model.requests) == before  # no turn ran on empty text
    assert len(model.audio.uploads) == 2
    assert not (_inbox(home) / str(mid)).exists()  # nothing of the message kept
    model.audio.set_answer(SAID)


def test_slack_an_audio_clip_is_fetched_with_the_bot_token_and_reaches_the_model_as_its_transcript(
    tree: Tree,
) -> None:
    home, _tg, model, slack = tree
    model.audio.set_answer("the slack clip said hello")
    env = slack.push_file(SLACK_CHAN, data=WEBM, voice=True)  # an audio clip, no text
    ts = env["payload"]["event"]["ts"]

    def answered() -> list[str] | None:
        texts = [p["text"] for p in slack.posts(SLACK_CHAN) if p.get("thread_ts") == ts]
        return texts if texts and pollers(home)["slack"]["pending_replies"] == 0 else None

    texts = poll_for(answered, 60, what="the clip's answer") or []
    (saved,) = [p for p in home.root.glob(f"workspaces/slack-{SLACK_CHAN}/inbox/{ts}/*") if p.name[0] != "."]
    assert saved.name == "audio_message.webm" and saved.read_bytes() == WEBM
    assert prompt_of(model.requests[-1]) == (
        f"[transcript of a voice note (saved: {saved}, audio/webm, {len(WEBM):,} bytes)]\n"
        "the slack clip said hello\n[end of transcript]"
    )
    assert len(texts) == 1
    (got,) = slack.file_host.downloaded()
    assert got["status"] == 200 and got["authorization"] == f"Bearer {slack.bot_token}"
    up = model.audio.uploads[-1]
    assert (up["content_type"], up["sha256"]) == ("audio/webm", hashlib.sha256(WEBM).hexdigest())
