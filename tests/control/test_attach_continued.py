"""``cli.attach`` with lanes' replay continued by callback (issue 34): no control pool thread is parked on
lanes' replay, so a burst of attaches while lanes is slow (more than the pool's 8 threads) does not hold up
another connection's handshake, prompt or cancel; each attach still gets its replay, then its reply, once
lanes answers."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from geode.protocol import control as c
from geode.protocol import lanes as lanes_msg
from geode.protocol.envelope import Envelope
from geode.protocol.errors import RequestTimeout
from geode.protocol.transport import Request
from tests.control.harness import ScriptedWorker, Tree

POOL = 8  # control's pool (actors/control.py start_control workers)


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    t = Tree(tmp_path, continued=True)
    pool = ThreadPoolExecutor(max_workers=POOL, thread_name_prefix="control")
    t.core.runner = lambda job: pool.submit(job)  # control's bounded pool, as in the shell
    yield t
    pool.shutdown(wait=False, cancel_futures=True)
    t.close()


def _slow_replays(tree: Tree) -> threading.Event:
    """lanes answers ``lanes.replay`` only once the returned gate is set (a slow or restarting lanes)."""
    gate, inner = threading.Event(), tree.lanes.handle

    def handle(request: Request) -> Any:
        if request.type == lanes_msg.REPLAY:
            gate.wait(10)
        return inner(request)

    tree.lanes.handle = handle  # type: ignore[method-assign]
    return gate


def test_attaches_waiting_on_a_slow_lanes_do_not_block_a_handshake_prompt_or_cancel(tree: Tree) -> None:
    ScriptedWorker(tree.reg).ready()
    n = 2 * POOL + 2
    clients = [tree.client(f"a{i}") for i in range(n)]
    prompter = tree.client("p")
    gate = _slow_replays(tree)
    attaches = []
    for cl in clients:
        env = Envelope(type=c.ATTACH, body={"session_id": cl.session_id, "after_seq": 0})  # type: ignore[attr-defined]
        tree.core.on_envelope(cl.conn_id, env)
        attaches.append(env)
    try:  # before: a handshake and a cancel (runner jobs) waited behind 8 attaches parked on lanes
        late = tree.client("late")  # a new client's handshake
        r = late.request(c.PROMPT, {"text": "hello"}, timeout=5.0)
        assert r.kind == "ok", r.body
        assert late.wait_done(r.body["turn_id"])["text"] == "answer to hello"
        assert prompter.request(c.CLI_CANCEL, {"turn_id": "t-none"}, timeout=5.0).corr
        assert not [f for cl in clients for f in cl.frames if f.corr in {e.id for e in attaches}]
    finally:
        gate.set()
    for cl, env in zip(clients, attaches, strict=True):
        got = cl.wait(lambda f, mid=env.id: f.corr == mid)  # type: ignore[misc]
        assert got.kind == "ok" and got.body["session_id"] == cl.session_id, got.body  # type: ignore[attr-defined]


def test_an_attach_runs_on_no_runner_thread(tree: Tree) -> None:
    cl = tree.client("c1")
    jobs: list[object] = []
    runner = tree.core.runner
    tree.core.runner = lambda job: (jobs.append(job), runner(job))  # type: ignore[func-returns-value]
    r = cl.request(c.ATTACH, {"session_id": cl.session_id, "after_seq": 0})  # type: ignore[attr-defined]
    assert r.kind == "ok" and r.body["replayed"] == 0
    assert jobs == [] and tree.calls is not None and tree.calls.sent == 1


def test_live_events_held_during_a_continued_replay_follow_it_in_order(tree: Tree) -> None:
    """A live event that arrives while the attach waits for lanes goes out after the replay, deduped."""
    cl = tree.client("c1")
    sid = cl.session_id  # type: ignore[attr-defined]
    gate = _slow_replays(tree)
    env = Envelope(type=c.ATTACH, body={"session_id": sid, "after_seq": 0})
    tree.core.on_envelope(cl.conn_id, env)
    live = lanes_msg.StreamEvent(session_id=sid, turn_id="t-1", seq=5, kind="text_delta", data={"text": "x"})
    tree.core.on_origin_event(live)
    threading.Event().wait(0.1)
    assert not cl.events()  # held while the replay is in flight
    gate.set()
    assert cl.wait(lambda f: f.corr == env.id).kind == "ok"
    assert [e["seq"] for e in cl.events()] == [5]


def test_lanes_not_answering_falls_back_to_the_store(tree: Tree, monkeypatch: pytest.MonkeyPatch) -> None:
    cl = tree.client("c1")
    assert tree.calls is not None
    used: list[str] = []
    runner: Callable[[Callable[[], object]], object] = tree.core.runner

    def timed_out(target: str, type_: str, body: Any, then: Any, **kw: Any) -> None:
        then(RequestTimeout("no reply from 'lanes' to lanes.replay in time"))

    monkeypatch.setattr(tree.calls, "call", timed_out)
    tree.core.runner = lambda job: (used.append("runner"), runner(job))  # type: ignore[func-returns-value]
    r = cl.request(c.ATTACH, {"session_id": cl.session_id, "after_seq": 0})  # type: ignore[attr-defined]
    assert r.kind == "ok" and r.body["complete"] is False and r.body["replayed"] == 0, r.body
    assert used == ["runner"]  # the store is read on a runner thread (the rare path)
    assert not tree.core.replaying()
