"""The CLI's hot path: `geode ask` runs without building the typer app (every command module), its
handshake is the first message on the control socket (no ping first), and `geode --help` still lists every
command."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import actors.cli.ask_run as ask_run
import actors.cli.chat_cmds as chat_cmds
import actors.cli.main as cli_main
from actors.tree.instance_lock import InstanceLock
from geode.home import GeodeHome
from geode.protocol import control as c
from tests.cli.fake_control import FakeControl


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """``run_ask`` calls (prompt + keywords); building the typer app fails the test."""
    calls: list[dict[str, Any]] = []

    def run_ask(prompt: str, **kw: Any) -> None:
        calls.append({"prompt": prompt, **kw})
        raise typer.Exit(3)

    def no_app() -> Any:
        raise AssertionError("the typer app was built for a hot command")

    monkeypatch.setattr(ask_run, "run_ask", run_ask)  # `geode ask` (main's hot path)
    monkeypatch.setattr(chat_cmds, "run_ask", run_ask)  # `geode -p` and the typer app
    monkeypatch.setattr(cli_main, "build_app", no_app)
    return calls


def _main(monkeypatch: pytest.MonkeyPatch, *argv: str) -> int:
    monkeypatch.setattr(sys, "argv", ["geode", *argv])
    with pytest.raises(SystemExit) as ex:
        cli_main.main()
    return int(ex.value.code or 0)


def test_ask_runs_without_the_typer_app_with_the_same_options(
    monkeypatch: pytest.MonkeyPatch, asked: list[dict[str, Any]]
) -> None:
    assert _main(monkeypatch, "ask", "hello there") == 3  # run_ask's typer.Exit code is the exit code
    assert asked[-1] == {
        "prompt": "hello there",
        "as_json": False,
        "resume": None,
        "cont": False,
        "model": None,
        "skip": False,
        "timeout": 3600.0,
    }
    argv = [
        "ask",
        "--json",
        "--model=m1",
        "--dangerously-skip-permissions",
        "--timeout",
        "5",
        "--resume",
        "--",
        "-x",
    ]
    _main(monkeypatch, *argv)
    assert asked[-1] == {
        "prompt": "-x",
        "as_json": True,
        "resume": "",  # a bare --resume: pick a session
        "cont": False,
        "model": "m1",
        "skip": True,
        "timeout": 5.0,
    }
    _main(monkeypatch, "ask", "--continue", "--resume", "s-1", "p")
    assert asked[-1]["cont"] is True and asked[-1]["resume"] == "s-1" and asked[-1]["prompt"] == "p"


@pytest.mark.parametrize(
    "argv",
    [
        ["ask", "--help"],
        ["ask", "--bogus", "p"],
        ["ask"],
        ["ask", "a", "b"],
        ["ask", "--js", "p"],
        ["status", "--help"],
        ["status", "--bogus"],
        ["sessions"],
    ],
)
def test_help_usage_errors_and_other_commands_go_through_the_typer_app(
    monkeypatch: pytest.MonkeyPatch, asked: list[dict[str, Any]], argv: list[str]
) -> None:
    built: list[bool] = []

    def app(*_argv: Any) -> Any:
        built.append(True)
        raise SystemExit(2)

    monkeypatch.setattr(cli_main, "build_app", app)
    _main(monkeypatch, *argv)
    assert built == [True] and asked == []


def test_help_lists_every_command() -> None:
    app = cli_main.build_app()
    names = [
        cmd.name or cmd.callback.__name__.replace("_", "-") for cmd in app.registered_commands if cmd.callback
    ]
    assert "ask" in names and "serve" in names and "mcp" in names and len(names) >= 15
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    missing = [n for n in names if n not in out]
    assert not missing, out


@pytest.fixture
def fake_control(tmp_path: Path) -> Iterator[tuple[GeodeHome, list[str]]]:
    """A served home (its instance lock held) whose control socket answers handshake and ping, recording
    the type of every message it receives."""
    home = GeodeHome(tmp_path / "gh").ensure()
    lock = InstanceLock(home.lock_file)
    assert lock.acquire()
    try:
        with FakeControl(home) as fc:
            yield home, fc.seen
    finally:
        lock.release()


def test_the_handshake_is_the_first_message_to_a_running_daemon(
    fake_control: tuple[GeodeHome, list[str]],
) -> None:
    home, seen = fake_control
    cl = chat_cmds._connect(home, model=None, skip=False, tty=False, resume=None, cont=False)
    try:
        assert cl.session_id == "s-1"
        assert seen[:1] == [c.HANDSHAKE]  # before: a cli.ping on a socket of its own, then the handshake
        assert c.PING not in seen[:1]
    finally:
        cl.close()
