"""`geode ask --output-format stream-json` (and `geode -p … --output-format stream-json`) against a served
tree with the scripted model: one JSON line per event as the turn runs (the model's final reply is held until
the test has read the ``tool_use`` line), approvals asked and answered in order, and a last line that is the
`--json` answer of the turn plus ``"type": "result"``."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from geode.testing.scenario import RecordedRequest
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode_popen, scripted_tree

RELEASE = threading.Event()  # the test read the tool_use line: the model may give its final reply
HELD = threading.Event()  # the final reply is being held
IDS = ("session_id", "turn_id")


def reply(req: RecordedRequest) -> Any:
    msgs = req.body["messages"]
    last = msgs[-1]["content"]
    answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    if "look" in json.dumps(msgs[0]):
        if not answered:
            call = {"name": "read_file", "id": "tu_r", "input": {"file_path": "a.txt"}}
            return {"text": "Let me look. ", "tool_calls": [call]}
        HELD.set()
        RELEASE.wait(60)
        return {"chunks": ("all ", "done")}
    if "hello" in json.dumps(msgs[0]):
        return {"text": "hi there"}
    if not answered:
        return {
            "tool_calls": [
                {"name": "write_file", "id": "tu_w", "input": {"file_path": "w.txt", "content": "W"}}
            ]
        }
    return {"text": "written"}


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, ScriptedServer, Path]]:
    base = tmp_path_factory.mktemp("stream")
    ws = base / "ws"
    ws.mkdir()
    (ws / "a.txt").write_text("alpha\n")
    with scripted_tree(base, reply, ws=ws) as (home, server):
        yield home, server, ws


class Lines:
    """The CLI's stdout, one parsed JSON object per line as it is written."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.q, self.seen = proc, queue.Queue[Any](), []  # type: ignore[var-annotated]
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.q.put(json.loads(line))
        self.q.put(None)

    def until(self, pred: Any, timeout: float = 60.0) -> dict[str, Any]:
        while True:
            try:
                ev = self.q.get(timeout=timeout)
            except queue.Empty:
                raise AssertionError(f"no such line within {timeout}s; so far: {self.seen}") from None
            assert ev is not None, f"stdout ended first; lines: {self.seen}"
            self.seen.append(ev)
            if pred(ev):
                return ev

    def rest(self) -> list[dict[str, Any]]:
        while (ev := self.q.get(timeout=60)) is not None:
            self.seen.append(ev)
        return self.seen


def _shapes(seen: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """The lines in order, consecutive text deltas joined (the tree may coalesce deltas in flight)."""
    out: list[tuple[Any, ...]] = []
    for shape in map(_shape, seen):
        if shape[0] == "stream_event" and out and out[-1][0] == "stream_event":
            out[-1] = ("stream_event", out[-1][1] + shape[1])
        else:
            out.append(shape)
    return out


def _finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Wait for the CLI; its exit code and stderr (its pipes closed)."""
    code = proc.wait(60)
    err = proc.stderr.read() if proc.stderr else ""
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return code, err


def _shape(ev: dict[str, Any]) -> tuple[Any, ...]:
    """An event line reduced to what it says, for an ordered comparison."""
    kind = ev["type"]
    if kind == "stream_event":
        return (kind, ev["event"]["delta"]["text"])
    if kind in ("assistant", "user"):
        block = ev["message"]["content"][0]
        if block["type"] == "text":
            return (kind, "text", block["text"])
        if block["type"] == "tool_use":
            return (kind, "tool_use", block["id"], block["name"], json.dumps(block["input"]))
        return (kind, "tool_result", block["tool_use_id"], block["is_error"])
    if kind == "system":
        return (kind, ev["subtype"], ev.get("tool_name"), ev.get("decision"))
    return (kind,)


def test_events_stream_as_the_turn_runs_and_the_last_line_is_the_json_answer(
    tree: tuple[GeodeHome, ScriptedServer, Path],
) -> None:
    home, _server, ws = tree
    proc = geode_popen(
        home, "ask", "--output-format", "stream-json", "look at a.txt", cwd=ws, stdin=subprocess.DEVNULL
    )
    lines = Lines(proc)
    try:
        use = lines.until(
            lambda ev: ev["type"] == "assistant" and ev["message"]["content"][0]["type"] == "tool_use"
        )
        assert HELD.wait(60), "the model was never asked for its final reply"
        assert not any(ev["type"] == "result" for ev in lines.seen)  # the turn is still running
    finally:
        RELEASE.set()
    seen = lines.rest()
    code, err = _finish(proc)
    assert code == 0, err
    result = seen[-1]
    assert _shapes(seen) == [
        ("system", "init", None, None),
        ("stream_event", "Let me look. "),
        ("assistant", "text", "Let me look. "),
        ("assistant", "tool_use", "tu_r", "read_file", '{"file_path": "a.txt"}'),
        ("user", "tool_result", "tu_r", False),
        ("stream_event", "all done"),
        ("assistant", "text", "all done"),
        ("result",),
    ], seen
    assert seen[0]["approvals"] == "nobody" and seen[0]["model"] == "claude-sonnet-5"
    assert all(ev["session_id"] == result["session_id"] for ev in seen)
    assert all(ev["turn_id"] == result["turn_id"] for ev in seen[1:])
    assert use["turn_id"] == result["turn_id"]
    assert result["text"] == "all done" and result["termination_reason"] == "natural"
    assert result["tool_calls"] == [{"id": "tu_r", "name": "read_file", "error": None}]

    # the same turn again with --json: the same object (ids aside), the result line only adds "type"
    out, err = geode_popen(
        home, "ask", "--json", "look at a.txt", cwd=ws, stdin=subprocess.DEVNULL
    ).communicate(timeout=60)
    answer = json.loads(out)
    assert answer["turn_id"] != result["turn_id"], err
    assert set(result) == {"type", *answer}
    assert {k: v for k, v in result.items() if k not in IDS} == {
        "type": "result",
        **{k: v for k, v in answer.items() if k not in IDS},
    }


def test_an_approval_asked_and_answered_on_the_terminal_in_order(
    tree: tuple[GeodeHome, ScriptedServer, Path],
) -> None:
    """`geode -p`: stdout is a pipe for a script, stdin the terminal where the question is asked."""
    home, _server, ws = tree
    master, slave = os.openpty()
    proc = geode_popen(home, "-p", "write w.txt", "--output-format", "stream-json", cwd=ws, stdin=slave)
    os.close(slave)
    lines = Lines(proc)
    try:
        asked = lines.until(lambda ev: ev.get("subtype") == "approval_request")
        assert not (ws / "w.txt").exists()
        os.write(master, b"y\n")
        seen = lines.rest()
        code, err = _finish(proc)
        assert code == 0, err
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert _shapes(seen) == [
        ("system", "init", None, None),
        ("assistant", "tool_use", "tu_w", "write_file", '{"file_path": "w.txt", "content": "W"}'),
        ("system", "approval_request", "write_file", None),
        ("system", "approval_response", "write_file", "allow"),
        ("user", "tool_result", "tu_w", False),
        ("stream_event", "written"),
        ("assistant", "text", "written"),
        ("result",),
    ], seen
    assert seen[0]["approvals"] == "terminal"
    assert "w.txt" in asked["detail"] and seen[3]["approval_id"] == asked["approval_id"]
    assert (ws / "w.txt").read_text() == "W"
    assert seen[-1]["tool_calls"] == [{"id": "tu_w", "name": "write_file", "error": None}]


def test_nobody_to_ask_is_said_as_unasked_and_a_bad_format_is_a_usage_error(
    tree: tuple[GeodeHome, ScriptedServer, Path],
) -> None:
    home, _server, ws = tree
    (ws / "w.txt").unlink(missing_ok=True)
    proc = geode_popen(
        home, "ask", "--output-format=stream-json", "write w.txt", cwd=ws, stdin=subprocess.DEVNULL
    )
    seen = Lines(proc).rest()
    assert _finish(proc)[0] == 77
    assert _shapes(seen)[2:5] == [
        ("system", "approval_request", "write_file", None),
        ("system", "approval_response", "write_file", "unasked"),
        ("user", "tool_result", "tu_w", True),
    ], seen
    assert (
        seen[4]["error"] == "permission_denied" and seen[-1]["tool_calls"][0]["error"] == "permission_denied"
    )
    assert seen[-1]["approvals_unasked"] == ["write_file"] and seen[-1]["exit_code"] == 77
    assert not (ws / "w.txt").exists()

    bad = geode_popen(home, "ask", "--output-format", "xml", "hi", cwd=ws, stdin=subprocess.DEVNULL)
    out, err = bad.communicate(timeout=30)
    assert bad.returncode == 2 and out == ""
    assert err.strip().splitlines() == [
        "geode: --output-format must be one of text, json, stream-json (not 'xml')"
    ]

    # a reader that closes the pipe after the first line ends the output, not the turn nor the command
    gone = geode_popen(
        home, "ask", "--output-format", "stream-json", "hello", cwd=ws, stdin=subprocess.DEVNULL
    )
    assert gone.stdout is not None and json.loads(gone.stdout.readline())["subtype"] == "init"
    gone.stdout.close()
    code, err = _finish(gone)
    assert code == 0 and "Traceback" not in err and "BrokenPipe" not in err, err
