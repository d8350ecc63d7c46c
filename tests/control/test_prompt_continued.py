"""A prompt whose ``lanes.submit`` is continued by callback (issue 34): sent on the thread that read the
frame, answered from the reply's thread, no runner thread woken or parked for it; the same replies, events and
order as a prompt whose runner thread waits."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope
from geode.protocol.errors import Unavailable
from tests.control.harness import ScriptedWorker, Tree


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    t = Tree(tmp_path, continued=True)
    yield t
    t.close()


def test_a_prompt_runs_on_no_runner_thread_and_streams_as_before(tree: Tree) -> None:
    ScriptedWorker(tree.reg).ready()
    cl = tree.client("c1")
    jobs = tree.jobs  # the handshake's
    r = cl.request(c.PROMPT, {"text": "hello"})
    assert r.kind == "ok" and tree.calls is not None and tree.calls.sent == 1
    result = cl.wait_done(r.body["turn_id"])
    assert result["text"] == "answer to hello"
    assert tree.jobs == jobs  # was one runner job a prompt, parked on lanes.submit
    frames = [(f.type, f.body.get("kind")) for f in cl.frames]
    at = frames.index((c.CLI_EVENT, lanes_msg.TURN_STARTED))
    assert frames[at - 1] == (c.CLI_EVENT, lanes_msg.TURN_QUEUED)
    reply = next(i for i, f in enumerate(cl.frames) if f.corr == r.corr)
    assert at < reply  # the submit reply's carried events go out before the prompt's reply, as before
    kinds = [e["kind"] for e in cl.events()]
    assert kinds[-1] == lanes_msg.TURN_DONE and "text_delta" in kinds


def test_the_connections_next_request_waits_for_the_prompts_reply(tree: Tree) -> None:
    ScriptedWorker(tree.reg).ready()
    cl = tree.client("c1")
    gate, calls = threading.Event(), tree.calls
    assert calls is not None
    inner = calls.call

    def held(*a: Any, **kw: Any) -> None:  # the reply is handed over only once the gate opens
        then = a[3]
        inner(*a[:3], lambda out: (gate.wait(5), then(out)), **kw)

    calls.call = held  # type: ignore[method-assign]
    prompt = Envelope(type=c.PROMPT, body={"text": "one"})
    tree.core.on_envelope("c1", prompt)
    after = Envelope(type=c.HANDSHAKE, body={"protocol_version": c.CONTROL_PROTOCOL})
    tree.core.on_envelope("c1", after)  # queued behind the prompt on the same connection
    threading.Event().wait(0.2)
    assert not [f for f in cl.frames if f.corr in (prompt.id, after.id)]  # neither answered yet
    gate.set()
    got = cl.wait(lambda f: f.corr == after.id)
    assert got.kind == "ok"
    assert [f.corr for f in cl.frames if f.corr in (prompt.id, after.id)] == [prompt.id, after.id]


def test_lanes_unreachable_is_retried_then_the_prompts_error(
    tree: Tree, monkeypatch: pytest.MonkeyPatch
) -> None:
    cl = tree.client("c1")
    assert tree.calls is not None
    tried: list[str] = []

    def refused(target: str, type_: str, body: Any, then: Any, **kw: Any) -> None:
        tried.append("continued")
        then(Unavailable("lanes is restarting"))

    def blocking(*a: Any, **kw: Any) -> Any:
        tried.append("blocking")
        raise Unavailable("lanes is restarting")

    monkeypatch.setattr(tree.calls, "call", refused)
    monkeypatch.setattr(tree.core.transport, "call", blocking)
    monkeypatch.setattr("geode.control.session_requests.time.sleep", lambda s: None)
    r = cl.request(c.PROMPT, {"text": "x"})
    assert r.kind == "error" and r.body["code"] == "unavailable"
    assert tried == ["continued", "blocking", "blocking", "blocking"]  # 4 attempts, as a waiting prompt's
    assert cl.request(c.PING).kind == "ok"  # the connection goes on
