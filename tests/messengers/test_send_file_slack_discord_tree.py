"""``send_file`` on Slack and Discord end to end: a real `geode serve` tree (scripted provider) against the
local Slack and Discord servers, the upload made by the real SDKs inside the messengers child (slack_sdk's
files_upload_v2; discord.py's multipart attachment). A path outside the file tools' roots is refused before
anyone is asked, nothing uploaded; an approved file is shared once in the turn's thread with its caption
(Slack); the messengers child SIGKILLed right after the upload (Discord, the second upload of that child:
``messengers.after_upload`` armed on its 2nd hit) leaves it posted once, its receipt uncertain, never
uploaded again.

The tests share one tree and run in file order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.discord_server import CHANNELS, USER_ID, LocalDiscord
from geode.testing.scripted import ScriptedServer
from geode.testing.slack_server import LocalSlack
from tests.actors.tree_kit import children, geode, scripted_home
from tests.messengers.chat_tree_kit import echo_or_write, prompt_of
from tests.messengers.platform_tree_kit import platform_sections, serving
from tests.waiting import poll_for

SLACK_CHAN, SLACK_BOSS = "C0FILES01", "U0BOSS001"
DC_CHAN, DC_BOSS = CHANNELS[0], USER_ID + 1
PAYLOAD = b"quarterly numbers\n" * 100
Tree = tuple[GeodeHome, LocalSlack, LocalDiscord]


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
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("sendfile-sd")
    ws = base / "ws"
    ws.mkdir()
    (ws / "report.txt").write_bytes(PAYLOAD)
    with (
        LocalSlack(redeliver_after_s=5.0) as slack,
        LocalDiscord() as dc,
        ScriptedServer(_model(ws)) as model,
        pytest.MonkeyPatch.context() as mp,
    ):
        extra = f"""
[messengers]
approval_timeout_s = 30
observe_grace_s = 0
{platform_sections(slack=slack, dc=dc)}
[[messengers.bindings]]
platform = "slack"
channel_id = "{SLACK_CHAN}"
allowed_senders = ["{SLACK_BOSS}"]
approvers = ["{SLACK_BOSS}"]
workspace = "{ws}"
[[messengers.bindings]]
platform = "discord"
channel_id = "{DC_CHAN}"
allowed_senders = ["{DC_BOSS}"]
approvers = ["{DC_BOSS}"]
workspace = "{ws}"
"""
        home = scripted_home(base, model, ws, extra=extra)
        mp.setenv("GEODE_FAULTS", "messengers@messengers.after_upload:kill:2")
        with serving(home, slack=slack, dc=dc, cwd=ws):
            yield home, slack, dc


def _slack_results(slack: LocalSlack) -> list[str]:
    return [p["text"] for p in slack.posts(SLACK_CHAN) if p["text"].startswith("tool result:")]


def _dc_texts(dc: LocalDiscord) -> list[str]:
    return [p["content"] for p in dc.posts(DC_CHAN)]


def test_a_path_outside_the_roots_is_refused_and_nothing_uploaded(tree: Tree) -> None:
    _home, slack, dc = tree
    slack.push_message(SLACK_CHAN, "sendfile /etc/hostname", user=SLACK_BOSS)
    dc.push_message(DC_CHAN, "sendfile /etc/hostname", author_id=DC_BOSS, author_name="boss")
    poll_for(lambda: len(_slack_results(slack)) == 1, 60, what="the Slack reply to a path outside the roots")
    done = lambda: [t for t in _dc_texts(dc) if t.startswith("tool result:")]  # noqa: E731
    poll_for(done, 60, what="the Discord reply to a path outside the roots")
    assert "outside" in _slack_results(slack)[0] and "outside" in done()[0]
    assert slack.uploads.of() == [] and slack.calls("files.getUploadURLExternal") == []
    assert dc.uploads.of() == []
    assert not [p for p in slack.posts(SLACK_CHAN) if p["blocks"]], "nobody was asked"
    assert not [p for p in dc.posts(DC_CHAN) if p["components"]], "nobody was asked"


def test_slack_an_approved_file_is_shared_once_in_the_turns_thread_with_its_caption(tree: Tree) -> None:
    _home, slack, _dc = tree
    sent = slack.push_message(SLACK_CHAN, "sendfile report.txt the numbers", user=SLACK_BOSS)
    kb = poll_for(
        lambda: [p for p in slack.posts(SLACK_CHAN) if p["blocks"]], 60, what="the approval buttons"
    )[0]
    assert "send_file" in kb["text"] and "report.txt" in kb["text"]
    buttons = {
        e["text"]["text"]: (e["action_id"], e["value"])
        for block in kb["blocks"]
        for e in block.get("elements") or ()
        if e.get("type") == "button"
    }
    slack.push_action(SLACK_CHAN, kb["ts"], *buttons["Approve"], user=SLACK_BOSS)
    poll_for(lambda: len(_slack_results(slack)) == 2, 60, what="the turn's answer after the upload")
    (share,) = slack.uploads.of(SLACK_CHAN)
    assert share["data"] == PAYLOAD and share["filename"] == "report.txt"
    assert share["comment"] == "the numbers" and share["thread_ts"] == sent["ts"]  # the turn's thread
    assert [u["authorization"] for u in slack.uploads.upload_posts()] == [""]  # no token to the upload URL
    assert len(slack.calls("files.completeUploadExternal")) == 1
    assert '\\"sent\\": true' in _slack_results(slack)[1]


def test_discord_an_approved_file_is_posted_once_even_when_the_child_is_killed_after_the_upload(
    tree: Tree,
) -> None:
    home, _slack, dc = tree
    incarnation = children(home)["messengers"].incarnation
    n0 = len(dc.posts(DC_CHAN))
    dc.push_message(DC_CHAN, "sendfile report.txt the numbers", author_id=DC_BOSS, author_name="boss")
    kb = poll_for(
        lambda: [p for p in dc.posts(DC_CHAN)[n0:] if p["components"]], 60, what="the approval buttons"
    )[0]
    assert "send_file" in kb["content"] and "report.txt" in kb["content"]
    buttons = {b["label"]: b["custom_id"] for row in kb["components"] for b in row["components"]}
    dc.push_button(DC_CHAN, kb["message_id"], buttons["Approve"], user_id=DC_BOSS, user_name="boss")
    fired = home.root / "faults" / "messengers.after_upload.fired"
    poll_for(fired.exists, 60, what="the kill right after the upload")
    ended = "The turn ended without an answer (external_verification_required)."
    poll_for(lambda: ended in _dc_texts(dc), 90, what="the turn's reply after the kill")
    assert children(home)["messengers"].incarnation > incarnation
    (upload,) = dc.uploads.of(DC_CHAN)
    assert upload["data"] == PAYLOAD and upload["filename"] == "report.txt"
    assert upload["content"] == "the numbers"
    assert len([c for c in dc.calls("send_message") if c["json"].get("attachments")]) == 1
    rows = json.loads(geode(home, "receipts", "--uncertain", "--json").stdout)
    assert [r for r in rows if r["identity"].get("tool_name") == "send_file"], rows
