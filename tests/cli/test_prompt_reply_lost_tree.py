"""A real tree: control is SIGKILLed right after `geode ask` sent its prompt (lanes is held with SIGSTOP so
the prompt is still in flight inside control). The client re-handshakes, re-sends the prompt with the turn
id it chose, and reports the real outcome of that one turn; a client that stops waiting exits 4 with the
turn's id (issue 12: client give-ups were exit 3, "daemon unavailable")."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

from tests.actors.tree_kit import children, geode, geode_popen, scripted_tree, wait_children, wait_for
from tests.cli.scripted_chat import make_reply


def test_prompt_whose_reply_is_lost_is_followed_to_its_outcome(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with scripted_tree(tmp_path, make_reply(ws), ws, cwd=ws) as (home, server):
        kids = wait_children(home, lambda k: all(k[n].state == "running" for n in ("control", "lanes")))
        control, lanes = kids["control"], kids["lanes"]
        log = home.logs_dir / "control.log"
        offset = log.stat().st_size if log.exists() else 0
        os.kill(lanes.pid, signal.SIGSTOP)  # control's submit of the prompt waits on lanes
        ask = geode_popen(home, "ask", "hello lost reply", "--json", cwd=ws)
        try:
            line = wait_for(
                lambda: re.search(r"prompt: turn (t-[0-9a-f]+)", log.read_text()[offset:]), timeout_s=30
            )
            os.kill(control.pid, signal.SIGKILL)  # the prompt's reply is lost with it
        finally:
            os.kill(lanes.pid, signal.SIGCONT)
        try:
            out, err = ask.communicate(timeout=90)
        finally:
            if ask.poll() is None:
                ask.kill()
                ask.communicate()
        assert ask.returncode == 0, (out, err)
        result = json.loads(out)
        assert result["turn_id"] == line.group(1)  # the turn the client chose, found again after the restart
        assert result["termination_reason"] == "natural" and result["text"] == "echo: hello lost reply"
        asked = [r for r in server.requests if "hello lost reply" in json.dumps(r.body)]
        assert len(asked) == 1, "the re-sent prompt must not start a second turn"
        assert children(home)["control"].incarnation > control.incarnation

        # the client stops waiting (--timeout) while its turn runs: exit 4, the turn's id, not "unavailable"
        slow = geode(home, "ask", "slow one", "--json", "--timeout", "1", cwd=ws, timeout=60)
        assert slow.returncode == 4, (slow.stdout, slow.stderr)
        gave_up = json.loads(slow.stdout)
        assert gave_up["continues"] is True and gave_up["accepted"] is True
        assert re.fullmatch(r"t-[0-9a-f]{16}", gave_up["turn_id"])
        assert f"turn {gave_up['turn_id']} of session {gave_up['session_id']} continues" in slow.stderr
        assert f"geode --resume {gave_up['session_id']}" in slow.stderr
