"""A stdio MCP server that dies while idle is seen at once (its stdout ends), not at the next call's ping:
`exited` with how it ended, restarted by the first call after its cooldown (the hub against the real SDK
server of tests/tools/mcp_policy_server.py, with an injected clock)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from geode.tools.mcp.config import McpServerConfig
from geode.tools.mcp.hub import McpHub, McpUnavailable
from geode.tools.mcp.transport import describe_exit
from tests.waiting import poll_for

SERVER = str(Path(__file__).with_name("mcp_policy_server.py"))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def server_pids(marker: str) -> list[int]:
    """The processes whose environment holds ``MCP_IDLE_MARK=marker`` (the server this test started)."""
    want = f"MCP_IDLE_MARK={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as f:
                if want in f.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:
            continue
    return found


@pytest.fixture
def hub_and_clock() -> Iterator[tuple[McpHub, Clock]]:
    clock = Clock()
    hub = McpHub(clock=clock)
    yield hub, clock
    hub.close()


def test_a_server_killed_while_idle_shows_exited_and_the_next_call_restarts_it(
    hub_and_clock: tuple[McpHub, Clock], tmp_path: Path
) -> None:
    hub, clock = hub_and_clock
    marker = str(tmp_path)
    cfg = McpServerConfig(name="s", command=sys.executable, args=[SERVER], env={"MCP_IDLE_MARK": marker})
    hub.start(cfg)
    [pid] = server_pids(marker)
    os.kill(pid, signal.SIGKILL)
    poll_for(lambda: "SIGKILL" in hub.states()[0].reason, 10, what="the idle server's exit seen")
    [st] = hub.states()
    assert st.reason == "killed by SIGKILL while idle" and st.next_try_s == 5.0, st
    assert not hub.alive("s")
    with pytest.raises(McpUnavailable, match=r"is exited \(next try in 5 s\): killed by SIGKILL"):
        hub.call("s", "lookup", {"key": "k"}, timeout_s=10)  # within the cooldown: never sent
    clock.now += 5.0
    assert "value-of-k" in str(hub.call("s", "lookup", {"key": "k"}, timeout_s=10).content)
    [st] = hub.states()
    assert st.state == "running" and st.restarts == 1 and server_pids(marker) != [pid]


def test_exit_descriptions() -> None:
    assert describe_exit(0) == "exited with code 0"
    assert describe_exit(3) == "exited with code 3"
    assert describe_exit(-9) == "killed by SIGKILL"
    assert describe_exit(None) == "exited"
