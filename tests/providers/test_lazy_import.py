"""Importing geode (and the catalogue/selection/scripted modules) loads neither anthropic nor openai."""

from __future__ import annotations

import subprocess
import sys


def test_sdks_are_imported_lazily():
    code = (
        "import sys, geode, geode.providers.catalogue, geode.providers.selection, geode.providers.report,"
        " geode.testing.scripted, geode.testing.function_model, geode.providers.vendors;"
        " from geode.providers.selection import build_provider; from geode.config_schema import GeodeConfig;"
        " build_provider('claude-opus-5-5', env={}, config=GeodeConfig());"
        " print(sorted(m for m in ('anthropic', 'openai', 'httpx2', 'httpx') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
