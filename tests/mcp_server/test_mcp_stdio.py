"""`geode mcp` over stdio, no daemon (the turn runs in the process's own single-process tree), driven by a
real mcp ClientSession: run_agent answers, HEADLESS hides run_bash/delegate_task/computer from the model,
continue_agent continues the same session, the client's root is the workspace, progress arrives. While that
tree runs, `geode serve`, `geode status` and `geode sessions` say what it is. Bad arguments are refused as
the published schema says, each ``isError: true`` with one line."""

from __future__ import annotations

import json
from pathlib import Path

from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, make_home, scripted_home
from tests.mcp_server.mcp_kit import (
    FORBIDDEN,
    Provider,
    call,
    mcp_params,
    mcp_session,
    refused,
    tool_error,
)


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
            unknown = await refused(s, "continue_agent", {"session_id": "s-no-such-session", "prompt": "hi"})
            # the tree inside this geode mcp: serve and status say the same, sessions reads its records
            serve = geode(home, "serve", cwd=tmp_path)
            status = geode(home, "status", cwd=tmp_path)
            listed = geode(home, "sessions", "--json", cwd=tmp_path)
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
    assert unknown == "unknown session: no session 's-no-such-session' started by this MCP client"
    inside = "a geode mcp process (pid "
    assert serve.returncode == 3 and inside in serve.stderr, (serve.stdout, serve.stderr)
    assert status.returncode == 0 and inside in status.stdout, (status.stdout, status.stderr)
    said = lambda text: text[text.index(inside) :].split(";")[0]  # noqa: E731
    assert said(serve.stderr) == said(status.stdout)  # the same process, the same words
    assert f"runs an in-process tree for GEODE_HOME={home.root}" in said(serve.stderr)
    assert listed.returncode == 0, listed.stderr
    assert first["session_id"] in [r["session_id"] for r in json.loads(listed.stdout)]


BAD_ARGUMENTS = [  # (tool, arguments, the one-line reason)
    ("run_agent", {"prompt": "hello", "time_budget_s": 1e6}, "invalid time_budget_s: Input should be less"),
    ("run_agent", {"prompt": "hello", "time_budget_s": 0}, "invalid time_budget_s: Input should be greater"),
    ("run_agent", {"prompt": "hello", "budget": 5}, "run_agent has no argument 'budget'"),
    ("run_agent", {"prompt": ""}, "invalid prompt: String should have at least 1 character"),
    ("run_agent", {}, "run_agent needs 'prompt'"),
    ("continue_agent", {"prompt": "hello"}, "continue_agent needs 'session_id'"),
    ("continue_agent", {"session_id": "s-1", "prompt": "hi", "model": "x"}, "has no argument 'model'"),
    ("get_health", {"verbose": True}, "get_health has no argument 'verbose'"),
]


async def test_bad_arguments_are_each_an_error_as_the_schema_publishes(tmp_path: Path) -> None:
    model = Provider()
    server = ScriptedServer(model).start()
    try:
        home = scripted_home(tmp_path, server)
        async with mcp_session(mcp_params(home, cwd=tmp_path), tmp_path / "mcp.err") as s:
            schemas = {t.name: t.input_schema for t in (await s.list_tools()).tools}
            reasons = [await tool_error(s, tool, args) for tool, args, _ in BAD_ARGUMENTS]
            health = await call(s, "get_health", {})
    finally:
        server.stop()
    for (tool, args, expected), reason in zip(BAD_ARGUMENTS, reasons, strict=True):
        assert expected in reason, (tool, args, reason)
    run = schemas["run_agent"]
    assert run["additionalProperties"] is False and run["required"] == ["prompt"], run
    budget = run["properties"]["time_budget_s"]
    assert (budget["exclusiveMinimum"], budget["maximum"]) == (0, 3600), budget
    assert run["properties"]["prompt"]["minLength"] == 1
    assert schemas["continue_agent"]["additionalProperties"] is False
    assert set(schemas["continue_agent"]["required"]) == {"session_id", "prompt"}
    assert schemas["get_health"]["additionalProperties"] is False
    assert model.messages == [] and health["backend"] == "none", health  # nothing was run or started


async def test_a_config_geode_serve_would_refuse_is_the_error_of_the_turn(tmp_path: Path) -> None:
    home = make_home(tmp_path, '[lanes]\nglobal_cap = "many"\n')
    async with mcp_session(mcp_params(home, cwd=tmp_path), tmp_path / "mcp.err") as s:
        error = await refused(s, "run_agent", {"prompt": "hello"})
        health = await call(s, "get_health", {})
    assert "config is refused" in error and "[lanes] global_cap" in error, error
    assert health["ok"] is False and health["backend"] == "none", health
