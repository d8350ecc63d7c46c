"""``send_file`` end to end on a real `geode serve` tree (scripted provider) against the local Bot API server,
through the real python-telegram-bot's sendDocument inside the messengers child: a path outside the file
tools' roots or a credential file is refused before anyone is asked (nothing uploaded); a file approved in
the chat is uploaded once, and the messengers child SIGKILLed right after the upload (before the executor
hears) leaves it posted once, its receipt uncertain, never uploaded again.

The tests share one tree (armed with the ``messengers.after_upload`` kill) and run in file order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import children, geode, scripted_home, serve, stop
from tests.messengers.chat_tree_kit import echo_or_write, prompt_of
from tests.waiting import poll_for

CHAT, APPROVER = -100321, 1002
PAYLOAD = b"quarterly numbers\n" * 100


def _model(ws: Path):  # type: ignore[no-untyped-def]
    """ "sendfile <path> [caption]" asks for send_file; anything else as ``echo_or_write``."""
    other = echo_or_write(ws)

    def reply(req: Any) -> Any:
        prompt = prompt_of(req)
        last = req.body["messages"][-1].get("content")
        fresh = not (isinstance(last, list) and any(b.get("type") == "tool_result" for b in last))
        if fresh and prompt.startswith("sendfile "):
            words = prompt.split(" ", 2)
            args = {"path": words[1], **({"caption": words[2]} if len(words) == 3 else {})}
            return {"tool_calls": [{"name": "send_file", "input": args}]}
        return other(req)

    return reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, LocalBotApi, Path]]:
    base = tmp_path_factory.mktemp("sendfile")
    ws = base / "ws"
    ws.mkdir()
    (ws / "report.txt").write_bytes(PAYLOAD)
    (ws / ".netrc").write_text("machine example.com login me password hunter2\n")
    with (
        LocalBotApi() as api,
        ScriptedServer(_model(ws)) as model,
        pytest.MonkeyPatch.context() as mp,
    ):
        extra = f"""
[messengers]
approval_timeout_s = 30
observe_grace_s = 0
[messengers.telegram]
base_url = "{api.base_url}"
poll_timeout_s = 1
[[messengers.bindings]]
platform = "telegram"
channel_id = "{CHAT}"
allowed_senders = ["{APPROVER}"]
approvers = ["{APPROVER}"]
workspace = "{ws}"
"""
        home = scripted_home(base, model, ws, extra=extra)
        with home.env_file.open("a") as f:
            f.write(f"TELEGRAM_BOT_TOKEN={api.token}\n")
        mp.setenv("GEODE_FAULTS", "messengers@messengers.after_upload:kill")
        try:
            serve(home, cwd=ws)
            yield home, api, ws
        finally:
            stop(home)


def _texts(api: LocalBotApi) -> list[str]:
    return [p["text"] for p in api.posts(CHAT)]


def _results(api: LocalBotApi) -> list[str]:
    return [t for t in _texts(api) if t.startswith("tool result:")]


def test_a_path_outside_the_roots_or_a_credential_file_is_refused_and_nothing_uploaded(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    _home, api, _ws = tree
    api.push_message(CHAT, "sendfile /etc/hostname", sender_id=APPROVER)
    poll_for(lambda: len(_results(api)) == 1, 60, what="the reply to a path outside the roots")
    api.push_message(CHAT, "sendfile .netrc", sender_id=APPROVER)
    poll_for(lambda: len(_results(api)) == 2, 60, what="the reply to a credential file")
    outside, credential = _results(api)
    assert "outside" in outside, outside
    assert "credential" in credential, credential
    assert api.uploads.of() == [] and api.calls("senddocument") == []
    assert not [p for p in api.posts(CHAT) if p["reply_markup"]], "nobody was asked"
    assert "hunter2" not in json.dumps(_texts(api))


def test_an_approved_file_is_uploaded_once_even_when_the_child_is_killed_after_the_upload(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    home, api, _ws = tree
    incarnation = children(home)["messengers"].incarnation
    n0 = len(api.posts(CHAT))
    api.push_message(CHAT, "sendfile report.txt the numbers", sender_id=APPROVER)
    kb = poll_for(
        lambda: [p for p in api.posts(CHAT)[n0:] if p["reply_markup"]], 60, what="the approval keyboard"
    )[0]
    assert "send_file" in kb["text"] and "report.txt" in kb["text"]
    buttons = {b["text"]: b["callback_data"] for row in kb["reply_markup"]["inline_keyboard"] for b in row}
    api.push_callback(CHAT, kb["message_id"], buttons["Approve"], sender_id=APPROVER)
    fired = home.root / "faults" / "messengers.after_upload.fired"
    poll_for(fired.exists, 60, what="the kill right after the upload")
    # an effect whose outcome is unknown ends the turn; the restarted child says so, and uploads nothing again
    ended = "The turn ended without an answer (external_verification_required)."
    poll_for(lambda: ended in _texts(api), 60, what="the turn's reply after the kill")
    assert children(home)["messengers"].incarnation > incarnation
    uploads = api.uploads.of(CHAT)
    assert len(uploads) == 1 and len(api.calls("senddocument")) == 1, uploads
    assert uploads[0]["data"] == PAYLOAD and uploads[0]["filename"] == "report.txt"
    assert uploads[0]["caption"] == "the numbers"
    rows = json.loads(geode(home, "receipts", "--uncertain", "--json").stdout)
    assert [r for r in rows if r["identity"].get("tool_name") == "send_file"], rows
