"""load_mcp_catalogue: global servers plus trusted projects' ``.geode/config.toml`` and ``.mcp.json``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from geode.config_schema import GeodeConfig
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError
from geode.tools.mcp.catalogue import McpCatalogue, load_mcp_catalogue
from geode.tools.mcp.trust import untrusted_project_note
from geode.tools.mcp.trust_bind import trust_project


def _project(root: Path, *, mcp_json: dict | None = None, toml: str | None = None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    if mcp_json is not None:
        (root / ".mcp.json").write_text(json.dumps(mcp_json))
    if toml is not None:
        (root / ".geode").mkdir(exist_ok=True)
        (root / ".geode" / "config.toml").write_text(toml)
    return root


def _catalogue(cfg: dict, home_root: Path) -> McpCatalogue:
    """The catalogue of a snapshot of ``cfg`` with ``home_root``'s ``.env`` (as a child's source reads it)."""
    dotenv = GeodeHome(home_root).load_dotenv()
    return load_mcp_catalogue(GeodeConfig.from_raw(cfg), home_root=home_root, dotenv=dotenv)


def _trust(home: Path, *projects: Path) -> None:
    """`geode trust` each project (bound to the directory, its servers approved as they are now)."""
    for proj in projects:
        trust_project(home / "config.toml", home, proj)


def test_untrusted_project_is_ignored_and_named_in_one_note(tmp_path: Path) -> None:
    proj = _project(tmp_path / "proj", mcp_json={"mcpServers": {"p": {"command": "srv"}}})
    cfg = {"mcp": {"servers": {"g": {"command": "g"}}}}
    cat = _catalogue(cfg, tmp_path / "home")
    assert [s.name for s in cat.servers] == ["g"] and cat.notes == []
    (proj / "sub").mkdir()
    note = untrusted_project_note(proj / "sub", [], home_root=tmp_path)
    assert note is not None and "\n" not in note
    assert str(proj) in note and ".mcp.json" in note and f"geode trust {proj}" in note
    assert untrusted_project_note(proj / "sub", [str(proj)], home_root=tmp_path) is None


def test_trusted_project_servers_carry_their_origin_and_run_in_the_project(tmp_path: Path) -> None:
    proj = _project(
        tmp_path / "proj",
        mcp_json={
            "mcpServers": {
                "js": {"command": "node", "args": ["s.js"]},
                "web": {"type": "http", "url": "http://127.0.0.1:1/"},
            }
        },
        toml='model = "m"\n[mcp.servers.tt]\ncommand = "python"\ncwd = "tools"\nread_only_tools = ["q"]\n',
    )
    cfg = {"trust": {"projects": [str(proj)]}, "mcpServers": {"g": {"command": "g"}}}
    _trust(tmp_path / "home", proj)
    cat = _catalogue(cfg, tmp_path / "home")
    by = {s.name: s for s in cat.servers}
    assert list(by) == ["g", "tt", "js", "web"] and cat.notes == []
    assert by["g"].origin == "global"
    assert {by[n].origin for n in ("tt", "js", "web")} == {str(proj)}
    assert by["js"].cwd == str(proj) and by["tt"].cwd == str(proj / "tools") and by["web"].cwd is None
    assert by["tt"].read_only_tools == ["q"]


def test_name_clash_bad_entry_and_missing_project_are_notes(tmp_path: Path) -> None:
    proj = _project(
        tmp_path / "proj",
        mcp_json={
            "mcpServers": {
                "g": {"command": "mine"},
                "bad": {"command": "x", "url": "http://h/"},
                "ok": {"command": "o"},
            }
        },
    )
    broken = _project(tmp_path / "broken")
    (broken / ".mcp.json").write_text("{not json")
    gone = tmp_path / "gone"
    cfg = {
        "trust": {"projects": [str(proj), str(broken), str(gone), "relative/dir"]},
        "mcp": {"servers": {"g": {"command": "global-g"}}},
    }
    _trust(tmp_path / "home", proj, broken)
    cat = _catalogue(cfg, tmp_path / "home")
    assert [(s.name, s.command) for s in cat.servers] == [("g", "global-g"), ("ok", "o")]
    text = "\n".join(cat.notes)
    assert len(cat.notes) == 5, cat.notes
    assert "'relative/dir' is not an absolute path" in text
    assert f"server 'g' of project {proj} ignored: the global server has that name" in text
    assert "mcpServers.bad: give either command" in text and "server 'bad' ignored" in text
    assert f"{broken / '.mcp.json'}: cannot read" in text
    assert f"trust of {gone} is not bound to a directory" in text


def test_a_bad_global_entry_is_still_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"mcpServers\.x: needs command"):
        _catalogue({"mcpServers": {"x": {}}}, tmp_path)


def test_geode_home_config_is_not_a_project_config(tmp_path: Path) -> None:
    """With GEODE_HOME = <dir>/.geode, trusting <dir> must not re-read the global config as a project's."""
    user = _project(tmp_path / "user", toml='[mcp.servers.g]\ncommand = "g"\n')
    cfg = {"trust": {"projects": [str(user)]}, "mcp": {"servers": {"g": {"command": "g"}}}}
    _trust(user / ".geode", user)
    cat = _catalogue(cfg, user / ".geode")
    assert [s.origin for s in cat.servers] == ["global"] and cat.notes == []
    assert untrusted_project_note(user, [], home_root=user / ".geode") is None


def test_vars_expand_from_the_environment_then_dotenv_and_unset_ones_skip_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("MCP_TOKEN=from-dotenv\nMCP_PORT=1\n")
    monkeypatch.setenv("MCP_PORT", "8931")
    monkeypatch.delenv("MCP_NOPE", raising=False)
    proj = _project(
        tmp_path / "proj",
        mcp_json={
            "mcpServers": {
                "web": {
                    "type": "http",
                    "url": "http://127.0.0.1:${MCP_PORT}/mcp",
                    "headers": {"Authorization": "Bearer ${MCP_TOKEN}"},
                },
                "cli": {
                    "command": "${MCP_BIN:-srv}",
                    "args": ["--x=${MCP_PORT}"],
                    "env": {"T": "${MCP_TOKEN}"},
                },
                "gap": {"command": "srv", "env": {"K": "${MCP_NOPE}"}},
            }
        },
    )
    cfg = {"trust": {"projects": [str(proj)]}, "mcpServers": {"g": {"command": "${MCP_NOPE}"}}}
    _trust(home, proj)
    cat = _catalogue(cfg, home)
    by = {s.name: s for s in cat.servers}
    assert by["web"].url == "http://127.0.0.1:8931/mcp"  # the environment wins over .env
    assert by["web"].headers == {"Authorization": "Bearer from-dotenv"}
    assert (by["cli"].command, by["cli"].args, by["cli"].env) == ("srv", ["--x=8931"], {"T": "from-dotenv"})
    assert "gap" not in by
    gap = "server 'gap': ${MCP_NOPE} not set (environment or $GEODE_HOME/.env); server ignored"
    assert cat.notes == [
        "MCP: server 'g': ${MCP_NOPE} not set (environment or $GEODE_HOME/.env); server ignored",
        f"MCP (project {proj}): {gap}",
    ]
