"""`geode trust` as a process against a temporary GEODE_HOME (no daemon): add, list, remove; doctor's line."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from geode.home import GeodeHome
from tests.actors.tree_kit import geode


def _setup(tmp_path: Path) -> tuple[GeodeHome, Path]:
    home = GeodeHome(tmp_path / "gh").ensure()
    home.config_file.write_text("# mine\n[loop]\nmax_rounds = 7  # keep\n")
    proj = (tmp_path / "proj").resolve()
    proj.mkdir()
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {"notes": {"command": "srv"}, "b": {}}}))
    return home, proj


def test_trust_add_list_remove_as_a_process(tmp_path: Path) -> None:
    home, proj = _setup(tmp_path)
    r = geode(home, "trust", cwd=proj)  # default: the current directory
    assert r.returncode == 0, r.stderr
    assert f"trusted: {proj}" in r.stdout and ".mcp.json: MCP servers notes" in r.stdout
    assert "mcpServers.b: needs command" in r.stdout  # the bad entry is named, and will be ignored
    assert "daemon is not running" in r.stdout
    data = tomllib.loads(home.config_file.read_text())
    assert data == {"loop": {"max_rounds": 7}, "trust": {"projects": [str(proj)]}}
    assert home.config_file.read_text().startswith("# mine\n[loop]\nmax_rounds = 7  # keep\n")

    again = geode(home, "trust", str(proj))
    assert again.returncode == 0 and f"already trusted: {proj}" in again.stdout
    assert tomllib.loads(home.config_file.read_text())["trust"]["projects"] == [str(proj)]

    listed = geode(home, "trust", "--list")
    assert listed.returncode == 0 and listed.stdout.splitlines() == [f"{proj}: trusted (servers: notes)"]

    gone = geode(home, "trust", "--remove", str(proj))
    assert gone.returncode == 0 and f"no longer trusted: {proj}" in gone.stdout
    assert geode(home, "trust", "--remove", str(proj)).stdout.startswith("not trusted (nothing to change)")
    assert "no trusted projects" in geode(home, "trust", "--list").stdout
    assert tomllib.loads(home.config_file.read_text())["loop"] == {"max_rounds": 7}


def test_trust_refusals(tmp_path: Path) -> None:
    home, proj = _setup(tmp_path)
    missing = geode(home, "trust", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "not a directory" in missing.stderr
    both = geode(home, "trust", str(proj), "--list")
    assert both.returncode == 2 and "one of PATH, --list or --remove" in both.stderr
    assert "trust" not in tomllib.loads(home.config_file.read_text())


def test_doctor_names_the_untrusted_project_until_it_is_trusted(tmp_path: Path) -> None:
    home, proj = _setup(tmp_path)
    before = geode(home, "doctor", "--json", cwd=proj)
    lines = [c["detail"] for c in json.loads(before.stdout)["checks"] if c["name"] == "mcp"]
    assert lines == [
        f"MCP servers in {proj} (.mcp.json) are ignored: the project is not trusted; "
        f"run `geode trust {proj}` to load them"
    ]
    assert geode(home, "trust", cwd=proj).returncode == 0
    after = geode(home, "doctor", "--json", cwd=proj)
    lines = [c["detail"] for c in json.loads(after.stdout)["checks"] if c["name"] == "mcp"]
    assert lines == [
        f"MCP: {proj / '.mcp.json'}: mcpServers.b: needs command (a stdio server) or url "
        "(a streamable HTTP server); server 'b' ignored"
    ]


def test_ask_and_chat_print_the_untrusted_line_once_on_stderr(tmp_path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import pytest

    from actors.cli import ask_run
    from geode.protocol.errors import Unavailable

    home, proj = _setup(tmp_path)
    monkeypatch.chdir(proj)

    def unreachable(*_a: object, **_k: object) -> None:
        raise Unavailable("no daemon in this test")

    monkeypatch.setattr(ask_run, "_connect", unreachable)
    with pytest.raises(SystemExit):
        ask_run._connect_or_exit(home, model=None, skip=False, tty=False, resume=None, cont=False)
    out = capsys.readouterr()
    assert out.err.count("is not trusted") == 1 and f"geode trust {proj}" in out.err and out.out == ""
    home.config_file.write_text(f'[trust]\nprojects = ["{proj}"]\n')
    with pytest.raises(SystemExit):
        ask_run._connect_or_exit(home, model=None, skip=False, tty=False, resume=None, cont=False)
    assert "trust" not in capsys.readouterr().err


def test_with_a_daemon_running_trust_restarts_its_executor(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from actors.cli.main import build_app
    from actors.tree import client
    from geode.protocol.errors import RequestTimeout

    home, proj = _setup(tmp_path)
    monkeypatch.setenv("GEODE_HOME", str(home.root))
    restarted: list[str] = []
    monkeypatch.setattr(client, "is_running", lambda h: h.root == home.root)
    monkeypatch.setattr(client, "restart_child", lambda h, name: restarted.append(name))
    app = build_app()
    r = CliRunner().invoke(app, ["trust", str(proj)])
    assert r.exit_code == 0 and restarted == ["executor"], r.output
    assert "restarting the daemon's executor" in r.output
    assert CliRunner().invoke(app, ["trust", str(proj)]).exit_code == 0 and restarted == ["executor"]  # no-op

    def refuse(h: object, name: str) -> None:
        raise RequestTimeout("no reply")

    monkeypatch.setattr(client, "restart_child", refuse)
    r = CliRunner().invoke(app, ["trust", "--remove", str(proj)])
    assert r.exit_code == 1 and "run `geode restart executor`" in r.output, r.output
    assert "trust" in tomllib.loads(home.config_file.read_text())  # the removal itself was written
    assert tomllib.loads(home.config_file.read_text())["trust"]["projects"] == []


def test_the_ask_paths_file_check_names_the_trust_modules_project_files() -> None:
    """`geode ask` looks for these files itself before importing the trust module (issue 34)."""
    from actors.cli.project_note import PROJECT_FILES
    from geode.tools.mcp.trust import PROJECT_FILES as TRUSTED

    assert PROJECT_FILES == tuple(str(p) for p in TRUSTED)
