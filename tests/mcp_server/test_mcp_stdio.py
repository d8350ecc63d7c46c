"""`geode mcp` over stdio, no daemon (the turn runs in the process's own single-process tree), driven by a
real mcp ClientSession: run_agent answers, HEADLESS hides run_bash/delegate_task/computer from the model,
continue_agent continues the same session, the client's root is the workspace, progress arrives."""

from __future__ import annotations

from pathlib import Path

from geode.providers.scripted import ScriptedServer
from tests.actors.tree_kit import make_home, scripted_home
from tests.mcp_server.mcp_kit import FORBIDDEN, Provider, call, mcp_params, mcp_session


async def test_run_agent_then_continue_agent_in_single_process_mode(tmp_path: Path) -> None:
    root = tmp_path / "client-root"
    root.mkdir()
    (root / "GEODE.md").write_text("## Project\nmarker-of-the-client-root\n")
    model = Provider()
    server = ScriptedServer(model).start()
    try:
        home = scripted_home(tmp_path, server)
        progress: list[str] = []
        async with mcp_session(mcp_params(home, cwd=tmp_path), tmp_path / "mcp.err", roots=[root]) as s:
            names = {t.name for t in (await s.list_tools()).tools}
            assert names == {"run_agent", "continue_agent", "get_health"}
            first = await call(s, "run_agent", {"prompt": "what is two plus two"}, progress)
            assert first["text"] == "answer: what is two plus two", first
            assert first["termination_reason"] == "natural" and first["error"] is None
            assert first["rounds"] >= 1 and first["session_id"]
            health = await call(s, "get_health", {})
            second = await call(
                s, "continue_agent", {"session_id": first["session_id"], "prompt": "and three"}
            )
        assert second["session_id"] == first["session_id"], second
        assert second["text"] == "answer: and three"
    finally:
        server.stop()
    assert health["backend"] == "single-process" and health["mode"] == "HEADLESS", health
    assert model.tools and all(tools for tools in model.tools), "the provider was offered no tools"
    assert all(FORBIDDEN.isdisjoint(tools) for tools in model.tools), model.tools
    assert "read_file" in model.tools[0]
    # the continued turn carries the first exchange: same session, not a new one
    assert "what is two plus two" in str(model.messages[-1]) and "answer: what is two plus two" in str(
        model.messages[-1]
    )
    assert "marker-of-the-client-root" in model.systems[0], "the client's root is not the workspace"
    assert any(p.startswith("round") for p in progress), progress


async def test_unknown_session_or_budget_is_an_error_not_a_turn(tmp_path: Path) -> None:
    server = ScriptedServer(Provider()).start()
    try:
        home = scripted_home(tmp_path, server)
        async with mcp_session(mcp_params(home, cwd=tmp_path), tmp_path / "mcp.err") as s:
            out = await call(s, "continue_agent", {"session_id": "s-no-such-session", "prompt": "hello"})
            big = await call(s, "run_agent", {"prompt": "hello", "time_budget_s": 1e6})
    finally:
        server.stop()
    assert out["termination_reason"] is None and "unknown session" in (out["error"] or ""), out
    assert big["termination_reason"] is None and "invalid time_budget_s" in (big["error"] or ""), big


async def test_a_config_geode_serve_would_refuse_is_the_error_of_the_turn(tmp_path: Path) -> None:
    home = make_home(tmp_path, '[lanes]\nglobal_cap = "many"\n')
    async with mcp_session(mcp_params(home, cwd=tmp_path), tmp_path / "mcp.err") as s:
        out = await call(s, "run_agent", {"prompt": "hello"})
        health = await call(s, "get_health", {})
    assert out["termination_reason"] is None and out["session_id"] is None
    assert "config is refused" in out["error"] and "[lanes] global_cap" in out["error"], out
    assert health["ok"] is False and health["backend"] == "none", health
