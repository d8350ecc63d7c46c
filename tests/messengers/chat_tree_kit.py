"""Shared pieces of the messenger tree tests (Slack, Discord, all three platforms): the scripted model that
echoes a chat's message or asks for write_file, and reading the pollers and uncertain receipts of a tree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from actors.cli.messengers_view import messengers_detail
from geode.home import GeodeHome
from tests.actors.tree_kit import geode

FAULTS_AROUND_A_REPLY = ",".join(
    (
        "messengers@messengers.after_turn_record:kill",  # turn recorded; cursor/ack not yet
        "messengers@messengers.after_post:kill",  # posted; the executor not answered
        "executor@executor.reply_after_send:kill",  # posted and answered; the receipt not committed
    )
)


def prompt_of(req: Any) -> str:
    """The text of the turn's user message (a chat's session keeps the earlier turns before it)."""
    for m in reversed(req.body.get("messages", []) if isinstance(req.body, dict) else []):
        content = m.get("content")
        if m.get("role") != "user":
            continue
        if isinstance(content, str):
            return content
        if not any(b.get("type") == "tool_result" for b in content or []):
            return " ".join(b.get("text", "") for b in content or [])
    return ""


def echo_or_write(ws: Path):  # type: ignore[no-untyped-def]
    """Echo the prompt; "write X" asks for write_file (needs approval), then reports the tool result."""

    def reply(req: Any) -> Any:
        prompt = prompt_of(req)
        last = req.body["messages"][-1].get("content")
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return {"text": "tool result: " + json.dumps(last)[:300]}
        if prompt.startswith("write "):
            name = prompt.split()[-1]
            return {
                "tool_calls": [{"name": "write_file", "input": {"file_path": str(ws / name), "content": "x"}}]
            }
        return {"text": f"echo: {prompt}"}

    return reply


def pollers(home: GeodeHome) -> dict[str, dict[str, Any]]:
    """Each platform's poller status (``messenger.bindings``), by platform."""
    detail = messengers_detail(home)
    assert detail is not None, "the messengers child does not answer"
    return {p["platform"]: p for p in detail["platforms"]}


def settled(home: GeodeHome, platform: str, *, min_in: int, min_ignored: int = 0) -> dict[str, Any] | None:
    """The poller once it polls, took ``min_in`` messages, ignored ``min_ignored`` and owes no reply."""
    p = pollers(home)[platform]
    took = p["in"] >= min_in and sum(p["ignored"].values()) >= min_ignored
    return p if p["state"] == "polling" and took and p["pending_replies"] == 0 else None


def uncertain_operations(home: GeodeHome) -> list[str]:
    r = geode(home, "receipts", "--uncertain", "--json")
    assert r.returncode == 0, r.stderr
    return [row["operation_id"] for row in json.loads(r.stdout)]


def status_messengers(home: GeodeHome) -> dict[str, dict[str, Any]]:
    """``geode status --json`` "messengers", by platform."""
    r = geode(home, "status", "--json")
    assert r.returncode == 0, r.stderr
    return {p["platform"]: p for p in json.loads(r.stdout)["messengers"] or []}
