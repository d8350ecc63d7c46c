"""`geode` argument handling: a bare `--resume` picks, flags show plainly in `--help`."""

from __future__ import annotations

from typer.testing import CliRunner

from actors.cli.main import build_app, optional_resume


def test_a_bare_resume_becomes_an_empty_value():
    assert optional_resume(["--resume"]) == ["--resume="]
    assert optional_resume(["--resume", "--model", "m"]) == ["--resume=", "--model", "m"]
    assert optional_resume(["--resume", "s-1"]) == ["--resume", "s-1"]
    assert optional_resume(["ask", "--", "--resume"]) == ["ask", "--", "--resume"]


def test_help_shows_plain_flags_and_print_version():
    out = CliRunner().invoke(build_app(), ["--help"], env={"COLUMNS": "160"}).output
    assert "--print" in out and "--version" in out and "--continue" in out
    assert "<bool>" not in out
    ask = CliRunner().invoke(build_app(), ["ask", "--help"], env={"COLUMNS": "160"}).output
    assert "--json" in ask and "<bool>" not in ask
