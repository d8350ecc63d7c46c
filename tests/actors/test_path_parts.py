"""actors/tree/path_parts.py: on CPython 3.12 a path's parts are not interned (3.12's interned strings are
immortal: a daemon naming a file after each call kept every name for good)."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

from actors.tree import path_parts

IMMORTAL = 1 << 30  # 3.12 reports an immortal object's reference count as 2**32 - 1

pytestmark = pytest.mark.skipif(sys.version_info[:2] != (3, 12), reason="only 3.12 interns into immortals")


def test_a_paths_parts_stay_mortal() -> None:
    assert path_parts.install() and path_parts.install()  # once, then a no-op
    name = Path(f"/tmp/geode-{uuid.uuid4().hex}/call-{uuid.uuid4().hex}.tmp").name
    assert sys.getrefcount(name) < IMMORTAL  # before: interned, immortal, never freed
    assert Path("/a/b/../c").parts == ("/", "a", "b", "..", "c") and str(Path("x") / "y") == "x/y"
