"""schedule_job in the served tree: a scripted model calls it from `geode ask` in a real terminal (tmux); the
person sees the job's schedule, next instants, prompt, tools and workspace in the approval, answers y, and
the job then exists in the scheduler child (`geode schedule list` → ``schedule.list``) as the model's, in the
session's workspace; a bad job is a one-line tool error and nothing is stored."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from tests.actors.tree_kit import geode, scripted_tree
from tests.cli.scripted_chat import make_reply
from tests.cli.test_chat_terminal import Term

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
PROMPT = "Summarise\x1b[8m the logs"  # a model's terminal sequence in the job's prompt


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    """``schedule NAME`` → a schedule_job create call (``schedule-bad NAME``: a cron with 6 fields); else the
    CLI tests' scripted model."""
    base = make_reply(ws)

    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        content = msgs[-1].get("content") if msgs else None
        blocks = content if isinstance(content, list) else [{"text": content or ""}]
        words = " ".join(str(b.get("text", "")) for b in blocks if isinstance(b, dict)).split()
        if words and words[0] in ("schedule", "schedule-bad"):
            cron = "0 7 * * 1-5" if words[0] == "schedule" else "0 7 * * 1-5 2027"
            job: dict[str, Any] = {"action": "create", "name": words[-1], "cron": cron, "tz": "Europe/Berlin"}
            job.update(prompt=PROMPT, tools=["read_file", "web_fetch"])
            return {"tool_calls": [{"name": "schedule_job", "input": job}]}
        return base(req)

    return reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, Path]]:
    base = tmp_path_factory.mktemp("sched_tool")
    ws = base / "ws"
    ws.mkdir()
    with scripted_tree(base, _reply(ws), ws, cwd=ws) as (home, _server):
        yield home, ws


def _jobs(home: GeodeHome) -> dict[str, Any]:
    r = geode(home, "schedule", "list", "--json")
    assert r.returncode == 0, r.stderr
    return {j["name"]: j for j in json.loads(r.stdout)["jobs"]}


def test_a_model_schedules_a_job_from_geode_ask_once_the_person_approves(
    tree: tuple[GeodeHome, Path],
) -> None:
    home, ws = tree
    t = Term(home, ws)
    try:
        t.start("ask", "ask", "schedule weekday-digest")
        screen = t.wait("ask", "(Enter denies")
        assert "◆ Approval · schedule_job" in screen
        flat = "".join(screen.split())  # the request is wrapped to the terminal's width
        assert "".join('schedule_job create "weekday-digest"'.split()) in flat
        assert 'cron"07**1-5"intimezone"Europe/Berlin"' in flat and "next3:" in flat and "(CET)" in flat
        assert 'prompt:"Summarise\\u001b[8mthelogs"' in flat and "\x1b[8m" not in screen
        assert 'tools:["read_file","web_fetch"]' in flat and f'workspace:"{ws}"' in flat
        assert _jobs(home) == {}  # nothing is stored before the answer
        t.type("ask", "y")
        t.wait("ask", "done after:")
    finally:
        t.kill_server()
    job = _jobs(home)["weekday-digest"]
    definition = job["entry"]["job"]["definition"]
    assert definition["origin"] == "model" and definition["workspace"] == str(ws)
    assert definition["cron"] == "0 7 * * 1-5" and definition["allowed_tools"] == ["read_file", "web_fetch"]
    assert job["next_instant"]

    bad = geode(home, "ask", "schedule-bad weekday-bad", "--json", "--dangerously-skip-permissions", cwd=ws)
    assert bad.returncode == 0, bad.stderr
    assert "standard cron has 5 fields" in bad.stdout and "Nothing was scheduled." in bad.stdout
    assert "weekday-bad" not in _jobs(home)
