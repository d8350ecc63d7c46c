"""What the chaos checker reads from the tree once it has settled: receipts, turn records, sessions, lanes."""

from __future__ import annotations

import os
import random
import time
from dataclasses import dataclass, field
from typing import Any

from actors.bus import Bus
from actors.tree.client import ENDPOINT
from geode.home import GeodeHome
from geode.protocol import lanes as lanes_msg
from geode.protocol import runtime
from geode.protocol.errors import GeodeError
from geode.records.models import Receipt, TurnRecord
from geode.records.store_client import StoreClient

OLDER_SAMPLE = 200


@dataclass
class Evidence:
    receipts: dict[str, list[Receipt]] = field(default_factory=dict)  # by session id
    receipts_checked: set[str] = field(default_factory=set)  # sessions whose receipts were all read
    uncertain: list[Receipt] = field(default_factory=list)
    turns: list[TurnRecord] = field(default_factory=list)
    paused_sessions: list[str] = field(default_factory=list)
    lanes: dict[str, Any] | None = None
    settled: bool = False
    settle_s: float = 0.0
    unsettled_why: str = ""
    notes: list[str] = field(default_factory=list)


def _tree_idle(bus: Bus, store: StoreClient) -> tuple[str, dict[str, Any] | None]:
    """'' when every child runs, lanes hold and queue nothing and no turn record is queued/running."""
    st = runtime.TreeStatus.model_validate(bus.transport.call(ENDPOINT, runtime.TREE_STATUS, timeout_s=2.0))
    down = [f"{ch.name}={ch.state}" for ch in st.children if ch.state != "running"]
    if down:
        return f"children not running: {', '.join(down)}", None
    lanes = bus.transport.call("lanes", lanes_msg.LANES_STATUS, {}, timeout_s=2.0)
    ln = lanes.get("lanes", {})
    if ln.get("running") or ln.get("queued") or ln.get("held_lanes"):
        return (
            f"lanes busy: running {ln.get('running')} queued {ln.get('queued')} held {ln.get('held_lanes')}",
            lanes,
        )
    live = [t.turn_id for t in store.list_turns() if t.state.value != "done"]
    if live:
        return f"turns not done: {', '.join(live[:5])}{' …' if len(live) > 5 else ''}", lanes
    return "", lanes


def collect(home: GeodeHome, session_ids: list[str], settle_timeout_s: float = 60.0) -> Evidence:
    """Wait (bounded) for the tree to settle, then read the store and lanes."""
    ev = Evidence()
    bus = Bus(f"chaos-check-{os.getpid()}", 1, home).start()
    try:
        store = StoreClient(bus.transport, timeout_s=10.0, attempts=3)
        t0 = time.monotonic()
        why = "not asked"
        while time.monotonic() - t0 < settle_timeout_s:
            try:
                why, ev.lanes = _tree_idle(bus, store)
            except GeodeError as exc:
                why = f"no answer: {exc}"
            if not why:
                ev.settled = True
                break
            time.sleep(0.2)
        ev.settle_s, ev.unsettled_why = time.monotonic() - t0, why
        ev.turns = store.list_turns()
        ev.uncertain = store.list_receipts(uncertain_only=True, limit=2000)
        # newest first, at most 2000: complete when fewer came back. Beyond that a per-session list costs a
        # scan of every receipt (~0.16 s at 5,000), so only a sample of the older sessions is read.
        every = store.list_receipts(limit=2000)
        for r in every:
            ev.receipts.setdefault(r.identity.session_id, []).append(r)
        ev.receipts_checked = set(session_ids) if len(every) < 2000 else set(ev.receipts)
        older = [sid for sid in session_ids if sid not in ev.receipts_checked]
        for sid in random.Random(0).sample(older, min(len(older), OLDER_SAMPLE)):
            ev.receipts[sid] = store.list_receipts(session_id=sid, limit=50)
            ev.receipts_checked.add(sid)
        try:
            listed = store.list_sessions(limit=5000)
        except GeodeError as exc:  # e.g. the reply exceeds the bus frame cap (~2.2 MB at 5,000 sessions)
            ev.notes.append(f"sessions --limit 5000 failed ({exc}); read 1000")
            listed = store.list_sessions(limit=1000)
        ev.paused_sessions = [s.session_id for s in listed if s.status.value == "paused"]
        if ev.lanes is None:
            try:
                ev.lanes = bus.transport.call("lanes", lanes_msg.LANES_STATUS, {}, timeout_s=2.0)
            except GeodeError:
                ev.lanes = None
    finally:
        bus.stop()
    return ev


def uncertain_receipts(home: GeodeHome) -> list[Receipt]:
    """The store's uncertain receipts now (after the chats' replies settled)."""
    bus = Bus(f"chaos-check-{os.getpid()}-2", 1, home).start()
    try:
        return StoreClient(bus.transport, timeout_s=10.0, attempts=3).list_receipts(
            uncertain_only=True, limit=2000
        )
    finally:
        bus.stop()
