"""Telegram photos and files on a real `geode serve` tree through python-telegram-bot against the local Bot
API server (issue 31 item 2): a photo with a caption reaches the model as an image block (seen in the
scripted model's request) and its answer is posted once; the file is saved under the chat's workspace
(inbox/<message-id>/) and the turn's input names it by sha256; a file over ``max_attachment_bytes`` gets a
clear reply and nothing is saved; a file name with separators and ``..`` is saved under a safe name inside
the workspace; a getFile path on another host is refused and nothing is fetched, no token sent.

The tests share one tree and run in file order."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import children, scripted_home, serve, stop
from tests.messengers.chat_tree_kit import pollers, prompt_of
from tests.waiting import poll_for

CHAT, ALLOWED = -100731, 1001
LIMIT = 40_000
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 30 + b"\xff\xd9"  # the adapters never decode it
Tree = tuple[GeodeHome, LocalBotApi, ScriptedServer]


def _new_images(req: Any) -> list[dict[str, Any]]:
    """The image blocks of the turn's own user message (the session's history keeps earlier ones)."""
    last = [m for m in req.body["messages"] if m["role"] == "user"][-1]["content"]
    return (
        [p for p in last if isinstance(p, dict) and p.get("type") == "image"]
        if isinstance(last, list)
        else []
    )


def _reply(req: Any) -> dict[str, Any]:
    if _new_images(req):
        return {"text": "saw " + " ".join(i["media_type"] + ":" + i["sha256"][:12] for i in req.images)}
    return {"text": "echo: " + prompt_of(req)}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("images")
    with LocalBotApi() as tg, ScriptedServer(_reply) as model:
        extra = f"""
[messengers]
max_attachment_bytes = {LIMIT}
[messengers.telegram]
base_url = "{tg.base_url}"
poll_timeout_s = 1
[[messengers.bindings]]
platform = "telegram"
channel_id = "{CHAT}"
allowed_senders = ["{ALLOWED}"]
"""
        home = scripted_home(base, model, extra=extra)
        with home.env_file.open("a") as f:
            f.write(f"TELEGRAM_BOT_TOKEN={tg.token}\n")
        try:
            with pytest.MonkeyPatch.context() as mp:  # the first message's batch: killed once recorded
                mp.setenv("GEODE_FAULTS", "messengers@messengers.after_turn_record:kill")
                serve(home)
            yield home, tg, model
        finally:
            stop(home)


def _inbox(home: GeodeHome) -> Path:
    return home.root / "workspaces" / f"telegram-{CHAT}" / "inbox"


def _answers(tg: LocalBotApi, mid: int) -> list[str]:
    return [p["text"] for p in tg.posts(CHAT) if p["reply_to"] == mid]


def _answered(home: GeodeHome, tg: LocalBotApi, mid: int) -> list[str] | None:
    texts = _answers(tg, mid)
    return texts if texts and pollers(home)["telegram"]["pending_replies"] == 0 else None


def test_a_photo_with_a_caption_reaches_the_model_as_an_image_and_is_answered_once(tree: Tree) -> None:
    """... also when the messengers child is SIGKILLed once its turn is recorded: the redelivered photo is
    neither downloaded again nor lost."""
    home, tg, model = tree
    incarnation = children(home)["messengers"].incarnation
    upd = tg.push_photo(CHAT, JPEG, caption="what is on this picture?", sender_id=ALLOWED)
    mid = upd["message"]["message_id"]
    sha = hashlib.sha256(JPEG).hexdigest()
    fired = home.root / "faults" / "messengers.after_turn_record.fired"
    poll_for(fired.exists, 30, what="the kill after the turn record")
    texts = poll_for(lambda: _answered(home, tg, mid), 60, what="the photo's answer")
    assert texts == [f"saw image/jpeg:{sha[:12]}"]
    assert children(home)["messengers"].incarnation > incarnation
    assert [d["path"] for d in tg.files.downloaded()] == [f"photos/file_{mid}.jpg"]
    (req,) = [r for r in model.requests if r.images]
    assert req.images == [{"media_type": "image/jpeg", "sha256": sha}]
    assert prompt_of(req).startswith("what is on this picture?")
    (saved,) = (_inbox(home) / str(mid)).iterdir()
    assert saved.read_bytes() == JPEG and saved.stat().st_mode & 0o077 == 0
    assert f"[photo saved: {saved} (image/jpeg, {len(JPEG):,} bytes)]" in prompt_of(req)


def test_a_file_over_the_limit_gets_a_clear_reply_and_nothing_is_saved(tree: Tree) -> None:
    home, tg, model = tree
    before = len(model.requests)
    upd = tg.push_document(
        CHAT, b"x" * 100, file_name="big.pdf", mime_type="application/pdf", declared_size=LIMIT + 1
    )
    mid = upd["message"]["message_id"]
    texts = poll_for(lambda: _answered(home, tg, mid), 60, what="the refusal")
    assert texts == [
        f"Sorry, that file 'big.pdf' is too large for me ({LIMIT + 1:,} bytes; the limit is {LIMIT:,}); "
        "it was not saved."
    ]
    assert not (_inbox(home) / str(mid)).exists()
    assert len(model.requests) == before  # no turn ran
    big = tg.push_document(
        CHAT, b"y" * (LIMIT + 5), file_name="liar.txt", mime_type="text/plain", declared_size=9
    )
    texts = poll_for(lambda: _answered(home, tg, big["message"]["message_id"]), 60, what="the second refusal")
    assert texts == [f"Sorry, that file is too large for me (over {LIMIT:,} bytes); it was not saved."]
    assert not (_inbox(home) / str(big["message"]["message_id"])).exists()


def test_a_file_name_with_separators_and_dot_dot_is_saved_under_a_safe_name(tree: Tree) -> None:
    home, tg, model = tree
    upd = tg.push_document(
        CHAT, b"notes\n", file_name="../../etc/pa..sswd/x.txt", mime_type="text/plain", caption="read it"
    )
    mid = upd["message"]["message_id"]
    texts = poll_for(lambda: _answered(home, tg, mid), 60, what="the file's answer")
    (saved,) = (_inbox(home) / str(mid)).iterdir()
    assert saved.name == "____etc_pa_sswd_x.txt" and saved.read_bytes() == b"notes\n"
    assert texts == [f"echo: read it\n[document saved: {saved} (text/plain, 6 bytes)]"]
    assert _new_images(model.requests[-1]) == []  # a text file is no image


def test_a_file_path_on_another_host_is_refused_and_no_token_is_sent(tree: Tree) -> None:
    home, tg, _model = tree
    upd = tg.push_photo(CHAT, JPEG, caption="evil", sender_id=ALLOWED)
    mid = upd["message"]["message_id"]
    tg.files.set_path(f"photo-{CHAT}-{mid}", "https://evil.example/file/x.jpg")
    downloads = len(tg.files.downloaded())
    texts = poll_for(lambda: _answered(home, tg, mid), 60, what="the refusal")
    assert texts == ["Sorry, I could not fetch that file from the chat; it was not read."]
    assert len(tg.files.downloaded()) == downloads and not (_inbox(home) / str(mid)).exists()
