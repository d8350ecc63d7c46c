"""A real `geode serve` tree: the scripted model asks web_fetch for a loopback server's `.env` (as a hostile
model would, to read secrets off the host); the tool result it gets back is the refusal, the key never
reaches it, and the local server sees no request: IPC with --dangerously-skip-permissions, and DAEMON."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol import lanes as lanes_msg
from geode.providers.scripted import ScriptedServer
from geode.sessions.factory import create_session
from tests.actors.tree_kit import geode, scripted_tree, tool_results, wait_for

FAKE_KEY = "sk-ant-FAKE-web-fetch-0123456789abcdef"


@dataclass
class Rig:
    home: GeodeHome
    model: ScriptedServer
    ws: Path
    env_url: str
    seen: list[str]  # paths the local file server was asked for


def _reply(req: Any) -> Any:
    """Fetch the URL that ends the prompt; after the tool result, a final text."""
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    content = msgs[-1].get("content") if msgs else ""
    if isinstance(content, list) and any(b.get("type") == "tool_result" for b in content):
        return {"text": "done"}
    text = content if isinstance(content, str) else " ".join(b.get("text", "") for b in content or [])
    return {"tool_calls": [{"name": "web_fetch", "input": {"url": text.split()[-1]}}]}


@pytest.fixture(scope="module")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rig]:
    base = tmp_path_factory.mktemp("webfetch")
    served, ws = base / "served", base / "ws"
    served.mkdir()
    ws.mkdir()
    (served / ".env").write_text(f"ANTHROPIC_API_KEY={FAKE_KEY}\n")
    seen: list[str] = []

    class Files(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            super().do_GET()

        def log_message(self, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Files, directory=str(served)))
    threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    try:
        with scripted_tree(base, _reply, ws, cwd=ws) as (home, model):
            yield Rig(home, model, ws, f"http://127.0.0.1:{httpd.server_port}/.env", seen)
    finally:
        httpd.shutdown()
        httpd.server_close()


def _assert_refused(results: list[str], rig: Rig) -> None:
    assert len(results) == 1, results
    (result,) = results
    assert "web_fetch_blocked_address" in result and "loopback" in result, result
    assert FAKE_KEY not in result and rig.seen == []


def test_ipc_skip_permissions_gets_the_refusal_not_the_key(rig: Rig) -> None:
    r = geode(
        rig.home,
        "ask",
        f"ipc: read {rig.env_url}",
        "--json",
        "--dangerously-skip-permissions",
        cwd=rig.ws,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["text"] == "done" and FAKE_KEY not in r.stdout + r.stderr
    _assert_refused(tool_results(rig.model, "ipc: read"), rig)


def test_daemon_turn_gets_the_refusal_not_the_key(rig: Rig) -> None:
    """A turn submitted straight to lanes in DAEMON mode, as a messenger gateway would."""
    sid = f"s-web-{uuid.uuid4().hex[:8]}"
    env = {"GEODE_HOME": str(rig.home.root)}
    spec = create_session("DAEMON", home=rig.home, session_id=sid, workspace=rig.ws, env=env)
    settings = spec.model_dump(mode="json", exclude={"plan"}) | {"session_id": sid}
    bus = Bus("webfetch-test", 1, rig.home).start()
    try:
        sub = lanes_msg.Submit(
            turn_id=f"t-{sid}",
            session_id=sid,
            mode="DAEMON",
            input={"text": f"daemon: read {rig.env_url}?daemon"},
            settings=settings,
        )
        bus.transport.call("lanes", lanes_msg.SUBMIT, sub, timeout_s=20)
        wait_for(
            lambda: tool_results(rig.model, "daemon: read"),
            timeout_s=60,
            what="the DAEMON turn never sent a tool result to the model",
        )
    finally:
        bus.stop()
    _assert_refused(tool_results(rig.model, "daemon: read"), rig)
