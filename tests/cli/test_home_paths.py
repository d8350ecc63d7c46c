"""`geode ask` finds its home without pathlib (geode/home_paths.py, issue 34): the strings it uses are the
paths ``GeodeHome`` gives for the same ``GEODE_HOME``, a relative, symlinked or ``~`` one included, and a
home too long for ipc sockets gets ``GeodeHome``'s run directory. ``GeodeHome`` stays what the dataclass
was: immutable, equal and hashed by its root, picklable."""

from __future__ import annotations

import os
import pickle
from pathlib import Path

import pytest

from geode.config_bytes import LAST_GOOD, known_good
from geode.home import GeodeHome, full_home
from geode.home_paths import HomePaths


def _same(monkeypatch: pytest.MonkeyPatch, value: str) -> HomePaths:
    monkeypatch.setenv("GEODE_HOME", value)
    light, full = HomePaths.from_env(), GeodeHome.from_env()
    assert light.root == str(full.root)
    for name in ("config_file", "cli_socket", "lock_file", "run_dir"):
        assert getattr(light, name) == str(getattr(full, name)), name
    assert full_home(light) == full and full_home(full) is full
    return light


def test_the_strings_are_geode_homes_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _same(monkeypatch, "link/").root == str(real)  # relative, a symlink, a trailing slash
    assert _same(monkeypatch, "~/real//x/..").root == str(real)
    long = _same(monkeypatch, str(tmp_path / ("h" * 120)))  # too long for ipc: the hashed run directory
    assert os.path.basename(long.run_dir).startswith(f"geode-{os.getuid()}-")
    monkeypatch.delenv("GEODE_HOME")
    assert HomePaths.from_env().root == str(tmp_path / ".geode")


def test_a_home_that_does_not_expand_is_refused_as_geode_home_does(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEODE_HOME", "~no-such-user-geode/h")
    with pytest.raises(RuntimeError):
        GeodeHome.from_env()
    with pytest.raises(RuntimeError):
        HomePaths.from_env()


def test_the_config_check_reads_the_same_bytes_through_either(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path / "h").ensure()
    light = HomePaths(str(home.root))
    assert known_good(light) and known_good(home)  # no config.toml: the defaults
    home.config_file.write_text("[loop]\nworkers = 2\n")
    assert not known_good(light) and not known_good(home)
    home.run_dir.mkdir()
    (home.run_dir / LAST_GOOD).write_text("[loop]\nworkers = 2\n")
    assert known_good(light) and known_good(home)


def test_geode_home_is_immutable_equal_by_root_and_picklable(tmp_path: Path) -> None:
    home = GeodeHome(tmp_path)
    assert home == GeodeHome(tmp_path) and hash(home) == hash(GeodeHome(tmp_path))
    assert home != GeodeHome(tmp_path / "x") and home != tmp_path
    assert pickle.loads(pickle.dumps(home)) == home
    assert repr(home) == f"GeodeHome(root={tmp_path!r})"
    with pytest.raises(AttributeError):
        home.root = tmp_path / "x"  # type: ignore[misc]
    assert len({home, GeodeHome(tmp_path)}) == 1
