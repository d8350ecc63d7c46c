"""A real `geode serve` tree (issue 32 items 4 and 5): a Claude Code settings file whose command hooks record
their stdin for every session-level event, a small context window, and the scripted model.

- A session pushed past the window: the loop worker is SIGKILLed right after the compaction record is saved
  (fault point ``loop.after_compaction_record``); the turn resumes on a new incarnation, ONE record is
  stored, the summary was asked once, and the next request carries the summary plus the recent turn.
- A summary call that fails, then a PreCompact hook that blocks: the turns go on with the deterministic view.
- SessionStart (startup, resume, compact; its additionalContext in the model's system prompt), SessionEnd,
  PreCompact, PostCompact, SubagentStart / SubagentStop around delegate_task, Notification (an approval
  waiting; the turn idle) each fire with Claude Code's payload.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_home, serve, stop, wait_for

pytestmark = pytest.mark.timeout(300)

CTX = "CTX-MARKER-4242: the build runs with make"
SUMMARY = (
    "## Goal\nthe harbour code\n## Decisions\nHARBOUR-7731 is the code\n## Files touched\n-\n## Open items\n-"
)
RECORD = """
import json, pathlib, sys, uuid
data = json.load(sys.stdin)
out = pathlib.Path(sys.argv[1])
(out / f"{data['hook_event_name']}-{uuid.uuid4().hex}.json").write_text(json.dumps(data))
ev = data["hook_event_name"]
if ev == "SessionStart":
    context = {"hookEventName": "SessionStart", "additionalContext": CTX_REPR}
    print(json.dumps({"hookSpecificOutput": context}))
if ev == "PreCompact" and (out / "block-compaction").exists():
    print("no summaries today", file=sys.stderr)
    sys.exit(2)
""".replace("CTX_REPR", repr(CTX))
EVENTS = (
    "SessionStart",
    "SessionEnd",
    "PreCompact",
    "PostCompact",
    "SubagentStart",
    "SubagentStop",
    "Notification",
)
FLAGS: dict[str, bool] = {"fail_summary": False}


@dataclass
class Rig:
    home: GeodeHome
    model: ScriptedServer
    ws: Path
    seen: Path


def _text(msg: dict[str, Any]) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    parts = []
    for b in content or []:
        if isinstance(b, dict):
            parts.append(str(b.get("text", "")) + str(b.get("content", "")))
    return " ".join(parts)


def _system(body: dict[str, Any]) -> str:
    sys_ = body.get("system")
    if isinstance(sys_, list):
        return " ".join(str(b.get("text", "")) for b in sys_ if isinstance(b, dict))
    return str(sys_ or "")


def is_summary(req: Any) -> bool:
    return isinstance(req.body, dict) and "compacting a long agent conversation" in _system(req.body)


def _reply(req: Any) -> Any:
    body = req.body if isinstance(req.body, dict) else {}
    if is_summary(req):
        if FLAGS["fail_summary"]:
            return {"error": {"status": 400, "message": "summary refused by the test"}}
        return {"text": SUMMARY}
    msgs = body.get("messages", [])
    first, last = _text(msgs[0]), _text(msgs[-1])
    answered = any(
        isinstance(b, dict) and b.get("type") == "tool_result" for b in msgs[-1].get("content") or []
    )
    if "SUBTASK" in first:
        return {"text": "sub-agent done"}
    if "DELEGATE:" in last and not answered:
        return {"tool_calls": [{"name": "delegate_task", "input": {"task": "SUBTASK: count to three"}}]}
    if "WRITE:" in last and not answered:
        return {"tool_calls": [{"name": "write_file", "input": {"file_path": "note.txt", "content": "x"}}]}
    return {"text": "answer " + "words " * 150}  # ~1,000 characters: the window fills in a few turns


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    base = tmp_path_factory.mktemp("compacthooks")
    ws, seen = base / "ws", base / "seen"
    ws.mkdir()
    seen.mkdir()
    (base / "record.py").write_text(RECORD)
    command = f"{sys.executable} {base / 'record.py'} {seen}"
    hooks = {
        ev: [{"matcher": "", "hooks": [{"type": "command", "command": command, "timeout": 30}]}]
        for ev in EVENTS
    }
    (base / "claude_settings.json").write_text(json.dumps({"hooks": hooks}))
    loop = (
        "workers = 1\ncontext_window_tokens = 3000\noutput_reserve_tokens = 500\nkeep_recent_messages = 2\n"
    )
    extra = f"""
[hooks]
claude_settings = ["{base / "claude_settings.json"}"]
"""
    server = ScriptedServer(_reply).start()
    os.environ["GEODE_FAULTS"] = "loop-*@loop.after_compaction_record:kill:1"
    try:
        home = scripted_home(base, server, ws, extra)
        cfg = home.config_file.read_text()
        home.config_file.write_text(cfg.replace("[loop]\nworkers = 2\n", "[loop]\n" + loop, 1))
        try:
            serve(home, cwd=ws)
            os.environ.pop("GEODE_FAULTS", None)
            yield Rig(home, server, ws, seen)
        finally:
            stop(home)
    finally:
        os.environ.pop("GEODE_FAULTS", None)
        server.stop()


def _ask(rig: Rig, prompt: str, *resume: str) -> dict[str, Any]:
    args = ["ask", prompt, "--json", *(("--resume", resume[0]) if resume else ())]
    r = geode(rig.home, *args, cwd=rig.ws, timeout=150)
    assert r.returncode in (0, 1, 77), r.stdout + r.stderr
    return json.loads(r.stdout)


def _seen(rig: Rig, event: str, **match: Any) -> list[dict[str, Any]]:
    rows = [json.loads(p.read_text()) for p in rig.seen.glob(f"{event}-*.json")]
    return [r for r in rows if all(r.get(k) == v for k, v in match.items())]


def _wait_seen(rig: Rig, event: str, **match: Any) -> dict[str, Any]:
    rows = wait_for(lambda: _seen(rig, event, **match), 30, what=f"a {event} hook {match}")
    return rows[0]


def _records(rig: Rig, sid: str) -> list[dict[str, Any]]:
    path = rig.home.root / "transcripts" / f"{sid}.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if (r.get("metadata") or {}).get("origin") == "compaction"]


def _turn_requests(rig: Rig, sid: str) -> list[Any]:
    return [r for r in rig.model.requests if not is_summary(r) and sid in json.dumps(r.headers)] or [
        r for r in rig.model.requests if not is_summary(r)
    ]


def _push_past_the_window(rig: Rig, tag: str) -> str:
    out = _ask(rig, f"{tag} question one " + "pad " * 250)
    sid = out["session_id"]
    for n in ("two", "three"):
        out = _ask(rig, f"{tag} question {n} " + "pad " * 250, sid)
        assert out["termination_reason"] == "natural", (out.get("error"), out)
    return sid


def test_a_session_past_the_window_is_summarized_once_even_when_the_worker_dies(rig: Rig) -> None:
    sid = _push_past_the_window(rig, "KILL")
    assert (rig.home.root / "faults" / "loop.after_compaction_record.fired").exists()  # the worker was killed
    assert len([r for r in rig.model.requests if is_summary(r)]) == 1
    assert len(_records(rig, sid)) == 1
    last = [r for r in rig.model.requests if not is_summary(r)][-1].body
    first, final = _text(last["messages"][0]), _text(last["messages"][-1])
    assert "[system:compaction-summary]" in first and "HARBOUR-7731" in first, first[:300]
    assert "KILL question three" in final
    assert "KILL question one" not in json.dumps(last["messages"])
    pre = _wait_seen(rig, "PreCompact", session_id=sid)
    assert pre["trigger"] == "auto" and pre["transcript_path"].endswith(f"{sid}.jsonl")
    # the next turn passes the window again: a second point, summarized (not killed) with PostCompact
    out = _ask(rig, "KILL question four " + "pad " * 250, sid)
    assert out["termination_reason"] == "natural", out
    records = _records(rig, sid)
    assert len([r for r in rig.model.requests if is_summary(r)]) == len(records) == 2
    assert len({r["metadata"]["compaction_id"] for r in records}) == 2
    post = _wait_seen(rig, "PostCompact", session_id=sid)
    assert post["trigger"] == "auto" and "HARBOUR-7731" in post["compact_summary"]
    _wait_seen(rig, "SessionStart", session_id=sid, source="compact")


def _floor(rig: Rig, sid: str) -> None:
    assert _records(rig, sid) == []
    last = [r for r in rig.model.requests if not is_summary(r)][-1].body
    assert "[system:compaction]" in _text(last["messages"][0])  # the deterministic view


def test_a_failing_summary_or_a_blocking_pre_compact_hook_leaves_the_deterministic_view(rig: Rig) -> None:
    FLAGS["fail_summary"] = True
    try:
        before = len([r for r in rig.model.requests if is_summary(r)])
        sid = _push_past_the_window(rig, "FLOOR")
        assert len([r for r in rig.model.requests if is_summary(r)]) > before  # it was asked, and failed
    finally:
        FLAGS["fail_summary"] = False
    _floor(rig, sid)
    (rig.seen / "block-compaction").write_text("1")
    try:
        before = len([r for r in rig.model.requests if is_summary(r)])
        seen = len(_seen(rig, "PreCompact", session_id=sid))
        out = _ask(rig, "FLOOR question four " + "pad " * 250, sid)
        assert out["termination_reason"] == "natural", out
        assert len([r for r in rig.model.requests if is_summary(r)]) == before  # blocked before the call
        assert len(_seen(rig, "PreCompact", session_id=sid)) > seen
    finally:
        (rig.seen / "block-compaction").unlink()
    _floor(rig, sid)


def test_session_start_and_end_fire_and_the_context_reaches_the_model(rig: Rig) -> None:
    out = _ask(rig, "hello there")
    sid = out["session_id"]
    start = _wait_seen(rig, "SessionStart", session_id=sid, source="startup")
    assert start["hook_event_name"] == "SessionStart" and start["cwd"] == str(rig.ws)
    first = [r for r in rig.model.requests if not is_summary(r)][-1].body
    assert CTX in _system(first)  # additionalContext honoured into the prompt
    end = _wait_seen(rig, "SessionEnd", session_id=sid)
    assert end["reason"] == "prompt_input_exit"  # the client said exit when it closed
    _ask(rig, "and again", sid)
    _wait_seen(rig, "SessionStart", session_id=sid, source="resume")
    assert CTX in _system([r for r in rig.model.requests if not is_summary(r)][-1].body)


def test_subagent_and_notification_events_fire(rig: Rig) -> None:
    out = _ask(rig, "DELEGATE: please")
    sid = out["session_id"]
    assert out["termination_reason"] == "natural", out
    start = _wait_seen(rig, "SubagentStart", session_id=sid)
    stop = _wait_seen(rig, "SubagentStop", session_id=sid)
    assert start["agent_type"] == "delegate_task" and stop["agent_id"] == start["agent_id"]
    assert stop["stop_hook_active"] is False
    assert not _seen(rig, "SessionStart", session_id=start["agent_id"])  # a sub-agent: SubagentStart only
    idle = _wait_seen(rig, "Notification", session_id=sid, notification_type="idle_prompt")
    assert idle["message"]
    out = _ask(rig, "WRITE: a note")
    asked = _wait_seen(
        rig, "Notification", session_id=out["session_id"], notification_type="permission_prompt"
    )
    assert "write_file" in asked["message"]
