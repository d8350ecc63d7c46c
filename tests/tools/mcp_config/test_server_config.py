"""The MCP server config model: TOML tables and ``mcpServers`` JSON, HTTP entries, bad entries."""

from __future__ import annotations

import json

import pytest

from geode.protocol.errors import ConfigError
from geode.tools.mcp.config import load_mcp_servers, parse_mcp_servers


def test_toml_shape_with_every_new_key() -> None:
    cfg = {
        "mcp": {
            "servers": {
                "notes": {
                    "command": "python",
                    "args": ["-m", "notes"],
                    "env": {"A": "1"},
                    "resource_keys": ["notes-db"],
                    "read_only_tools": ["search"],
                    "tools": {"peek": {}},
                    "timeout_s": 30,
                },
                "web": {"url": "https://example.test/mcp", "headers": {"X-Key": "k"}, "enabled": False},
            }
        }
    }
    notes, web = parse_mcp_servers(cfg)
    assert (notes.transport, notes.command, notes.args, notes.env) == (
        "stdio",
        "python",
        ["-m", "notes"],
        {"A": "1"},
    )
    assert notes.resource_keys == ["notes-db"] and notes.read_only_tools == ["search"]
    assert notes.tools["peek"].effect.value == "read" and notes.timeout_s == 30 and notes.origin == "global"
    assert notes.enabled and notes.startup_timeout_s == 20
    assert (web.transport, web.url, web.headers, web.enabled) == (
        "http",
        "https://example.test/mcp",
        {"X-Key": "k"},
        False,
    )


def test_mcp_servers_json_shape_stdio_http_and_disabled() -> None:
    raw = json.loads(
        """{"mcpServers": {
            "fs": {"command": "npx", "args": ["-y", "fs-server"], "env": {"T": "x"}},
            "typed": {"type": "stdio", "command": "srv"},
            "remote": {"type": "http", "url": "http://127.0.0.1:9/m", "headers": {"Authorization": "B t"}},
            "remote2": {"type": "streamable-http", "url": "https://h.test/mcp"},
            "bare_url": {"url": "http://127.0.0.1:9/mcp"},
            "off": {"command": "srv", "disabled": true}
        }}"""
    )
    by = {s.name: s for s in parse_mcp_servers(raw)}
    assert (
        by["fs"].transport == "stdio" and by["fs"].args == ["-y", "fs-server"] and by["fs"].env == {"T": "x"}
    )
    assert by["typed"].transport == "stdio"
    assert by["remote"].transport == "http" and by["remote"].headers == {"Authorization": "B t"}
    assert by["remote2"].transport == "http" and by["bare_url"].transport == "http"
    assert by["off"].enabled is False and all(by[n].enabled for n in ("fs", "typed", "remote", "remote2"))
    # load_mcp_servers keeps its old contract: the enabled stdio servers only
    assert [s.name for s in load_mcp_servers(raw)] == ["fs", "typed"]


def test_toml_table_wins_over_mcp_servers_of_the_same_name() -> None:
    [one] = parse_mcp_servers(
        {"mcp": {"servers": {"a": {"command": "x"}}}, "mcpServers": {"a": {"url": "http://h/"}}}
    )
    assert one.command == "x"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({}, r"mcpServers\.s: needs command \(a stdio server\) or url"),
        ({"command": "x", "url": "http://h/"}, r"mcpServers\.s: give either command .* not both"),
        ({"url": "ftp://h/"}, r"mcpServers\.s: url 'ftp://h/' must start with http"),
        ({"type": "sse", "url": "http://h/"}, r"mcpServers\.s: type 'sse' is not supported"),
        ({"type": "websocket", "url": "ws://h/"}, r"mcpServers\.s: type 'websocket' unknown"),
        ({"type": "http", "command": "x"}, r"mcpServers\.s: type 'http' needs a url"),
        ({"command": "x", "disabled": "yes"}, r"mcpServers\.s: disabled must be true or false"),
        ({"command": "x", "headers": {"a": 1}}, r"mcpServers\.s: headers\.a: Input should be a valid string"),
        ({"command": "x", "resource_keys": [""]}, r"mcpServers\.s: resource_keys entries must be non-empty"),
        ({"command": "x", "bogus": 1}, r"mcpServers\.s: bogus: Extra inputs"),
        (
            {"command": "x", "tools": {"w": {"effect": "mutate"}}},
            r"mcpServers\.s\.tools\.w: effect mutate needs",
        ),
    ],
)
def test_a_bad_entry_is_one_config_error_naming_the_server(entry: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        parse_mcp_servers({"mcpServers": {"s": entry}})
    assert "\n" not in info.value.message


def test_bad_names_and_shapes() -> None:
    with pytest.raises(ConfigError, match=r"mcp\.servers: server name 'a b' must match"):
        parse_mcp_servers({"mcp": {"servers": {"a b": {"command": "x"}}}})
    with pytest.raises(ConfigError, match=r"mcpServers\.s: must be a table"):
        parse_mcp_servers({"mcpServers": {"s": "npx"}})
    with pytest.raises(ConfigError, match=r"mcpServers must be a table"):
        parse_mcp_servers({"mcpServers": ["x"]})


def test_the_start_up_check_refuses_a_bad_http_entry_and_accepts_trust(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from geode.config_check import check_file

    good = tmp_path / "good.toml"
    good.write_text('[trust]\nprojects = ["/p"]\n[mcp.servers.w]\nurl = "http://127.0.0.1:1/mcp"\n')
    report = check_file(good)
    assert report.ok and not report.warnings, (report.errors, report.warnings)
    bad = tmp_path / "bad.toml"
    bad.write_text('[mcp.servers.w]\nurl = "http://127.0.0.1:1/mcp"\ncommand = "x"\n')
    [err] = check_file(bad).errors
    assert "mcp.servers.w: give either command" in err
