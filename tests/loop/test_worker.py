"""The loop worker over the real bus (single-process inproc): store + lanes + executor + loop-1."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from actors.lanes import start_lanes
from actors.loop_worker import LoopWorker
from actors.store import start_store
from actors.tree.registry import ChildContext
from geode.home import GeodeHome
from geode.protocol import lanes as lanes_msg
from geode.records.store_client import StoreClient
from geode.testing.function_model import FunctionModel
from geode.tools.executor import ToolExecutor
from geode.tools.handlers import HandlerEntry
from geode.tools.plan import PlanRegistry
from geode.tools.service import ToolService
from tests.loop.fakes import read_spec, write_spec
from tests.waiting import poll_for


@dataclass
class Tree:
    home: GeodeHome
    buses: list[Bus]
    client: Bus
    store: Any
    lanes: Any
    effects: list[str] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    entered: threading.Event = field(default_factory=threading.Event)
    workers: list[LoopWorker] = field(default_factory=list)

    def submit(self, turn_id: str, session_id: str, text: str, **settings: Any) -> None:
        body = lanes_msg.Submit(
            turn_id=turn_id, session_id=session_id, input={"text": text}, settings=settings
        )
        self.client.transport.call("lanes", lanes_msg.SUBMIT, body, timeout_s=5)

    def wait_done(self, turn_id: str, timeout: float = 10.0) -> dict[str, Any]:
        def done() -> dict[str, Any] | None:
            query = lanes_msg.TurnQuery(turn_id=turn_id)
            rec: dict[str, Any] = self.client.transport.call("lanes", lanes_msg.TURN, query, timeout_s=5)
            return rec if rec.get("state") == "done" else None

        return poll_for(done, timeout, interval_s=0.05, what=f"turn {turn_id} done")


@pytest.fixture
def tree(tmp_path: Path) -> Iterator[Tree]:
    home = GeodeHome(tmp_path / "h").ensure()

    def bus(name: str) -> Bus:
        return Bus(name, 1, home, single_process=True).start()

    sb, lb, eb, cb = bus("store"), bus("lanes"), bus("executor"), bus("control")
    store = start_store(home, bus=sb)
    lanes = start_lanes(home, bus=lb)
    effects: list[str] = []
    gate, entered = threading.Event(), threading.Event()

    def read(a: dict[str, Any], env: Any) -> Any:
        if a.get("block") and not entered.is_set():  # only the first call blocks
            entered.set()
            gate.wait(10)
        return {"value": a.get("key")}

    handlers = {
        "test:read": HandlerEntry(read),
        "test:write": HandlerEntry(lambda a, env: effects.append(a["text"]) or {"written": a["text"]}),
    }
    ex = ToolExecutor(
        owner="executor#1", records=StoreClient(eb.transport), handlers=handlers, default_workspace=tmp_path
    )
    eb.serve("executor", ToolService(ex))
    t = Tree(home, [sb, lb, eb, cb], cb, store, lanes, effects, gate, entered)
    yield t
    for w in t.workers:
        w.stop()
    lanes.stop()
    ex.shutdown()
    for b in reversed(t.buses):
        b.stop()
    store.engine.close()


def _worker(tree: Tree, provider: Any, name: str = "loop-1", incarnation: int = 1) -> LoopWorker:
    b = Bus(name, incarnation, tree.home, single_process=True).start()
    tree.buses.append(b)
    plan = PlanRegistry().compile([read_spec("read"), write_spec("write")])
    w = LoopWorker(
        b,
        ChildContext(name, incarnation, tree.home),
        provider_factory=lambda m: provider,
        plan_factory=lambda: plan,
        heartbeat_s=0.2,
    ).start()
    tree.workers.append(w)
    return w


def test_turn_runs_on_worker_and_reports_done(tree: Tree) -> None:
    provider = FunctionModel.script(
        [{"tool_calls": [{"name": "write", "input": {"text": "hi"}}]}, "wrote hi"]
    )
    _worker(tree, provider)
    tree.submit("t1", "s1", "please write")
    rec = tree.wait_done("t1")
    assert rec["outcome"]["termination_reason"] == "natural"
    assert rec["outcome"]["text"] == "wrote hi"
    assert tree.effects == ["hi"]
    events = tree.client.transport.call(
        "lanes", lanes_msg.REPLAY, lanes_msg.Replay(session_id="s1"), timeout_s=5
    )
    kinds = [e["kind"] for e in events.get("events", [])]
    assert "tool_start" in kinds and "termination" in kinds


def test_cancel_reaches_the_running_turn(tree: Tree) -> None:
    provider = FunctionModel.script([{"tool_calls": [{"name": "read", "input": {"block": True}}]}, "never"])
    w = _worker(tree, provider)
    tree.submit("t2", "s2", "read slowly")
    assert tree.entered.wait(10)
    [before] = w.turn_status()  # the turn's actor answers while its loop is blocked in a tool
    assert (before["turn_id"], before["phase"], before["cancelled"]) == ("t2", "running", False)
    reply = tree.client.transport.call("lanes", lanes_msg.CANCEL, lanes_msg.Cancel(turn_id="t2"), timeout_s=5)
    assert reply["state"] == "cancellation_requested"
    # it reaches the turn's actor while the tool still blocks
    poll_for(lambda: w.turn_status()[0]["cancelled"], 5, what="the cancel reaching the turn's actor")
    tree.gate.set()
    rec = tree.wait_done("t2")
    assert rec["outcome"]["termination_reason"] == "user_cancelled"
    assert len(provider.requests) == 1


def test_second_worker_incarnation_resumes_requeued_turn(tree: Tree) -> None:
    """The worker vanishes (supervision releases its lanes entry): the next incarnation resumes the turn."""
    from geode.protocol import runtime

    first = FunctionModel.script([{"tool_calls": [{"name": "read", "input": {"block": True}}]}])
    w1 = _worker(tree, first)
    tree.submit("t3", "s3", "go")
    assert tree.entered.wait(10)
    w1.stop()  # like a dying process: its turn is left where it is (blocked in the executor)
    tree.client.transport.call(
        "lanes", runtime.CHILD_DIED, runtime.ChildDied(name="loop-1", incarnation=1), timeout_s=5
    )
    second = FunctionModel.script(["resumed"])
    _worker(tree, second, incarnation=2)
    rec = tree.wait_done("t3")
    assert rec["incarnation"] == 2
    assert rec["outcome"]["text"] == "resumed"
    tree.gate.set()  # the zombie turn of incarnation 1 wakes up: its saves are fenced by the checkpoint seq
