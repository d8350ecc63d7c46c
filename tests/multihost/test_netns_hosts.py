"""Issue 17's acceptance across network namespaces (scripts/netns-hosts): a main tree in geode-main, a
loop-worker host w1 and an executor host w2 over tcp + CURVE. Turns from main's CLI run on w1's loop worker
and w2's executor; an unknown key is refused and logged with its address; a cut worker host's turn is resumed
on another worker without running its effect twice; a cut executor host's in-flight effect is uncertain;
restored hosts rejoin with a new incarnation."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.multihost.netns_kit import PORT, Cluster, Worker, cluster, unavailable
from tests.waiting import poll_for

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

MARKERS = "markers.txt"
REFUSED = re.compile(r"reject|refus", re.IGNORECASE)


class Model:
    """The scripted model. A prompt is ``KIND NAME``: the first call runs ``run_bash`` appending NAME to the
    workspace's markers file (``slow``: then sleeps 30 s); the call after the tool result answers
    ``done NAME``.
    ``pair`` turns wait at their first call until two of them are in flight (so each sits on its own worker);
    ``hold`` turns wait before their final answer until the test releases NAME."""

    def __init__(self, ws: Path) -> None:
        self.ws = ws
        self.cond = threading.Condition()
        self.pairs: set[str] = set()
        self.held: set[str] = set()
        self.release: dict[str, threading.Event] = {}

    def event(self, name: str) -> threading.Event:
        with self.cond:
            return self.release.setdefault(name, threading.Event())

    def __call__(self, req: Any) -> Any:
        msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
        first = msgs[0]["content"] if msgs else ""
        prompt = first if isinstance(first, str) else " ".join(b.get("text", "") for b in first)
        kind, name = [*prompt.split(), "?", "?"][:2]
        last = msgs[-1].get("content") if msgs else None
        if not (isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)):
            if kind == "pair":
                with self.cond:
                    self.pairs.add(name)
                    self.cond.notify_all()
                    self.cond.wait_for(lambda: len(self.pairs) >= 2, timeout=30)
            cmd = f"echo {name} >> {self.ws / MARKERS}" + ("; sleep 30" if kind == "slow" else "")
            return {"tool_calls": [{"name": "run_bash", "input": {"command": cmd, "timeout": 60}}]}
        if kind == "hold":
            with self.cond:
                self.held.add(name)
                self.cond.notify_all()
            self.event(name).wait(90)
        return {"text": f"done {name}"}


RECORDS = """
import json, sys
from actors.bus import Bus
from geode.records.store_client import StoreClient
bus = Bus("netns-test", 1).start()
try:
    sc = StoreClient(bus.transport, timeout_s=10)
    out = {"turns": [t.model_dump(mode="json") for t in sc.list_turns()],
           "receipts": [r.model_dump(mode="json") for r in sc.list_receipts(limit=1000)]}
finally:
    bus.stop()
print(json.dumps(out))
"""


def records(c: Cluster) -> dict[str, list[dict[str, Any]]]:
    """Main's turn records and receipts, read by a store client inside main's namespace."""
    r = c.bed.python("main", RECORDS, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    return dict(json.loads(r.stdout.strip().splitlines()[-1]))


def markers(c: Cluster) -> list[str]:
    f = c.ws / MARKERS
    return f.read_text().split() if f.exists() else []


def child(kids: dict[str, dict[str, Any]], kind: str) -> dict[str, Any] | None:
    """The child of ``kind`` (loop-1, executor) in a host's list, named plain or host-qualified."""
    return next((v for k, v in kids.items() if k == kind or k.endswith("/" + kind)), None)


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Cluster, Model]]:
    base = tmp_path_factory.mktemp("netns")
    model = Model(base / "ws")
    with cluster(base, model) as c:
        c.serve_main(loop_workers=1, capacity=1)  # one turn per worker (pairs split)
        c.serve_workers(Worker("w1", "loop", capacity=1), Worker("w2", "executor", roots=(c.ws,)))
        c.wait_host("w1", lambda k: child(k, "loop-1") is not None)
        c.wait_host("w2", lambda k: child(k, "executor") is not None)
        yield c, model


def ask(c: Cluster, prompt: str) -> subprocess.Popen[str]:
    return c.bed.geode_popen("main", "ask", prompt, "--json", "--dangerously-skip-permissions", cwd=c.ws)


def answer(p: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    out, err = p.communicate(timeout=timeout)
    assert out.strip(), err
    return dict(json.loads(out))


def test_turns_run_on_the_worker_host_and_tools_on_the_executor_host(hosts: tuple[Cluster, Model]) -> None:
    c, _model = hosts
    procs = [ask(c, "pair p1"), ask(c, "pair p2")]
    results = [answer(p) for p in procs]
    assert [r["termination_reason"] for r in results] == ["natural", "natural"], results
    assert [markers(c).count(n) for n in ("p1", "p2")] == [1, 1]
    recs = records(c)
    turn_ids = {r["turn_id"] for r in results}
    workers = sorted(t["worker"] for t in recs["turns"] if t["turn_id"] in turn_ids)
    assert workers == ["loop-1", "w1/loop-1"], workers  # one on main's worker, one on w1's
    sessions = {r["session_id"] for r in results}
    owners = {r["owner"].split("#")[0] for r in recs["receipts"] if r["identity"]["session_id"] in sessions}
    assert owners == {"w2/executor"}, owners  # the workspace lies under w2's roots: w2 ran both tools
    addresses = {h["host"]: h["address"] for h in c.status()["hosts"]}
    assert addresses == {"w1": "10.77.0.2", "w2": "10.77.0.3"}, addresses  # main's status: hosts, addresses


UNKNOWN_PEER = """
import sys, zmq
ctx = zmq.Context()
s = ctx.socket(zmq.DEALER)
if sys.argv[1]:  # CURVE with a key main does not know; else a plain (NULL, unauthenticated) peer
    s.curve_serverkey = open(sys.argv[1]).read().strip().encode()
    s.curve_publickey, s.curve_secretkey = zmq.curve_keypair()
s.linger = 0
s.connect(sys.argv[2])
s.send_multipart([b"", b"hello"])
print("answered" if s.poll(3000) else "no answer")
"""


def test_a_peer_with_an_unknown_key_is_refused_and_logged_with_its_address_a_plain_one_refused(
    hosts: tuple[Cluster, Model],
) -> None:
    c, _model = hosts
    main_pub = c.bed.hosts["main"].home.root / "keys" / "host.pub"
    target = f"tcp://{c.bed.hosts['main'].address}:{PORT}"
    r = c.bed.python("w1", UNKNOWN_PEER, str(main_pub), target)
    assert r.returncode == 0 and r.stdout.strip() == "no answer", r.stdout + r.stderr
    w1 = c.bed.hosts["w1"].address

    def refusal() -> list[str]:
        return [ln for ln in c.logs("main").splitlines() if w1 in ln and REFUSED.search(ln)]

    lines = poll_for(refusal, 15, interval_s=0.2, what=f"main's log to refuse the peer at {w1}")
    assert lines, lines
    plain = c.bed.python("w2", UNKNOWN_PEER, "", target)  # no CURVE at all: refused too
    assert plain.returncode == 0 and plain.stdout.strip() == "no answer", plain.stdout + plain.stderr


def test_a_cut_worker_host_turn_resumes_elsewhere_once_and_the_host_rejoins(
    hosts: tuple[Cluster, Model],
) -> None:
    c, model = hosts
    before = child(c.host_children("w1"), "loop-1")
    assert before is not None
    procs = [ask(c, "hold c1"), ask(c, "hold c2")]
    with model.cond:
        assert model.cond.wait_for(lambda: {"c1", "c2"} <= model.held, timeout=60), model.held
    assert [markers(c).count(n) for n in ("c1", "c2")] == [1, 1]  # both effects ran; both turns wait
    running = [t for t in records(c)["turns"] if t["state"] == "running"]
    on_w1 = [t for t in running if str(t["worker"]).startswith("w1/")]
    assert len(running) == 2 and len(on_w1) == 1, running
    in_flight = child(c.host_children("w1"), "loop-1")
    assert in_flight is not None and in_flight["turns_in_flight"] == [on_w1[0]["turn_id"]], in_flight
    c.bed.cut("w1")
    try:
        for name in ("c1", "c2"):
            model.event(name).set()
        results = [answer(p, timeout=120) for p in procs]
        assert [r["termination_reason"] for r in results] == ["natural", "natural"], results
        moved = next(t for t in records(c)["turns"] if t["turn_id"] == on_w1[0]["turn_id"])
        assert moved["state"] == "done" and moved["worker"] == "loop-1", moved  # resumed on main's worker
        assert [markers(c).count(n) for n in ("c1", "c2")] == [1, 1]  # no effect ran twice
    finally:
        c.bed.restore("w1")
    inc = int(before["incarnation"])
    again = c.wait_host("w1", lambda k: int((child(k, "loop-1") or {}).get("incarnation", 0)) > inc, 60)
    assert int(child(again, "loop-1")["incarnation"]) > inc  # type: ignore[index]


def test_a_cut_executor_host_leaves_its_effect_uncertain_and_rejoins(hosts: tuple[Cluster, Model]) -> None:
    c, _model = hosts
    before = child(c.host_children("w2"), "executor")
    assert before is not None
    proc = ask(c, "slow e1")
    poll_for(lambda: "e1" in markers(c), 60, interval_s=0.1, what="the slow effect to start on w2")
    busy = c.wait_host("w2", lambda k: (child(k, "executor") or {}).get("effects_in_flight") == 1, 15)
    assert child(busy, "executor") is not None  # main's status shows the effect in flight on w2
    c.bed.cut("w2")
    try:

        def uncertain() -> list[dict[str, Any]]:
            return [
                r
                for r in records(c)["receipts"]
                if r["state"] == "uncertain" and r["owner"].startswith("w2/")
            ]

        found = poll_for(uncertain, 30, interval_s=0.5, what="the cut host's receipt to become uncertain")
        assert len(found) == 1, found
        out = answer(proc, timeout=120)
        assert out["session_id"] == found[0]["identity"]["session_id"], out
        assert markers(c).count("e1") == 1  # nothing re-sent
    finally:
        c.bed.restore("w2")
    inc = int(before["incarnation"])
    again = c.wait_host("w2", lambda k: int((child(k, "executor") or {}).get("incarnation", 0)) > inc, 60)
    assert int(child(again, "executor")["incarnation"]) > inc  # type: ignore[index]
