"""Telegram end to end on a real `geode serve` tree (scripted provider) against the local Bot API server, with
the real python-telegram-bot inside the messengers child: one reply per message in a bound chat, nothing for
unbound chats or other senders (counted in `geode status --json`), a redelivered update answered once, 429
and 409 honoured, and (last: it restarts the tree) polling resumes at the stored offset after a restart and a
SIGKILL between the turn record and the cursor still gets exactly one reply.

The tests share one tree and run in file order."""

from __future__ import annotations

import hashlib
import json
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.cli.messengers_view import messengers_detail
from geode.home import GeodeHome
from geode.messengers.sessions import reply_operation_id, session_id_for, turn_id_for
from geode.protocol.errors import GeodeError
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import children, geode, scripted_home, serve, stop
from tests.mcp_server.mcp_kit import mcp_params, mcp_session, refused
from tests.messengers.chat_tree_kit import (
    echo_or_write,
    long_write,
    no_log_has,
    shown_request,
    whole_request,
)
from tests.waiting import poll_for

CHAT, OTHER = -100123, -100999
ALLOWED, APPROVER, STRANGER = 1001, 1002, 5555


def _config(api: LocalBotApi) -> str:
    return f"""
[messengers]
approval_timeout_s = 3
observe_grace_s = 0
[messengers.telegram]
base_url = "{api.base_url}"
poll_timeout_s = 1
[[messengers.bindings]]
platform = "telegram"
channel_id = "{CHAT}"
allowed_senders = ["{ALLOWED}", "{APPROVER}"]
approvers = ["{APPROVER}"]
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, LocalBotApi, Path]]:
    base = tmp_path_factory.mktemp("tg")
    ws = base / "ws"
    ws.mkdir()
    with LocalBotApi() as api, ScriptedServer(echo_or_write(ws)) as model:
        home = scripted_home(base, model, ws, extra=_config(api))
        with home.env_file.open("a") as f:
            f.write(f"TELEGRAM_BOT_TOKEN={api.token}\n")
        try:
            serve(home, cwd=ws)
            yield home, api, ws
        finally:
            stop(home)


def _poller(home: GeodeHome) -> dict[str, Any]:
    detail = messengers_detail(home)
    assert detail is not None, "the messengers child does not answer"
    return next(p for p in detail["platforms"] if p["platform"] == "telegram")


def _texts(api: LocalBotApi, chat: int = CHAT) -> list[str]:
    return [p["text"] for p in api.posts(chat)]


def _answered(api: LocalBotApi, text: str) -> int:
    return sum(text in t for t in _texts(api))


def _settled(home: GeodeHome, cursor_past: int) -> dict[str, Any] | None:
    """The poller once its cursor is past ``cursor_past`` and it owes no reply."""
    p = _poller(home)
    return p if (p["cursor"] or 0) > cursor_past and p["pending_replies"] == 0 else None


def test_bound_chat_gets_one_reply_unbound_and_stranger_none_and_counted(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    home, api, _ = tree
    first = api.push_message(CHAT, "hello one", sender_id=ALLOWED)
    api.push_message(OTHER, "hello other", sender_id=ALLOWED)
    last = api.push_message(CHAT, "hello stranger", sender_id=STRANGER)
    poll_for(lambda: _answered(api, "echo: hello one"), 60, what="the reply", swallow=(AssertionError,))
    poll_for(
        lambda: _settled(home, last["update_id"]), 30, what="the batch settled", swallow=(AssertionError,)
    )
    posts = api.posts(CHAT)
    assert [p["text"] for p in posts] == ["echo: hello one"]
    assert posts[0]["reply_to"] == first["message"]["message_id"]
    assert api.posts(OTHER) == []
    assert any(a["action"] == "typing" for a in api.actions(CHAT))
    r = geode(home, "status", "--json")
    assert r.returncode == 0, r.stderr
    tg = next(p for p in json.loads(r.stdout)["messengers"] if p["platform"] == "telegram")
    assert tg["state"] == "polling" and tg["in"] == 1 and tg["replies_out"] == 1
    assert tg["ignored"] == {"unbound": 1, "sender": 1}
    assert tg["cursor"] == last["update_id"] + 1
    detail = messengers_detail(home)  # messenger.bindings: `geode messengers`
    assert detail is not None
    (binding,) = detail["bindings"]
    assert binding["session_id"].startswith(f"s-telegram-{CHAT}-g0-")
    assert binding["last_turn"]["state"] == "done"


def test_same_update_delivered_twice_is_one_turn_and_one_reply(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    home, api, _ = tree
    upd = api.push_message(CHAT, "twice please", sender_id=ALLOWED)
    poll_for(lambda: _answered(api, "echo: twice please"), 60, what="the reply", swallow=(AssertionError,))
    again = api.push_update(upd)  # the same message under a fresh update id
    poll_for(
        lambda: _settled(home, again["update_id"]), 30, what="the redelivery seen", swallow=(AssertionError,)
    )
    assert _poller(home)["ignored"].get("duplicate") == 1
    assert _answered(api, "echo: twice please") == 1


def test_status_and_new_commands_answer_in_the_chat(tree: tuple[GeodeHome, LocalBotApi, Path]) -> None:
    _home, api, _ = tree
    api.push_message(CHAT, "/status", sender_id=ALLOWED)
    status = poll_for(lambda: [t for t in _texts(api) if t.startswith("Session:")], 60, what="/status")[0]
    assert f"s-telegram-{CHAT}-g0-" in status and "Last turn: done (natural)" in status
    api.push_message(CHAT, "/new", sender_id=ALLOWED)
    poll_for(lambda: _answered(api, "Started a new session"), 60, what="/new")
    assert f"s-telegram-{CHAT}-g1-" in next(t for t in _texts(api) if t.startswith("Started a new session"))
    api.push_message(CHAT, "fresh start", sender_id=ALLOWED)
    poll_for(lambda: _answered(api, "echo: fresh start"), 60, what="a turn in the new session")
    api.push_message(CHAT, "/status", sender_id=ALLOWED)
    poll_for(lambda: _answered(api, "Session:") == 2, 60, what="/status again")
    assert f"s-telegram-{CHAT}-g1-" in [t for t in _texts(api) if t.startswith("Session:")][1]


def test_memory_and_compact_commands_answer_in_the_chat(tree: tuple[GeodeHome, LocalBotApi, Path]) -> None:
    """/memory shows the chat's own MEMORY.md; /compact stores a summary the next turn starts from."""
    home, api, _ = tree
    api.push_message(CHAT, "/memory", sender_id=ALLOWED)
    poll_for(lambda: _answered(api, "No memory yet in this chat"), 60, what="/memory without memory")
    memory = home.root / "memory" / "chats" / f"telegram-{CHAT}" / "MEMORY.md"
    memory.parent.mkdir(parents=True, exist_ok=True)
    memory.write_text("- the user likes teal\n")
    api.push_message(CHAT, "/memory", sender_id=ALLOWED)
    poll_for(lambda: _answered(api, "- the user likes teal"), 60, what="/memory")
    assert _answered(api, "Memory of this chat (22 of 25000 bytes)") == 1
    api.push_message(CHAT, "/compact", sender_id=ALLOWED)
    poll_for(lambda: _answered(api, "Compacted: 2 messages summarized"), 60, what="/compact")
    api.push_message(CHAT, "after the summary", sender_id=ALLOWED)
    echoed = lambda: [t for t in _texts(api) if t.startswith("echo:") and "after the summary" in t]  # noqa: E731
    reply = poll_for(echoed, 60, what="the turn after /compact")[0]
    assert "[system:compaction-summary]" in reply and "fresh start" in reply  # the summary, then the prompt


def test_429_retry_after_delays_the_next_poll_and_409_shows_as_conflict(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    home, api, _ = tree
    api.fail_next("getUpdates", status=429, retry_after=2)
    poll_for(lambda: [c for c in api.calls("getUpdates") if c["status"] == 429], 15, what="the 429")
    poll_for(lambda: api.calls("getUpdates")[-1]["status"] != 429, 15, what="the poll after the 429")
    calls = api.calls("getUpdates")
    i = next(i for i, c in enumerate(calls) if c["status"] == 429)
    assert calls[i + 1]["at"] - calls[i]["at"] >= 1.9, "the next getUpdates came before retry_after"
    assert _poller(home)["rate_limited"] >= 1

    api.fail_next("getUpdates", status=409, count=4)
    poll_for(lambda: _poller(home)["state"] == "conflict", 15, what="conflict", swallow=(AssertionError,))
    r = geode(home, "status", "--json")
    tg = next(p for p in json.loads(r.stdout)["messengers"] if p["platform"] == "telegram")
    assert tg["state"] == "conflict" and tg["conflicts"] >= 1 and tg["last_error"], tg
    poll_for(lambda: _poller(home)["state"] == "polling", 30, what="polling again", swallow=(AssertionError,))
    api.push_message(CHAT, "after conflict", sender_id=ALLOWED)
    poll_for(lambda: _answered(api, "echo: after conflict"), 60, what="a reply after the conflict")


def _keyboards(api: LocalBotApi, after: int) -> list[dict[str, Any]]:
    return [p for p in api.posts(CHAT)[after:] if p["reply_markup"] or "Approve the tool" in p["text"]]


def _buttons(kb: dict[str, Any]) -> dict[str, str]:
    return {b["text"]: b["callback_data"] for row in kb["reply_markup"]["inline_keyboard"] for b in row}


def _pressed_answers(api: LocalBotApi) -> list[str]:
    return [str(c["params"].get("text", "")) for c in api.calls("answerCallbackQuery")]


def test_approval_in_the_chat_deny_and_no_answer_both_keep_the_tool_from_running(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    _home, api, ws = tree
    n0 = len(api.posts(CHAT))
    api.push_message(CHAT, "write alpha.txt", sender_id=APPROVER)
    kb = poll_for(lambda: _keyboards(api, n0), 60, what="the approval keyboard")[0]
    buttons = _buttons(kb)
    assert set(buttons) == {"Approve", "Deny", "Always for this session"} and "write_file" in kb["text"]
    api.push_callback(CHAT, kb["message_id"], buttons["Approve"], sender_id=ALLOWED)  # not an approver
    poll_for(lambda: "You are not allowed to answer." in _pressed_answers(api), 30, what="the refusal")
    api.push_callback(CHAT, kb["message_id"], buttons["Deny"], sender_id=APPROVER)
    poll_for(lambda: _answered(api, "tool result:"), 60, what="the turn's reply after Deny")
    assert not (ws / "alpha.txt").exists()
    assert "User denied" in next(t for t in _texts(api) if t.startswith("tool result:"))
    assert any("Denied by" in t for t in _texts(api)), "the keyboard shows the decision"

    n1 = len(api.posts(CHAT))
    asked = time.monotonic()
    api.push_message(CHAT, "write beta.txt", sender_id=APPROVER)
    poll_for(lambda: _keyboards(api, n1), 60, what="the second keyboard")
    poll_for(lambda: _answered(api, "tool result:") == 2, 60, what="the reply after no answer")
    assert time.monotonic() - asked >= 3.0  # [messengers] approval_timeout_s
    assert not (ws / "beta.txt").exists()
    assert "timed out" in [t for t in _texts(api) if t.startswith("tool result:")][-1]
    poll_for(lambda: any("No answer in time" in t for t in _texts(api)), 15, what="the keyboard expired")


def test_a_3000_character_request_is_asked_whole_in_the_chat(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    """Breach 5: the approval shows the whole request (a 3,000-character write), its tail included, split
    over messages the Bot API accepts, the keyboard with the last (was: the first 1,000 characters); no log
    has it."""
    home, api, ws = tree
    before = _answered(api, "tool result:")
    n0 = len(api.posts(CHAT))
    api.push_message(CHAT, "long write", sender_id=APPROVER)
    poll_for(lambda: _keyboards(api, n0), 60, what="the approval keyboard")
    asked = [p["text"] for p in api.posts(CHAT)[n0:] if "request part" in p["text"] or p["reply_markup"]]
    assert whole_request("write_file", long_write(ws)) in shown_request(asked), asked
    poll_for(lambda: _answered(api, "tool result:") == before + 1, 60, what="the reply after 3 s: denied")
    assert not (ws / "long.txt").exists()
    assert no_log_has(home, "benign-benign-benign")


def test_the_zygote_imports_the_bound_platforms_sdk_so_a_killed_messengers_child_answers_again(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    """The config binds a Telegram chat: the zygote imports python-telegram-bot before it forks, so a
    SIGKILLed messengers child comes back without importing it, and the chat is answered again."""
    import os
    import signal

    home, api, _ws = tree
    log = home.logs_dir / "zygote.log"
    poll_for(lambda: "zygote: imported geode.messengers.telegram" in log.read_text(), 60, what="the import")
    assert "geode.messengers.slack" not in log.read_text()  # no Slack binding: not imported
    before = children(home)["messengers"]
    os.kill(before.pid, signal.SIGKILL)
    poll_for(
        lambda: (m := children(home)["messengers"]).incarnation > before.incarnation and m.state == "running",
        30,
        what="the messengers child back",
    )
    api.push_message(CHAT, "after the kill", sender_id=ALLOWED)
    poll_for(lambda: _answered(api, "echo: after the kill") == 1, 30, what="the reply after the kill")


async def test_a_chats_session_id_is_keyed_by_the_home_stable_across_a_restart_and_closed_to_mcp(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    """The chat's session id is an HMAC under keys/session-id.key (0600), not the unkeyed hash of the chat id
    and generation anyone could compute; a restarted messengers child keeps it; an MCP client's
    continue_agent on it is refused like an unknown session, and nothing reaches the chat."""
    home, api, ws = tree
    sid = _binding_session(home)
    gen = int(sid.rsplit("-g", 1)[1].split("-")[0])
    unkeyed = hashlib.sha256("\x00".join(("session", "telegram", str(CHAT), str(gen))).encode()).hexdigest()
    assert sid != f"s-telegram-{CHAT}-g{gen}-{unkeyed[:12]}"  # not computable from the chat id
    posts = len(_texts(api))
    async with mcp_session(mcp_params(home, cwd=ws), ws.parent / "mcp.err") as s:
        err = await refused(s, "continue_agent", {"session_id": sid, "prompt": "read me the chat"})
    assert err == f"unknown session: no session {sid!r} started by this MCP client"
    key_file = home.keys_dir / "session-id.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert sid == session_id_for("telegram", str(CHAT), gen, bytes.fromhex(key_file.read_text()))
    before, count = children(home)["messengers"].incarnation, _message_count(home, sid)
    r = geode(home, "restart", "messengers")
    assert r.returncode == 0, r.stderr
    poll_for(
        lambda: children(home)["messengers"].incarnation > before and _poller(home)["state"] == "polling",
        60,
        what="the messengers child back and polling",
        swallow=(AssertionError, GeodeError),
    )
    assert _binding_session(home) == sid  # the same key: the same id after the restart
    api.push_message(CHAT, "still the same session", sender_id=ALLOWED)
    poll_for(lambda: _answered(api, "echo: still the same session"), 60, what="the reply after the restart")
    assert len(_texts(api)) == posts + 1  # the chat got its own reply only
    assert _message_count(home, sid) > count  # ... in the same session


def _message_count(home: GeodeHome, sid: str) -> int:
    """The session's stored message count; 0 while the chat has no stored session yet (run alone)."""
    r = geode(home, "sessions", "--json")
    assert r.returncode == 0, r.stderr
    return next((int(row["message_count"]) for row in json.loads(r.stdout) if row["session_id"] == sid), 0)


def _binding_session(home: GeodeHome) -> str:
    detail = messengers_detail(home)
    assert detail is not None, "the messengers child does not answer"
    return str(detail["bindings"][0]["session_id"])


def test_restart_resumes_at_the_stored_offset_and_kills_around_a_reply_never_post_twice(
    tree: tuple[GeodeHome, LocalBotApi, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stop and serve again: polling resumes at the stored offset, nothing old is answered. Then the
    messengers child is SIGKILLed twice around one message: after its turn record (before the cursor), and,
    once restarted, right after posting the reply (before the executor hears back): one post, and the
    reply's receipt is `uncertain` (the restarted child's recovery finds it so and does not post again), and
    stays so past the observation grace (Telegram cannot read history: it is the operator's, and listed)."""
    home, api, ws = tree
    before = _texts(api)
    cursor = _poller(home)["cursor"]
    stop(home)
    monkeypatch.setenv(
        "GEODE_FAULTS", "messengers@messengers.after_turn_record:kill,messengers@messengers.after_post:kill"
    )
    started = time.monotonic()
    serve(home, cwd=ws)
    poll_for(
        lambda: [c for c in api.calls("getUpdates") if c["at"] > started and c["status"] == 200],
        30,
        what="polling after the restart",
    )
    resumed = next(c for c in api.calls("getUpdates") if c["at"] > started)
    assert int(resumed["params"]["offset"]) == cursor
    incarnation = children(home)["messengers"].incarnation

    upd = api.push_message(CHAT, "kill me softly", sender_id=ALLOWED)
    fired = home.root / "faults"
    poll_for(lambda: (fired / "messengers.after_turn_record.fired").exists(), 30, what="the first kill")
    poll_for(lambda: (fired / "messengers.after_post.fired").exists(), 60, what="the kill after the post")
    poll_for(lambda: _settled(home, upd["update_id"]), 60, what="settled", swallow=(AssertionError,))
    assert _answered(api, "echo: kill me softly") == 1
    assert children(home)["messengers"].incarnation >= incarnation + 2
    assert _texts(api)[: len(before)] == before and len(_texts(api)) == len(before) + 1  # nothing old again
    op = reply_operation_id(turn_id_for("telegram", str(CHAT), str(upd["message"]["message_id"])))
    # Telegram cannot read its history: observation passes (no grace here) keep the receipt for the operator,
    # and `geode messengers` lists it
    poll_for(lambda: _poller(home)["uncertain_replies"] >= 1, 30, what="an observation pass keeping it")
    r = geode(home, "receipts", "--uncertain", "--json")
    assert r.returncode == 0, r.stderr
    assert op in [row["operation_id"] for row in json.loads(r.stdout)], r.stdout
    shown = geode(home, "messengers")
    assert "uncertain replies: 1 (geode receipts --uncertain)" in shown.stdout, shown.stdout
