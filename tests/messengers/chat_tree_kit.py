"""Shared pieces of the messenger tree tests (Slack, Discord, all three platforms): the scripted model that
echoes a chat's message or asks for read_file / write_file, reading the pollers and uncertain receipts of a
tree, and the crash cells around a turn (lanes, store, loop worker) one message each."""

from __future__ import annotations

import fnmatch
import html
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from actors.cli.messengers_view import messengers_detail
from geode.home import GeodeHome
from tests.actors.tree_kit import children, geode, wait_children
from tests.waiting import poll_for

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


def _sends(prompt: str) -> list[dict[str, Any]]:
    """ "send <channel> <text>": one send_message; "flood <n> <channel>": n of them in one reply."""
    words = prompt.split(" ", 2)
    if words[0] == "send" and len(words) == 3:
        return [{"name": "send_message", "input": {"channel": words[1], "recipient": "r", "text": words[2]}}]
    if words[0] == "flood" and len(words) == 3:
        n, channel = int(words[1]), words[2]
        post = {"channel": channel, "recipient": "r"}
        return [{"name": "send_message", "input": {**post, "text": f"flood {i}"}} for i in range(n)]
    return []


def long_write(ws: Path) -> dict[str, Any]:
    """A write_file of 3,000 characters (run_bash is not offered to a chat's turn): a benign prefix, then
    the part an approval once hid (it showed the first 1,000 characters)."""
    return {"file_path": str(ws / "long.txt"), "content": "benign-" * 425 + "; THE-HIDDEN-TAIL"}


def shown_request(texts: list[str]) -> str:
    """The request an approval's messages show, their parts joined (part labels, code fences, Slack's
    escapes and blanks dropped: a platform may trim a message's blanks)."""
    body = re.sub(r"\[request part \d+/\d+\]", "", "".join(texts)).replace("```", "")
    return "".join(html.unescape(body).split())


def whole_request(tool: str, arguments: dict[str, Any]) -> str:
    """A request as ``shown_request`` should find it: whole and unredacted."""
    return "".join(f"{tool} {json.dumps(arguments, ensure_ascii=False)}".split())


def no_log_has(home: GeodeHome, text: str) -> bool:
    """No log file of the tree contains ``text`` (an approval's unredacted request is only in its message)."""
    logs = [f for f in home.logs_dir.rglob("*") if f.is_file()]
    return bool(logs) and not [f for f in logs if text.encode() in f.read_bytes()]


def echo_or_write(ws: Path):  # type: ignore[no-untyped-def]
    """Echo the prompt; "write X" asks for write_file (needs approval), "read X" for read_file (does not),
    "send <channel> <text>" / "flood <n> <channel>" for send_message; then reports the tool result."""

    def reply(req: Any) -> Any:
        prompt = prompt_of(req)
        last = req.body["messages"][-1].get("content")
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return {"text": "tool result: " + json.dumps(last)[:300]}
        if prompt.startswith("read "):
            return {
                "tool_calls": [{"name": "read_file", "input": {"file_path": str(ws / prompt.split()[-1])}}]
            }
        if sends := _sends(prompt):
            return {"tool_calls": sends}
        if prompt.startswith("long write"):  # a 3,000-character request whose tail must be shown
            return {"tool_calls": [{"name": "write_file", "input": long_write(ws)}]}
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


def receipt_state(home: GeodeHome, operation_id: str) -> str | None:
    """The receipt's state (``geode receipts``), None when there is none."""
    r = geode(home, "receipts", "--json", "--limit", "2000")
    assert r.returncode == 0, r.stderr
    return next((row["state"] for row in json.loads(r.stdout) if row["operation_id"] == operation_id), None)


def receipt_row(home: GeodeHome, operation_id: str, **want: Any) -> dict[str, Any] | None:
    """The receipt as ``geode receipts --json`` shows it, once its fields have the values in ``want``."""
    r = geode(home, "receipts", "--json", "--limit", "2000")
    assert r.returncode == 0, r.stderr
    row = next((row for row in json.loads(r.stdout) if row["operation_id"] == operation_id), None)
    return row if row is not None and all(row.get(k) == v for k, v in want.items()) else None


def observed(home: GeodeHome, operation_id: str, outcome: str, timeout_s: float) -> dict[str, Any]:
    """The reply's receipt once reconciled by observation with ``outcome`` and matching evidence."""
    row = poll_for(
        lambda: receipt_row(home, operation_id, reconciled_by="observation"),
        timeout_s,
        what=f"{operation_id} settled by observation",
    )
    assert row is not None and row["outcome"] == outcome, row
    assert row["observation"]["observed"] == ("posted" if outcome == "applied" else "absent"), row
    return row


@dataclass(frozen=True)
class TurnCell:
    """A SIGKILL around a chat's turn (test_reply_crash_matrix_tree.py's cells for lanes, store, loop and
    the executor before the send)."""

    child: str  # the child killed (a glob on its name)
    point: str  # geode/faults.py point
    nth: int = 1  # its nth hit in that child's incarnation (see FAULTS_AROUND_THE_TURN)
    tool: bool = False  # the message asks for read_file (loop.* points are reached only by a tool batch)
    posts: int = 1  # the message's posts once the tree recovered
    receipt: str = "committed"  # the reply receipt's state then


# One message each, in this order, in one tree served with FAULTS_AROUND_THE_TURN: lanes dies on the first
# turn; the store's first incarnation admits and commits the first reply, then dies after admitting the
# second (its 2nd admission); its second incarnation takes the second reply's retried admission and commit
# and dies after committing the third (its 2nd commit); a loop worker dies after the fourth turn's tool batch;
# the executor dies after admitting the fifth reply (its 5th). As docs/messengers.md's crash table says.
TURN_CELLS = (
    TurnCell("lanes", "lanes.after_turn_stored"),  # the turn stored, not pushed: pushed again
    TurnCell("store", "store.after_admit", nth=2),  # the reply's admission stored, not answered: retried
    TurnCell("store", "store.after_commit", nth=2),  # the reply's result stored, not answered: idempotent
    TurnCell("loop-*", "loop.before_completed_checkpoint", tool=True),  # the batch ran: the turn resumes
    TurnCell("executor", "executor.reply_after_admit", nth=5, posts=0, receipt="uncertain"),  # not sent
)
FAULTS_AROUND_THE_TURN = ",".join(f"{c.child}@{c.point}:kill:{c.nth}" for c in TURN_CELLS)


@dataclass(frozen=True)
class Chat:
    """One bound chat of a served tree, as the turn cells drive it."""

    home: GeodeHome
    platform: str
    send: Callable[[str], Any]  # posts a message as an allowed sender; returns the platform's message
    replies: Callable[[Any], list[str]]  # the texts posted in reply to that message
    operation: Callable[[Any], str]  # the reply's receipt operation id
    observed: bool = False  # the platform settles uncertain replies by observation (a short observe_grace_s)


def _incarnation(home: GeodeHome, child: str) -> int:
    return max(
        (ch.incarnation for n, ch in children(home).items() if fnmatch.fnmatchcase(n, child)), default=0
    )


def _settle(chat: Chat, message: Any, what: str) -> list[str]:
    """Wait until the message has its post or an uncertain receipt, and the poller owes no reply."""
    op = chat.operation(message)

    def seen() -> Any:
        if chat.observed:  # a post observed missing is posted as the reply's next attempt: every one posts
            return chat.replies(message)
        return chat.replies(message) or op in uncertain_operations(chat.home)

    poll_for(seen, 90, what=f"{what}: a post")
    poll_for(lambda: settled(chat.home, chat.platform, min_in=0), 60, what=what, swallow=(AssertionError,))
    return chat.replies(message)


def kill_around_each_turn(chat: Chat, ws: Path) -> dict[str, Any]:
    """Drive TURN_CELLS on a tree served with FAULTS_AROUND_THE_TURN (no fault fired yet): one message per
    cell; each fault must fire on its own message and restart its child; then at most one post, a missing
    one `uncertain`, as the crash table says; the chat's next message gets its one reply. Returns what each
    cell saw."""
    (ws / "note.txt").write_text("a note\n")
    faults = chat.home.root / "faults"
    seen: dict[str, Any] = {}
    for i, cell in enumerate(TURN_CELLS):
        marker = faults / f"{cell.point}.fired"
        assert not marker.exists(), f"{cell.point} fired before its message: {marker.read_text()}"
        before, t0 = _incarnation(chat.home, cell.child), time.monotonic()
        text = "read note.txt" if cell.tool else f"say {i} {cell.point}"
        message = chat.send(text)
        # the marker is created, then written ("<child> pid=<pid> kill hit=<n>") just before the kill
        fired = poll_for(lambda m=marker: m.exists() and m.read_text(), 60, what=f"the fault {cell.point}")
        assert fnmatch.fnmatchcase(fired.split()[0], cell.child), fired
        wait_children(
            chat.home,
            lambda kids, c=cell, b=before: any(
                ch.state == "running" and ch.incarnation > b
                for n, ch in kids.items()
                if fnmatch.fnmatchcase(n, c.child)
            ),
            timeout_s=60,
        )
        t1 = time.monotonic()
        posts = _settle(chat, message, cell.point)
        t2 = time.monotonic()
        op = chat.operation(message)
        got: dict[str, Any] = {"posts": posts, "receipt": receipt_state(chat.home, op)}
        seen[cell.point] = got
        assert len(posts) <= 1, got  # never posted twice
        want = (cell.posts, cell.receipt)
        if chat.observed and cell.receipt == "uncertain":  # looked for, not found: owed, posted as attempt 2
            row = receipt_row(chat.home, op, reconciled_by="observation", outcome="not_applied")
            nxt = receipt_row(chat.home, f"{op}~2", state="committed")
            assert row is not None and nxt is not None, (got, row, nxt)
            got["receipt"], want = "uncertain", (1, "uncertain")  # the crash table's, until observed
        elif not posts:  # a missing post is an uncertain receipt the operator sees
            assert got["receipt"] == "uncertain" and op in uncertain_operations(chat.home), got
        assert (len(posts), got["receipt"]) == want, got  # committed: not uncertain
        got["took"] = [round(t1 - t0, 2), round(t2 - t1, 2), round(time.monotonic() - t2, 2)]
        assert all(p.startswith("tool result:" if cell.tool else f"echo: {text}") for p in posts), got
    after = chat.send("after the kills")  # the chat goes on: its next message gets its one reply
    assert _settle(chat, after, "the next message") == ["echo: after the kills"]
    return seen
