"""The lines `geode messengers` and `geode status` print about the messengers child (its pollers, its
bindings), from its ``messenger.bindings`` answer as data: no typer, no pydantic (`geode status` with a tree
running imports this, not the command module)."""

from __future__ import annotations

import time
from typing import Any

WAITING = ("polling", "backoff", "conflict")  # states of a started poller (a restart is "starting" again)


def _ago(ts: Any) -> str:
    if not isinstance(ts, (int, float)) or ts <= 0:
        return "never"
    return f"{max(0.0, time.time() - ts):.1f}s ago"


def _last_poll(p: dict[str, Any]) -> str:
    """When a poll last answered; before the first answer (a long poll holds up to poll_timeout_s), since
    when the started poller has been waiting for it."""
    if p.get("last_poll_ok_at") or not p.get("started_at") or p.get("state") not in WAITING:
        return f"last poll {_ago(p.get('last_poll_ok_at'))}"
    return f"started {_ago(p.get('started_at'))}, first poll waiting"


def poller_lines(detail: dict[str, Any] | None) -> list[str]:
    """One line per platform poller (two when it has an error to show)."""
    if detail is None:
        return ["messengers: not answering"]
    platforms = detail.get("platforms") or []
    if not platforms:
        return ["messengers: no platform configured"]
    out: list[str] = []
    for p in platforms:
        state = p.get("state", "?")
        if state == "disabled":
            out.append(f"messenger {p.get('platform')}: disabled ({p.get('reason') or 'no reason given'})")
            continue
        ignored = p.get("ignored") or {}
        why = ", ".join(f"{k} {v}" for k, v in sorted(ignored.items())) or "none"
        out.append(
            f"messenger {p.get('platform')}: {state} · {_last_poll(p)} · "
            f"cursor {p.get('cursor') or '-'} · in {p.get('in', 0)} · ignored {sum(ignored.values())} "
            f"({why}) · replies out {p.get('replies_out', 0)}"
        )
        unhandled = p.get("unhandled") or {}
        if unhandled:  # messages it could not handle (answered with a short error, skipped)
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(unhandled.items()))
            out.append(f"  not handled: {sum(unhandled.values())} ({kinds})")
        if p.get("uncertain_replies"):  # not settled by observation: `geode receipts --uncertain`
            out.append(f"  uncertain replies: {p['uncertain_replies']} (geode receipts --uncertain)")
        if p.get("last_error"):
            out.append(f"  last error: {p['last_error']}")
    return out


def binding_lines(detail: dict[str, Any]) -> list[str]:
    rows = detail.get("bindings") or []
    if not rows:
        return ["no bindings: add [[messengers.bindings]] to config.toml (see config/geode.toml)"]
    out = [f"{'PLATFORM':<9} {'CHANNEL':<24} {'SESSION':<34} LAST TURN"]
    for b in rows:
        last = b.get("last_turn") or {}
        turn = f"{last.get('turn_id', '')} {last.get('state', '')} {last.get('termination_reason', '')}"
        flags = " (mention)" if b.get("require_mention") else ""
        out.append(
            f"{b['platform']:<9} {b['channel_id'] + flags:<24} {b.get('session_id') or '-':<34} "
            f"{turn.strip() or '-'}"
        )
    return out
