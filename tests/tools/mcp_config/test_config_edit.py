"""`geode mcp-servers add` / `remove` editing the global config.toml: comments and every other line kept, the
result what the executor loads, names / duplicates / bad JSON refused with one line and the file untouched."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from geode.config_file import read_config
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError
from geode.tools.mcp.config import parse_mcp_servers
from geode.tools.mcp.config_edit import add_server, parse_env, parse_json_entry, remove_server, stdio_entry
from tests.actors.tree_kit import geode

MINE = """\
# my config: hand-written
[loop]
max_rounds = 7  # keep this

# the notes server, used by the team
[mcp.servers.notes]
command = "notes-srv"  # the binary
read_only_tools = ["search"]

[mcp.servers.notes.tools]
append = { effect = "mutate", resource_strategy = "global:notes" }

# the old one
[mcpServers.old]
command = "legacy"

# hooks below stay
[hooks]
enabled = true
"""


def test_add_appends_a_table_and_keeps_every_line(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(MINE)
    entry = stdio_entry(
        ["npx", "-y", "srv pkg", 'q"uote'], env={"TOKEN": "${TOKEN}"}, read_only_tools=["get"]
    )
    assert add_server(cfg, "fs", entry) is False
    text = cfg.read_text()
    assert text.startswith(MINE)  # byte for byte, comments included
    servers = {s.name: s for s in parse_mcp_servers(tomllib.loads(text))}
    assert set(servers) == {"notes", "old", "fs"}
    fs = servers["fs"]
    assert (fs.command, fs.args, fs.env, fs.read_only_tools) == (
        "npx",
        ["-y", "srv pkg", 'q"uote'],
        {"TOKEN": "${TOKEN}"},
        ["get"],
    )
    assert servers["notes"].tools["append"].resource_strategy == "global:notes"  # untouched


def test_json_entry_is_written_as_the_executor_reads_it(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"  # absent: created
    raw = '{"type": "http", "url": "http://127.0.0.1:1/mcp", "headers": {"X-Key": "${K}"}, "disabled": true}'
    add_server(cfg, "remote", parse_json_entry(raw))
    [srv] = parse_mcp_servers(tomllib.loads(cfg.read_text()))
    assert (srv.transport, srv.url, srv.headers, srv.enabled) == (
        "http",
        "http://127.0.0.1:1/mcp",
        {"X-Key": "${K}"},
        False,
    )
    assert cfg.stat().st_mode & 0o777 == 0o600


def test_remove_deletes_its_tables_and_nothing_else(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(MINE)
    remove_server(cfg, "notes")
    text = cfg.read_text()
    assert "notes-srv" not in text and "global:notes" not in text and "[mcp.servers.notes" not in text
    for kept in ("# my config: hand-written", "max_rounds = 7  # keep this", "# the old one", "# hooks"):
        assert kept in text
    assert tomllib.loads(text) == {
        "loop": {"max_rounds": 7},
        "mcpServers": {"old": {"command": "legacy"}},
        "hooks": {"enabled": True},
    }
    remove_server(cfg, "old")  # the mcpServers shape too
    assert tomllib.loads(cfg.read_text()) == {"loop": {"max_rounds": 7}, "hooks": {"enabled": True}}


def test_duplicates_need_force_and_force_replaces(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(MINE)
    for name in ("notes", "old"):  # either table shape counts
        with pytest.raises(ConfigError, match=f"named '{name}' is already in .*--force"):
            add_server(cfg, name, stdio_entry(["x"]))
    assert cfg.read_text() == MINE
    assert add_server(cfg, "notes", stdio_entry(["new-notes"]), force=True) is True
    servers = {s.name: s for s in parse_mcp_servers(tomllib.loads(cfg.read_text()))}
    assert servers["notes"].command == "new-notes" and servers["notes"].tools == {}
    assert "# the notes server, used by the team" in cfg.read_text()


@pytest.mark.parametrize(
    ("name", "entry", "message"),
    [
        ("bad name", {"command": "x"}, "server name 'bad name' must match"),
        ("x" * 33, {"command": "x"}, "must match"),
        ("ok", {"command": "x", "bogus": 1}, "mcp.servers.ok: bogus"),
        ("ok", {"type": "sse", "url": "http://h/"}, "'sse' is not supported"),
        ("ok", {"command": "x", "cwd": None}, "null is not allowed"),
    ],
)
def test_bad_entries_are_refused_and_the_file_is_untouched(
    tmp_path: Path, name: str, entry: dict[str, object], message: str
) -> None:
    cfg = tmp_path / "config.toml"
    cfg.write_text(MINE)
    with pytest.raises(ConfigError, match=message):
        add_server(cfg, name, entry)
    assert cfg.read_text() == MINE


def test_bad_json_env_and_missing_command_are_named() -> None:
    with pytest.raises(ConfigError, match="--json: not valid JSON"):
        parse_json_entry('{"command": "x"')
    with pytest.raises(ConfigError, match="one server's object, not list"):
        parse_json_entry('["x"]')
    with pytest.raises(ConfigError, match="not the whole mcpServers object"):
        parse_json_entry('{"mcpServers": {"a": {"command": "x"}}}')
    with pytest.raises(ConfigError, match="NAME=VALUE"):
        parse_env(["NOVALUE"])
    with pytest.raises(ConfigError, match="command after --"):
        stdio_entry([])


def test_an_unusual_form_is_refused_with_the_way_to_do_it_by_hand(tmp_path: Path) -> None:
    cfg = tmp_path / "config.toml"
    inline = '# inline\nmcp = { servers = { a = { command = "x" } } }\n'
    cfg.write_text(inline)
    with pytest.raises(ConfigError, match=r"cannot edit the MCP servers automatically.*by hand"):
        remove_server(cfg, "a")
    with pytest.raises(ConfigError, match="by hand"):
        add_server(cfg, "b", stdio_entry(["y"]))
    assert cfg.read_text() == inline
    with pytest.raises(ConfigError, match=r"no MCP server named 'zz' .*configured: a"):
        remove_server(cfg, "zz")


def test_the_cli_adds_refuses_a_duplicate_and_removes(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh").ensure()
    home.config_file.write_text("# mine\n[loop]\nmax_rounds = 7  # keep\n")
    r = geode(home, "mcp-servers", "add", "fs", "--env", "A=1", "--", "srv", "-y", "--flag")
    assert r.returncode == 0, r.stderr
    assert "added MCP server fs" in r.stdout and "daemon is not running" in r.stdout
    assert home.config_file.read_text().startswith("# mine\n[loop]\nmax_rounds = 7  # keep\n")
    [fs] = parse_mcp_servers(read_config(home.config_file)[0])
    assert (fs.command, fs.args, fs.env) == ("srv", ["-y", "--flag"], {"A": "1"})
    dup = geode(home, "mcp-servers", "add", "fs", "--", "other")
    assert dup.returncode == 2 and "already in" in dup.stderr and "--force" in dup.stderr
    gone = geode(home, "mcp-servers", "remove", "fs")
    assert gone.returncode == 0 and "removed MCP server fs" in gone.stdout
    assert tomllib.loads(home.config_file.read_text()) == {"loop": {"max_rounds": 7}}
