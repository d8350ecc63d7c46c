"""schedule_job from a bound Telegram chat on a served tree (local Bot API, scripted model): a chat whose
binding sets ``allow_schedule = true`` asks its approver with the job's schedule, next instants and delivery,
and once approved the job is in the scheduler child (`geode schedule list`), the model's, delivering to that
chat; a chat without the flag never gets the job (the tool is not in its plan) and nobody is asked there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_home, serve, stop
from tests.messengers.chat_tree_kit import echo_or_write, prompt_of
from tests.waiting import poll_for

CHAT, PLAIN = -100123, -100456  # allow_schedule = true / the default
APPROVER = 1002


def _config(api: LocalBotApi) -> str:
    chats = "".join(
        f"""
[[messengers.bindings]]
platform = "telegram"
channel_id = "{chat}"
allowed_senders = ["{APPROVER}"]
approvers = ["{APPROVER}"]
{"allow_schedule = true" if chat == CHAT else ""}
"""
        for chat in (CHAT, PLAIN)
    )
    return f"""
[messengers]
approval_timeout_s = 30
[messengers.telegram]
base_url = "{api.base_url}"
poll_timeout_s = 1
{chats}"""


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    """``schedule NAME CHAT``: a schedule_job create delivering to that chat; else the chat tests' model."""
    base = echo_or_write(ws)

    def reply(req: Any) -> Any:
        words = prompt_of(req).split()
        last = req.body["messages"][-1].get("content")
        fresh = not (isinstance(last, list) and any(b.get("type") == "tool_result" for b in last))
        if fresh and len(words) == 3 and words[0] == "schedule":
            job = {"action": "create", "name": words[1], "every": "1d", "prompt": "daily digest"}
            return {
                "tool_calls": [{"name": "schedule_job", "input": {**job, "deliver": f"telegram:{words[2]}"}}]
            }
        return base(req)

    return reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, LocalBotApi]]:
    base = tmp_path_factory.mktemp("tg_sched")
    ws = base / "ws"
    ws.mkdir()
    with LocalBotApi() as api, ScriptedServer(_reply(ws)) as model:
        home = scripted_home(base, model, ws, extra=_config(api))
        with home.env_file.open("a") as f:
            f.write(f"TELEGRAM_BOT_TOKEN={api.token}\n")
        try:
            serve(home, cwd=ws)
            yield home, api
        finally:
            stop(home)


def _jobs(home: GeodeHome) -> dict[str, Any]:
    r = geode(home, "schedule", "list", "--json")
    assert r.returncode == 0, r.stderr
    return {j["name"]: j for j in json.loads(r.stdout)["jobs"]}


def _texts(api: LocalBotApi, chat: int, after: int = 0) -> list[str]:
    return [p["text"] for p in api.posts(chat)[after:]]


def test_a_chat_schedules_a_job_only_where_its_binding_allows_and_its_approver_approves(
    tree: tuple[GeodeHome, LocalBotApi],
) -> None:
    home, api = tree
    api.push_message(PLAIN, f"schedule plain-job {PLAIN}", sender_id=APPROVER)
    poll_for(lambda: any("tool result:" in t for t in _texts(api, PLAIN)), 60, what="the plain chat's reply")
    assert not any(p["reply_markup"] for p in api.posts(PLAIN)), "nobody is asked where it is not allowed"
    assert "not available in this session" in _texts(api, PLAIN)[-1]  # not in the chat's plan
    assert "plain-job" not in _jobs(home)

    api.push_message(CHAT, f"schedule chat-digest {CHAT}", sender_id=APPROVER)
    kb = poll_for(
        lambda: [p for p in api.posts(CHAT) if p["reply_markup"]], 60, what="the approval keyboard"
    )[0]
    asked = "\n".join(_texts(api, CHAT))
    assert 'schedule_job create "chat-digest"' in asked and "every 86400 s" in asked and "next 3:" in asked
    assert f'delivery: "telegram:{CHAT}"' in asked and 'prompt: "daily digest"' in asked
    assert "chat-digest" not in _jobs(home)
    buttons = {b["text"]: b["callback_data"] for row in kb["reply_markup"]["inline_keyboard"] for b in row}
    api.push_callback(CHAT, kb["message_id"], buttons["Approve"], sender_id=APPROVER)
    poll_for(lambda: any("tool result:" in t for t in _texts(api, CHAT)), 60, what="the reply after Approve")
    definition = _jobs(home)["chat-digest"]["entry"]["job"]["definition"]
    assert definition["origin"] == "model" and definition["every"] == 86400
    assert definition["deliver"] == {"platform": "telegram", "channel_id": str(CHAT)}
