"""The MCP client runtime in a real `geode serve` tree, against a real SDK server
(tests/tools/mcp_policy_server.py) over stdio (``[mcp.servers.st]`` / ``[mcp.servers.nk]`` in TOML) and
streamable HTTP (``[mcpServers.web]``, the mcpServers shape, with a bearer header the server requires):

- the read-only tool (annotated readOnlyHint) is offered in the provider's request and runs in a turn; its
  fake secret is redacted in the result and in the server's stderr copied to the executor log;
- the first use of a server in an IPC session asks, though the server hints readOnlyHint; a non-terminal
  `geode ask` cannot ask: nothing runs, the model is told nobody could be asked (not "User denied") and the
  command exits 77 naming the reason and the ways to allow it; a tool the global config declares
  `read_only_tools` runs unasked;
- the mutating tool of a server without resource keys is not offered and a call by name is refused before
  dispatch with a reason saying how to declare it (no effect);
- with resource keys it runs once, with a committed receipt, a lock on the declared key (timeline), and a
  PreToolUse command hook that sees it as ``mcp__SERVER__TOOL``;
- `geode mcp-servers --json` lists the servers with their state (a disabled one, an HTTP one refused for
  lack of its header: failed with the reason) and tool counts;
- the project's `.mcp.json` (the workspace's parent) is ignored until `geode trust`; after it (the daemon's
  executor restarts) its server is listed, offered and runs in that project's workspace (last: it restarts the
  executor).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_tree, tool_results, wait_for

SERVER = Path(__file__).with_name("mcp_policy_server.py")
TOKEN = "tok-0123456789"
SECRET = "sk-test-0123456789abcdef"
HOOK = """
import json, sys
data = json.load(sys.stdin)
with open({path!r}, "a") as f:
    f.write(data.get("tool_name", "?") + "\\n")
"""
# prompt marker → the tool call the scripted model makes
CALLS = {
    "ro-st": ("mcp__st__lookup", {"key": "k1"}),
    "ro-web": ("mcp__web__lookup", {"key": "k2"}),
    "mut-nk": ("mcp__nk__append", {"line": "never"}),
    "mut-st": ("mcp__st__append", {"line": "stdio-once"}),
    "mut-web": ("mcp__web__append", {"line": "http-once"}),
    "first-use": ("mcp__st__lookup", {"key": "k0"}),
    "ro-pj": ("mcp__pj__lookup", {"key": "k3"}),
    "declared-ro": ("mcp__ro__lookup", {"key": "k4"}),
}


def _tools(req: Any) -> list[str]:
    body = req.body if isinstance(req.body, dict) else {}
    return [t.get("name", "") for t in body.get("tools") or []]


def _reply(req: Any) -> Any:
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    content = msgs[-1].get("content") if msgs else ""
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return {"text": "done"}
    first = json.dumps(msgs[:1])
    for marker, (name, args) in CALLS.items():
        if marker in first and (marker != "ro-pj" or name in _tools(req)):  # pj: only once offered
            return {"tool_calls": [{"name": name, "input": args}]}
    return {"text": "no call"}


@dataclass
class Rig:
    home: GeodeHome
    model: ScriptedServer
    ws: Path
    base: Path

    def ask(self, prompt: str, *, skip: bool = True) -> dict[str, Any]:
        args = ["ask", prompt, "--json", *(["--dangerously-skip-permissions"] if skip else [])]
        r = geode(self.home, *args, cwd=self.ws, timeout=90)
        assert r.returncode in (0, 1), r.stdout + r.stderr
        return dict(json.loads(r.stdout))

    def result(self, marker: str) -> dict[str, Any]:
        """The one tool_result block the model got in the conversation with ``marker``: {"block", "body"}."""
        [only] = tool_results(self.model, marker)
        block = json.loads(only)
        content = block.get("content")
        if isinstance(content, list):
            content = "".join(b.get("text", "") for b in content if isinstance(b, dict))
        try:
            body = json.loads(content) if isinstance(content, str) else content
        except ValueError:
            body = content
        return {"block": block, "body": body}

    def cli_json(self, *args: str) -> Any:
        r = geode(self.home, *args, "--json", timeout=30)
        assert r.returncode == 0, r.stdout + r.stderr
        return json.loads(r.stdout)


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    base = tmp_path_factory.mktemp("mcprt")
    ws = base / "proj" / "ws"
    ws.mkdir(parents=True)
    port_file = base / "port"
    http_env = {**os.environ, "EFFECTS_FILE": str(base / "fx-web"), "MCP_TEST_TOKEN": TOKEN}
    web = subprocess.Popen(
        [sys.executable, str(SERVER), "--http", str(port_file)],
        env=http_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port = wait_for(lambda: port_file.exists() and port_file.read_text(), 20, what="the HTTP MCP server")
        project = {"mcpServers": {"pj": {"command": sys.executable, "args": [str(SERVER)]}}}
        (ws.parent / ".mcp.json").write_text(json.dumps(project))  # an untrusted project's server
        hook = base / "hook.py"
        hook.write_text(HOOK.format(path=str(base / "hook-seen.txt")))
        py, srv = json.dumps(sys.executable), json.dumps(str(SERVER))
        extra = f"""
[mcp.servers.st]
command = {py}
args = [{srv}]
env = {{ EFFECTS_FILE = {json.dumps(str(base / "fx-st"))} }}
resource_keys = ["ledger"]

[mcp.servers.ro]
command = {py}
args = [{srv}]
read_only_tools = ["lookup"]

[mcp.servers.nk]
command = {py}
args = [{srv}]
env = {{ EFFECTS_FILE = {json.dumps(str(base / "fx-nk"))} }}

[mcpServers.web]
type = "http"
url = "http://127.0.0.1:{port}/mcp"
headers = {{ Authorization = "Bearer {TOKEN}" }}
resource_keys = ["ledger"]

[mcpServers.nohdr]
type = "http"
url = "http://127.0.0.1:{port}/mcp"
read_only_tools = ["lookup"]

[mcp.servers.off]
command = "no-such-command-anywhere"
enabled = false

[[hooks.PreToolUse]]
matcher = "mcp__.*"
command = {json.dumps(f"{sys.executable} {hook}")}
dialect = "claude-code"
"""
        with scripted_tree(base, _reply, ws, extra=extra, cwd=ws) as (home, model):
            yield Rig(home, model, ws, base)
    finally:
        web.kill()
        web.wait(10)


def test_read_only_tools_are_offered_and_run_over_stdio_and_http(rig: Rig) -> None:
    for marker, server, key in (("ro-st", "st", "k1"), ("ro-web", "web", "k2")):
        out = rig.ask(f"{marker}: look something up")
        assert out.get("text") == "done", out
        asked = [q for q in rig.model.requests if marker in json.dumps(q.body.get("messages", [])[:1])]
        offered = _tools(asked[0])
        assert f"mcp__{server}__lookup" in offered and "read_file" in offered, offered
        result = rig.result(marker)
        text = json.dumps(result)
        assert f"value-of-{key}" in text and not result["block"].get("is_error"), result
        assert SECRET not in text and "[REDACTED]" in text, text  # secrets in results are masked
    log = (rig.home.logs_dir / "executor.log").read_text(errors="replace")
    assert "MCP server st stderr: lookup k1" in log and SECRET not in log  # stderr → log, redacted


def test_first_use_asks_and_without_a_terminal_says_nobody_could_be_asked(rig: Rig) -> None:
    """The server's own readOnlyHint does not lift the first-use prompt; `geode ask` with no terminal cannot
    ask: exit 77, and the user and the model are told nobody could be asked and how to allow it (was: "User
    denied … Do NOT retry", exit 0)."""
    r = geode(rig.home, "ask", "first-use: look k0 up", "--json", cwd=rig.ws, timeout=90)
    assert r.returncode == 77, r.stdout + r.stderr
    assert json.loads(r.stdout)["approvals_unasked"] == ["mcp__st__lookup"], r.stdout
    why = r.stderr
    assert "mcp__st__lookup needed approval and nobody could be asked (no terminal)" in why, why
    assert 'read_only_tools = ["lookup"] in [mcp.servers.st]' in why, why
    assert "--dangerously-skip-permissions" in why and "PermissionRequest" in why, why
    text = json.dumps(rig.result("first-use"))
    assert "permission_denied" in text and "nobody could be asked" in text, text
    assert "User denied" not in text and "value-of-k0" not in text, text
    log = (rig.home.logs_dir / "executor.log").read_text(errors="replace")
    assert "lookup k0" not in log  # the server never ran it


def test_a_tool_the_global_config_declares_read_only_runs_unasked(rig: Rig) -> None:
    out = rig.ask("declared-ro: look k4 up", skip=False)  # no terminal, no skip flag: not asked, it ran
    assert "value-of-k4" in json.dumps(rig.result("declared-ro")), rig.result("declared-ro")
    assert out["exit_code"] == 0 and out.get("approvals_unasked") == [], out


def test_undeclared_mutating_tool_is_not_offered_and_refused_before_dispatch(rig: Rig) -> None:
    rig.ask("mut-nk: append a line")
    asked = [q for q in rig.model.requests if "mut-nk" in json.dumps(q.body.get("messages", [])[:1])]
    offered = _tools(asked[0])
    assert "mcp__nk__lookup" in offered and "mcp__nk__append" not in offered, offered
    result = rig.result("mut-nk")
    text = json.dumps(result)
    assert result["block"].get("is_error") and "tool_policy_denied" in text, result
    assert "server 'nk'" in text and "resource_keys" in text, text  # names the server and the fix
    assert not (rig.base / "fx-nk").exists()  # never dispatched


@pytest.mark.parametrize("server", ["st", "web"])
def test_keyed_mutating_tool_runs_once_with_receipt_lock_and_hook(rig: Rig, server: str) -> None:
    marker, line = f"mut-{server}", f"{'stdio' if server == 'st' else 'http'}-once"
    tool = f"mcp__{server}__append"
    out = rig.ask(f"{marker}: append a line")
    assert out.get("text") == "done", out
    assert (rig.base / f"fx-{server}").read_text().splitlines() == [line]  # ran exactly once
    assert f"appended {line}" in json.dumps(rig.result(marker))
    sid = out["session_id"]
    receipts = rig.cli_json("receipts", "--session", sid)
    mine = [r for r in receipts if r["identity"]["tool_name"] == tool]
    assert len(mine) == 1 and mine[0]["state"] == "committed", receipts
    timeline = rig.cli_json("timeline", sid)
    events = [row["event"] for row in timeline]
    called = [e for e in events if e["kind"] == "tool.called" and e["payload"]["tool_name"] == tool]
    assert len(called) == 1 and called[0]["payload"]["locks"] == ["key:ledger"], called
    seen = (rig.base / "hook-seen.txt").read_text().splitlines()
    assert tool in seen, seen  # the PreToolUse hook matched mcp__.* and saw the prefixed name


def test_mcp_servers_lists_state_and_tool_counts(rig: Rig) -> None:
    detail = rig.cli_json("mcp-servers")
    rows = {r["name"]: r for r in detail["servers"]}
    assert set(rows) >= {"st", "nk", "web"}, rows
    assert rows["web"]["transport"] == "http" and rows["st"]["transport"] == "stdio"
    assert all(rows[n]["state"] == "running" and rows[n]["origin"] == "global" for n in ("st", "nk", "web"))
    assert rows["nk"]["refused"] == ["mcp__nk__append", "mcp__nk__crash"], rows["nk"]
    assert "mcp__st__append" in rows["st"]["offered"] and not rows["st"]["refused"]
    assert rows["off"]["state"] == "disabled", rows["off"]  # listed, never started
    nohdr = rows["nohdr"]  # the server wants a bearer header this entry does not send
    assert nohdr["state"] == "failed" and "error" in nohdr["reason"] and not nohdr["offered"], nohdr
    text = geode(rig.home, "mcp-servers", timeout=30).stdout
    assert "nk" in text and "2 offered / 2 refused" in text and "failed: " in text, text


def test_project_mcp_json_is_ignored_until_trusted(rig: Rig) -> None:
    project = rig.ws.parent
    before = {r["name"] for r in rig.cli_json("mcp-servers")["servers"]}
    assert "pj" not in before, before
    offered_before = _tools(rig.model.requests[0])
    assert offered_before and "mcp__pj__lookup" not in offered_before
    r = geode(rig.home, "trust", str(project), cwd=rig.ws, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr

    def listed() -> Any:
        d = geode(rig.home, "mcp-servers", "--json", timeout=30)
        rows = {x["name"]: x for x in json.loads(d.stdout)["servers"]} if d.returncode == 0 else {}
        return rows.get("pj") if rows.get("pj", {}).get("state") == "running" else None

    pj = wait_for(listed, 60, what="the trusted project's server in geode mcp-servers", interval_s=0.5)
    assert pj["origin"] == str(project.resolve()), pj
    assert pj["offered"] == ["mcp__pj__lookup", "mcp__pj__pause"], pj  # the read-only (hinted) tools

    def answered() -> dict[str, Any] | None:
        out = rig.ask("ro-pj: look k3 up")
        return out if tool_results(rig.model, "ro-pj") else None

    wait_for(answered, 60, what="a turn offered the project's tool", interval_s=1.0)
    assert "value-of-k3" in json.dumps(rig.result("ro-pj")), rig.result("ro-pj")

    # a session working outside the project is not offered the project's server
    out = geode(rig.home, "ask", "outside-pj: hello", "--json", cwd=rig.base, timeout=90)
    assert out.returncode == 0, out.stdout + out.stderr
    asked = [q for q in rig.model.requests if "outside-pj" in json.dumps(q.body.get("messages", [])[:1])]
    offered = _tools(asked[0])
    assert "mcp__st__lookup" in offered and "mcp__pj__lookup" not in offered, offered
