"""Issue 34, session 6 (EXEC2): whether a folder is another GEODE home is remembered across calls only while
the folder holds none of the markers' names and keeps its signature. A home created (or completed) between
two calls in a folder the first call found unmarked is still refused on the second."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

import geode.tools.secret_files as secret_files
from geode.tools.paths import AllowedRoots, Boundary, Exclusion

OLD = time.time() - 3600


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """The daemon home, the allowed root and a settled project folder inside it holding a file."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setattr(secret_files, "_unmarked", {})
    home, root = tmp_path / "home", tmp_path / "root"
    project = root / "project"
    for d in (home, project):
        d.mkdir(parents=True)
    (project / "notes.txt").write_text("x")
    os.utime(project, (OLD, OLD))
    os.utime(root, (OLD, OLD))
    return home, root, project


def _verdict(home: Path, root: Path, p: Path) -> str | None:
    return Boundary.of(AllowedRoots((root,), Exclusion((home,), home=home))).verdict(p)


@pytest.mark.parametrize(
    "mark",
    [
        lambda d: (d / "records" / "evidence").mkdir(parents=True) or (d / "evidence").mkdir(),
        lambda d: (d / "keys").mkdir() or (d / "keys" / "host.secret").write_text("k"),
        lambda d: (d / "records").mkdir() or (d / "config.toml").write_text(""),
    ],
    ids=["records+evidence", "keys/host.secret", "records+config"],
)
def test_a_home_made_between_two_calls_is_refused_on_the_second(tree, mark) -> None:  # type: ignore[no-untyped-def]
    home, root, project = tree
    assert _verdict(home, root, project / "notes.txt") is None
    assert str(project) in secret_files._unmarked  # remembered: settled and unmarked
    mark(project)
    os.utime(project, (OLD, OLD))  # even with its mtime set back (the ctime still moved)
    assert _verdict(home, root, project / "notes.txt") == "geode_home"


def test_host_secret_appearing_in_an_existing_keys_folder_is_refused(tree) -> None:  # type: ignore[no-untyped-def]
    home, root, project = tree
    (project / "keys").mkdir()
    os.utime(project, (OLD, OLD))
    os.utime(project / "keys", (OLD, OLD))
    assert _verdict(home, root, project / "notes.txt") is None
    assert str(project) not in secret_files._unmarked  # a marker's name is there: asked every call
    (project / "keys" / "host.secret").write_text("k")  # changes keys/, not the project folder
    assert _verdict(home, root, project / "notes.txt") == "geode_home"


def test_a_folder_changed_just_now_is_not_remembered(tree) -> None:  # type: ignore[no-untyped-def]
    home, root, project = tree
    (project / "other.txt").write_text("y")  # mtime now: not settled
    assert _verdict(home, root, project / "notes.txt") is None
    assert str(project) not in secret_files._unmarked


def test_a_remembered_folder_costs_one_stat_and_no_failed_lookup(tree, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    home, root, project = tree
    assert _verdict(home, root, project / "notes.txt") is None
    asked: list[str] = []
    real = secret_files.is_geode_home

    def counted(d: str) -> bool:
        asked.append(str(d))
        return real(d)

    monkeypatch.setattr(secret_files, "is_geode_home", counted)
    assert _verdict(home, root, project / "notes.txt") is None
    assert str(project) not in asked and str(root) not in asked
