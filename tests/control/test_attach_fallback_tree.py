"""On a real `geode serve` tree: while lanes does not answer (here SIGSTOPped; under repeated kills, each
incarnation dying before it replies), a client's catch-up is answered by control from the store, within
about a second, with the outcome of its finished turn."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from actors.cli.client import ControlClient
from geode.protocol import lanes as lanes_msg
from tests.actors.tree_kit import children, scripted_tree


def test_a_catch_up_while_lanes_is_frozen_is_answered_from_the_store(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()

    def reply(_req: Any) -> Any:
        return {"text": "the answer"}

    with scripted_tree(tmp_path, reply, ws, cwd=ws) as (home, _server):
        cl = ControlClient(home, client_version="test")
        cl.connect(timeout_s=10.0, cwd=str(ws), is_tty=False, mode="IPC")
        try:
            result = cl.run_prompt("hello", timeout_s=60)
            assert result["text"] == "the answer"
            lanes = children(home)["lanes"]
            os.kill(lanes.pid, signal.SIGSTOP)
            try:
                cl.last_seq.clear()  # a client that saw nothing of the session (its events died with lanes)
                t0 = time.monotonic()
                got = cl.catch_up(timeout_s=5.0)  # lanes waited 5 s before, and the client gave up
                took = time.monotonic() - t0
            finally:
                os.kill(lanes.pid, signal.SIGCONT)
        finally:
            cl.close()
    done = [e for e in got if e["kind"] == lanes_msg.TURN_DONE and e["turn_id"] == result["turn_id"]]
    assert done and done[0]["data"]["result"]["text"] == "the answer", got
    assert took < 4.0, took  # about 1 s of waiting for lanes, then the store
