"""The first turn of a fresh `geode serve` tree does not import the provider SDK beside the zygote: the
early loop workers (forked before the zygote had the SDKs) offer lanes no capacity, so a turn issued while
the zygote imports waits in its lane and runs once, on the first worker swapped for a fork that carries
them. The SDK import is held open by a gate (tests/actors/sdk_gate.py), not by time."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.testing.scripted import ScriptedServer
from tests.actors.sdk_gate import GATE_ENV
from tests.actors.test_zygote_swap_tree import LOOPS, _maps, _open_gate
from tests.actors.tree_kit import children, geode, geode_popen, scripted_tree, wait_children
from tests.waiting import poll_for

Held = tuple[Any, ScriptedServer, Path]


@pytest.fixture(scope="module")
def held(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Held]:
    base = tmp_path_factory.mktemp("hold")
    gate = base / "sdk-gate"
    os.mkfifo(gate)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GEODE_ZYGOTE_WARM", "tests.actors.sdk_gate")  # the zygote imports it with the SDKs
        mp.setenv(GATE_ENV, str(gate))
        with scripted_tree(base, lambda req: {"text": "pong"}, settle=False) as (home, model):
            yield home, model, gate


def _lanes(home: Any) -> dict[str, Any]:
    r = geode(home, "status", "--json")
    assert r.returncode == 0, r.stderr
    lanes: dict[str, Any] = json.loads(r.stdout)["lanes"]
    return lanes


def test_a_turn_issued_before_the_sdks_waits_for_a_swapped_worker_and_runs_once(held: Held) -> None:
    home, model, gate = held
    kids = children(home)  # `geode serve` returned: every child running, the SDK import held at the gate
    assert all(c.state == "running" for c in kids.values()), {n: c.state for n, c in kids.items()}
    early = {n: kids[n].pid for n in LOOPS}
    ask = geode_popen(home, "ask", "in the window", "--json")
    try:
        poll_for(lambda: _lanes(home)["lanes"]["queued"] == 1, 60, what="the turn waiting in its lane")
        assert not model.requests  # no early worker took it
        for n in LOOPS:
            assert "jiter" not in _maps(early[n])  # nor imported the SDK for it
        _open_gate(gate)
        out, err = ask.communicate(timeout=90)
    finally:
        if ask.poll() is None:
            ask.kill()
        with ask:
            pass
    assert ask.returncode == 0 and '"pong"' in out, out + err
    assert len(model.requests) == 1  # once
    logs = {n: (home.logs_dir / f"{n}.log").read_text() for n in LOOPS}
    ran = [n for n in LOOPS if " accepted (attempt" in logs[n]]
    assert len(ran) == 1, logs
    kids = wait_children(home, lambda k: k[ran[0]].incarnation == 2, 30)
    assert "jiter" in _maps(kids[ran[0]].pid)  # the worker that ran it is the fork with the SDKs
    sup = (home.logs_dir / "supervisor.log").read_text()
    assert logs[ran[0]].index(" accepted (attempt") > logs[ran[0]].index(f"{ran[0]}#1: idle and retired")
    assert "zygote imported the SDKs" in sup
