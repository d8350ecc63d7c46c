"""Issue 34, session 6: ``paths.real_path`` (the kernel's answer for a path that exists) answers as
``os.path.realpath`` on every kind of path a tool argument or a workspace can be: symlinks anywhere, ``..``
after a symlink, missing tails, dangling links, loops, files, a removed folder, NUL bytes."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from geode.tools.paths import real_path


def _same(p: str) -> None:
    try:
        want = os.path.realpath(p)
    except (OSError, ValueError) as exc:  # a NUL byte; a removed cwd for a relative path
        with pytest.raises(type(exc)):
            real_path(p)
        return
    assert real_path(p) == want, p


def test_real_path_answers_as_realpath_on_random_trees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(34)
    root = tmp_path / "r"
    root.mkdir()
    made: list[Path] = [root]
    for i in range(60):
        parent = rng.choice([m for m in made if m.is_dir() and not m.is_symlink()] or [root])
        p = parent / f"n{i}"
        kind = rng.random()
        if kind < 0.4:
            p.mkdir()
        elif kind < 0.6:
            p.write_text("x")
        elif kind < 0.85:
            target = rng.choice(made)
            p.symlink_to(os.path.relpath(target, parent) if rng.random() < 0.5 else target)
        else:
            p.symlink_to(parent / f"missing{i}")  # dangling
        made.append(p)
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    made += [root / "loop_a", root / "missing" / "deeper"]
    tails = ["", "/..", "/../..", "/.", "/x", "/x/..", "/../n0", "/"]
    for m in made:
        for tail in tails:
            _same(str(m) + tail)
    monkeypatch.chdir(root)
    for m in made:
        _same(os.path.relpath(m, root))
    for odd in ("", ".", "..", "/", "//", "///tmp", "a\x00b", str(root) + "\x00"):
        _same(odd)


def test_a_removed_folder_and_a_file_answer_as_realpath(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    (tmp_path / "f").write_text("x")
    monkeypatch.chdir(gone)
    os.rmdir(gone)  # the cwd removed: /proc says "... (deleted)"; realpath's own answer stands
    for p in (".", "x", str(tmp_path / "f"), str(tmp_path / "f") + "/"):
        _same(p)
