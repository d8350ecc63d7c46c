"""MCP tools through the executor: declared read and mutate tools run (mutate receipted); undeclared never."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from geode.protocol.errors import ConfigError
from geode.tools.builtin.catalogue import builtin_handlers
from geode.tools.executor import ToolExecutor
from geode.tools.mcp.bridge import connect
from geode.tools.mcp.config import load_mcp_servers
from geode.tools.mcp.hub import McpHub
from geode.tools.plan import BoundToolPlan
from geode.tools.spec import ToolCall, ToolContext
from geode.tools.structured_text import expand

SERVER = str(Path(__file__).with_name("mcp_server.py"))


@pytest.fixture
def hub() -> Iterator[McpHub]:
    h = McpHub()
    yield h
    h.close()


def _config(notes: Path) -> dict:
    return {
        "mcpServers": {
            "t": {
                "command": sys.executable,
                "args": [SERVER],
                "env": {"NOTES_FILE": str(notes)},
                "tools": {
                    "add": {},
                    "note": {"effect": "mutate", "resource_strategy": "global:notes"},
                    "die": {"effect": "mutate", "resource_strategy": "global:notes"},
                },
            }
        }
    }


def test_declared_tools_run_undeclared_never(hub, store, tmp_path) -> None:  # type: ignore[no-untyped-def]
    notes = tmp_path / "notes.txt"
    specs, handlers = connect(hub, load_mcp_servers(_config(notes)))
    names = {s.name: s for s in specs}
    assert set(names) == {"mcp__t__add", "mcp__t__note", "mcp__t__undeclared", "mcp__t__die"}
    assert names["mcp__t__undeclared"].policy.denied and "mcp:t/undeclared" not in handlers
    ex = ToolExecutor(
        owner="executor#1",
        records=store.client,
        handlers={**builtin_handlers(), **handlers},
        default_workspace=tmp_path,
    )
    plan = BoundToolPlan.build(specs)
    ex.bind_plan(plan)

    def run(name: str, args: dict, n: int):  # type: ignore[no-untyped-def,type-arg]
        ctx = ToolContext(
            session_id="s",
            turn_id="t",
            step_id=f"st{n}",
            operation_id=f"op{n}",
            plan_hash=plan.content_hash,
            plan_generation=plan.generation,
            workspace=str(tmp_path),
        )
        return ex.execute(ctx, ToolCall(id=f"c{n}", name=name, input=args))

    assert expand(run("mcp__t__add", {"a": 2, "b": 3}, 1).content) == {"result": 5}  # carried as text
    assert run("mcp__t__add", {"a": "x"}, 2).error_type == "invalid_tool_input"  # the server's schema
    res = run("mcp__t__note", {"text": "hello"}, 3)
    assert expand(res.content) == {"result": "noted"} and notes.read_text() == "hello\n"
    assert store.client.get_receipt("op3").state.value == "committed"
    denied = run("mcp__t__undeclared", {}, 4)
    assert denied.error_type == "tool_policy_denied" and denied.content["reason"] == "declared"
    dead = run("mcp__t__die", {}, 5)
    assert dead.error_type == "effect_outcome_uncertain"  # the server died mid-call: outcome unknown
    after = run("mcp__t__add", {"a": 1, "b": 1}, 6)
    assert after.error_type == "tool_unavailable" and "unavailable" in after.content["error"], (dead, after)
    ex.shutdown()


def test_config_shapes_and_errors() -> None:
    toml_style = {"mcp": {"servers": {"a": {"command": "x", "tools": {"r": {}}}}}}
    [a] = load_mcp_servers(toml_style)
    assert a.name == "a" and a.tools["r"].effect.value == "read"
    with pytest.raises(ConfigError, match="resource_strategy"):
        load_mcp_servers({"mcp": {"servers": {"a": {"command": "x", "tools": {"w": {"effect": "mutate"}}}}}})
    with pytest.raises(ConfigError, match="Extra inputs"):
        load_mcp_servers({"mcpServers": {"a": {"command": "x", "bogus": 1}}})
    assert load_mcp_servers({"mcpServers": {"u": {"url": "http://x"}}}) == []  # only stdio servers


def test_executor_child_serves_mcp_tools(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from actors.bus import Bus
    from geode.tools.executor_client import ExecutorClient
    from tests.actors.tree_kit import geode, make_home, stop

    notes = tmp_path / "n.txt"
    extra = f"""
[mcp.servers.t]
command = "{sys.executable}"
args = ["{SERVER}"]
env = {{ NOTES_FILE = "{notes}" }}
tools = {{ add = {{}} }}
"""
    home = make_home(tmp_path, extra)
    assert geode(home, "serve").returncode == 0
    bus = Bus("mcp-test", 1, home).start()
    try:
        client = ExecutorClient(bus.transport)
        specs = client.catalogue()
        names = {s.name for s in specs}
        assert {"read_file", "run_bash", "mcp__t__add", "mcp__t__note"} <= names
        plan = BoundToolPlan.build(specs)
        client.bind_plan(plan)
        ctx = ToolContext(
            session_id="m",
            turn_id="t",
            step_id="s",
            operation_id="o1",
            plan_hash=plan.content_hash,
            plan_generation=plan.generation,
            workspace=str(tmp_path),
        )
        # the global config declares `add` read-only (tools = { add = {} }): its first use does not ask
        # (a server's own readOnlyHint does: tests/tools/test_mcp_runtime_tree.py)
        unasked = client.execute(ctx, ToolCall(id="c0", name="mcp__t__add", input={"a": 4, "b": 5}))
        assert expand(unasked.content) == {"result": 9}, unasked
        ctx = ctx.model_copy(update={"skip_permissions": True})
        again = client.execute(ctx, ToolCall(id="c", name="mcp__t__add", input={"a": 4, "b": 5}))
        assert again.content == {"structured_json": '{"result": 9}'}, again  # its JSON text, not a map
        denied = client.execute(ctx, ToolCall(id="d", name="mcp__t__note", input={"text": "x"}))
        assert denied.error_type == "tool_policy_denied" and not notes.exists()  # undeclared: never called
        assert "read_only_tools" in denied.content["error"], denied  # says how to declare it
    finally:
        bus.stop()
        stop(home)
