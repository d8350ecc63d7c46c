"""`geode ask --json` reports the turn's tool calls from its durable record (issue 12): a denied call has its
error set, a call re-sent after the loop worker was SIGKILLed is listed once, and the count is the list's
length. Real tree, scripted model."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

from geode.testing.scenario import RecordedRequest
from tests.actors.tree_kit import geode_popen, wait_children
from tests.loop.tree_rig import ALLOW, _wait, launch, ws  # noqa: F401  (fixtures)

DENY = ALLOW.replace("allow", "deny")


def _reply(root: Path):  # type: ignore[no-untyped-def]
    def reply(req: RecordedRequest) -> Any:
        msgs = req.body["messages"]
        last = msgs[-1]
        if isinstance(last.get("content"), list) and any(
            b.get("type") == "tool_result" for b in last["content"]
        ):
            return {"text": "finished"}
        if "deny me" in json.dumps(msgs[0]):
            call = {"name": "write_file", "id": "tu_w", "input": {"file_path": "w.txt", "content": "W"}}
        else:
            call = {"name": "run_bash", "id": "tu_x", "input": {"command": f"echo X >> {root / 'log.txt'}"}}
        return {"tool_calls": [call]}

    return reply


def _ask(home, cwd: Path, prompt: str):  # type: ignore[no-untyped-def]
    return geode_popen(home, "ask", prompt, "--json", cwd=cwd)


def test_ask_json_lists_the_recorded_calls(launch, ws: Path) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
    entered, release = ws / "entered", ws / "release"
    hold = f"sh -c 'echo e >> {entered}; while [ ! -f {release} ]; do sleep 0.05; done; echo {{}}'"
    home, _server, _bus = launch(
        _reply(ws),
        f'[[hooks.PreToolUse]]\nmatcher = "run_bash"\ncommand = "{hold}"\ntimeout = 60\n'
        f'[[hooks.PreToolUse]]\nmatcher = "write_file"\ncommand = "{DENY}"\n',
    )
    denied = _ask(home, ws, "deny me")
    out, err = denied.communicate(timeout=60)
    result = json.loads(out)
    assert [(c["id"], c["name"]) for c in result["tool_calls"]] == [("tu_w", "write_file")], (result, err)
    assert result["tool_calls"][0]["error"] not in (None, "no_result"), result
    assert result["tool_call_count"] == 1
    assert not (ws / "w.txt").exists()

    first = wait_children(home, lambda k: k["loop-1"].state == "running")["loop-1"]
    ask = _ask(home, ws, "run it")
    try:
        _wait(lambda: entered.exists())  # tool_start sent, the call waits in its PreToolUse hook
        os.kill(first.pid, signal.SIGKILL)
        _wait(lambda: entered.read_text().count("e") >= 2, timeout=30)  # re-sent by the next incarnation
        release.write_text("go")
        out, err = ask.communicate(timeout=60)
    finally:
        release.write_text("go")
        if ask.poll() is None:
            ask.kill()
            ask.communicate()
    result = json.loads(out)
    assert result["termination_reason"] == "natural", (result, err)
    assert result["tool_calls"] == [{"id": "tu_x", "name": "run_bash", "error": None}], result
    assert result["tool_call_count"] == len(result["tool_calls"])
    assert (ws / "log.txt").read_text() == "X\n"
