"""Two operator views that said something untrue for a while (issue 27), on one real `geode serve` tree:

- `geode messengers` shows a poller `polling` as soon as it has started: with Telegram's default long poll
  (25 s) the first poll answers only when it times out, and the view said "starting · last poll never" till
  then (the local Bot API server);
- `geode mcp-servers` shows a stdio MCP server that died while idle as `exited` (how: killed by SIGKILL) and
  what happens next (the next call restarts it), not `running` (tests/tools/mcp_policy_server.py).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest

from actors.cli.mcp_servers_view import mcp_servers_detail
from actors.cli.messengers_view import messengers_detail
from geode.home import GeodeHome
from geode.testing.bot_api_server import LocalBotApi
from tests.actors.tree_kit import geode, make_home, serve, stop
from tests.tools.test_mcp_idle_exit import SERVER, server_pids
from tests.waiting import poll_for

PROMPTLY_S = 10.0  # well under the 25 s long poll that used to be the first moment it was shown


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[GeodeHome, str]]:
    base = tmp_path_factory.mktemp("views")
    marker = str(base)
    with LocalBotApi() as api:
        # poll_timeout_s left at its default (25 s): the first getUpdates is held that long
        home = make_home(
            base,
            f"""
[messengers.telegram]
base_url = "{api.base_url}"
[mcp.servers.idle]
command = {json.dumps(sys.executable)}
args = [{json.dumps(SERVER)}]
env = {{ MCP_IDLE_MARK = {json.dumps(marker)} }}
""",
        )
        home.env_file.write_text(f"TELEGRAM_BOT_TOKEN={api.token}\n")
        try:
            serve(home)
            yield home, marker
        finally:
            stop(home)


def _telegram(home: GeodeHome) -> dict[str, Any]:
    detail = messengers_detail(home)
    return next((p for p in (detail or {}).get("platforms", []) if p["platform"] == "telegram"), {})


def _idle_server(home: GeodeHome) -> dict[str, Any]:
    detail = mcp_servers_detail(home)
    return next((s for s in (detail or {}).get("servers", []) if s["name"] == "idle"), {})


def test_a_started_poller_shows_polling_before_its_first_long_poll_answers(
    tree: tuple[GeodeHome, str],
) -> None:
    home, _ = tree
    poll_for(
        lambda: _telegram(home).get("state") == "polling",
        PROMPTLY_S,
        what="the started telegram poller shown as polling",
    )
    r = geode(home, "messengers", "--json")
    assert r.returncode == 0, r.stderr
    tg = next(p for p in json.loads(r.stdout)["platforms"] if p["platform"] == "telegram")
    assert tg["state"] == "polling" and 0 < tg["started_at"] <= time.time(), tg
    from actors.cli.messengers_view import poller_lines  # the text `geode messengers` prints from it

    line = next(x for x in poller_lines({"platforms": [tg]}) if x.startswith("messenger telegram:"))
    assert line.startswith("messenger telegram: polling · ") and "never" not in line, line


def test_an_mcp_server_killed_while_idle_shows_exited_and_what_comes_next(
    tree: tuple[GeodeHome, str],
) -> None:
    home, marker = tree
    poll_for(lambda: _idle_server(home).get("state") == "running", 30, what="the idle MCP server running")
    [pid] = server_pids(marker)
    os.kill(pid, signal.SIGKILL)
    poll_for(
        lambda: _idle_server(home).get("state") == "exited",
        10,
        what="geode mcp-servers showing the killed server exited",
    )
    r = geode(home, "mcp-servers")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("idle "))
    assert "exited (killed by SIGKILL while idle): restarts on the next call" in line, line
