"""A real `geode serve` tree whose scripted model proposes run_bash (issue 10): finding 1, a "read-only"
pipeline (`cat payload | sort --compress-program=sh`) no longer runs without a person, so `geode ask` without
a terminal denies it and nothing is written; finding 3, with --dangerously-skip-permissions `setsid`,
`setsid -f` and double forks leave no process once the call returns; and the shell sees no secret."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.providers.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_tree, tool_results, wait_for

PREFIX = "run: "


@dataclass
class Rig:
    home: GeodeHome
    model: ScriptedServer
    ws: Path
    outside: Path


def _reply(req: Any) -> Any:
    """Run the command after "run: " in the prompt; after the tool result, a final text."""
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    content = msgs[-1].get("content") if msgs else ""
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return {"text": "done"}
    text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])
    return {"tool_calls": [{"name": "run_bash", "input": {"command": text.split(PREFIX, 1)[1]}}]}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    base = tmp_path_factory.mktemp("bashtree")
    ws, outside = base / "ws", base / "outside"
    ws.mkdir()
    outside.mkdir()
    with scripted_tree(base, _reply, ws, cwd=ws) as (home, model):
        yield Rig(home, model, ws, outside)


def _ask(rig: Rig, prompt: str, *flags: str) -> dict[str, Any]:
    r = geode(rig.home, "ask", prompt, "--json", *flags, cwd=rig.ws, timeout=90)
    out = json.loads(r.stdout)
    assert out["text"] == "done", r.stdout + r.stderr
    return out


def _timeline(rig: Rig, session: str) -> list[dict[str, Any]]:
    r = geode(rig.home, "timeline", session, "--json", timeout=30)
    assert r.returncode == 0, r.stderr
    return [row["event"] for row in json.loads(r.stdout)]


def _left_behind(marker: str) -> list[int]:
    found = []
    for e in os.scandir("/proc"):
        if e.name.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{e.name}/cmdline").read_bytes():
                    found.append(int(e.name))
            except OSError:
                pass
    return found


def test_finding1_sort_compress_program_is_not_run_without_a_person(rig: Rig) -> None:
    target = rig.outside / f"f1-{uuid.uuid4().hex[:8]}"
    (rig.ws / "payload.txt").write_text(f"touch {target}\n" * 30000)
    tag = f"f1-{uuid.uuid4().hex[:8]}"
    out = _ask(rig, f"{tag} {PREFIX}cat payload.txt | sort -S 64K --compress-program=sh | head -1")
    [result] = tool_results(rig.model, tag)
    assert "permission_denied" in result, result
    assert not target.exists()
    events = wait_for(
        lambda: [e for e in _timeline(rig, out["session_id"]) if e["kind"].startswith("tool.")],
        what="no tool row in the timeline",
    )
    assert [(e["kind"], e["payload"]["summary"]["approval"]) for e in events] == [("tool.denied", "n")]
    assert not any(e["payload"].get("approval") == "read_only" for e in events)


def test_finding3_setsid_leaves_no_process_after_the_call(rig: Rig) -> None:
    marker = f"300.{os.getpid()}{uuid.uuid4().int % 10**6:06d}"
    cmd = (
        f"setsid sleep {marker} & nohup setsid sleep {marker} >/dev/null 2>&1 & setsid -f sleep {marker}; "
        f"(sleep {marker} &) & env -i setsid -f sleep {marker}; sleep 0.2; echo started-{marker}"
    )
    tag = f"f3-{uuid.uuid4().hex[:8]}"
    _ask(rig, f"{tag} {PREFIX}{cmd}", "--dangerously-skip-permissions")
    assert _left_behind(marker) == []
    [result] = tool_results(rig.model, tag)
    assert f"started-{marker}" in result, result


def test_the_shell_sees_no_secret_and_no_home(rig: Rig) -> None:
    tag = f"env-{uuid.uuid4().hex[:8]}"
    cmd = "env; cat $GEODE_HOME/.env; tr '\\0' '\\n' < /proc/$PPID/environ; echo end-of-env"
    _ask(rig, f"{tag} {PREFIX}{cmd}", "--dangerously-skip-permissions")
    [result] = tool_results(rig.model, tag)
    assert "end-of-env" in result and "PATH=" in result, result
    assert "sk-test-key" not in result and "GEODE_HOME=" not in result and str(rig.home.root) not in result
