"""Built-in tools through the executor: files, search, web_fetch (local server), send_message, delegate."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class _Yes:
    def request(self, ctx, tool_name, detail, safety):  # type: ignore[no-untyped-def]
        return "y"


@pytest.fixture
def rig(make_rig):  # type: ignore[no-untyped-def]
    from geode.tools.builtin.web_guard import WebAllow

    # web_fetch's local test servers are loopback: allowlisted (tests/tools/test_web_fetch_guard.py)
    return make_rig(approvals=_Yes(), services={"web_fetch": WebAllow.parse(["127.0.0.1"])})


def test_write_read_edit_list(rig) -> None:
    assert not rig.call("write_file", {"file_path": "d/f.txt", "content": "one\ntwo\nthree\n"}).is_error
    res = rig.call("read_file", {"file_path": "d/f.txt", "offset": 2, "limit": 1})
    assert res.content["content"] == "     2\ttwo" and res.content["total_lines"] == 3
    assert rig.call(
        "edit_file", {"file_path": "d/f.txt", "old_string": "two", "new_string": "2"}
    ).content == {"file_path": str(rig.workspace / "d/f.txt"), "replacements": 1}
    assert (rig.workspace / "d/f.txt").read_text() == "one\n2\nthree\n"
    names = [e["name"] for e in rig.call("list_dir", {"path": "d"}).content["entries"]]
    assert names == ["f.txt"]


def test_edit_exactness(rig) -> None:
    (rig.workspace / "g.txt").write_text("a a a")
    amb = rig.call("edit_file", {"file_path": "g.txt", "old_string": "a", "new_string": "b"})
    assert amb.error_type == "edit_ambiguous"
    missing = rig.call("edit_file", {"file_path": "g.txt", "old_string": "zz", "new_string": "b"})
    assert missing.error_type == "edit_not_found"
    res = rig.call(
        "edit_file", {"file_path": "g.txt", "old_string": "a", "new_string": "b", "replace_all": True}
    )
    assert res.content["replacements"] == 3 and (rig.workspace / "g.txt").read_text() == "b b b"


def test_absolute_path_outside_roots_and_symlink_escape(rig, tmp_path) -> None:
    outside = tmp_path / "secret.txt"
    outside.write_text("s")
    assert rig.call("read_file", {"file_path": str(outside)}).content["reason"] == "outside_roots"
    (rig.workspace / "link").symlink_to(outside)
    assert rig.call("read_file", {"file_path": "link"}).content["reason"] == "outside_roots"


def test_glob_and_grep(rig) -> None:
    (rig.workspace / "src").mkdir()
    (rig.workspace / "src/a.py").write_text("import os\nx = 1\n")
    (rig.workspace / "src/b.txt").write_text("import nothing\n")
    files = rig.call("glob_files", {"pattern": "**/*.py"}).content["files"]
    assert files == [str(rig.workspace / "src/a.py")]
    res = rig.call("grep_files", {"pattern": r"^import", "glob": "*.py"})
    assert res.content["matches"] == [f"{rig.workspace / 'src/a.py'}:1:import os"]


class _Page(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = (
            b"<html><head><title>T</title><style>x{}</style></head>"
            b"<body><p>Hello <b>web</b></p></body></html>"
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass


def test_web_fetch_extracts_text(rig) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        res = rig.call("web_fetch", {"url": f"http://127.0.0.1:{server.server_port}/"})
    finally:
        server.shutdown()
        server.server_close()
    assert res.content["title"] == "T" and res.content["text"] == "Hello web" and res.content["status"] == 200
    assert rig.call("web_fetch", {"url": "file:///etc/passwd"}).error_type == "invalid_url"


class _Big(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/slow":
            time.sleep(2)
        body = b"x" * (3 * 1024 * 1024)
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, *args) -> None:  # type: ignore[no-untyped-def]
        pass


def test_web_fetch_size_and_time_caps(rig) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Big)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    try:
        big = rig.call("web_fetch", {"url": f"{base}/big"})
        slow = rig.call("web_fetch", {"url": f"{base}/slow"}, deadline_ms=int((time.time() + 1.0) * 1000))
    finally:
        server.shutdown()
        server.server_close()
    assert big.content["truncated"] is True and len(big.content["text"]) == 50_000
    assert slow.error_type == "fetch_failed" and "Timeout" in slow.content["error"]


class _Slack:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str, str, str]] = []

    def send(self, channel, recipient, text, *, idempotency_key):  # type: ignore[no-untyped-def]
        self.sent.append((channel, recipient, text, idempotency_key))
        return {"ts": "1.0"}


def test_send_message_is_receipted_and_never_posts_twice(make_rig) -> None:
    slack = _Slack()
    rig = make_rig(services={"messengers": {"slack": slack}})
    ctx = rig.ctx(mode="DAEMON")
    from geode.tools.spec import ToolCall

    call = ToolCall(
        id="m1", name="send_message", input={"channel": "slack:C1", "recipient": "U1", "text": "hi"}
    )
    first = rig.executor.execute(ctx, call)
    again = rig.executor.execute(ctx, call)
    assert first.content["sent"] is True and again.content == first.content
    assert slack.sent == [("slack:C1", "U1", "hi", ctx.operation_id)]


def test_send_message_without_adapters_is_unavailable(rig) -> None:
    res = rig.call("send_message", {"channel": "telegram:1", "recipient": "u", "text": "x"})
    assert res.error_type == "tool_unavailable" and "unavailable" in res.content["error"]


def test_delegate_task(make_rig) -> None:
    seen = []

    def delegate(task, *, parent, timeout_s, **kw):  # type: ignore[no-untyped-def]
        seen.append((task, parent.session_id))
        return {"result": "done"}

    rig = make_rig(services={"delegate": delegate})
    assert rig.call("delegate_task", {"task": "sum it"}).content == {"task": "sum it", "result": "done"}
    assert rig.call("delegate_task", {"task": "x"}, subagent_depth=1).error_type == "tool_policy_denied"
    assert rig.call("delegate_task", {"task": "x"}, mode="HEADLESS").error_type == "tool_policy_denied"
    assert make_rig().call("delegate_task", {"task": "x"}).error_type == "tool_unavailable"
    assert seen == [("sum it", "s1")]


def test_computer_unavailable_without_display(rig, monkeypatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    res = rig.call("computer", {"action": "screenshot"})
    assert res.error_type == "tool_unavailable" and "no display" in res.content["error"]


def test_personal_data_arguments_are_omitted_from_the_timeline(rig) -> None:
    rig.call("probe_personal", {"x": 42})
    rows = rig.timeline()
    assert rows and all(r.payload["arguments"] == "[omitted: personal data]" for r in rows)
