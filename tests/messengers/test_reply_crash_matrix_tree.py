"""The reply crash matrix (issue 13): a real `geode serve` tree, the real python-telegram-bot in the
messengers child against the local Bot API server, and one child SIGKILLed at one point around a chat reply
per cell — the messengers child (after the turn record, after the post), the executor (receipt admitted, send
answered), the store (admission committed, result committed), a loop worker (mid-turn) and lanes (the turn
stored, not pushed). After the tree recovers, the chat has at most one post for the message, a missing post is
an `uncertain` receipt in `geode receipts --uncertain`, and the chat's next message still gets its one reply.

The cells share one home, one chat and one local server; each cell re-arms its fault by serving the tree again
with its own ``GEODE_FAULTS`` (faults are read once at import, so a running tree cannot be re-armed). Runs per
cell: ``GEODE_MATRIX_RUNS`` (default 1). Each cell prints what it saw and its timings (``pytest -s``)."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from actors.cli.messengers_view import messengers_detail
from geode.home import GeodeHome
from geode.messengers.sessions import reply_operation_id, turn_id_for
from geode.testing.bot_api_server import LocalBotApi
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, scripted_home, serve, stop, wait_children
from tests.messengers.chat_tree_kit import prompt_of
from tests.waiting import poll_for

CHAT, ALLOWED = -100777, 1001
RUNS = max(1, int(os.environ.get("GEODE_MATRIX_RUNS", "1")))


@dataclass(frozen=True)
class Cell:
    child: str  # the child killed (a glob on its name)
    point: str  # geode/faults.py point
    posts: int  # the message's posts once the tree recovered (never more than one)
    receipt: str  # the reply receipt's state then: committed | uncertain
    tool: bool = False  # the turn reads a file first (loop.* points are reached only by a tool batch)

    @property
    def id(self) -> str:
        return f"{self.child.rstrip('-*')}-{self.point.split('.', 1)[1]}"


CELLS = [
    Cell("messengers", "messengers.after_turn_record", 1, "committed"),  # before the send: redelivered once
    Cell("messengers", "messengers.after_post", 1, "uncertain"),  # after the post, before the executor hears
    Cell("executor", "executor.reply_after_admit", 0, "uncertain"),  # before the send
    Cell("executor", "executor.reply_after_send", 1, "uncertain"),  # after it, before the commit
    # the store client retries an admission under its attempt token ("same admission"); a commit is idempotent
    Cell("store", "store.after_admit", 1, "committed"),  # the reply's admission stored, not answered
    Cell("store", "store.after_commit", 1, "committed"),  # the reply's result stored, not answered
    Cell("loop-*", "loop.before_completed_checkpoint", 1, "committed", tool=True),  # the turn resumes
    Cell("lanes", "lanes.after_turn_stored", 1, "committed"),  # the turn stored, not pushed to a worker
]


def _reply(ws: Path):  # type: ignore[no-untyped-def]
    """Echo the prompt; "read ..." reads a file first (a tool batch), then answers."""

    def reply(req: Any) -> Any:
        prompt = prompt_of(req)
        last = req.body["messages"][-1].get("content")
        if isinstance(last, list) and any(b.get("type") == "tool_result" for b in last):
            return {"text": f"echo: {prompt} (read)"}
        if prompt.startswith("read "):
            return {"tool_calls": [{"name": "read_file", "input": {"file_path": str(ws / "note.txt")}}]}
        return {"text": f"echo: {prompt}"}

    return reply


def _config(api: LocalBotApi) -> str:
    return f"""
[messengers.telegram]
base_url = "{api.base_url}"
poll_timeout_s = 1
[[messengers.bindings]]
platform = "telegram"
channel_id = "{CHAT}"
allowed_senders = ["{ALLOWED}"]
"""


@pytest.fixture(scope="module")
def bot(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, LocalBotApi, Path]]:
    """A home bound to one chat of a local Bot API server (not served: each cell serves it armed)."""
    base = tmp_path_factory.mktemp("tgmatrix")
    ws = base / "ws"
    ws.mkdir()
    (ws / "note.txt").write_text("a note\n")
    with LocalBotApi() as api, ScriptedServer(_reply(ws)) as model:
        home = scripted_home(base, model, ws, extra=_config(api))
        cfg = home.config_file.read_text()
        one = cfg.replace("[loop]\nworkers = 2\n", "[loop]\nworkers = 1\n", 1)  # fewer processes
        assert one != cfg, "tree_kit's FAST_CONFIG changed: set [loop] workers = 1 another way"
        home.config_file.write_text(one)
        with home.env_file.open("a") as f:
            f.write(f"TELEGRAM_BOT_TOKEN={api.token}\n")
        try:
            yield home, api, ws
        finally:
            stop(home)


def _poller(home: GeodeHome) -> dict[str, Any] | None:
    detail = messengers_detail(home)
    if detail is None:
        return None
    return next(p for p in detail["platforms"] if p["platform"] == "telegram")


def _settled(home: GeodeHome, update_id: int) -> bool:
    """The poller's cursor is past ``update_id`` and it owes no reply (delivered, or settled uncertain)."""
    p = _poller(home)
    return p is not None and (p["cursor"] or 0) > update_id and p["pending_replies"] == 0


def _posts_for(api: LocalBotApi, message_id: int) -> list[dict[str, Any]]:
    return [p for p in api.posts(CHAT) if p["reply_to"] == message_id]


def _receipts(home: GeodeHome, *flags: str) -> list[dict[str, Any]]:
    r = geode(home, "receipts", "--json", "--limit", "2000", *flags)
    assert r.returncode == 0, r.stdout + r.stderr
    rows: list[dict[str, Any]] = json.loads(r.stdout)
    return rows


def _op(message_id: int) -> str:
    return reply_operation_id(turn_id_for("telegram", str(CHAT), str(message_id)))


def _send_and_settle(home: GeodeHome, api: LocalBotApi, text: str, timeout_s: float = 60) -> dict[str, Any]:
    """Post ``text`` in the chat and wait until its reply is settled (60 s: a reply whose executor died is
    settled by the poller's next recovery round, not after the 90 s deliver timeout)."""
    upd = api.push_message(CHAT, text, sender_id=ALLOWED)
    poll_for(lambda: _settled(home, upd["update_id"]), timeout_s, what=f"{text!r} settled")
    return upd


@pytest.mark.parametrize("run", range(RUNS), ids=[f"run{n}" for n in range(RUNS)])
@pytest.mark.parametrize("cell", CELLS, ids=[c.id for c in CELLS])
def test_reply_crash_cell(
    bot: tuple[GeodeHome, LocalBotApi, Path], monkeypatch: pytest.MonkeyPatch, cell: Cell, run: int
) -> None:
    home, api, ws = bot
    took: dict[str, float] = {}
    t0 = time.monotonic()
    stop(home)  # the previous cell's tree (its faults fired): serve again with this cell's fault armed
    shutil.rmtree(home.root / "faults", ignore_errors=True)
    monkeypatch.setenv("GEODE_FAULTS", f"{cell.child}@{cell.point}:kill")
    serve(home, cwd=ws)
    took["serve"] = round(time.monotonic() - t0, 2)

    t1 = time.monotonic()
    text = f"{'read' if cell.tool else 'say'} {cell.id} run {run}"
    upd = _send_and_settle(home, api, text)
    took["faulted_message"] = round(time.monotonic() - t1, 2)
    fired = home.root / "faults" / f"{cell.point}.fired"
    assert fired.exists(), f"the fault {cell.point} never fired"
    wait_children(  # the killed child is back
        home,
        lambda kids: any(
            ch.state == "running" and ch.restarts >= 1  # restarted by this tree (a swap is not counted)
            for n, ch in kids.items()
            if n == cell.child or (cell.child.endswith("*") and n.startswith(cell.child[:-1]))
        ),
        timeout_s=60,
    )
    mid = upd["message"]["message_id"]
    posts = _posts_for(api, mid)
    op = _op(mid)
    receipt = next((r for r in _receipts(home) if r["operation_id"] == op), None)
    uncertain = [r["operation_id"] for r in _receipts(home, "--uncertain")]
    seen = {
        "posts": len(posts),
        "receipt": receipt["state"] if receipt else None,
        "listed_uncertain": op in uncertain,
    }

    t2 = time.monotonic()  # the chat goes on: its next message gets its one reply
    nxt = _send_and_settle(home, api, f"after {cell.id} run {run}")
    after = _posts_for(api, nxt["message"]["message_id"])
    took["next_message"] = round(time.monotonic() - t2, 2)
    took["cell"] = round(time.monotonic() - t0, 2)
    print(f"\n{cell.id} run {run}: {seen} next={len(after)} took={took}")

    why = f"{cell.id}: {seen}"
    assert len(posts) <= 1, why  # never posted twice
    if not posts:  # a missing post is an uncertain receipt the operator sees
        assert seen["receipt"] == "uncertain" and seen["listed_uncertain"], why
    assert (seen["posts"], seen["receipt"]) == (cell.posts, cell.receipt), why
    assert seen["listed_uncertain"] == (cell.receipt == "uncertain"), why
    if posts:
        assert posts[0]["text"].startswith(f"echo: {text}"), why
    assert [p["text"] for p in after] == [f"echo: after {cell.id} run {run}"], why
