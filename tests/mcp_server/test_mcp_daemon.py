"""`geode mcp` with the user's daemon running for the same GEODE_HOME: the turn goes through the daemon's
lanes (not an in-process tree) and shows in `geode sessions` like any other entry path's; a call the host
cancels cancels its turn. `geode mcp --http` on loopback wants the token it made in the home (another uid
without it gets 401), and continue_agent continues only sessions its own creator started over MCP."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from tests.actors.tree_kit import geode, scripted_tree, wait_for
from tests.mcp_server.mcp_kit import (
    FORBIDDEN,
    Provider,
    call,
    free_port,
    http_session,
    mcp_params,
    mcp_session,
    refused,
    serving_http,
)

SLOW_S = 20.0  # the provider's delay for a "slow" prompt: far longer than the cancelled call waits
NOBODY = 65534
# another local user's MCP client: POSTs initialize without a token, then tries to read the daemon's token
AS_NOBODY = """
import encodings.idna, email.parser, http.client, json, os, socket, sys, urllib.error, urllib.request
socket.getaddrinfo("127.0.0.1", 80)  # loads what name lookup needs while the files are still readable
uid = int(sys.argv[3]); os.setgroups([]); os.setgid(uid); os.setuid(uid)  # modules loaded: now another user
init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
        "capabilities": {}, "clientInfo": {"name": "stranger", "version": "0"}}}
req = urllib.request.Request(sys.argv[1], data=json.dumps(init).encode(), method="POST",
    headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
try:
    with urllib.request.urlopen(req, timeout=10) as resp:
        print(resp.status)
except urllib.error.HTTPError as exc:
    print(exc.code)
try:
    open(sys.argv[2]).read()
    print("read")
except OSError:
    print("unreadable")
"""


class SlowProvider(Provider):
    """``slow …``: answered after SLOW_S; ``write PATH``: a write_file call, then the tool result as text."""

    def __call__(self, req: Any) -> Any:
        reply = super().__call__(req)
        last = self.messages[-1][-1] if self.messages[-1] else {}
        blocks = last.get("content") if isinstance(last.get("content"), list) else []
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            return {"text": json.dumps(results[0].get("content"))}
        if reply["text"].startswith("answer: write "):
            path = reply["text"].split()[-1]
            return {"tool_calls": [{"name": "write_file", "input": {"file_path": path, "content": "x"}}]}
        return {**reply, "delay_s": SLOW_S} if "slow" in reply["text"] else reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, SlowProvider, Path]]:
    base = tmp_path_factory.mktemp("mcp-daemon")
    model = SlowProvider()
    with scripted_tree(base, model) as (home, _server):
        yield home, model, base


def _sessions(home: GeodeHome) -> dict[str, dict[str, Any]]:
    listed = geode(home, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    return {r["session_id"]: r for r in json.loads(listed.stdout)}


async def test_run_agent_goes_through_the_running_daemon(tree: tuple[GeodeHome, SlowProvider, Path]) -> None:
    home, model, base = tree
    async with mcp_session(mcp_params(home, cwd=base), base / "mcp.err") as s:
        health = await call(s, "get_health", {})
        out = await call(s, "run_agent", {"prompt": "through the daemon please", "time_budget_s": 60})
    rows = _sessions(home)
    assert health["backend"] == "daemon" and health["children"].get("lanes") == "running", health
    assert out["text"] == "answer: through the daemon please" and out["termination_reason"] == "natural"
    assert out["session_id"] in rows, rows
    assert rows[out["session_id"]]["first_prompt"].startswith("through the daemon please")
    assert model.tools and all(FORBIDDEN.isdisjoint(tools) for tools in model.tools), model.tools
    assert "of 60s" in model.systems[-1], "the caller's time budget did not reach the turn"
    # the daemon ran it: `geode mcp` never started a tree of its own (that one would log to repl.log)
    assert not (home.logs_dir / "repl.log").exists()


async def test_a_call_the_host_cancels_cancels_its_turn(tree: tuple[GeodeHome, SlowProvider, Path]) -> None:
    home, _model, base = tree
    async with mcp_session(mcp_params(home, cwd=base), base / "mcp.err") as s:
        with pytest.raises(Exception, match=r"(?i)timed out|timeout"):  # the client gives up: cancelled
            await s.call_tool(
                "run_agent", {"prompt": "a slow one", "time_budget_s": 60}, read_timeout_seconds=3
            )

    def ended() -> str | None:
        row = next((r for r in _sessions(home).values() if r["first_prompt"].startswith("a slow one")), None)
        result = ((row or {}).get("meta") or {}).get("last_result") or {}
        return result.get("termination_reason")

    # well before the provider's delay ends, the turn has ended: cancelled, not answered
    assert (
        wait_for(ended, timeout_s=SLOW_S - 5, interval_s=0.5, what="the slow turn to end") == "user_cancelled"
    )


async def test_approvals_are_denied(tree: tuple[GeodeHome, SlowProvider, Path]) -> None:
    home, _model, base = tree
    target = base / "wanted.txt"
    async with mcp_session(mcp_params(home, cwd=base), base / "mcp.err") as s:
        out = await call(s, "run_agent", {"prompt": f"write {target}"})
    assert out["termination_reason"] == "natural", out
    assert "Nobody can approve 'write_file' in HEADLESS mode" in out["text"], out
    assert not target.exists()


def _listening(log: Path) -> bool:
    return "listening on" in (log.read_text() if log.exists() else "")


async def test_loopback_http_wants_the_homes_token_and_another_uid_gets_401(
    tree: tuple[GeodeHome, SlowProvider, Path],
) -> None:
    """Loopback with nothing configured: a token is made 0600 in keys/ and shown once; `nobody` gets 401 and
    cannot read it; the holder runs and continues its own turns; a refusal is logged without the token. The
    sessions record their creator (a hash of the token), and the stdio client (the daemon's uid) and the
    HTTP client cannot continue each other's sessions."""
    home, model, base = tree
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    token_file = home.keys_dir / "mcp-http.token"
    first_log, second_log = base / "http-1.err", base / "http-2.err"
    with serving_http(home, f"127.0.0.1:{port}", first_log, cwd=base):
        wait_for(lambda: _listening(first_log), 60, interval_s=0.1, what="geode mcp --http to listen")
        stranger = subprocess.run(
            [sys.executable, "-c", AS_NOBODY, url, str(token_file), str(NOBODY)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert stranger.stdout.split() == ["401", "unreadable"], stranger
        token = token_file.read_text().strip()
        async with http_session(url, token, roots=[base]) as h:
            mine = await call(h, "run_agent", {"prompt": "over http with the token"})
            again = await call(h, "continue_agent", {"session_id": mine["session_id"], "prompt": "once more"})
            async with mcp_session(mcp_params(home, cwd=base), base / "mcp.err") as s:
                theirs = await call(s, "run_agent", {"prompt": "over stdio"})
                stdio_on_http = await refused(
                    s, "continue_agent", {"session_id": mine["session_id"], "prompt": "let me in"}
                )
            http_on_stdio = await refused(
                h, "continue_agent", {"session_id": theirs["session_id"], "prompt": "let me in"}
            )
    st = token_file.stat()
    assert stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.getuid()
    assert len(token) >= 32
    shown = first_log.read_text()
    assert shown.count(token) == 2, shown  # the token, and the line to register it with
    assert f'claude mcp add --transport http geode {url} --header "Authorization: Bearer {token}"' in shown
    assert "401 for POST '/mcp' from 127.0.0.1:" in shown and "no Authorization header" in shown, shown
    assert mine["text"] == "answer: over http with the token" and again["text"] == "answer: once more"
    assert again["session_id"] == mine["session_id"] and again["rounds"] == 1
    assert stdio_on_http == f"unknown session: no session {mine['session_id']!r} started by this MCP client"
    assert http_on_stdio == f"unknown session: no session {theirs['session_id']!r} started by this MCP client"
    rows = _sessions(home)
    creators = {rows[x["session_id"]]["meta"].get("creator") for x in (mine, theirs)}
    assert creators == {f"uid:{os.getuid()}", rows[mine["session_id"]]["meta"]["creator"]}, creators
    assert rows[mine["session_id"]]["meta"]["creator"].startswith("token:")
    assert token not in json.dumps(rows) and not any("let me in" in json.dumps(m) for m in model.messages)
    # a second start finds the token: the same one, not shown again
    with serving_http(home, f"127.0.0.1:{free_port()}", second_log, cwd=base):
        wait_for(lambda: _listening(second_log), 60, interval_s=0.1, what="geode mcp --http to listen again")
    assert token not in second_log.read_text() and token_file.read_text().strip() == token


async def test_continue_agent_refuses_cli_and_unknown_sessions_alike_and_continues_its_own(
    tree: tuple[GeodeHome, SlowProvider, Path],
) -> None:
    home, model, base = tree
    cli = geode(home, "ask", "--json", "a cli session of the operator", cwd=base)
    assert cli.returncode == 0, cli.stderr
    cli_sid = json.loads(cli.stdout)["session_id"]
    before = _sessions(home)[cli_sid]["message_count"]
    async with mcp_session(mcp_params(home, cwd=base), base / "mcp.err") as s:
        on_cli = await refused(s, "continue_agent", {"session_id": cli_sid, "prompt": "inject into cli"})
        unknown = await refused(s, "continue_agent", {"session_id": "s-0000000000000000", "prompt": "x"})
        own = await call(s, "run_agent", {"prompt": "first of mine"})
        more = await call(s, "continue_agent", {"session_id": own["session_id"], "prompt": "second of mine"})
    # the same answer for a session that exists (not ours) and one that does not: existence is not leaked
    assert on_cli.replace(cli_sid, "ID") == unknown.replace("s-0000000000000000", "ID")
    assert "started by this MCP client" in on_cli
    assert _sessions(home)[cli_sid]["message_count"] == before
    assert not any("inject into cli" in json.dumps(m) for m in model.messages)
    assert more["session_id"] == own["session_id"] and more["text"] == "answer: second of mine"
    # the continued turn saw the first: one session, one history
    assert "first of mine" in json.dumps(model.messages[-1])
    assert _sessions(home)[own["session_id"]]["message_count"] >= 4
