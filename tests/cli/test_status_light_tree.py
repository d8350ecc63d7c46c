"""`geode status` with a tree running, as the console script runs it: the children read over raw DEALERs
with the replies validated from stored schemas (actors/cli/status_light.py), without pydantic models, typer,
the bus or the config schema (issue 34: ≤ 120 ms; it took ~330 ms through the bus) — and it says what the
full way (the typer app, ``GEODE_CLI_HOT=0``) says, text and JSON. Modules counted, not time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from geode.home import GeodeHome
from tests.actors.tree_kit import ROOT, make_home, serve, stop

_STATUS = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.__stderr__))
sys.argv = ["geode", "status", *json.loads(sys.argv[1])]
from actors.cli.main import entry
entry()
"""

HEAVY = (  # what a read of five children needs none of
    "pydantic.",
    "typer",
    "click",
    "actors.bus",
    "actors.tree.client",
    "actors.tree.config_sections",
    "geode.config_schema",
    "geode.protocol.runtime",
    "geode.protocol.control",
    "importlib.metadata",
    "tomllib",
)
VARYING = ("rss_bytes", "pss_bytes")  # differ between two reads a moment apart (as every float: ages)


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GeodeHome]:
    h = make_home(tmp_path_factory.mktemp("status"))
    serve(h)
    try:
        yield h
    finally:
        stop(h)


def _status(home: GeodeHome, *args: str, hot: bool = True) -> tuple[str, list[str]]:
    env = {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(ROOT)}
    if not hot:
        env["GEODE_CLI_HOT"] = "0"
    out = subprocess.run(
        [sys.executable, "-c", _STATUS, json.dumps(list(args))],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=home.root,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout, json.loads(out.stderr.strip().splitlines()[-1])


def _steady(text: str) -> str:
    """The lines without what changes from one read to the next (uptimes, memory, heartbeat ages) and the
    column padding that follows their widths (a child at 9.9 MiB in one read and 10.0 in the next)."""
    return re.sub(r" +", " ", re.sub(r"\d+\.\d+", "N", text))


def _steady_json(o: Any) -> Any:
    if isinstance(o, dict):
        return {k: _steady_json(v) for k, v in o.items() if k not in VARYING}
    if isinstance(o, list):
        return [_steady_json(v) for v in o]
    return "N" if isinstance(o, float) else o  # ages, waits


def test_status_reads_a_running_tree_without_models_bus_or_typer(home: GeodeHome) -> None:
    text, modules = _status(home)
    assert text.startswith("supervisor pid ") and "lanes: " in text and "messenger " in text, text
    assert [m for m in modules if m.startswith(HEAVY) or m == "pydantic"] == []
    full, full_modules = _status(home, hot=False)
    assert "actors.bus" in full_modules  # the full way still goes through the bus: the two differ in that
    assert _steady(text) == _steady(full)


def test_status_json_is_the_full_ways_json(home: GeodeHome) -> None:
    light, modules = _status(home, "--json")
    assert [m for m in modules if m.startswith(HEAVY) or m == "pydantic"] == []
    full, _ = _status(home, "--json", hot=False)
    got, want = json.loads(light), json.loads(full)
    assert list(got) == list(want)  # the same keys in the same order
    assert _steady_json(got) == _steady_json(want)
    assert got["running"] is True and {c["name"] for c in got["children"]} >= {"store", "lanes", "control"}


def test_status_with_bus_settings_goes_the_full_way(home: GeodeHome, tmp_path: Path) -> None:
    """``[bus]`` in the config (tcp endpoints, CURVE keys): the children's addresses are the bus's to
    resolve, so status reads them through it (the same lines)."""
    saved = home.config_file.read_bytes()
    try:
        home.config_file.write_bytes(saved + b"\n[bus]\nworkers = 4\n")
        text, modules = _status(home)
    finally:
        home.config_file.write_bytes(saved)
    assert "actors.bus" in modules and text.startswith("supervisor pid ")


@pytest.mark.parametrize(
    "info",
    [
        {"name": "store", "state": "running"},
        {"name": "lanes", "state": "backoff", "next_try_s": 1.63},
        {"name": "flappy", "state": "fatal", "reason": "4 restarts within 30 s"},
        {"name": "x", "state": "fatal"},
    ],
)
def test_a_childs_state_reads_as_the_supervisors_view_says_it(info: dict[str, Any]) -> None:
    from actors.cli.tree_table import shown_state
    from actors.tree.child_handle import shown_state as supervisors
    from geode.protocol.runtime import ChildInfo

    child = ChildInfo.model_validate(info)
    assert shown_state(child.model_dump()) == supervisors(child)
