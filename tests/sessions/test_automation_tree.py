"""AUTOMATION in a real `geode serve` tree (scripted model): an operator job that names ``run_bash`` in
``allowed_tools`` runs it in its own workspace (``$GEODE_HOME/workspaces/job-<name>``, 0700) with nobody
asked (the timeline's approval reads ``operator_allowed``), and a write outside the workspace is refused."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.tree.client import client_bus
from geode.home import GeodeHome
from geode.records.store_client import StoreClient
from tests.actors.tree_kit import scripted_tree, wait_for

JOB = """
[[schedule.jobs]]
name = "script"
every = 2
prompt = "run the script"
allowed_tools = ["run_bash", "write_file"]
catch_up = "skip"
"""


def _reply(outside: Path) -> Any:
    """First call of a turn: run_bash in the workspace and a write outside it; then a final text."""

    def reply(req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        content = msgs[-1].get("content") if msgs else None
        if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
            return {"text": "ran"}
        return {
            "tool_calls": [
                {"name": "run_bash", "input": {"command": "echo ran >> ran.txt"}},
                {"name": "write_file", "input": {"file_path": str(outside), "content": "x"}},
            ]
        }

    return reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, Path]]:
    base = tmp_path_factory.mktemp("automation_tree")
    outside = base / "outside.txt"
    with scripted_tree(base, _reply(outside), extra=JOB) as (home, _server):
        yield home, outside


def _rows_of_a_run(home: GeodeHome, ws: Path) -> list[tuple[str, dict[str, Any]]] | None:
    """The timeline of a session in which run_bash ran (the job's sessions: one per occurrence)."""
    if not (ws / "ran.txt").exists():
        return None
    with client_bus(home) as bus:
        store = StoreClient(bus.transport)
        for info in store.list_sessions():
            if not info.session_id.startswith("s-job-script-"):
                continue
            rows = [(r.event.kind, r.event.payload) for r in store.read_timeline(info.session_id)]
            if any(k == "tool.denied" for k, _ in rows) and any(k == "tool.called" for k, _ in rows):
                return rows
    return None


def test_an_operator_job_runs_run_bash_unasked_and_cannot_write_outside(
    tree: tuple[GeodeHome, Path],
) -> None:
    home, outside = tree
    ws = home.root / "workspaces" / "job-script"
    rows = wait_for(lambda: _rows_of_a_run(home, ws), 30.0, what="a run of the operator job with run_bash")
    assert rows is not None
    assert stat.S_IMODE(ws.stat().st_mode) == 0o700 and "ran" in (ws / "ran.txt").read_text()
    called = [p for k, p in rows if k == "tool.called" and p["tool_name"] == "run_bash"]
    # allowed by the job's list, not by a person: nobody was asked
    assert called[0]["approval"] == "operator_allowed" and called[0]["mode"] == "AUTOMATION"
    denied = [p for k, p in rows if k == "tool.denied" and p["tool_name"] == "write_file"]
    assert denied[0]["error_type"] == "tool_policy_denied" and not outside.exists()
