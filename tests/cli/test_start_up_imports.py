"""`geode --version` and `geode status` (no daemon) import no more modules than they did (issue 28): counted
in a fresh interpreter, not timed: a new import on the start-up path shows here before anyone feels it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Ceilings measured on main at f76865a (before the issue 28 moves landed), each command run once in a
# fresh `python -c` that imports actors.cli.main, calls main() with the command's argv (as the `geode`
# console script does) and counts sys.modules at exit; GEODE_HOME absent, no daemon running:
#   geode --version  -> 493 modules in all, 140 of them geode.* / actors.*
#   geode status     -> 499 modules in all, 144 of them geode.* / actors.*
# "In all" counts the standard library and third-party packages too (a new pydantic-ai, SDK or zmq import on
# the path shows there); a Python or dependency upgrade that moves it is re-measured the same way.
# Issue 34 (measured the same way after `geode status` went round the typer app and the bus when nothing
# holds the home): geode status -> 174 modules in all, 13 of them ours (it was 499 and 144).
# Later in issue 34, `geode status` with nothing running answered without serve_cmds (typer) and argparse:
# 107 and 12; `geode --version` read the version without importlib.metadata and geode.home: 82 and 4 (it was
# 169 and 9). Then its check of a broken config.toml read the file's bytes through geode.config_bytes (the
# one module besides the config source that reads them): 108 and 13.
# Round 3 of issue 34: the venv installed with editable_mode=compat (no finder at the interpreter's start:
# pathlib, re, urllib…) and `geode status` with nothing running reads the home as strings (no geode.home,
# pathlib): --version 71 and 4, status 80 and 12.
CEILINGS: dict[tuple[str, ...], tuple[int, int]] = {
    ("--version",): (71, 4),
    ("status",): (80, 12),
    ("status", "--json"): (80, 12),
}

_COUNT = """
import json, sys
sys.argv = ["geode", *json.loads(sys.argv[1])]
from actors.cli.main import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.__stderr__)
"""


def _imported(argv: tuple[str, ...], home: Path) -> tuple[list[str], str]:
    """The modules the command imported (all of them, the interpreter's own included) and what it printed."""
    env = {**os.environ, "GEODE_HOME": str(home)}
    out = subprocess.run(
        [sys.executable, "-c", _COUNT, json.dumps(list(argv))],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=home.parent,
    )
    last = (out.stderr.strip().splitlines() or [""])[-1]
    assert last.startswith("["), f"geode {' '.join(argv)} did not finish:\n{out.stderr}"
    return list(json.loads(last)), out.stdout


@pytest.mark.parametrize("argv", sorted(CEILINGS))
def test_cli_start_up_imports_do_not_grow(argv: tuple[str, ...], tmp_path: Path) -> None:
    modules, printed = _imported(argv, tmp_path / "home")
    assert printed, "the command printed nothing: it did not run"
    total_ceiling, ours_ceiling = CEILINGS[argv]
    ours = [m for m in modules if m.split(".")[0] in ("geode", "actors")]
    assert len(ours) <= ours_ceiling, f"geode {' '.join(argv)} imports {len(ours)} of our modules: {ours}"
    assert len(modules) <= total_ceiling, f"geode {' '.join(argv)} imports {len(modules)} modules"


def test_version_loads_no_command_config_or_bus_module(tmp_path: Path) -> None:
    """`geode --version` prints the version without building the command line (every command module, the
    config schema, pydantic, the bus): on f76865a it imported all of them, 493 modules for one line."""
    modules, printed = _imported(("--version",), tmp_path / "home")
    assert printed.startswith("geode ")
    heavy = (
        "pydantic",
        "typer",
        "zmq",
        "geode.config_schema",
        "actors.bus",
        "actors.tree",
        "actors.cli.chat_cmds",
        "importlib.metadata",  # issue 34: the dist-info's METADATA read directly (~25 ms less)
    )
    loaded = [m for m in modules if m.startswith(heavy)]
    assert loaded == []


def test_status_with_nothing_running_loads_no_bus_config_or_pydantic(tmp_path: Path) -> None:
    """`geode status` with no daemon answers from the instance lock alone: before issue 34 it built the
    typer app (every command module), imported the bus and type-checked the config, 0.36 s for one line."""
    modules, printed = _imported(("status",), tmp_path / "home")
    assert printed.startswith("geode is not running")
    heavy = (
        "pydantic",
        "typer",  # issue 34: not even the command module (actors/cli/status_light.py says it)
        "actors.cli.serve_cmds",
        "zmq",
        "geode.config_schema",
        "actors.bus",
        "actors.tree.client",
        "actors.cli.chat_cmds",
    )
    assert [m for m in modules if m.startswith(heavy)] == []


def test_the_version_read_without_importlib_metadata_is_its_version() -> None:
    """`geode --version` and the handshake's client version read the distribution's metadata file directly
    (issue 34): the same version importlib.metadata finds, on this sys.path."""
    from importlib.metadata import version

    from actors.cli.daemon_link import _dist_info_version, client_version

    assert _dist_info_version("geode") == version("geode") == client_version()
