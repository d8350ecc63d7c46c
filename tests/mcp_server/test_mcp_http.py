"""`geode mcp --http`: off loopback it refuses to start without a configured bearer token; with one, every
request without `Authorization: Bearer <token>` gets 401 and a client sending it initializes and lists the
tools; a token shorter than 16 characters is refused whichever source it comes from, naming the source.
(Loopback's own token, made in the home, and another uid refused: test_mcp_daemon.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.actors.tree_kit import geode, make_home
from tests.mcp_server.mcp_kit import free_port, http_session, post_initialize, serving_http
from tests.waiting import poll_for

TOKEN = "test-token-0123456789abcdef"
SHORT = "short-token-15ch"[:15]


def test_off_loopback_without_a_token_refuses_to_start(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    r = geode(home, "mcp", "--http", f"0.0.0.0:{free_port()}", timeout=30)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "refusing to listen on 0.0.0.0" in lines[0] and "GEODE_MCP_TOKEN" in lines[0]
    ), r


async def test_with_a_token_requests_without_it_get_401(tmp_path: Path) -> None:
    home = make_home(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    with serving_http(home, f"0.0.0.0:{port}", tmp_path / "mcp.err", GEODE_MCP_TOKEN=TOKEN) as proc:
        first = poll_for(
            lambda: post_initialize(url, {}),
            30,
            interval_s=0.1,
            what="geode mcp --http to listen",
            swallow=(OSError,),
        )
        assert proc.poll() is None
        assert first == 401
        assert post_initialize(url, {"authorization": "Bearer wrong-token-0123456789"}) == 401
        assert post_initialize(url, {"authorization": f"Basic {TOKEN}"}) == 401
        async with http_session(url, TOKEN) as session:
            tools = {t.name for t in (await session.list_tools()).tools}
            health = await session.call_tool("get_health", {})
    assert tools == {"run_agent", "continue_agent", "get_health"}
    assert not health.is_error and health.structured_content is not None, health
    assert health.structured_content["geode_home"] == str(home.root)
    assert not (home.keys_dir / "mcp-http.token").exists()  # a configured token: none made in the home


@pytest.mark.parametrize("source", ["environment", ".env", "config"])
def test_a_short_token_is_refused_naming_its_source(
    tmp_path: Path, source: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same 16-character floor for every source, loopback included (it used to hold for the config
    only: `GEODE_MCP_TOKEN=x` was accepted)."""
    home = make_home(tmp_path)
    args = ("mcp", "--http", f"127.0.0.1:{free_port()}")
    if source == "environment":
        monkeypatch.setenv("GEODE_MCP_TOKEN", SHORT)
        r = geode(home, *args, timeout=30)
        named = "GEODE_MCP_TOKEN in the environment"
    elif source == ".env":
        home.env_file.write_text(f"GEODE_MCP_TOKEN={SHORT}\n")
        r = geode(home, *args, timeout=30)
        named = f"GEODE_MCP_TOKEN in {home.env_file}"
    else:
        with home.config_file.open("a") as f:
            f.write(f'[mcp.serve]\ntoken = "{SHORT}"\n')
        r = geode(home, *args, timeout=30)
        named = f"[mcp.serve] token in {home.config_file}"
    assert r.returncode == 78, r
    assert r.stderr.strip().splitlines() == [
        f"geode mcp: the bearer token from {named} has 15 characters; at least 16 are required"
    ], r.stderr
    assert SHORT not in r.stderr.replace(named, "")  # the value itself is not echoed
