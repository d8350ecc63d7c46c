"""`geode --help` prints a stored page (actors/cli/help_page_data.py) instead of building the typer app: it
must say what the app says (every option with its help and default, every command with its help), and it
must not load the command modules, typer or pydantic (issue 34: ≤ 0.08 s, it was ~0.35 s)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from actors.cli import help_page, help_page_data
from actors.cli.main import build_app

_RUN = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.__stderr__))
sys.argv = ["geode", "--help"]
from actors.cli.main import entry
entry()
"""


def test_the_stored_page_says_what_the_app_says() -> None:
    about, options, commands = help_page.page_of(build_app())
    stored = (help_page_data.ABOUT, list(help_page_data.OPTIONS), list(help_page_data.COMMANDS))
    assert stored == (about, options, commands), (
        "the typer app changed: regenerate with `.venv/bin/python scripts/help_page`"
    )


def test_geode_help_prints_every_command_and_option_without_the_app(tmp_path: Path) -> None:
    env = {**os.environ, "GEODE_HOME": str(tmp_path / "home"), "COLUMNS": "100"}
    out = subprocess.run(
        [sys.executable, "-c", _RUN], capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    flat = " ".join(out.stdout.split())
    for name, text in help_page_data.COMMANDS:
        assert f" {name} " in flat and " ".join(text.split()) in flat, name
    for names, _value, text in help_page_data.OPTIONS:
        assert names in flat and text in flat, names
    assert "ask" in flat and "--print" in flat and "[loop], [verify]" in flat
    modules = json.loads(out.stderr.strip().splitlines()[-1])
    heavy = ("typer", "click", "rich", "pydantic", "zmq", "actors.cli.chat_cmds", "actors.cli.serve_cmds")
    assert [m for m in modules if m.startswith(heavy)] == []
