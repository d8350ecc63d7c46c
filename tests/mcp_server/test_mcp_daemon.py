"""`geode mcp` with the user's daemon running for the same GEODE_HOME: the turn goes through the daemon's
lanes (not an in-process tree) and shows in `geode sessions` like any other entry path's; a call the host
cancels cancels its turn."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from tests.actors.tree_kit import geode, scripted_tree, wait_for
from tests.mcp_server.mcp_kit import FORBIDDEN, Provider, call, mcp_params, mcp_session

SLOW_S = 20.0  # the provider's delay for a "slow" prompt: far longer than the cancelled call waits


class SlowProvider(Provider):
    """``slow …``: answered after SLOW_S; ``write PATH``: a write_file call, then the tool result as text."""

    def __call__(self, req: Any) -> Any:
        reply = super().__call__(req)
        last = self.messages[-1][-1] if self.messages[-1] else {}
        blocks = last.get("content") if isinstance(last.get("content"), list) else []
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            return {"text": json.dumps(results[0].get("content"))}
        if reply["text"].startswith("answer: write "):
            path = reply["text"].split()[-1]
            return {"tool_calls": [{"name": "write_file", "input": {"file_path": path, "content": "x"}}]}
        return {**reply, "delay_s": SLOW_S} if "slow" in reply["text"] else reply


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, SlowProvider, Path]]:
    base = tmp_path_factory.mktemp("mcp-daemon")
    model = SlowProvider()
    with scripted_tree(base, model) as (home, _server):
        yield home, model, base


def _sessions(home: GeodeHome) -> dict[str, dict[str, Any]]:
    listed = geode(home, "sessions", "--json")
    assert listed.returncode == 0, listed.stderr
    return {r["session_id"]: r for r in json.loads(listed.stdout)}


async def test_run_agent_goes_through_the_running_daemon(tree: tuple[GeodeHome, SlowProvider, Path]) -> None:
    home, model, base = tree
    async with mcp_session(mcp_params(home, cwd=base), base / "mcp.err") as s:
        health = await call(s, "get_health", {})
        out = await call(s, "run_agent", {"prompt": "through the daemon please", "time_budget_s": 60})
    rows = _sessions(home)
    assert health["backend"] == "daemon" and health["children"].get("lanes") == "running", health
    assert out["text"] == "answer: through the daemon please" and out["termination_reason"] == "natural"
    assert out["session_id"] in rows, rows
    assert rows[out["session_id"]]["first_prompt"].startswith("through the daemon please")
    assert model.tools and all(FORBIDDEN.isdisjoint(tools) for tools in model.tools), model.tools
    assert "of 60s" in model.systems[-1], "the caller's time budget did not reach the turn"
    # the daemon ran it: `geode mcp` never started a tree of its own (that one would log to repl.log)
    assert not (home.logs_dir / "repl.log").exists()


async def test_a_call_the_host_cancels_cancels_its_turn(tree: tuple[GeodeHome, SlowProvider, Path]) -> None:
    home, _model, base = tree
    async with mcp_session(mcp_params(home, cwd=base), base / "mcp.err") as s:
        with pytest.raises(Exception, match=r"(?i)timed out|timeout"):  # the client gives up: cancelled
            await s.call_tool(
                "run_agent", {"prompt": "a slow one", "time_budget_s": 60}, read_timeout_seconds=3
            )

    def ended() -> str | None:
        row = next((r for r in _sessions(home).values() if r["first_prompt"].startswith("a slow one")), None)
        result = ((row or {}).get("meta") or {}).get("last_result") or {}
        return result.get("termination_reason")

    # well before the provider's delay ends, the turn has ended: cancelled, not answered
    assert (
        wait_for(ended, timeout_s=SLOW_S - 5, interval_s=0.5, what="the slow turn to end") == "user_cancelled"
    )


async def test_approvals_are_denied(tree: tuple[GeodeHome, SlowProvider, Path]) -> None:
    home, _model, base = tree
    target = base / "wanted.txt"
    async with mcp_session(mcp_params(home, cwd=base), base / "mcp.err") as s:
        out = await call(s, "run_agent", {"prompt": f"write {target}"})
    assert out["termination_reason"] == "natural", out
    assert "Nobody can approve 'write_file' in HEADLESS mode" in out["text"], out
    assert not target.exists()
