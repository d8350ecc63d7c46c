"""A real ``geode serve --foreground`` refuses a bad config at once: exit 78, one line naming file and key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from geode.home import GeodeHome

ROOT = Path(__file__).resolve().parents[2]
CHILD_LOGS = ("store.log", "lanes.log", "executor.log", "loop-1.log", "control.log", "supervisor.log")


def _geode(home: GeodeHome, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GEODE_HOME": str(home.root), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "actors.cli.main", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("[loop]\nworkers = 2\n[loop\n", ("invalid TOML",)),
        ("[lopp]\nworkers = 2\n", ("unknown section [lopp]", "valid sections:")),
        ('[loop]\nworkers = "two"\n', ("[loop] workers", "got 'two'", "workers = 2")),
    ],
)
def test_serve_refuses_a_bad_config_before_any_child(
    tmp_path: Path, text: str, needles: tuple[str, ...]
) -> None:
    home = GeodeHome(tmp_path / "gh")
    home.root.mkdir()
    home.config_file.write_text(text)
    proc = _geode(home, "serve", "--foreground")
    assert proc.returncode == 78, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"geode serve: {home.config_file}: ")
    for needle in needles:
        assert needle in first, proc.stderr
    assert "no child was started" in proc.stderr
    assert not (home.root / "incarnations.json").exists()  # the supervisor never counted a start
    assert not [n for n in CHILD_LOGS if (home.logs_dir / n).exists()]
    assert not list(home.run_dir.glob("*.sock"))


def test_doctor_reports_the_same_line(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "gh")
    home.root.mkdir()
    home.config_file.write_text('[loop]\nworkers = "two"\n[tools]\nhandler = 3\n')
    proc = _geode(home, "doctor")
    assert proc.returncode != 0
    assert f"{home.config_file}: [loop] workers" in proc.stdout
    assert "[tools] handler: unknown key" in proc.stdout
