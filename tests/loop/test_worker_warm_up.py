"""A loop worker builds its provider (SDK import, client) in the background right after ``worker.ready``:
the first turn finds it built and does not build it on its own thread."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import geode.providers.live as live
from actors.bus import Bus
from actors.lanes import start_lanes
from actors.loop_worker import LoopWorker
from actors.store import start_store
from actors.tree.registry import ChildContext
from geode.home import GeodeHome
from geode.loop.turn_providers import WARM_ENV
from geode.protocol import lanes as lanes_msg
from geode.providers.anthropic_messages import AnthropicMessagesAdapter
from geode.testing.scripted import ScriptedServer
from tests.waiting import poll_for


@pytest.fixture
def built_on(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads that built a provider (LiveProviders' build_provider) or its SDK client, in order."""
    threads: list[str] = []
    real_build, real_client = live.build_provider, AnthropicMessagesAdapter._make_client

    def build(*args: Any, **kw: Any) -> Any:
        threads.append(f"provider on {threading.current_thread().name}")
        return real_build(*args, **kw)

    def make_client(self: AnthropicMessagesAdapter) -> Any:
        threads.append(f"client on {threading.current_thread().name}")
        return real_client(self)

    monkeypatch.setattr(live, "build_provider", build)
    monkeypatch.setattr(AnthropicMessagesAdapter, "_make_client", make_client)
    return threads


@pytest.fixture
def home(tmp_path: Path) -> Iterator[GeodeHome]:
    with ScriptedServer(lambda _rec: "hello") as server:
        h = GeodeHome(tmp_path / "h").ensure()
        h.config_file.write_text(
            f'[providers]\nmodel = "claude-sonnet-5"\n[providers.anthropic]\nbase_url = "{server.base_url}"\n'
        )
        h.env_file.write_text("ANTHROPIC_API_KEY=sk-test-key\n")
        yield h


def _run_one_turn(home: GeodeHome) -> tuple[LoopWorker, dict[str, Any]]:
    buses = [Bus(n, 1, home, single_process=True).start() for n in ("store", "lanes", "control", "loop-1")]
    store = start_store(home, bus=buses[0])
    lanes = start_lanes(home, bus=buses[1])
    worker = LoopWorker(buses[3], ChildContext("loop-1", 1, home), plan_factory=lambda: None, heartbeat_s=0.2)
    try:
        worker.start()
        warm = poll_for(lambda: worker.providers.warm, 10.0, interval_s=0.02, what="the warm-up thread")
        assert warm is not None
        warm.join(30)
        assert not warm.is_alive()
        body = lanes_msg.Submit(turn_id="t1", session_id="s1", input={"text": "hi"}, settings={})
        buses[2].transport.call("lanes", lanes_msg.SUBMIT, body, timeout_s=5)

        def done() -> dict[str, Any] | None:
            q = lanes_msg.TurnQuery(turn_id="t1")
            rec: dict[str, Any] = buses[2].transport.call("lanes", lanes_msg.TURN, q, timeout_s=5)
            return rec if rec.get("state") == "done" else None

        return worker, poll_for(done, 30.0, interval_s=0.05, what="turn t1 done")
    finally:
        worker.stop()
        lanes.stop()
        for b in reversed(buses):
            b.stop()
        store.engine.close()


def test_first_turn_uses_the_provider_built_in_the_background(home: GeodeHome, built_on: list[str]) -> None:
    _, rec = _run_one_turn(home)
    assert rec["outcome"]["termination_reason"] == "natural", rec
    assert rec["outcome"]["text"] == "hello"
    # built once, after ready, SDK client included; nothing on the turn's thread
    assert built_on == ["provider on loop-1-warm-up", "client on loop-1-warm-up"]


def test_warm_up_can_be_turned_off(
    home: GeodeHome, built_on: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(WARM_ENV, "0")
    bus = Bus("loop-1", 1, home, single_process=True)
    worker = LoopWorker(bus, ChildContext("loop-1", 1, home), plan_factory=lambda: None)
    assert worker.providers.start_warm_up() is None
    assert built_on == []
