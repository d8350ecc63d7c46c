"""The lanes part of ``geode status``: lane wait times, queue lengths, held lanes, the worker pool and each
active turn's age (since its first submission) and re-queue count."""

from __future__ import annotations

from typing import Any

from geode.home import GeodeHome
from geode.protocol.errors import GeodeError

TURN_LINES = 10


def lanes_detail(home: GeodeHome, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """``lanes.status`` of the running tree, or None when lanes does not answer."""
    from actors.tree.client import client_bus
    from geode.protocol import lanes as lanes_msg  # models: not for `geode status`'s lines (status_light)

    try:
        with client_bus(home) as bus:
            return bus.transport.call("lanes", lanes_msg.LANES_STATUS, {}, timeout_s=timeout_s)
    except GeodeError:
        return None


def lanes_lines(detail: dict[str, Any] | None) -> list[str]:
    if detail is None:
        return ["lanes: not answering"]
    ln = detail.get("lanes", {})
    out = [
        f"lanes: {ln.get('running', 0)}/{ln.get('global_cap', '?')} running · {ln.get('queued', 0)} queued · "
        f"wait p50 {ln.get('wait_p50_s', 0):.3f}s max {ln.get('wait_max_s', 0):.3f}s · "
        f"oldest queued {ln.get('oldest_queued_s', 0):.1f}s · "
        f"approvals pending {detail.get('pending_approvals', 0)}"
    ]
    for held in held_rows(ln.get("held_lanes")):
        out.append(
            f"  held {held['session_id']}: {held['turn_id']} for {held['held_s']:.1f}s, "
            f"{held['queued']} queued behind"
        )
    turns = detail.get("turns") or []
    for t in turns[:TURN_LINES]:
        where = f" on {t['worker']}" if t.get("worker") and t.get("state") == "running" else ""
        out.append(
            f"  turn {t['turn_id']} ({t['session_id']}) {t['state']}{where} · age {t['age_s']:.1f}s · "
            f"re-queued {t['requeues']} times · attempts {t['attempts']}"
        )
    if len(turns) > TURN_LINES:
        out.append(f"  … {len(turns) - TURN_LINES} more active turns (geode status --json lists them)")
    for w in detail.get("workers", []):
        out.append(
            f"  worker {w['worker']}#{w['incarnation']}: {len(w['running'])}/{w['capacity']} busy, "
            f"seen {w['last_seen_s']:.1f}s ago"
        )
    return out


def held_rows(held: Any) -> list[dict[str, Any]]:
    """The held lanes as rows sorted by session: lanes sends rows (``session_id`` in each); a daemon from
    before that sent a map keyed by session id."""
    if isinstance(held, dict):
        held = [{"session_id": s, **row} for s, row in held.items()]
    return sorted(held or [], key=lambda row: str(row.get("session_id", "")))
