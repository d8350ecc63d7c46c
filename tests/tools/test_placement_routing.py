"""The tool routing in main's executor (geode/tools/remote_routing.py) and a remote executor's link to it
(geode/tools/remote_agent.py), in process: forwarding by workspace root, host loss → uncertain, no re-send."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from geode.protocol import tools as m
from geode.protocol.errors import GeodeError, RequestTimeout
from geode.protocol.transport import LocalTransport
from geode.records.service import StoreService
from geode.tools.executor import ToolExecutor
from geode.tools.remote_agent import RemoteAgent
from geode.tools.remote_routing import RemoteRouter
from geode.tools.service import ToolService
from geode.tools.spec import ToolCall, ToolResult
from tests.tools.conftest import Probe, Rig, StoreFixture
from tests.waiting import poll_for

PEER = "w1/executor#1"  # the remote executor's bus address as main's executor sees it


@dataclass
class Net:
    """A transport whose calls to the remote peer can be failed while they wait (``Bus.fail_pending``)."""

    local: LocalTransport
    sent: list[tuple[str, str]] = field(default_factory=list)
    _waiting: list[tuple[threading.Event, list[Any]]] = field(default_factory=list)
    _mu: threading.Lock = field(default_factory=threading.Lock)

    def call(self, target: str, type_: str, body: Any = None, *, session: Any = None, timeout_s: float = 5.0):  # type: ignore[no-untyped-def]
        self.sent.append((target, type_))
        if target != PEER:
            return self.local.call(target, type_, body, session=session, timeout_s=timeout_s)
        done, box = threading.Event(), []  # type: ignore[var-annotated]

        def run() -> None:
            try:
                box.append(self.local.call(target, type_, body, session=session, timeout_s=timeout_s))
            except Exception as exc:
                box.append(exc)
            done.set()

        with self._mu:
            self._waiting.append((done, box))
        threading.Thread(target=run, daemon=True).start()
        if not done.wait(timeout_s):
            raise RequestTimeout("no reply")
        if isinstance(box[0], Exception):
            raise box[0]
        return box[0]

    def fail_pending(self, target: str, error: GeodeError) -> int:
        n = 0
        with self._mu:
            for done, box in self._waiting:
                if target == PEER and not done.is_set():
                    box.insert(0, error)
                    done.set()
                    n += 1
        return n


@dataclass
class Clock:
    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Hosts:
    main: Rig
    remote: ToolExecutor
    router: RemoteRouter
    net: Net
    clock: Clock
    remote_ws: Path


@pytest.fixture
def hosts(make_rig, store: StoreFixture, tmp_path: Path) -> Hosts:  # type: ignore[no-untyped-def]
    main = make_rig()
    remote_ws = tmp_path / "remote-ws"
    remote_ws.mkdir()
    probes = main.probes  # the remote runs the same probe handlers: count calls per host below
    remote_probes = {n: Probe() for n in probes}
    handlers = {f"test:{n}": _entry(p) for n, p in remote_probes.items()}
    remote = ToolExecutor(
        owner="w1/executor#1", records=store.client, handlers=handlers, default_workspace=remote_ws
    )
    remote.services["probes"] = remote_probes
    local = LocalTransport(
        {"store": StoreService(store.engine), PEER: ToolService(remote, name="w1/executor", incarnation=1)},
        sender="executor#1",
    )
    net = Net(local)
    clock = Clock()
    router = RemoteRouter(main.executor, net, fail_pending=net.fail_pending, clock=clock)
    router.ready(m.ExecutorReady(host="w1", incarnation=1, roots=[str(remote_ws)]), _req(PEER))
    yield Hosts(main, remote, router, net, clock, remote_ws)
    for p in remote_probes.values():
        if p.release is not None:
            p.release.set()
    remote.shutdown()


def _entry(p: Probe) -> Any:
    from geode.tools.handlers import HandlerEntry

    return HandlerEntry(p)


def _req(sender: str, deadline_s: float = 30.0) -> Any:
    from geode.protocol.envelope import Envelope, now_ms
    from geode.protocol.transport import Request

    env = Envelope(type=m.EXECUTE, deadline=now_ms() + int(deadline_s * 1000), **{"from": sender})
    return Request(env, m.HostsQuery())


def _execute(h: Hosts, name: str, ws: Path, op: str, session: str = "s1") -> ToolResult:
    ctx = h.main.ctx(workspace=str(ws), operation_id=op, session_id=session)
    body = m.ToolExecute(ctx=ctx, call=ToolCall(id=f"tu-{op}", name=name, input={"x": 1}))
    return h.router.execute(body, _req("loop-1#1"))


def _remote_probe(h: Hosts, name: str) -> Probe:
    probe: Probe = h.remote.services["probes"][name]
    return probe


def test_calls_under_the_remote_roots_run_there_others_run_locally(hosts: Hosts, tmp_path: Path) -> None:
    h = hosts
    sub = h.remote_ws / "project"
    sub.mkdir()
    r = _execute(h, "probe_write", sub, "op-remote")
    assert not r.is_error, r
    assert len(_remote_probe(h, "probe_write").calls) == 1 and h.main.probes["probe_write"].calls == []
    receipt = h.main.store.client.get_receipt("op-remote")
    assert receipt is not None and receipt.owner == "w1/executor#1" and receipt.state.value == "committed"
    assert (PEER, m.PLAN_BIND) in h.net.sent  # main's plan was bound there before the first call
    r = _execute(h, "probe_write", h.main.workspace, "op-local")
    assert not r.is_error, r
    assert len(h.main.probes["probe_write"].calls) == 1 and len(_remote_probe(h, "probe_write").calls) == 1
    local = h.main.store.client.get_receipt("op-local")
    assert local is not None and local.owner == "executor#1"
    rows = h.router.hosts(m.HostsQuery(), _req("control#1")).hosts
    assert [(x.host, x.state, x.roots, x.effects_in_flight) for x in rows] == [
        ("w1", "up", [str(h.remote_ws)], 0)
    ]


def test_a_lost_host_makes_its_admitted_effect_uncertain_at_once_and_nothing_is_re_sent(hosts: Hosts) -> None:
    h = hosts
    probe = _remote_probe(h, "probe_write")
    probe.release = threading.Event()  # the effect runs until the host is cut
    out: list[ToolResult] = []
    t = threading.Thread(target=lambda: out.append(_execute(h, "probe_write", h.remote_ws, "op-cut")))
    t.start()
    assert probe.started.wait(5)
    rows = h.router.hosts(m.HostsQuery(), _req("control#1")).hosts
    assert rows[0].effects_in_flight == 1
    h.clock.now = 2.9
    assert h.router.check() == []  # within the liveness window
    h.clock.now = 3.5
    assert [rx.host for rx in h.router.check()] == ["w1"]
    t.join(5)
    assert out and out[0].error_type == "effect_outcome_uncertain", out
    assert out[0].content["operation_id"] == "op-cut"  # type: ignore[index]
    poll_for(
        lambda: (r := h.main.store.client.get_receipt("op-cut")) is not None and r.state.value == "uncertain",
        5,
        what="the lost host's admitted receipt to become uncertain",
    )
    # the host's roots are down: the same call (a loop that tried again) is not run anywhere
    again = _execute(h, "probe_write", h.remote_ws, "op-cut")
    assert again.error_type == "executor_host_down" and again.content.get("executed") is not True  # type: ignore[union-attr]
    assert len(probe.calls) == 1 and h.main.probes["probe_write"].calls == []
    # the lost incarnation is told so on its next heartbeat (it leaves; a new incarnation registers)
    hb = m.ExecutorHeartbeat(host="w1", incarnation=1)
    assert not h.router.heartbeat(hb, _req(PEER)).known


def test_a_new_incarnation_declares_the_old_one_dead(hosts: Hosts) -> None:
    h = hosts
    probe = _remote_probe(h, "probe_write")
    probe.release = threading.Event()
    out: list[ToolResult] = []
    t = threading.Thread(target=lambda: out.append(_execute(h, "probe_write", h.remote_ws, "op-restart")))
    t.start()
    assert probe.started.wait(5)
    known = h.router.ready(
        m.ExecutorReady(host="w1", incarnation=2, roots=[str(h.remote_ws)]), _req("w1/x#2")
    )
    assert known.known
    t.join(5)
    assert out and out[0].error_type == "effect_outcome_uncertain", out
    poll_for(
        lambda: (
            (r := h.main.store.client.get_receipt("op-restart")) is not None and r.state.value == "uncertain"
        ),
        5,
        what="the replaced incarnation's receipt to become uncertain",
    )


class _Main:
    """main's executor as the agent sees it: answers known/unknown, or nothing at all."""

    def __init__(self) -> None:
        self.known = True
        self.silent = False
        self.seen: list[str] = []

    def call(self, target: str, type_: str, body: Any = None, **kw: Any) -> dict[str, Any]:
        self.seen.append(type_)
        if self.silent:
            raise RequestTimeout("cut")
        return m.ExecutorKnown(known=self.known).model_dump()


def test_the_agent_registers_heartbeats_and_leaves_when_main_is_silent() -> None:
    main = _Main()
    left: list[str] = []
    gone = threading.Event()

    def on_lost(why: str) -> None:
        left.append(why)
        gone.set()

    ready = m.ExecutorReady(host="w1", incarnation=3, roots=["/srv/w1"])
    agent = RemoteAgent(main, ready, on_lost, heartbeat_s=0.05, liveness_s=0.3).start()  # type: ignore[arg-type]
    try:
        assert agent.registered.wait(5)
        poll_for(lambda: main.seen.count(m.EXECUTOR_HEARTBEAT) >= 2, 5, what="heartbeats")
        assert main.seen[0] == m.EXECUTOR_READY and not left
        main.silent = True
        assert gone.wait(5)
        assert "no answer" in left[0]
    finally:
        agent.stop()


def test_the_agent_leaves_when_main_no_longer_knows_its_incarnation() -> None:
    main = _Main()
    gone = threading.Event()
    ready = m.ExecutorReady(host="w1", incarnation=3, roots=["/srv/w1"])
    agent = RemoteAgent(main, ready, lambda why: gone.set(), heartbeat_s=0.05, liveness_s=5).start()  # type: ignore[arg-type]
    try:
        assert agent.registered.wait(5)
        main.known = False  # main declared it lost (or restarted): never go on under the same owner
        assert gone.wait(5)
    finally:
        agent.stop()


def test_a_restarted_router_remembers_the_remote_executors(hosts: Hosts, tmp_path: Path) -> None:
    """main's executor restarted: sessions under a remote's roots must not run locally meanwhile; the remote's
    heartbeats carry on, and a remote that is gone is lost after the liveness window, as before."""
    h, memory = hosts, tmp_path / "executor-hosts.json"
    first = RemoteRouter(
        h.main.executor, h.net, fail_pending=h.net.fail_pending, clock=h.clock, memory=memory
    )
    first.ready(m.ExecutorReady(host="w1", incarnation=1, roots=[str(h.remote_ws)]), _req(PEER))
    again = RemoteRouter(
        h.main.executor, h.net, fail_pending=h.net.fail_pending, clock=h.clock, memory=memory
    )
    assert again.placement.route(str(h.remote_ws / "x")).kind == "remote"
    assert again.heartbeat(m.ExecutorHeartbeat(host="w1", incarnation=1), _req(PEER)).known
    h.clock.now = 10.0
    assert [rx.host for rx in again.check()] == ["w1"]
    third = RemoteRouter(
        h.main.executor, h.net, fail_pending=h.net.fail_pending, clock=h.clock, memory=memory
    )
    assert third.placement.route(str(h.remote_ws)).kind == "down"
    memory.write_text("not json")
    assert (
        RemoteRouter(h.main.executor, h.net, fail_pending=h.net.fail_pending, memory=memory).placement.all()
        == []
    )


def test_a_cancel_reaches_the_remote_executors_calls(hosts: Hosts) -> None:
    h = hosts
    probe = _remote_probe(h, "probe_write")
    probe.release = threading.Event()
    out: list[ToolResult] = []
    t = threading.Thread(target=lambda: out.append(_execute(h, "probe_write", h.remote_ws, "op-cancel")))
    t.start()
    assert probe.started.wait(5)
    touched = h.router.cancel(m.ToolCancel(session_id="s1", turn_id="t1"), _req("loop-1#1")).touched
    assert touched == 1  # the call running on w1 saw the cancel (main's local executor had none)
    assert (PEER, m.CANCEL) in h.net.sent
    probe.release.set()
    t.join(5)
