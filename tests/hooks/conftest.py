"""Hook tests reuse the executor rig of tests/tools and get the example scripts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hooks.scripts import write_scripts
from tests.tools.conftest import make_rig, store, workspace  # noqa: F401  (fixtures)


@pytest.fixture
def scripts(tmp_path: Path) -> dict[str, str]:
    d = tmp_path / "scripts"
    d.mkdir()
    return write_scripts(d)
