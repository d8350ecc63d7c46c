"""An interrupted effect is never "not applied", on a real `geode serve` tree. A command that writes before
it sleeps, stopped by GEODE after it began — SIGINT to `geode ask` (Ctrl-C), its own deadline, a turn cancel
in the executor — is a known end with an unknown effect: the partial write stays, every view (the CLI's tool
line, `geode ask --json`, the model's tool_result, the timeline, `geode receipts`) says `interrupted`, the
receipt is `committed` (nothing quarantined), and the session takes its next mutating call without a
reconcile."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from geode.tools.spec import ToolCall, ToolResult
from tests.actors.tree_kit import geode, geode_popen, scripted_tree, tool_results, wait_for
from tests.tools.executor_tree import ALLOW_ALL, bound_executor

NOT_APPLIED = ("not applied", '"applied": false', "not_applied")


def _members(pgid: int) -> list[int]:
    found = []
    for e in os.scandir("/proc"):
        if not e.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{e.name}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(") ", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(e.name))
    return found


def _prompt(req: Any) -> str:
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    content = msgs[-1].get("content") if msgs else None
    if isinstance(content, str):
        return content
    blocks = content if isinstance(content, list) else []
    if any(b.get("type") == "tool_result" for b in blocks):
        return ""
    return " ".join(str(b.get("text", "")) for b in blocks)


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    commands = {
        "ctrl-c": (f"echo $$ > {ws}/pgid; echo started > {ws}/c.txt; sleep 8; echo done >> {ws}/c.txt", 60),
        "deadline": (f"echo started > {ws}/d.txt; sleep 8; echo done >> {ws}/d.txt", 1),
    }

    def reply(req: Any) -> Any:
        prompt = _prompt(req)
        if not prompt:
            return {"text": "the command finished"}
        if prompt.startswith("write "):
            name = prompt.split()[1]
            return {"tool_calls": [{"name": "write_file", "input": {"file_path": name, "content": "next\n"}}]}
        command, timeout = commands[prompt]
        return {"tool_calls": [{"name": "run_bash", "input": {"command": command, "timeout": timeout}}]}

    return reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, ScriptedServer, Path]]:
    base = tmp_path_factory.mktemp("interrupted")
    ws = base / "ws"
    ws.mkdir()
    with scripted_tree(base, _reply(ws), ws, extra=ALLOW_ALL, cwd=ws) as (home, server):
        yield home, server, ws


def _says_interrupted_nowhere_not_applied(text: str) -> None:
    assert "interrupted" in text.lower(), text
    for lie in NOT_APPLIED:
        assert lie not in text.lower(), (lie, text)


def _records_say_interrupted(home: GeodeHome, session: str, by: str, *, table: bool = False) -> None:
    """The timeline's completed row and the receipt (JSON and the table) say interrupted, none not applied."""
    rows = json.loads(geode(home, "timeline", session, "--json").stdout)
    done = [r["event"]["payload"] for r in rows if r["event"]["kind"] == "tool.completed"]
    assert done and done[0]["tool_name"] == "run_bash", rows
    assert done[0]["outcome"] == "interrupted" and done[0]["executed"] is True, done[0]
    assert done[0]["summary"]["interrupted_by"] == by and done[0]["summary"]["may_have_partly_run"] is True
    _says_interrupted_nowhere_not_applied(json.dumps(done[0]))
    receipts = json.loads(geode(home, "receipts", "--session", session, "--json").stdout)
    bash = [r for r in receipts if r["identity"]["tool_name"] == "run_bash"]
    assert [(r["state"], r["outcome"]) for r in bash] == [("committed", "interrupted")], receipts
    assert bash[0]["result"]["executed"] is True and bash[0]["result"]["content"]["signal"], bash[0]
    _says_interrupted_nowhere_not_applied(json.dumps(bash[0]))
    if table:  # the people's view (one test reads it: each CLI run costs a process start)
        text = geode(home, "receipts", "--session", session).stdout
        assert any("committed" in ln and "interrupted" in ln for ln in text.splitlines()), text


def _next_write_runs(home: GeodeHome, ws: Path, session: str, name: str) -> None:
    """The session is not quarantined: its next mutating call runs (no `geode reconcile` in between)."""
    r = geode(home, "ask", f"write {name}", "--resume", session, "--json", cwd=ws, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert json.loads(r.stdout)["tool_calls"] == [{"id": ANY_ID, "name": "write_file", "error": None}]
    assert (ws / name).read_text() == "next\n"
    assert json.loads(geode(home, "receipts", "--uncertain", "--json").stdout) == []


class _AnyId:
    def __eq__(self, other: object) -> bool:
        return isinstance(other, str) and bool(other)


ANY_ID = _AnyId()


def test_ctrl_c_during_a_command_says_interrupted_everywhere(tree: Any) -> None:
    home, _server, ws = tree
    proc = geode_popen(home, "ask", "ctrl-c", "--json", cwd=ws)
    pgid = 0
    try:
        wait_for(lambda: (ws / "c.txt").exists() and proc.poll() is None, timeout_s=60, what="not started")
        notes = list((home.run_dir / "executor-groups").glob("*.json"))
        assert len(notes) == 1, notes
        pgid = int(notes[0].name.split("-")[0])
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for(lambda: not _members(pgid), timeout_s=5, what="the process group outlived the cancel")
    assert took < 6, took  # long before `sleep 8` could have ended
    assert (ws / "c.txt").read_text() == "started\n"  # it partly ran: "not applied" would be a lie
    assert proc.returncode == 130, (out, err)
    result = json.loads(out)
    assert result["termination_reason"] == "user_cancelled"
    assert "run_bash: interrupted after" in result["text"] and "may have partly run" in result["text"]
    assert [c.get("outcome") for c in result["tool_calls"]] == ["interrupted"], result
    _says_interrupted_nowhere_not_applied(out)
    _records_say_interrupted(home, result["session_id"], "cancel", table=True)
    _next_write_runs(home, ws, result["session_id"], "after-c.txt")


def test_a_command_past_its_deadline_says_interrupted_everywhere(tree: Any) -> None:
    home, server, ws = tree
    known = {s["session_id"] for s in json.loads(geode(home, "sessions", "--json").stdout)}
    r = geode(home, "ask", "deadline", cwd=ws, timeout=60)  # the text view: the CLI's tool line
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert (ws / "d.txt").read_text() == "started\n"
    line = [ln for ln in r.stdout.splitlines() if "⎿ run_bash" in ln]
    assert line and "Interrupted by its deadline after" in line[0], r.stdout
    _says_interrupted_nowhere_not_applied(r.stdout)
    seen = [s.replace('\\"', '"') for s in tool_results(server, "deadline")]  # what the model was told
    assert seen and '"outcome": "interrupted"' in seen[0], seen
    _says_interrupted_nowhere_not_applied(seen[0])
    (session,) = {s["session_id"] for s in json.loads(geode(home, "sessions", "--json").stdout)} - known
    _records_say_interrupted(home, session, "deadline")
    _next_write_runs(home, ws, session, "after-d.txt")


def test_a_turn_cancel_in_the_executor_says_interrupted(tree: Any) -> None:
    home, _server, ws = tree
    bus = Bus("turn-cancel-test", 1, home).start()
    try:
        client, ctx = bound_executor(bus, ws, "turn-cancel-s", "op-turn-cancel-1")
        command = f"echo started > {ws}/t.txt; sleep 8; echo done >> {ws}/t.txt"
        call = ToolCall(id="tu-1", name="run_bash", input={"command": command, "timeout": 60})
        out: dict[str, ToolResult] = {}
        t = threading.Thread(target=lambda: out.setdefault("r", client.execute(ctx, call)), daemon=True)
        t.start()
        wait_for(lambda: (ws / "t.txt").exists(), timeout_s=30, what="the command never started")
        assert client.cancel("turn-cancel-s", "t1") >= 1  # what the loop sends when its turn is cancelled
        t.join(15)
        result = out["r"]
        assert result.content["outcome"] == "interrupted" and result.executed is True, result
        assert (ws / "t.txt").read_text() == "started\n"
        _says_interrupted_nowhere_not_applied(result.model_dump_json())
        _records_say_interrupted(home, "turn-cancel-s", "cancel")
        later = ctx.model_copy(update={"turn_id": "t2", "step_id": "st2", "operation_id": "op-turn-cancel-2"})
        write = ToolCall(id="tu-2", name="write_file", input={"file_path": "after-t.txt", "content": "x"})
        ok = client.execute(later, write)
        assert not ok.is_error, ok
    finally:
        bus.stop()
