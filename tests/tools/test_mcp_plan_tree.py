"""A real `geode serve` tree with a stdio MCP server configured in config.toml (``[mcp.servers.t]``, the
``add`` tool declared read-only with ``tools = { add = {} }``): the model is offered ``mcp__t__add`` in the
request's tools (the undeclared tool is not offered), calls it, and the server's answer reaches the next
request and the turn's answer."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_tree, tool_results

SERVER = Path(__file__).with_name("mcp_server.py")
A, B = 1234, 4321


def _tools(req: Any) -> list[str]:
    body = req.body if isinstance(req.body, dict) else {}
    return [t.get("name", "") for t in body.get("tools") or []]


def _reply(req: Any) -> Any:
    """Call mcp__t__add when it is offered; after its result, answer with what the tool returned."""
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    content = msgs[-1].get("content") if msgs else ""
    if isinstance(content, list):
        results = [b for b in content if b.get("type") == "tool_result"]
        if results:
            return {"text": f"the tool said: {json.dumps(results[0].get('content'))}"}
    if "mcp__t__add" not in _tools(req):
        return {"text": "no MCP tool was offered"}
    return {"tool_calls": [{"name": "mcp__t__add", "input": {"a": A, "b": B}}]}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, ScriptedServer, Path]]:
    base = tmp_path_factory.mktemp("mcpplan")
    ws = base / "ws"
    ws.mkdir()
    extra = f"""
[mcp.servers.t]
command = {json.dumps(sys.executable)}
args = [{json.dumps(str(SERVER))}]
env = {{ NOTES_FILE = {json.dumps(str(base / "notes.txt"))} }}
tools = {{ add = {{}} }}
"""
    with scripted_tree(base, _reply, ws, extra=extra, cwd=ws) as (home, model):
        yield home, model, ws


def test_configured_mcp_tool_is_offered_called_and_answers(tree: tuple[Any, ScriptedServer, Path]) -> None:
    home, model, ws = tree
    # the first use of a server in an IPC session asks: this turn approves with its own flag
    r = geode(
        home, "ask", "mcp: add two numbers", "--json", "--dangerously-skip-permissions", cwd=ws, timeout=90
    )
    assert r.returncode == 0, r.stdout + r.stderr
    answer = json.loads(r.stdout)["text"]
    assert str(A + B) in answer, answer

    asked = [q for q in model.requests if "mcp: add" in json.dumps(q.body.get("messages", [])[:1])]
    offered = _tools(asked[0])
    assert "mcp__t__add" in offered and "read_file" in offered, offered  # the MCP overlay + the built-ins
    assert "mcp__t__undeclared" not in offered  # no declared policy: listed by the executor, never offered
    results = tool_results(model, "mcp: add")
    assert len(results) == 1 and str(A + B) in results[0] and '"is_error": true' not in results[0], results

    # control composed the session from the executor's catalogue; the worker compiled the same plan (no
    # "composed with plan ... now plan ..." note: the session's plan_hash reached it and matched)
    logs = {p.name: p.read_text(errors="replace") for p in home.logs_dir.glob("*.log")}
    assert "tool catalogue from executor" in logs.get("control.log", ""), sorted(logs)
    loops = "".join(text for name, text in logs.items() if name.startswith("loop"))
    assert "tool catalogue from executor" in loops and "was composed with plan" not in loops
