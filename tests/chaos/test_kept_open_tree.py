"""The fence of a turn opened from the worker's own copy (issue 34, session 4), on a served tree: a session's
next turn on the worker that saved it last reads nothing from the store, so its open save must be refused
when anyone else saved the session since, and must still hold after the store was SIGKILLed and restarted
between turns (what the worker kept is what the durable store holds). Runs with the slow chaos runs
(GEODE_SLOW=1: a served tree, ~15-30 s on a loaded machine); tests/loop/test_kept_open.py proves the same
fence in-process in CI."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from actors.cli.client import ControlClient
from geode.conversation import Message
from geode.records.models import CheckpointSave
from geode.records.store_client import StoreClient
from tests.actors.tree_kit import children, scripted_tree, wait_children, wait_for

pytestmark = pytest.mark.skipif(not os.environ.get("GEODE_SLOW"), reason="a served tree: GEODE_SLOW=1")
OTHER = "written by another writer"


def reply(req: Any) -> Any:
    msgs = req.body.get("messages", []) if isinstance(req.body, dict) else []
    return {"text": f"answer {sum(1 for m in msgs if m.get('role') == 'user')}"}


def _texts(store: StoreClient, sid: str) -> list[str]:
    restored = store.load_checkpoint(sid)
    assert restored is not None
    return [Message.model_validate(m).text for m in restored.messages]


def test_a_kept_open_is_refused_after_another_writer_and_holds_across_a_store_restart(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    with scripted_tree(tmp_path, reply, ws, cwd=ws) as (home, model):
        bus = Bus("kept-open-test", 1, home).start()
        cl = ControlClient(home, client_version="kept-open-test")
        try:
            store = StoreClient(bus.transport)
            cl.connect(
                timeout_s=60.0, cwd=str(ws), is_tty=False, dangerously_skip_permissions=True, mode="IPC"
            )
            for prompt in ("first", "second"):  # the second learns the session's creation time: a kept copy
                assert cl.run_prompt(prompt, timeout_s=120)["termination_reason"] == "natural"
            sid = wait_for(lambda: [s.session_id for s in store.list_sessions()], 30)[0]
            state = store.load_checkpoint(sid).state  # type: ignore[union-attr]
            other = Message.user_text(OTHER).model_dump(mode="json")
            store.save_checkpoint(  # as the other worker would: the next seq, on top of what is stored
                CheckpointSave(
                    session_id=sid, seq=state.seq + 1, base_count=state.message_count, new_messages=[other]
                )
            )
            assert cl.run_prompt("third", timeout_s=120)["termination_reason"] == "natural"
            sent = json.dumps(model.requests[-1].body["messages"])
            assert sent.index(OTHER) < sent.index(
                "third"
            )  # the turn read the store: the other's message in it
            assert _texts(store, sid) == [
                "first",
                "answer 1",
                "second",
                "answer 2",
                OTHER,
                "third",
                "answer 4",
            ]
            old = children(home)["store"]
            os.kill(old.pid or 0, signal.SIGKILL)
            wait_children(
                home, lambda k: k["store"].incarnation > old.incarnation and k["store"].state == "running", 60
            )
            assert cl.run_prompt("fourth", timeout_s=120)["termination_reason"] == "natural"
            texts = _texts(store, sid)
            assert texts[-3:] == ["answer 4", "fourth", "answer 5"] and len(texts) == 9
            kinds = [r.event.kind for r in store.read_timeline(sid)]
            assert kinds.count("turn.started") == 4 and kinds.count("turn.ended") == 4
        finally:
            cl.close()
            bus.stop()
        logs = "".join(p.read_text() for p in home.logs_dir.glob("loop-*.log"))
        assert "changed since this process saved it" in logs  # the third turn's open save was refused
