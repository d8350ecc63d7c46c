"""`geode reload` on one real `geode serve` tree (scripted provider, the local Telegram Bot API server, a
stdio MCP server): it refuses an invalid file (exit 78, one line per problem, the tree's copy kept),
`--dry-run` prints and applies nothing, and after a reload — no restart command, no turn or reply lost — a
changed loop setting applies to the next turn, a new Telegram binding answers its next message (and a
disabled platform stops), a new PreToolUse hook decides the next call and a new MCP server's tools are
offered on the next turn (the reload rule, docs/runtime.md). The remote loop worker's case is in
tests/multihost/test_tcp_hosts.py. The tests share the tree and run in file order.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.config_file import last_good_path
from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, geode_popen, scripted_home, serve, stop
from tests.messengers.chat_tree_kit import prompt_of
from tests.waiting import poll_for

CHAT, NEW_CHAT, SENDER = -100123, -100456, 1001
MCP_SERVER = Path(__file__).parents[1] / "tools" / "mcp_server.py"
SEEN: dict[str, dict[str, Any]] = {}  # prompt → the last request's max_tokens and offered tools


def _reply(req: Any) -> Any:
    body = req.body if isinstance(req.body, dict) else {}
    prompt = prompt_of(req)
    SEEN[prompt] = {
        "max_tokens": body.get("max_tokens"),
        "tools": [t["name"] for t in body.get("tools") or []],
    }
    last = body["messages"][-1].get("content")
    if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
        return {"text": "tool result: " + json.dumps(last)[:400]}
    if prompt == "add 2 and 3":
        return {"tool_calls": [{"name": "mcp__t__add", "input": {"a": 2, "b": 3}}]}
    if prompt.startswith("read "):
        return {"tool_calls": [{"name": "read_file", "input": {"file_path": prompt.split()[-1]}}]}
    if prompt.startswith("slow "):
        return {"text": f"slowly: {prompt}", "delay_s": 3.0}
    return {"text": f"echo: {prompt}"}


def _binding(chat: int) -> str:
    return f'\n[[messengers.bindings]]\nplatform = "telegram"\nchannel_id = "{chat}"\n'


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, LocalBotApi, Path]]:
    base = tmp_path_factory.mktemp("reload")
    ws = base / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("the notes\n")
    with LocalBotApi() as api, ScriptedServer(_reply) as model:
        extra = f'[messengers.telegram]\nbase_url = "{api.base_url}"\npoll_timeout_s = 1\n' + _binding(CHAT)
        home = scripted_home(base, model, ws, extra=extra)
        with home.env_file.open("a") as f:
            f.write(f"TELEGRAM_BOT_TOKEN={api.token}\n")
        try:
            serve(home, cwd=ws)
            yield home, api, ws
        finally:
            stop(home)


def _edit(home: GeodeHome, add: str = "", old: str = "", new: str = "") -> None:
    text = home.config_file.read_text()
    home.config_file.write_text((text.replace(old, new) if old else text) + add)


def _ask(home: GeodeHome, ws: Path, prompt: str) -> dict[str, Any]:
    r = geode(home, "ask", prompt, "--json", timeout=90, cwd=ws)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return json.loads(r.stdout)  # type: ignore[no-any-return]


def test_an_invalid_file_is_refused_one_line_per_problem_and_the_copy_stays(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    home, _, ws = tree
    good, copy = home.config_file.read_text(), last_good_path(home).read_bytes()
    _edit(home, '\n[verify]\nrepair_budget = "lots"\n[lanes]\nsession_queue_max = "many"\n')
    try:
        for args in (["reload"], ["reload", "--dry-run"]):
            r = geode(home, *args, timeout=60)
            assert r.returncode == 78, (args, r.stdout, r.stderr)
            lines = r.stderr.strip().splitlines()
            assert len(lines) == 3 and {"repair_budget", "session_queue_max"} == {
                key for key in ("repair_budget", "session_queue_max") for x in lines[:2] if f"] {key}:" in x
            }, lines
            assert lines[-1].endswith("config not re-read; the daemon keeps its current one")
            assert r.stdout == "" and "Traceback" not in r.stderr
        assert last_good_path(home).read_bytes() == copy
    finally:
        home.config_file.write_text(good)
    assert _ask(home, ws, "still here")["text"] == "echo: still here"


def test_dry_run_prints_what_would_change_and_applies_nothing(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    home, _, ws = tree
    copy = last_good_path(home).read_bytes()
    _edit(home, old="workers = 2", new="workers = 3\nmax_tokens = 1234")
    r = geode(home, "reload", "--dry-run", timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "would apply: loop: max_tokens 32768 → 1234 (next turn)",
        "needs `geode serve` again: [loop] workers",
    ]
    assert last_good_path(home).read_bytes() == copy
    _ask(home, ws, "before the reload")
    assert SEEN["before the reload"]["max_tokens"] != 1234


def test_a_changed_loop_setting_applies_to_the_next_turn_and_no_turn_is_lost(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    home, _, ws = tree
    running = geode_popen(home, "ask", "slow across the reload", "--json", cwd=ws)
    try:
        poll_for(lambda: "slow across the reload" in SEEN, 60, what="the slow turn at the model")
        r = geode(home, "reload", timeout=60)
        assert r.returncode == 0, (r.stdout, r.stderr)
        assert "loop: max_tokens 32768 → 1234 (next turn)" in r.stdout.splitlines()
        assert "needs `geode serve` again: [loop] workers" in r.stdout.splitlines()
        _ask(home, ws, "after the reload")
        assert SEEN["after the reload"]["max_tokens"] == 1234
        out, err = running.communicate(timeout=90)
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    assert running.returncode == 0, err
    assert json.loads(out)["text"] == "slowly: slow across the reload"


def test_a_new_telegram_binding_answers_its_next_message_and_no_reply_is_lost(
    tree: tuple[GeodeHome, LocalBotApi, Path],
) -> None:
    home, api, _ = tree
    api.push_message(NEW_CHAT, "before the binding", sender_id=SENDER)
    api.push_message(CHAT, "during the reload", sender_id=SENDER)
    _edit(home, _binding(NEW_CHAT))
    r = geode(home, "reload", timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.splitlines()[0] == "messengers: restarted (telegram binding added)"
    api.push_message(NEW_CHAT, "hello new chat", sender_id=SENDER)

    def texts(chat: int) -> list[str]:
        return [p["text"] for p in api.posts(chat)]

    poll_for(lambda: "echo: hello new chat" in texts(NEW_CHAT), 60, what="the new chat's reply")
    poll_for(lambda: "echo: during the reload" in texts(CHAT), 60, what="the old chat's reply")
    assert texts(CHAT).count("echo: during the reload") == 1
    assert "echo: before the binding" not in texts(NEW_CHAT)  # unbound when it arrived


def test_a_platform_disabled_by_reload_stops_polling(tree: tuple[GeodeHome, LocalBotApi, Path]) -> None:
    home, _, _ = tree
    _edit(home, old="poll_timeout_s = 1\n", new="poll_timeout_s = 1\nenabled = false\n")
    r = geode(home, "reload", timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.splitlines()[0] == "messengers: restarted (telegram disabled)"
    st = geode(home, "status", "--json")
    assert st.returncode == 0, st.stderr
    (tg,) = [p for p in json.loads(st.stdout)["messengers"] if p["platform"] == "telegram"]
    assert tg["state"] == "disabled", tg


def test_a_new_pretooluse_hook_decides_the_next_call(tree: tuple[GeodeHome, LocalBotApi, Path]) -> None:
    home, _, ws = tree
    read = f"read {ws / 'notes.txt'}"
    assert "the notes" in _ask(home, ws, read)["text"]
    hook = (
        '\n[[hooks.PreToolUse]]\nmatcher = "read_file"\ncommand = "echo \'reads are paused\' >&2; exit 2"\n'
    )
    _edit(home, hook)
    r = geode(home, "reload", timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "executor: hooks reloaded (PreToolUse 0 → 1; next tool call)" in r.stdout.splitlines()
    marker = f"read {ws / 'notes.txt'} "  # a new conversation: its own prompt
    out = _ask(home, ws, marker)
    assert "reads are paused" in out["text"] and "the notes" not in out["text"], out["text"]


def test_a_new_mcp_server_is_offered_on_the_next_turn(tree: tuple[GeodeHome, LocalBotApi, Path]) -> None:
    home, _, ws = tree
    _ask(home, ws, "tools before")
    before = SEEN["tools before"]["tools"]
    assert "read_file" in before and "mcp__t__add" not in before
    server = f"\n[mcp.servers.t]\ncommand = {json.dumps(sys.executable)}\n"
    server += f"args = [{json.dumps(str(MCP_SERVER))}]\n"
    _edit(home, server + "tools = { add = {} }\n")
    r = geode(home, "reload", timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "MCP servers: +t (next turn)" in r.stdout
    _ask(home, ws, "tools after")
    assert "mcp__t__add" in SEEN["tools after"]["tools"], SEEN["tools after"]
    # its structured result travels the tree as JSON text (geode/tools/structured_text.py); the model reads
    # the characters the map made
    answer = _ask(home, ws, "add 2 and 3")["text"]
    blocks = json.loads(answer.removeprefix("tool result: "))
    assert [b["content"] for b in blocks if b.get("type") == "tool_result"] == ['{"result": 5}'], answer
