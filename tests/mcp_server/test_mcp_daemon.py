"""`geode mcp` with the user's daemon running for the same GEODE_HOME: the turn goes through the daemon's
lanes (not an in-process tree) and shows in `geode sessions` like any other entry path's."""

from __future__ import annotations

import json
from pathlib import Path

from tests.actors.tree_kit import geode, scripted_tree
from tests.mcp_server.mcp_kit import FORBIDDEN, Provider, call, mcp_params, mcp_session


async def test_run_agent_goes_through_the_running_daemon(tmp_path: Path) -> None:
    model = Provider()
    with scripted_tree(tmp_path, model) as (home, _server):
        async with mcp_session(mcp_params(home, cwd=tmp_path), tmp_path / "mcp.err") as s:
            health = await call(s, "get_health", {})
            out = await call(s, "run_agent", {"prompt": "through the daemon please", "time_budget_s": 60})
        listed = geode(home, "sessions", "--json")
        assert listed.returncode == 0, listed.stderr
    assert health["backend"] == "daemon" and health["children"].get("lanes") == "running", health
    assert out["text"] == "answer: through the daemon please" and out["termination_reason"] == "natural"
    rows = {r["session_id"]: r for r in json.loads(listed.stdout)}
    assert out["session_id"] in rows, rows
    assert rows[out["session_id"]]["first_prompt"].startswith("through the daemon please")
    assert model.tools and all(FORBIDDEN.isdisjoint(tools) for tools in model.tools), model.tools
    assert "of 60s" in model.systems[-1], "the caller's time budget did not reach the turn"
    # the daemon ran it: `geode mcp` never started a tree of its own (that one would log to repl.log)
    assert not (home.logs_dir / "repl.log").exists()
