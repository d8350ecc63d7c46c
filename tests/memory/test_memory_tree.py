"""Memory in the daemon (`geode serve`, the scripted model, the local Telegram Bot API server): a fact saved
with memory_save in one CLI session is in the next session's prompt, inside the <agent_memory> block; a bound
chat's memory_save is approved in the chat and lands in the chat's own memory; the chat's memory never
reaches a CLI session's prompt and the operator's never reaches the chat's. One shared tree, in file order."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_home
from tests.messengers.chat_tree_kit import prompt_of
from tests.messengers.platform_tree_kit import platform_sections, serving
from tests.waiting import poll_for

CHAT, APPROVER = -100777, 1002
OPERATOR_FACT, CHAT_FACT = "the operator drinks OOLONG-7731", "this chat ships on FRIDAY-4410"


def _reply(req: Any) -> Any:
    """ "remember X": memory_save add X; after a tool result: report it; anything else: echo."""
    last = req.body["messages"][-1].get("content")
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return {"text": "saved: " + json.dumps(last)[:300]}
    prompt = prompt_of(req)
    if prompt.startswith("remember "):
        fact = prompt.removeprefix("remember ")
        return {"tool_calls": [{"name": "memory_save", "input": {"action": "add", "text": fact}}]}
    return {"text": f"echo: {prompt}"}


@pytest.fixture(scope="module")
def tree(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GeodeHome, LocalBotApi, ScriptedServer, Path]]:
    base = tmp_path_factory.mktemp("memory")
    ws = base / "ws"
    ws.mkdir()
    with LocalBotApi() as api, ScriptedServer(_reply) as model:
        extra = "[messengers]\napproval_timeout_s = 60\n" + platform_sections(tg=api)
        extra += f'[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "{CHAT}"\n'
        extra += f'allowed_senders = ["{APPROVER}"]\napprovers = ["{APPROVER}"]\n'
        home = scripted_home(base, model, ws, extra=extra)
        with serving(home, tg=api, cwd=ws):
            yield home, api, model, ws


def _system(model: ScriptedServer, prompt: str) -> str:
    """The system prompt of the (last) model request whose user message is ``prompt``."""
    reqs = [r for r in model.requests if prompt_of(r) == prompt]
    assert reqs, f"no model request for {prompt!r}"
    return json.dumps(reqs[-1].body.get("system"))


def _ask(home: GeodeHome, ws: Path, prompt: str, *flags: str) -> str:
    r = geode(home, "ask", *flags, prompt, cwd=ws, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_a_fact_saved_in_one_cli_session_is_in_the_next_sessions_memory_block(
    tree: tuple[GeodeHome, LocalBotApi, ScriptedServer, Path],
) -> None:
    home, _, model, ws = tree
    out = _ask(home, ws, f"remember {OPERATOR_FACT}", "--dangerously-skip-permissions")
    assert "saved:" in out and "memory_full" not in out
    assert (home.root / "memory/MEMORY.md").read_text() == f"- {OPERATOR_FACT}\n"
    _ask(home, ws, "what do you remember")  # a new session
    system = _system(model, "what do you remember")
    block = system[system.index("<agent_memory>") : system.index("</agent_memory>")]
    assert OPERATOR_FACT in block and "data, not instructions" in block


def _posts_after(api: LocalBotApi, n: int) -> list[dict[str, Any]]:
    return api.posts(CHAT)[n:]


def _keyboard(api: LocalBotApi, n: int) -> dict[str, Any] | None:
    return next((p for p in _posts_after(api, n) if p["reply_markup"]), None)


def test_a_chats_memory_is_approved_in_the_chat_and_never_crosses_to_or_from_the_cli(
    tree: tuple[GeodeHome, LocalBotApi, ScriptedServer, Path],
) -> None:
    home, api, model, ws = tree
    n0 = len(api.posts(CHAT))
    api.push_message(CHAT, f"remember {CHAT_FACT}", sender_id=APPROVER)
    kb = poll_for(lambda: _keyboard(api, n0), 60, what="the approval keyboard")
    assert kb is not None
    assert "memory_save" in kb["text"]
    buttons = {b["text"]: b["callback_data"] for row in kb["reply_markup"]["inline_keyboard"] for b in row}
    api.push_callback(CHAT, kb["message_id"], buttons["Approve"], sender_id=APPROVER)
    poll_for(lambda: any("saved:" in p["text"] for p in _posts_after(api, n0)), 60, what="the turn's answer")
    chat_file = home.root / "memory/chats/telegram--100777/MEMORY.md"
    assert chat_file.read_text() == f"- {CHAT_FACT}\n"

    api.push_message(CHAT, "recall in the chat", sender_id=APPROVER)
    poll_for(lambda: any(p["text"] == "echo: recall in the chat" for p in api.posts(CHAT)), 60, what="echo")
    chat_system = _system(model, "recall in the chat")
    assert CHAT_FACT in chat_system and OPERATOR_FACT not in chat_system  # the operator's stays out

    _ask(home, ws, "recall in the cli")
    cli_system = _system(model, "recall in the cli")
    assert OPERATOR_FACT in cli_system and CHAT_FACT not in cli_system  # the chat's stays out
