"""actors/tree/path_parts.py: on CPython 3.12 a path's parts are not interned (3.12's interned strings are
immortal: a daemon naming a file after each call kept every name for good), in this process and in the
children of a served tree (forked from the zygote, itself forked from the daemon that installs it); and the
served children's code immortal (actors/tree/immortal.py), seen from each child."""

from __future__ import annotations

import pathlib
import sys
import uuid
from pathlib import Path

import pytest

from actors.tree import path_parts
from tests.actors.tree_kit import make_home, serve, stop, wait_for

IMMORTAL = path_parts.IMMORTAL_REFCOUNT

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 12), reason="only 3.12 interns into immortals")


def test_a_paths_parts_stay_mortal() -> None:
    assert path_parts.install() and path_parts.install()  # once, then a no-op
    name = Path(f"/tmp/geode-{uuid.uuid4().hex}/call-{uuid.uuid4().hex}.tmp").name
    assert sys.getrefcount(name) < IMMORTAL  # before: interned, immortal, never freed
    assert Path("/a/b/../c").parts == ("/", "a", "b", "..", "c") and str(Path("x") / "y") == "x/y"
    assert not path_parts.immortal_parts()


def test_the_probe_sees_3_12s_interning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pathlib, "sys", sys)  # pathlib as 3.12 ships it
    assert path_parts.immortal_parts()


def test_a_served_trees_children_parse_mortal_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The heap-trace diagnostics (GEODE_TRACEMALLOC, no tracemalloc) log each traced child's own probes: its
    path parts mortal (path_parts.py), and the code it was forked with immortal (actors/tree/immortal.py: the
    daemon's and the zygote's step before each fork; this test process took no such step)."""
    from actors.bus.socket_thread import Bus

    monkeypatch.delenv("GEODE_IMMORTALIZE", raising=False)
    assert sys.getrefcount(Bus.start.__code__) < IMMORTAL  # the probe's object, mortal where no step ran
    monkeypatch.setenv("GEODE_TRACEMALLOC", "executor,store,loop-1")
    monkeypatch.setenv("GEODE_TRACEMALLOC_FRAMES", "0")
    home = make_home(tmp_path)
    try:
        serve(home)
        for name in ("executor", "store", "loop-1"):
            log = home.logs_dir / f"{name}.log"

            def noted(log: Path = log) -> str | None:
                text = log.read_text() if log.exists() else ""
                return text if "heap tracing on" in text else None

            text = wait_for(noted, 20, what=f"{name}'s heap-tracing line")
            assert "path parts mortal" in text and "path parts immortal" not in text, text[-2000:]
            assert "code immortal" in text, text[-2000:]
    finally:
        stop(home)
