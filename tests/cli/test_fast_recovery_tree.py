"""A real tree: the client recovers at once from a control or lanes restart (issue 12, turn p99 under kills).

* control SIGKILLed with the prompt in flight: the client's socket reports the disconnection, it handshakes
  with the next control and re-sends the prompt under the same turn id within about a second (was 5 s);
* control SIGKILLed while a turn runs: the disconnection is seen within milliseconds and the client
  re-attaches as soon as control is back (was: a ping answered ``ok: false``, or 2 s of silence);
* lanes SIGKILLed while a turn runs: control pushes ``cli.notice`` once the new lanes answers and the
  client replays at once; the turn still ends with its real answer.
"""

from __future__ import annotations

import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from actors.cli.client import ControlClient
from actors.cli.reattach import new_turn_id, submit_prompt
from geode.home import GeodeHome
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import scripted_tree, wait_children
from tests.cli.scripted_chat import make_reply
from tests.waiting import poll_for

Tree = tuple[GeodeHome, Path, ScriptedServer]


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tree]:
    base = tmp_path_factory.mktemp("recovery")
    ws = base / "ws"
    ws.mkdir()
    with scripted_tree(base, make_reply(ws), ws, cwd=ws) as (home, server):
        yield home, ws, server


def _running(home: GeodeHome, *names: str) -> dict[str, Any]:
    return wait_children(home, lambda k: all(k[n].state == "running" for n in names), timeout_s=30)


def _client(home: GeodeHome, ws: Path) -> ControlClient:
    cl = ControlClient(home, client_version="test")
    cl.connect(timeout_s=10.0, cwd=str(ws), is_tty=False, mode="IPC")
    return cl


def _follow_in_thread(cl: ControlClient, text: str, started: threading.Event) -> Future[dict[str, Any]]:
    def note(ev: dict[str, Any]) -> None:
        if ev.get("kind") == "turn_started":
            started.set()

    pool = ThreadPoolExecutor(1)
    fut = pool.submit(cl.run_prompt, text, on_event=note, timeout_s=60)
    pool.shutdown(wait=False)
    return fut


def test_control_killed_with_the_prompt_in_flight_is_answered_within_a_second_or_so(tree: Tree) -> None:
    home, ws, server = tree
    kids = _running(home, "control", "lanes")
    log = home.logs_dir / "control.log"
    offset = log.stat().st_size if log.exists() else 0
    cl = _client(home, ws)
    accepted_at: list[float] = []
    try:
        os.kill(kids["lanes"].pid, signal.SIGSTOP)  # control's submit of the prompt waits on lanes
        try:
            tid = new_turn_id()
            body = {"text": "hello in flight", "session_id": cl.session_id, "turn_id": tid}

            backlog: list[dict[str, Any]] = []  # events before the prompt's reply (ask keeps them too)

            def submit() -> dict[str, Any]:
                out = submit_prompt(cl, body, backlog)
                accepted_at.append(time.monotonic())
                return out

            pool = ThreadPoolExecutor(1)
            fut = pool.submit(submit)
            pool.shutdown(wait=False)
            poll_for(lambda: f"prompt: turn {tid}" in log.read_text()[offset:], 30, what="control got it")
            killed_at = time.monotonic()
            os.kill(kids["control"].pid, signal.SIGKILL)  # the prompt's reply is lost with it
        finally:
            os.kill(kids["lanes"].pid, signal.SIGCONT)
        accepted = fut.result(timeout=30)
        took = accepted_at[0] - killed_at
        assert accepted["turn_id"] == tid
        assert cl.disconnects >= 1  # the socket monitor saw control go
        assert took < 2.5, f"accepted {took:.2f}s after control was killed"  # was ≥ 5 s (PROMPT_REPLY_S)
        # the re-sent submit's reply may carry the whole (already finished) turn: the client follows from it
        result = cl.follow(tid, backlog=backlog, timeout_s=60)
        assert result["termination_reason"] == "natural" and result["text"] == "echo: hello in flight"
        asked = [r for r in server.requests if "hello in flight" in str(r.body)]
        assert len(asked) == 1, "the re-sent prompt must not start a second turn"
    finally:
        cl.close()


def test_control_killed_mid_turn_is_noticed_at_once_and_the_client_reattaches(tree: Tree) -> None:
    home, ws, _server = tree
    kids = _running(home, "control", "lanes")
    cl = _client(home, ws)
    try:
        started = threading.Event()
        fut = _follow_in_thread(cl, "slow kc", started)
        assert started.wait(30), "the turn did not start"
        killed_at = time.monotonic()
        os.kill(kids["control"].pid, signal.SIGKILL)
        poll_for(lambda: cl.disconnects >= 1, 1.0, what="the socket monitor to report the disconnection")
        seen = time.monotonic() - killed_at
        poll_for(lambda: cl.reattached >= 1, 5.0, what="the client to re-attach")
        result = fut.result(timeout=60)
        assert result["termination_reason"] == "natural" and result["text"] == "slow answer kc", result
        assert seen < 0.5, f"disconnection seen {seen:.2f}s after the kill"
    finally:
        cl.close()


def test_lanes_killed_mid_turn_makes_control_tell_the_client_to_catch_up(tree: Tree) -> None:
    home, ws, _server = tree
    kids = _running(home, "control", "lanes")
    cl = _client(home, ws)
    try:
        started = threading.Event()
        fut = _follow_in_thread(cl, "slow kl", started)
        assert started.wait(30), "the turn did not start"
        os.kill(kids["lanes"].pid, signal.SIGKILL)
        _running(home, "lanes")
        poll_for(lambda: cl.notices >= 1, 5.0, what="control's cli.notice of the new lanes")
        result = fut.result(timeout=60)
        assert result["termination_reason"] == "natural" and result["text"] == "slow answer kl", result
        log = (home.logs_dir / "control.log").read_text()
        assert re.search(r"lanes #\d+ ready \(answers\): told [1-9]\d* client connections", log), log[-2000:]
    finally:
        cl.close()
