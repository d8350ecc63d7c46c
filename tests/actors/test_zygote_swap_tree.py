"""Drain-and-swap on a real `geode serve` tree: the tree is ready (every child running, the loop workers
included) before the zygote has imported the provider SDKs; with no hold (``GEODE_EARLY_HOLD_S=0``: what an
early worker does when no swap comes within its hold, test_zygote_hold_tree.py shows the default) a turn
issued in that window runs on an early loop worker (which imports the SDK itself) and completes exactly
once; once the SDKs are imported each early worker is swapped, only when idle, for a fork that carries them,
the tree healthy throughout and the swaps not counted as restarts. The SDK import is held open by a gate
(tests/actors/sdk_gate.py), not by time."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.loop.retirement import HOLD_ENV
from geode.testing.scripted import ScriptedServer
from tests.actors.sdk_gate import GATE_ENV
from tests.actors.tree_kit import children, geode, geode_popen, scripted_tree, status_children, wait_children
from tests.waiting import poll_for

SLOW = "slow turn in the window"
LOOPS = ("loop-1", "loop-2")
Gated = tuple[
    Any, ScriptedServer, Path, threading.Event
]  # home, model, the SDK gate, the slow turn's release


def _maps(pid: int | None) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


def _ppid(pid: int | None) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


@pytest.fixture(scope="module")
def gated(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gated]:
    base = tmp_path_factory.mktemp("swap")
    gate = base / "sdk-gate"
    os.mkfifo(gate)
    release = threading.Event()

    def reply(req: Any) -> dict[str, Any]:
        if SLOW in json.dumps(req.body):
            release.wait(60)  # the turn stays running on its worker until the test lets it answer
        return {"text": "pong"}

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GEODE_ZYGOTE_WARM", "tests.actors.sdk_gate")  # the zygote imports it with the SDKs
        mp.setenv(GATE_ENV, str(gate))
        mp.setenv(HOLD_ENV, "0")  # the early workers take turns at once (as after a hold with no swap)
        try:
            with scripted_tree(base, reply, settle=False) as (home, model):
                yield home, model, gate, release
        finally:
            release.set()


def _open_gate(gate: Path) -> None:
    def opened() -> int:
        return os.open(gate, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO until the zygote waits on it

    fd = poll_for(opened, 60, what="the zygote at the SDK gate", swallow=(OSError,))
    os.write(fd, b"x")
    os.close(fd)


def _slow_turns(model: ScriptedServer) -> int:
    return sum(SLOW in json.dumps(r.body) for r in model.requests)


def test_the_tree_is_ready_before_the_sdks_and_swaps_each_loop_worker_once_idle(
    gated: Gated,
) -> None:
    home, model, gate, release = gated
    sup_log = home.logs_dir / "supervisor.log"
    kids = children(
        home
    )  # `geode serve` returned: every child running, the SDK import still held at the gate
    assert all(c.state == "running" for c in kids.values()), {n: c.state for n, c in kids.items()}
    assert "zygote imported the SDKs" not in sup_log.read_text()
    early = {n: kids[n] for n in LOOPS}
    for c in early.values():
        assert c.incarnation == 1 and c.pid is not None and "jiter" not in _maps(c.pid)  # no SDK in it yet

    ask = geode_popen(home, "ask", SLOW, "--json")  # issued in the window: an early worker takes it
    try:
        poll_for(lambda: _slow_turns(model), 60, what="the turn's model request")
        busy: str = poll_for(
            lambda: next((n for n in LOOPS if "accepted" in (home.logs_dir / f"{n}.log").read_text()), ""),
            30,
            what="the worker that runs the turn",
        )
        assert "jiter" in _maps(early[busy].pid)  # it imported the SDK itself for the turn
        _open_gate(gate)
        states: set[str] = set()

        def retiring(k: dict[str, Any]) -> bool:
            states.update(c.state for c in k.values())
            return f"{busy}#1: asked to retire" in (home.logs_dir / f"{busy}.log").read_text()

        wait_children(home, retiring, 60)  # the other (idle) worker is swapped first or after: one at a time
        assert ask.poll() is None and children(home)[busy].pid == early[busy].pid  # a busy worker is not cut
        release.set()
        out, err = ask.communicate(timeout=60)
        assert ask.returncode == 0 and '"pong"' in out, out + err

        def swapped(k: dict[str, Any]) -> bool:
            states.update(c.state for c in k.values())
            return all(k[n].incarnation == 2 and k[n].state == "running" for n in LOOPS)

        kids = wait_children(home, swapped, 60)
    finally:
        release.set()
        if ask.poll() is None:
            ask.kill()
        with ask:  # its pipes closed, the process waited for
            pass
    assert states <= {"running", "starting"}, states  # healthy throughout: no backoff, nothing fatal
    assert _slow_turns(model) == 1  # the turn ran exactly once: not re-run by the swap
    zygote = _ppid(kids["store"].pid)
    for n in LOOPS:
        assert _ppid(kids[n].pid) == zygote and "jiter" in _maps(kids[n].pid)  # the SDK came with the fork
    log = sup_log.read_text()
    for n in LOOPS:
        assert f"INFO actors.tree.supervisor: {n}#1 exited: exit 0" in log  # clean, not a crash
        assert log.index(f"started {n}#2 ") > log.index("zygote imported the SDKs")
    busy_log = (home.logs_dir / f"{busy}.log").read_text()
    assert busy_log.index("done (") < busy_log.index(f"{busy}#1: idle and retired")  # exited after its turn
    shown = status_children(home)
    assert all(shown[n]["restarts"] == 0 and shown[n]["state"] == "running" for n in LOOPS), shown
    r = geode(home, "ask", "after the swap", "--json")
    assert r.returncode == 0 and '"pong"' in r.stdout, r.stdout + r.stderr
