"""Cancel means cancel, on a real `geode serve` tree: SIGINT to `geode ask` while an approved run_bash
`sleep 8; echo done > f` runs kills its process group at once; f never appears, the receipt settles as not
applied, and both the answer and the timeline say the call was cancelled and not applied."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from tests.actors.tree_kit import geode, geode_popen, scripted_tree, wait_for


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


def _running(proc: Any, pgid_file: Path) -> bool:
    assert proc.poll() is None, proc.communicate()
    return pgid_file.exists() and bool(pgid_file.read_text().strip())


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    command = f"echo $$ > {ws}/pgid; sleep 8; echo done > {ws}/f"

    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        content = msgs[-1].get("content") if msgs else None
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return {"text": "the command finished"}
        return {"tool_calls": [{"name": "run_bash", "input": {"command": command, "timeout": 60}}]}

    return reply


def test_sigint_to_ask_kills_the_running_bash_and_reports_it_not_applied(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with scripted_tree(tmp_path, _reply(ws), ws, cwd=ws) as (home, _server):
        proc = geode_popen(
            home, "ask", "run the slow command", "--json", "--dangerously-skip-permissions", cwd=ws
        )
        pgid = 0
        try:
            wait_for(lambda: _running(proc, ws / "pgid"), timeout_s=60, what="the command never started")
            # the shell's $$ is its pid in the call's PID namespace; the executor's note has its group
            notes = list((home.run_dir / "executor-groups").glob("*.json"))
            assert len(notes) == 1, notes
            pgid = int(notes[0].name.split("-")[0])
            assert _members(pgid), "the command runs"
            sent = time.monotonic()
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=30)
            took = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
        wait_for(lambda: not _members(pgid), timeout_s=5, what="the process group outlived the cancel")
        print(f"\ngeode ask returned {took:.2f}s after SIGINT")
        assert took < 6, took  # long before `sleep 8` could have ended
        assert not (ws / "f").exists()
        assert proc.returncode == 130, (out, err)
        result = json.loads(out)
        assert result["termination_reason"] == "user_cancelled"
        assert "run_bash: cancelled, not applied" in result["text"], result
        rows = json.loads(geode(home, "timeline", result["session_id"], "--json").stdout)
        done = [r["event"]["payload"] for r in rows if r["event"]["kind"] == "tool.completed"]
        assert done and done[-1]["tool_name"] == "run_bash", rows
        assert done[-1]["cancelled"] is True and done[-1]["applied"] is False
        assert done[-1]["executed"] is False and done[-1]["error_type"] == "bash_cancelled"
        kinds = [r["event"]["kind"] for r in rows]
        assert kinds.index("tool.completed") < kinds.index("turn.ended"), kinds
        receipts = json.loads(geode(home, "receipts", "--session", result["session_id"], "--json").stdout)
        assert [r["state"] for r in receipts] == ["committed"], receipts
        assert receipts[0]["result"]["executed"] is False
        assert not (ws / "f").exists()
