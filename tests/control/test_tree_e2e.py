"""End to end through `geode serve` (real supervisor, store, lanes, executor, loop workers, control) and
the scripted provider: a write_file tool call approved through the real socket, denied without a tty by
`geode ask`, allowed with --dangerously-skip-permissions."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, geode_popen, scripted_home, scripted_tree, stop

MODELS_SEEN: list[str | None] = []


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    """First call of a turn: write a file named after the prompt; after the tool result: a final text."""

    def reply(req: Any) -> Any:
        MODELS_SEEN.append(req.body.get("model") if isinstance(req.body, dict) else None)
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        last = msgs[-1] if msgs else {}
        content = last.get("content")
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return {"text": "wrote it"}
        text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])
        name = text.split()[-1] if text.split() else "x"
        return {
            "tool_calls": [
                {"name": "write_file", "input": {"file_path": str(ws / f"{name}.txt"), "content": name}}
            ]
        }

    return reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, Path]]:
    base = tmp_path_factory.mktemp("e2e")
    ws = base / "ws"
    ws.mkdir()
    with scripted_tree(base, _reply(ws), ws, cwd=ws) as (home, _server):
        yield home, ws


def _geode(home: GeodeHome, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return geode(home, *args, cwd=cwd, timeout=90)


def test_approval_y_through_the_socket_runs_the_real_tool(tree: tuple[GeodeHome, Path]) -> None:
    home, ws = tree
    cl = ControlClient(home)
    cl.connect(cwd=str(ws), is_tty=True)
    asked: list[dict] = []
    kinds: list[str] = []
    result = cl.run_prompt(
        "please write alpha",
        on_approval=lambda d: asked.append(d) or "y",
        on_event=lambda ev: kinds.append(ev["kind"]),
        timeout_s=60,
    )
    cl.close()
    assert result["termination_reason"] == "natural", result
    assert (ws / "alpha.txt").read_text() == "alpha"
    assert asked and asked[0]["tool_name"] == "write_file"
    assert "tool_start" in kinds and "tool_end" in kinds


def test_ask_without_tty_denies_and_skip_permissions_allows(tree: tuple[GeodeHome, Path]) -> None:
    home, ws = tree
    denied = _geode(home, ws, "ask", "please write beta", "--json")
    assert denied.returncode == 77, denied.stderr  # a call needed approval and nobody could be asked
    assert "write_file needed approval and nobody could be asked (no terminal)" in denied.stderr
    out = json.loads(denied.stdout)
    assert out["termination_reason"] == "natural" and not (ws / "beta.txt").exists()
    assert out["approvals_unasked"] == ["write_file"] and out["exit_code"] == 77, out
    allowed = _geode(home, ws, "ask", "please write gamma", "--json", "--dangerously-skip-permissions")
    assert allowed.returncode == 0, allowed.stderr
    assert (ws / "gamma.txt").read_text() == "gamma"
    assert json.loads(allowed.stdout)["text"] == "wrote it"


def test_status_shows_lanes_and_workers(tree: tuple[GeodeHome, Path]) -> None:
    home, ws = tree
    r = _geode(home, ws, "status", "--json")
    assert r.returncode == 0, r.stderr
    lanes = json.loads(r.stdout)["lanes"]
    assert {"global_cap", "running", "queued", "held_lanes", "wait_p50_s", "queue_lengths"} <= set(
        lanes["lanes"]
    )
    assert sorted(w["worker"] for w in lanes["workers"]) == ["loop-1", "loop-2"]
    text = _geode(home, ws, "status")
    assert "lanes:" in text.stdout and "worker loop-1#" in text.stdout


def test_resume_and_continue_keep_the_session(tree: tuple[GeodeHome, Path]) -> None:
    home, ws = tree
    first = json.loads(
        _geode(home, ws, "ask", "please write delta", "--json", "--dangerously-skip-permissions").stdout
    )
    sid = first["session_id"]
    again = _geode(
        home, ws, "ask", "please write eps", "--json", "--dangerously-skip-permissions", "--resume", sid
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["session_id"] == sid
    cont = _geode(
        home, ws, "ask", "please write zeta", "--json", "--dangerously-skip-permissions", "--continue"
    )
    assert cont.returncode == 0, cont.stderr
    assert json.loads(cont.stdout)["session_id"] == sid  # the most recently updated session
    missing = _geode(home, ws, "ask", "hi", "--resume", "s-nope")
    assert missing.returncode == 2 and "no session" in missing.stderr


def test_interactive_chat_streams_and_asks(tree: tuple[GeodeHome, Path]) -> None:
    home, ws = tree
    r = geode(home, cwd=ws, timeout=90, input="please write eta\ny\nexit\n")
    assert r.returncode == 0, r.stderr
    assert "⏺ write_file" in r.stdout and "wrote it" in r.stdout
    assert "◆ Approval · write_file" in r.stderr
    assert (ws / "eta.txt").read_text() == "eta"


def test_repl_mode_runs_the_tree_in_one_process(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    server = ScriptedServer(_reply(ws)).start()
    try:
        home = scripted_home(tmp_path, server, ws)
        r = geode(home, "--repl", cwd=ws, timeout=90, input="please write theta\ny\nexit\n")
        assert r.returncode == 0, r.stdout + r.stderr
        assert (ws / "theta.txt").read_text() == "theta" and "wrote it" in r.stdout
    finally:
        server.stop()


def test_ask_starts_the_daemon_once_for_two_concurrent_clis(tmp_path: Path) -> None:
    server = ScriptedServer(lambda req: {"text": "started and answered"}).start()
    home = scripted_home(tmp_path, server)
    try:
        procs = [geode_popen(home, "ask", "hi", "--json") for _ in range(2)]
        outs = [p.communicate(timeout=90) for p in procs]
        assert [p.returncode for p in procs] == [0, 0], outs
        assert all(json.loads(o)["text"] == "started and answered" for o, _ in outs)
        from actors.tree.client import tree_status

        st = tree_status(home)
        assert st is not None and all(ch.restarts == 0 for ch in st.children)  # one daemon, started once
    finally:
        stop(home)
        server.stop()


def test_model_option_picks_the_sessions_model(tree: tuple[GeodeHome, Path]) -> None:
    home, ws = tree
    r = _geode(
        home,
        ws,
        "ask",
        "please write iota",
        "--json",
        "--model",
        "claude-haiku-4-5-20251001",
        "--dangerously-skip-permissions",
    )
    assert r.returncode == 0, r.stderr
    assert MODELS_SEEN[-1] == "claude-haiku-4-5-20251001"
    _geode(home, ws, "ask", "please write kappa", "--json", "--dangerously-skip-permissions")
    assert MODELS_SEEN[-1] == "claude-sonnet-5"  # the configured model for a session without --model
