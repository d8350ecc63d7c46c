"""A forked child's record of the modules it imports itself (its ready line's count) leaves the zygote's
module names alone: taking a copy of ``sys.modules`` at the fork wrote a reference count into every name
(~780 in a child without an SDK, ~4,300 in a loop worker) and so copied the pages holding them into each child
(1.7 / 5.4 MiB of private memory a child; docs/benchmarks.md, "Start, restart and memory")."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from actors.tree import child_main
from actors.tree.fork_imports import ImportsAfterFork, watch


def test_the_imports_after_the_fork_are_listed_and_no_module_name_is_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "geode_fork_probe_new.py").write_text("import geode_fork_probe_dep\n")
    (tmp_path / "geode_fork_probe_dep.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    # dotted names only: a top-level name ("stat", "time") is also an identifier that running code refers to
    names = [n for n in sys.modules if "." in n]  # holds one reference more on each, before and after
    assert len(names) > 100, len(names)
    before = [sys.getrefcount(n) for n in names]
    finder = watch()
    monkeypatch.setattr(child_main, "AT_FORK", finder)
    try:
        import geode_fork_probe_new  # noqa: F401

        with pytest.raises(ImportError):
            import geode_fork_probe_missing  # noqa: F401
        assert child_main.imported_after_fork() == ["geode_fork_probe_dep", "geode_fork_probe_new"]
    finally:
        finder.stop()
        for mod in ("geode_fork_probe_new", "geode_fork_probe_dep"):
            sys.modules.pop(mod, None)
    assert finder not in sys.meta_path
    after = [sys.getrefcount(n) for n in names]
    touched = [n for n, b, a in zip(names, before, after, strict=True) if a != b]
    assert touched == [], touched[:10]


def test_a_stopped_record_counts_no_later_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "geode_fork_probe_late.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    finder = watch()
    finder.stop()
    try:
        import geode_fork_probe_late  # noqa: F401
    finally:
        sys.modules.pop("geode_fork_probe_late", None)
    assert finder.imported() == []
    assert isinstance(finder, ImportsAfterFork)
