"""The chaos harness's actors: clients running turns in a loop (recording invoke / ok / fail / info), a status
poller (the tree's children every 0.1 s) and a killer (SIGKILL a random child every S seconds)."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from actors.bus import Bus
from actors.cli.client import ControlClient
from actors.cli.reattach import new_turn_id, submit_prompt
from actors.tree.client import ENDPOINT
from actors.tree.spec import TreeConfig
from geode.home import GeodeHome
from geode.protocol import runtime
from geode.protocol.errors import GeodeError

SUCCESS = {"natural", "forced_text"}
TREE = TreeConfig()  # the shipped [supervisor] defaults
PER_CHILD_CAP = TREE.intensity - 2  # kills of one child per period_s the killer allows itself (margin 2)


@dataclass
class Op:
    """One turn as a client saw it. ``kind``: ok (a result arrived), fail (definitely never submitted: the
    handshake failed), info (submitted or maybe submitted, outcome unknown to the client)."""

    tag: str
    client: int
    t_invoke: float
    t_end: float = 0.0
    kind: str = "invoke"
    session_id: str | None = None
    turn_id: str | None = None
    reason: str | None = None  # termination reason
    text: str = ""
    error: str = ""
    approvals_asked: int = 0
    t_accepted: float = 0.0  # the prompt's reply arrived (the turn was admitted)
    events: list[tuple[float, str, str]] = field(default_factory=list)  # (arrival, kind, detail)
    reattached: int = 0  # the client's re-handshakes (control restarted under it)
    wall_invoke: float = field(default_factory=time.time)  # to line the turn up with the children's logs

    @property
    def applied(self) -> bool:
        """The answer the client got says the effect happened."""
        return self.kind == "ok" and self.reason in SUCCESS and self.text.startswith(f"applied {self.tag}")


@dataclass
class Kill:
    t: float
    wall: float
    name: str
    pid: int
    incarnation: int


@dataclass
class Sample:
    t: float
    children: (
        dict[str, tuple[str, int | None, int]] | None
    )  # name -> (state, pid, incarnation); None: no answer


@dataclass
class Record:
    """Everything the run observed, for the checker."""

    ops: list[Op] = field(default_factory=list)
    kills: list[Kill] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)
    t_start: float = 0.0
    t_chaos: float = 0.0  # kills begin
    t_calm_end: float = 0.0  # kills end
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add_op(self, op: Op) -> None:
        with self.lock:
            self.ops.append(op)


def run_turn(home: GeodeHome, ws: Path, op: Op, timeout_s: float) -> Op:
    """One `geode ask --dangerously-skip-permissions` equivalent through the control client library."""
    tag = op.tag
    cl = ControlClient(home, client_version="chaos")
    cl.on_recovery = lambda what: op.events.append((time.monotonic(), what, ""))  # in the slow-turn timeline

    def deny(_data: dict[str, Any]) -> str:  # skip-permissions should mean nobody is asked; no tty: deny
        op.approvals_asked += 1
        return "n"

    try:
        try:
            cl.connect(
                timeout_s=5.0, cwd=str(ws), is_tty=False, dangerously_skip_permissions=True, mode="IPC"
            )
        except GeodeError as exc:
            op.kind, op.error = "fail", f"handshake: {exc}"
            return op
        op.session_id = cl.session_id
        backlog: list[dict[str, Any]] = []
        try:
            # as `geode ask` does (ControlClient.run_prompt): the client picks the turn id, so a prompt whose
            # reply was lost with a killed control is sent again and finds the same turn
            body = {
                "text": f"please do chaos-turn-{tag}",
                "session_id": cl.session_id,
                "turn_id": new_turn_id(),
            }
            accepted = submit_prompt(cl, body, backlog)
            op.t_accepted = time.monotonic()
            op.turn_id = accepted["turn_id"]
            result = cl.follow(
                op.turn_id,
                backlog=backlog,
                on_event=lambda ev: note_event(op, ev),
                on_approval=deny,
                timeout_s=timeout_s,
            )
        except GeodeError as exc:
            op.kind, op.error = "info", f"{type(exc).__name__}: {exc}"
            return op
        op.kind = "ok"
        op.reason = result.get("termination_reason")
        op.text = str(result.get("text") or "")
        op.error = str(result.get("error") or "")
        return op
    except Exception as exc:
        op.kind, op.error = "info", f"{type(exc).__name__}: {exc}"
        return op
    finally:
        op.t_end = time.monotonic()
        op.reattached = cl.reattached
        cl.close()


TIMELINE_KINDS = {"turn_queued", "turn_started", "tool_start", "tool_end", "turn_done", "approval"}


def note_event(op: Op, ev: dict[str, Any]) -> None:
    """Keep the arrival time of the turn's milestones (the slow-turn breakdown reads them)."""
    kind = str(ev.get("kind") or "")
    if kind not in TIMELINE_KINDS or ev.get("turn_id") not in (None, op.turn_id):
        return
    data = ev.get("data") or {}
    if kind == "turn_started":
        detail = f"{data.get('worker')} rq{data.get('requeues', 0)}{' resume' if data.get('resume') else ''}"
    elif kind == "turn_queued":
        detail = "requeue" if data.get("resume") else ""
    elif kind == "tool_end":
        detail = str(data.get("error") or "")[:40]
    else:
        detail = ""
    op.events.append((time.monotonic(), kind, detail))


def client_loop(
    home: GeodeHome,
    ws: Path,
    client: int,
    rec: Record,
    stop: threading.Event,
    timeout_s: float,
    max_turns: int,
) -> None:
    n = 0
    while not stop.is_set() and (max_turns <= 0 or len(rec.ops) < max_turns):
        n += 1
        op = Op(tag=f"c{client}-{n}", client=client, t_invoke=time.monotonic())
        rec.add_op(op)  # recorded as "invoke" until it returns
        run_turn(home, ws, op, timeout_s)
        if op.kind == "fail":
            stop.wait(0.1)  # control is down: do not spin


def child_map(status: dict[str, Any]) -> dict[str, tuple[str, int | None, int]]:
    st = runtime.TreeStatus.model_validate(status)
    return {ch.name: (ch.state, ch.pid, ch.incarnation) for ch in st.children}


def poll_loop(home: GeodeHome, rec: Record, stop: threading.Event, every_s: float = 0.1) -> None:
    bus = Bus(f"chaos-poll-{os.getpid()}", 1, home).start()
    try:
        while not stop.is_set():
            t = time.monotonic()
            try:
                kids: dict[str, tuple[str, int | None, int]] | None = child_map(
                    bus.transport.call(ENDPOINT, runtime.TREE_STATUS, timeout_s=1.0)
                )
            except GeodeError:
                kids = None
            with rec.lock:
                rec.samples.append(Sample(t, kids))
            stop.wait(max(0.0, every_s - (time.monotonic() - t)))
    finally:
        bus.stop()


def latest_children(rec: Record) -> dict[str, tuple[str, int | None, int]]:
    with rec.lock:
        for s in reversed(rec.samples):
            if s.children is not None:
                return s.children
    return {}


def kill_loop(
    rec: Record, stop: threading.Event, every_s: float, names: list[str] | None, rng: random.Random
) -> None:
    """SIGKILL a random running child of ``names`` (None: every child) every ``every_s`` seconds.

    A child already killed ``PER_CHILD_CAP`` times within the supervisor's ``period_s`` is spared for that
    tick: past ``intensity`` restarts in that window the shipped policy marks it ``fatal`` by design (a
    flapping child; `tests/actors/test_restart_policy_tree.py` proves that), and a random killer that
    happens to pick the same child 11 times in 10 s (likely over 600 s when few children are up) would stop
    measuring availability and measure that policy instead."""
    next_t = time.monotonic() + every_s
    recent: dict[str, deque[float]] = {}
    while not stop.wait(max(0.0, next_t - time.monotonic())):
        next_t += every_s
        kids = latest_children(rec)
        now = time.monotonic()
        for times in recent.values():
            while times and now - times[0] > TREE.period_s:
                times.popleft()
        running = sorted(
            (n, pid, inc)
            for n, (state, pid, inc) in kids.items()
            if state == "running"
            and pid
            and (names is None or n in names or n.rstrip("0123456789-") in names)
            and len(recent.get(n, ())) < PER_CHILD_CAP
        )
        if not running:
            continue
        name, pid, inc = rng.choice(running)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            continue
        recent.setdefault(name, deque()).append(time.monotonic())
        with rec.lock:
            rec.kills.append(Kill(time.monotonic(), time.time(), name, pid, inc))
