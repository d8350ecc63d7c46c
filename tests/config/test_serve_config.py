"""A real ``geode serve --foreground`` refuses a bad config at once: exit 78, one line naming file and key."""

from __future__ import annotations

from pathlib import Path

import pytest

from geode.home import GeodeHome
from tests.actors.tree_kit import geode

CHILD_LOGS = ("store.log", "lanes.log", "executor.log", "loop-1.log", "control.log", "supervisor.log")


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
    proc = geode(home, "serve", "--foreground", timeout=30)
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
    proc = geode(home, "doctor", timeout=30)
    assert proc.returncode != 0
    assert f"{home.config_file}: [loop] workers" in proc.stdout
    assert "[tools] handler: unknown key" in proc.stdout
