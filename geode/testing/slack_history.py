"""History reads of the local Slack server: ``conversations.history`` (a channel's top-level messages, newest
first) and ``conversations.replies`` (a thread, oldest first), each with ``oldest``/``latest``/``limit``/
``cursor`` as Slack reads them and a message's ``metadata`` only with ``include_all_metadata``; and the
``metadata`` a ``chat.postMessage`` stored with its message (``store_metadata``)."""

from __future__ import annotations

import copy
import json
from typing import Any

from geode.testing.slack_events import CHANNEL_ID, JSON, SlackError

MAX_LIMIT = 999


def store_metadata(msg: JSON, params: JSON) -> None:
    """Keep a post's ``metadata`` (a JSON object, or a JSON string in a form) with its message."""
    raw = params.get("metadata")
    if raw in (None, ""):
        return
    try:
        meta = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError as exc:
        raise SlackError("invalid_metadata_format") from exc
    if not isinstance(meta, dict) or not isinstance(meta.get("event_type"), str):
        raise SlackError("invalid_metadata_format")
    if not isinstance(meta.get("event_payload", {}), dict):
        raise SlackError("invalid_metadata_format")
    msg["metadata"] = {"event_type": meta["event_type"], "event_payload": meta.get("event_payload", {})}


def _flag(params: JSON, name: str) -> bool:
    return str(params.get(name, "")).lower() in ("1", "true")


def _ts(params: JSON, name: str, default: float) -> float:
    raw = params.get(name)
    if raw in (None, ""):
        return default
    try:
        return float(str(raw))
    except ValueError as exc:
        raise SlackError("invalid_ts_oldest" if name == "oldest" else "invalid_ts_latest") from exc


def _page(rows: list[JSON], params: JSON) -> JSON:
    """``limit`` (default 100) rows after ``cursor``, metadata dropped unless asked for."""
    inclusive = _flag(params, "inclusive")
    oldest, latest = _ts(params, "oldest", 0.0), _ts(params, "latest", float("inf"))
    rows = [
        m
        for m in rows
        if (oldest <= float(m["ts"]) if inclusive else oldest < float(m["ts"]))
        and (float(m["ts"]) <= latest if inclusive else float(m["ts"]) < latest)
    ]
    try:
        limit = max(1, min(MAX_LIMIT, int(params.get("limit") or 100)))
        start = int(str(params.get("cursor") or "0"))
    except ValueError as exc:
        raise SlackError("invalid_cursor") from exc
    chosen = rows[start : start + limit]
    page = [copy.deepcopy({k: v for k, v in m.items() if k != "channel"}) for m in chosen]
    if not _flag(params, "include_all_metadata"):
        for m in page:
            m.pop("metadata", None)
    more = start + limit < len(rows)
    return {
        "messages": page,
        "has_more": more,
        "response_metadata": {"next_cursor": str(start + limit) if more else ""},
    }


def _channel(params: JSON) -> str:
    channel = params.get("channel")
    if not isinstance(channel, str) or not CHANNEL_ID.match(channel):
        raise SlackError("channel_not_found")
    return channel


def conversations_history(slack: Any, params: JSON) -> JSON:
    channel = _channel(params)
    rows = [
        m for (ch, ts), m in slack._messages.items() if ch == channel and m.get("thread_ts") in (None, ts)
    ]
    rows.sort(key=lambda m: float(m["ts"]), reverse=True)
    return _page(rows, params)


def conversations_replies(slack: Any, params: JSON) -> JSON:
    channel, ts = _channel(params), str(params.get("ts") or "")
    if (channel, ts) not in slack._messages:
        raise SlackError("thread_not_found")
    rows = [
        m
        for (ch, mts), m in slack._messages.items()
        if ch == channel and (mts == ts or m.get("thread_ts") == ts)
    ]
    rows.sort(key=lambda m: float(m["ts"]))
    return _page(rows, params)
