"""Issue 34, session 7 (EXEC3): a walked directory's entries and their lstat are kept across calls while the
directory keeps its device, inode, mtime and ctime and the mount table is unchanged (geode/tools/builtin/
listings.py). Counted: listings and lstats of a kept directory (none). An entry created, replaced or linked
between two walks is judged on the second as a fresh walk would (even with the directory's mtime set back)."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

import geode.tools.builtin.listings as listings
import geode.tools.secret_files as secret_files
from geode.tools.builtin.fs_guard import Skips, walk
from geode.tools.paths import AllowedRoots, Boundary, Exclusion

OLD = time.time() - 3600


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """The daemon home (with a secret), the allowed root and a settled project folder inside it."""
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    monkeypatch.setattr(secret_files, "_unmarked", {})
    monkeypatch.setattr(listings, "_kept", {})
    monkeypatch.setitem(listings._state, "entries", 0)
    home, root = tmp_path / "home", tmp_path / "root"
    project = root / "project"
    for d in (home, project / "sub"):
        d.mkdir(parents=True)
    (home / ".env").write_text("SECRET=1\n")
    for i in range(3):
        (project / f"f{i}.txt").write_text("x")
    for d in (project / "sub", project, root):
        os.utime(d, (OLD, OLD))
    return home, root, project


def _walk(home: Path, root: Path, project: Path) -> tuple[list[str], Skips]:
    bound = Boundary.of(AllowedRoots((root,), Exclusion((home,), home=home)))
    skips = Skips()
    return [e.text[len(str(project)) + 1 :] for e in walk(project, bound, skips)], skips


def _counted(monkeypatch: pytest.MonkeyPatch, project: Path) -> Counter[str]:
    """Listings and lstats of the project and what is in it (the secret files' scan also lists folders)."""
    seen: Counter[str] = Counter()
    real_list, real_lstat = os.listdir, os.lstat
    mine = str(project)

    def listdir(p: str) -> list[str]:
        seen["listdir"] += str(p).startswith(mine)
        return real_list(p)

    def lstat(p: str) -> os.stat_result:
        seen["lstat"] += str(p).startswith(mine)
        return real_lstat(p)

    monkeypatch.setattr(listings.os, "listdir", listdir)
    monkeypatch.setattr(listings.os, "lstat", lstat)
    return seen


def test_a_settled_directory_is_listed_once(tree, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    first = _walk(*tree)
    assert listings.kept() == 2  # project and sub
    seen = _counted(monkeypatch, tree[2])
    assert _walk(*tree) == first
    assert first[0] == ["f0.txt", "f1.txt", "f2.txt", "sub"]
    assert +seen == Counter()  # no listing, no lstat: one stat per directory


def test_a_directory_changed_just_now_is_not_kept(tree) -> None:  # type: ignore[no-untyped-def]
    home, root, project = tree
    (project / "new.txt").write_text("x")
    _walk(home, root, project)
    assert str(project) not in listings._kept and str(project / "sub") in listings._kept


@pytest.mark.parametrize(
    "change, skipped",
    [
        (lambda home, p: (p / ".netrc").write_text("machine x"), "credential_files"),
        (lambda home, p: os.link(home / ".env", p / "env-copy"), "geode_home"),
        (lambda home, p: (p / "f1.txt").unlink() or (p / "f1.txt").symlink_to("/etc"), "outside_roots"),
        (lambda home, p: os.mkfifo(p / "pipe"), "not_regular"),
        (lambda home, p: (p / "keys").mkdir() or (p / "keys" / "host.secret").write_text("k"), "geode_home"),
    ],
    ids=["credential-name", "hardlink-to-secret", "replaced-by-symlink-out", "fifo", "project-made-a-home"],
)
def test_an_entry_changed_between_two_walks_is_judged_on_the_second(tree, change, skipped) -> None:  # type: ignore[no-untyped-def]
    home, root, project = tree
    assert _walk(home, root, project)[1] == Skips()
    assert str(project) in listings._kept
    change(home, project)
    os.utime(project, (OLD, OLD))  # its mtime set back: the ctime still moved
    listed, skips = _walk(home, root, project)
    assert getattr(skips, skipped) >= 1, skips
    assert not any(n in ("env-copy", ".netrc", "pipe") for n in listed), listed


def test_a_mount_table_change_forgets_every_listing(tree, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _walk(*tree)
    assert listings.kept() == 2
    monkeypatch.setattr(listings, "_mounts_changed", lambda: True)
    before = listings._state["generation"]
    gen = listings.generation()
    assert listings.kept() == 0 and gen == before + 1
    seen = _counted(monkeypatch, tree[2])
    _walk(*tree)
    assert seen["listdir"] == 2 and seen["lstat"] == 4  # listed anew
    monkeypatch.setattr(listings, "_mounts_changed", lambda: False)
    listings._kept.clear()
    listings.entries(str(tree[2]), gen)  # a listing begun before the latest change is not kept
    assert listings.kept() == 0
    listings.entries(str(tree[2]), listings.generation())
    assert listings.kept() == 1


def test_mountinfo_polls_quiet_when_nothing_moved() -> None:
    listings.generation()  # opens the watch in this process if needed
    assert listings._watch, "no /proc/self/mountinfo here"
    gen = listings.generation()
    assert listings.generation() == gen  # no mount happened between the two asks


def test_a_large_directory_is_looked_at_as_the_walk_goes(tree, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    home, root, project = tree
    monkeypatch.setattr(listings, "MAX_DIR", 2)
    seen = _counted(monkeypatch, tree[2])
    walked = walk(project, Boundary.of(AllowedRoots((root,), Exclusion((home,), home=home))), Skips())
    next(walked)
    base = seen["lstat"]  # the first entry, and the home markers' lookups of the project folder
    next(walked)
    assert seen["lstat"] == base + 1  # one entry at a time
    assert len(list(walked)) == 2 and str(project) not in listings._kept


_MOUNTED = """
import os, sys, time
from pathlib import Path
from geode.tools.builtin.fs_guard import Skips, walk
from geode.tools.paths import AllowedRoots, Boundary, Exclusion
home, root, project = map(Path, sys.argv[1:4])
def skipped():
    skips = Skips()
    list(walk(project, Boundary.of(AllowedRoots((root,), Exclusion((home,), home=home))), skips))
    return skips.geode_home
first = skipped()
if os.system(f"mount --bind {home / '.env'} {project / 'f1.txt'}") != 0:
    print("no-mount")
    sys.exit(0)
print(first, skipped())
"""


def test_a_bind_mount_over_an_entry_of_a_kept_directory_is_seen(tree) -> None:  # type: ignore[no-untyped-def]
    """A real mount (in a private mount namespace, when this host allows one): the kept listing is forgotten
    and the entry, now the home's .env by identity, is skipped on the next walk."""
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None:
        pytest.skip("no unshare")
    home, root, project = tree
    out = subprocess.run(
        [
            "unshare",
            "-m",
            "--propagation",
            "private",
            sys.executable,
            "-c",
            _MOUNTED,
            str(home),
            str(root),
            str(project),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    if out.returncode != 0 or "no-mount" in out.stdout:
        pytest.skip(f"no private mount namespace here: {out.stderr[-200:]}")
    assert out.stdout.split() == ["0", "1"], out
