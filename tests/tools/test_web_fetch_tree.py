"""A real `geode serve` tree: the scripted model asks web_fetch for a loopback server's `.env` (as a hostile
model would, to read secrets off the host); the tool result it gets back is the refusal, the key never
reaches it, and the local server sees no request: IPC with --dangerously-skip-permissions (the address is
refused), and DAEMON (a new host nobody can approve).

Issue 26: web_fetch asks once per new host in a session. ``localhost`` is listed in ``[tools.web_fetch]
hosts`` (fetched without asking) and ``allow_hosts``; ``127.0.0.2`` only in ``allow_hosts`` (reachable, but
asked for). The chat asks once for 127.0.0.2 and then fetches from it again unasked; DAEMON fetches from
localhost, is denied 127.0.0.1 naming the config key, and does not follow localhost's redirect to
127.0.0.2."""

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
from geode.sessions.factory import create_session
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_tree, tool_results, wait_for

FAKE_KEY = "sk-ant-FAKE-web-fetch-0123456789abcdef"
CONFIG = """
[tools.web_fetch]
allow_hosts = ["localhost", "127.0.0.2"]
hosts = ["localhost"]
"""


@dataclass
class Rig:
    home: GeodeHome
    model: ScriptedServer
    ws: Path
    env_url: str
    seen: list[str]  # paths the local file servers were asked for
    port: int  # of both servers (127.0.0.1 and 127.0.0.2)


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
    for name in ("page", "one", "two"):
        (served / f"{name}.txt").write_text(f"the {name} page\n")
    seen: list[str] = []

    class Files(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            if self.path == "/jump":  # to the same port on 127.0.0.2: a new host
                self.send_response(302)
                self.send_header("Location", f"http://127.0.0.2:{port}/two.txt")
                self.end_headers()
                return
            super().do_GET()

        def log_message(self, *args: Any) -> None:
            pass

    first = ThreadingHTTPServer(("127.0.0.1", 0), partial(Files, directory=str(served)))
    port = first.server_port
    servers = [first, ThreadingHTTPServer(("127.0.0.2", port), partial(Files, directory=str(served)))]
    for httpd in servers:
        threading.Thread(target=httpd.serve_forever, args=(0.05,), daemon=True).start()
    try:
        with scripted_tree(base, _reply, ws, CONFIG, cwd=ws) as (home, model):
            yield Rig(home, model, ws, f"http://127.0.0.1:{port}/.env", seen, port)
    finally:
        for httpd in servers:
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


def _daemon_turn(rig: Rig, text: str) -> list[str]:
    """A turn submitted straight to lanes in DAEMON mode, as a messenger gateway would; its tool results."""
    sid = f"s-web-{uuid.uuid4().hex[:8]}"
    env = {"GEODE_HOME": str(rig.home.root)}
    spec = create_session("DAEMON", home=rig.home, session_id=sid, workspace=rig.ws, env=env)
    settings = spec.model_dump(mode="json", exclude={"plan"}) | {"session_id": sid}
    marker = text.split()[0]
    bus = Bus("webfetch-test", 1, rig.home).start()
    try:
        sub = lanes_msg.Submit(
            turn_id=f"t-{sid}", session_id=sid, mode="DAEMON", input={"text": text}, settings=settings
        )
        bus.transport.call("lanes", lanes_msg.SUBMIT, sub, timeout_s=20)
        return wait_for(
            lambda: tool_results(rig.model, marker),
            timeout_s=60,
            what=f"the DAEMON turn {marker} never sent a tool result to the model",
        )
    finally:
        bus.stop()


def test_daemon_turn_gets_the_refusal_not_the_key(rig: Rig) -> None:
    """127.0.0.1 is not listed in [tools.web_fetch] hosts and nobody can approve in DAEMON: denied before
    any address is looked at, naming the config key."""
    seen = len(rig.seen)  # what earlier tests of the module fetched from the shared server
    results = _daemon_turn(rig, f"daemon: read {rig.env_url}?daemon")
    assert len(results) == 1, results
    assert "permission_denied" in results[0] and "[tools.web_fetch] hosts" in results[0], results
    assert "127.0.0.1" in results[0] and FAKE_KEY not in results[0] and rig.seen[seen:] == []


def test_daemon_fetches_a_listed_host_but_not_its_redirect_to_a_new_host(rig: Rig) -> None:
    rig.seen.clear()
    (ok,) = _daemon_turn(rig, f"daemon-listed: read http://localhost:{rig.port}/page.txt")
    assert "the page page" in ok and rig.seen == ["/page.txt"], ok
    (hop,) = _daemon_turn(rig, f"daemon-hop: read http://localhost:{rig.port}/jump")
    assert "web_fetch_new_host" in hop and "127.0.0.2" in hop, hop
    assert rig.seen == ["/page.txt", "/jump"]  # the new host was never contacted


def test_the_chat_asks_once_per_new_host(rig: Rig) -> None:
    """Two fetches from 127.0.0.2 in one chat session: one approval ("y"), both fetched. Had the second
    asked too, "exit" would have been its (invalid) answer and it would have been denied."""
    rig.seen.clear()
    base = f"http://127.0.0.2:{rig.port}"
    chat = f"chat-a: read {base}/one.txt\ny\nchat-b: read {base}/two.txt\nexit\n"
    r = geode(rig.home, cwd=rig.ws, timeout=90, input=chat)
    assert r.returncode == 0, r.stdout + r.stderr
    assert rig.seen == ["/one.txt", "/two.txt"], (rig.seen, r.stdout, r.stderr)
    results = tool_results(rig.model, "chat-a")  # the session's conversation starts with chat-a
    assert any("the one page" in t for t in results) and any("the two page" in t for t in results), results
    prompts = {
        text.strip()
        for req in rig.model.requests
        for m in (req.body.get("messages", []) if isinstance(req.body, dict) else [])
        if m.get("role") == "user"
        for text in _texts(m.get("content"))
    }
    assert any(p.startswith("chat-b") for p in prompts), prompts  # the texts were found
    assert "y" not in prompts, prompts  # the "y" answered the approval, never reached the model


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text"]
