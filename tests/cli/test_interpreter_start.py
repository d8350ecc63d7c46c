"""The project's venv starts an interpreter without importing anything for GEODE (issue 34): scripts/setup
installs the checkout with ``editable_mode=compat``, a plain path ``.pth``. setuptools' default editable
mode for this layout installs a finder that `site` imports at every start, with pathlib, re, fnmatch and
urllib (~10 ms of each `geode` command, before its own first import). Counted, not timed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FINDER_MODULES = ("pathlib", "fnmatch", "urllib.parse", "importlib.util", "re")


def test_the_interpreter_start_imports_no_editable_finder(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import sys; print(' '.join(sys.modules))"],  # json would import re
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    modules = out.stdout.split()
    finders = [m for m in modules if m.startswith("__editable__")]
    assert finders == [], f"site imported {finders}: the venv was installed with the default editable mode"
    loaded = [m for m in FINDER_MODULES if m in modules]
    assert loaded == [], f"the interpreter's start imported {loaded}"
    # the checkout is importable all the same (the .pth's path), from any directory
    found = subprocess.run(
        [sys.executable, "-c", "import actors.cli.main, geode; print(geode.__file__)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert found.returncode == 0, found.stderr
    assert Path(found.stdout.strip()).parent.parent == Path(__file__).resolve().parents[2]
