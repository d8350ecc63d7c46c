"""The shipped config/geode.toml, as shipped and with every documented default uncommented."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ROOT / "config" / "geode.toml"


def uncommented_text() -> str:
    """Every ``# key = value`` / ``# [table]`` line uncommented; ``##`` prose stays a comment."""
    lines = SHIPPED.read_text().splitlines()
    return "\n".join(ln[2:] if ln.startswith("# ") else ln for ln in lines) + "\n"


def uncommented() -> dict[str, Any]:
    return tomllib.loads(uncommented_text())
