"""A real `geode serve` tree with the scripted provider, for the loop's crash tests (helpers + fixtures)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from actors.bus import Bus
from geode.home import GeodeHome
from geode.protocol import lanes as lanes_msg
from geode.testing.scripted import ScriptedServer
from tests.actors.tree_kit import geode, make_home, settled, stop
from tests.waiting import poll_for

ALLOW = 'echo \'{\\"hookSpecificOutput\\": {\\"permissionDecision\\": \\"allow\\"}}\''


def _start(tmp_path: Path, reply: Any, extra_cfg: str = "") -> tuple[GeodeHome, ScriptedServer, Bus]:
    server = ScriptedServer(reply).start()
    extra = f"""
[providers]
model = "claude-sonnet-5"
[providers.anthropic]
base_url = "{server.base_url}"
[[hooks.PermissionRequest]]
command = "{ALLOW}"
{extra_cfg}
[tools]
roots = ["{tmp_path / "ws"}"]
"""
    home = make_home(tmp_path, extra)
    cfg = home.config_file.read_text().replace("workers = 2", "workers = 1\ntool_parallelism = 1")
    home.config_file.write_text(cfg)
    home.env_file.write_text("ANTHROPIC_API_KEY=sk-test-key\n")
    r = geode(home, "serve")
    assert r.returncode == 0, r.stdout + r.stderr
    settled(home)  # the loop worker swapped for a fork with the SDKs (actors/tree/swaps.py)
    return home, server, Bus("testctl", 1, home).start()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    d = tmp_path / "ws"
    d.mkdir()
    return d


@pytest.fixture
def launch(tmp_path: Path) -> Iterator[Any]:
    started: list[tuple[GeodeHome, ScriptedServer, Bus]] = []

    def go(reply: Any, extra_cfg: str = "") -> tuple[GeodeHome, ScriptedServer, Bus]:
        started.append(_start(tmp_path, reply, extra_cfg))
        return started[-1]

    yield go
    for home, server, bus in started:
        bus.stop()
        stop(home)
        server.stop()


def _submit(bus: Bus, turn: str, session: str, ws: Path) -> None:
    body = lanes_msg.Submit(
        turn_id=turn, session_id=session, input={"text": "go"}, settings={"workspace": str(ws)}
    )
    _wait(lambda: _try(lambda: bus.transport.call("lanes", lanes_msg.SUBMIT, body, timeout_s=5)))


def _done(bus: Bus, turn: str) -> dict[str, Any]:
    def poll() -> dict[str, Any] | None:
        rec = _try(
            lambda: bus.transport.call(
                "lanes", lanes_msg.TURN, lanes_msg.TurnQuery(turn_id=turn), timeout_s=5
            )
        )
        return rec if rec and rec.get("state") == "done" else None

    return _wait(poll, timeout=30)


def _answered_once(server: ScriptedServer) -> tuple[list[str], list[str]]:
    final = server.requests[-1].body["messages"]
    blocks = [b for m in final if isinstance(m["content"], list) for b in m["content"]]
    uses = [b["id"] for b in blocks if b.get("type") == "tool_use"]
    answers = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
    return sorted(uses), sorted(answers)


def _wait(pred, timeout: float = 20.0) -> Any:  # type: ignore[no-untyped-def]
    return poll_for(pred, timeout, interval_s=0.05)


def _try(fn):  # type: ignore[no-untyped-def]
    try:
        return fn()
    except Exception:
        return None
