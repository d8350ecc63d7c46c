"""Search over past sessions in a served tree (scripted provider, two Telegram chats on the local Bot API
server through python-telegram-bot, and the operator's `geode ask`): `geode search` finds a phrase of an
earlier session of every scope, `geode search --rebuild` builds the same answers from the records, and a
chat's `session_search` (the scope is its session's, never the model's) returns only that chat's sessions
while the operator's returns every scope's."""

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
from tests.messengers.chat_tree_kit import echo_or_write, prompt_of
from tests.messengers.platform_tree_kit import serving
from tests.waiting import poll_for

CHAT_A, CHAT_B, SENDER = -100771, -100772, 1003
WORD = "aardvark"


def _model(ws: Path):  # type: ignore[no-untyped-def]
    """ "find <words>" calls session_search (the model's input names no scope; a scope it invents is
    refused by the schema); anything else as ``echo_or_write`` (echo; a tool result reported)."""
    other = echo_or_write(ws)

    def reply(req: Any) -> Any:
        prompt = prompt_of(req)
        last = req.body["messages"][-1].get("content")
        fresh = not (isinstance(last, list) and any(b.get("type") == "tool_result" for b in last))
        if fresh and prompt.startswith("find "):
            return {"tool_calls": [{"name": "session_search", "input": {"query": prompt[5:], "limit": 20}}]}
        return other(req)

    return reply


@pytest.fixture(scope="module")
def tree(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[GeodeHome, LocalBotApi, ScriptedServer, Path]]:
    base = tmp_path_factory.mktemp("search")
    ws = base / "ws"
    ws.mkdir()
    with LocalBotApi() as api, ScriptedServer(_model(ws)) as model:
        bindings = "".join(
            f'[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "{chat}"\n'
            f'allowed_senders = ["{SENDER}"]\nworkspace = "{ws}"\n'
            for chat in (CHAT_A, CHAT_B)
        )
        extra = f'[messengers.telegram]\nbase_url = "{api.base_url}"\npoll_timeout_s = 1\n{bindings}'
        home = scripted_home(base, model, ws, extra=extra)
        with serving(home, tg=api, cwd=ws):
            yield home, api, model, ws


def _say(api: LocalBotApi, chat: int, text: str) -> str:
    """Send ``text`` to the bot in ``chat``; the bot's reply."""
    n = len(api.posts(chat))
    api.push_message(chat, text, sender_id=SENDER)
    return str(poll_for(lambda: api.posts(chat)[n:], 60, what=f"the reply to {text!r}")[0]["text"])


def _search_results(model: ScriptedServer, prompt: str) -> list[dict[str, Any]]:
    """The results the model got from its session_search call for the turn ``prompt``."""
    for r in reversed(model.requests):
        last = r.body["messages"][-1].get("content") if isinstance(r.body, dict) else None
        if prompt_of(r) == prompt and isinstance(last, list):
            for block in last:
                if block.get("type") == "tool_result":
                    content = block["content"]
                    text = content if isinstance(content, str) else content[0]["text"]
                    return list(json.loads(text)["results"])
    raise AssertionError(f"no session_search result for {prompt!r}")


def _geode_search(home: GeodeHome, *args: str) -> dict[str, Any]:
    r = geode(home, "search", *args, "--json")
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


def test_geode_search_and_session_search_see_what_their_scope_may(
    tree: tuple[GeodeHome, LocalBotApi, ScriptedServer, Path],
) -> None:
    home, api, model, ws = tree
    ask = geode(home, "ask", f"the operator's {WORD} is called Oscar", "--json", cwd=ws)
    assert ask.returncode == 0, ask.stderr
    assert "Alpha" in _say(api, CHAT_A, f"our {WORD} is called Alpha")
    assert "Bravo" in _say(api, CHAT_B, f"our {WORD} is called Bravo")

    found = _geode_search(home, WORD, "--limit", "50")["hits"]
    snippets = " ".join(h["snippet"] for h in found)
    assert all(name in snippets for name in ("Oscar", "Alpha", "Bravo")) and f"[{WORD}]" in snippets
    assert len({h["session_id"] for h in found}) == 3
    rebuilt = _geode_search(home, WORD, "--limit", "50", "--rebuild")
    assert rebuilt["rebuilt"]["turns"] >= 3
    assert {(h["session_id"], h["turn_id"]) for h in rebuilt["hits"]} == {
        (h["session_id"], h["turn_id"]) for h in found
    }

    _say(api, CHAT_A, f"find {WORD}")
    seen_by_a = json.dumps(_search_results(model, f"find {WORD}"))
    assert "Alpha" in seen_by_a and "Bravo" not in seen_by_a and "Oscar" not in seen_by_a
    _say(api, CHAT_B, f"find {WORD} called")
    seen_by_b = json.dumps(_search_results(model, f"find {WORD} called"))
    assert "Bravo" in seen_by_b and "Alpha" not in seen_by_b and "Oscar" not in seen_by_b

    mine = geode(home, "ask", f"find {WORD} is called", "--json", cwd=ws)
    assert mine.returncode == 0, mine.stderr
    seen_by_operator = json.dumps(_search_results(model, f"find {WORD} is called"))
    assert all(name in seen_by_operator for name in ("Oscar", "Alpha", "Bravo"))
