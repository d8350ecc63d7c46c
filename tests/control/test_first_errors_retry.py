"""A retried provider failure is shown by `geode ask` as one line,
`· retrying in 0.1 s (overloaded error, attempt 1/3)`, never as a raw event dict."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tests.actors.tree_kit import geode, scripted_tree

FAST_RETRY = "[providers.retry]\nbase_delay_s = 0.1\nmax_delay_s = 0.2\n"


def test_ask_shows_a_retry_as_one_readable_line(tmp_path: Path) -> None:
    calls = {"n": 0}

    def reply(_req: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            return {"error": {"status": 503}}
        return {"text": "fine now"}

    with scripted_tree(tmp_path, reply, extra=FAST_RETRY) as (home, _server):
        r = geode(home, "ask", "hi", timeout=60)
        assert r.returncode == 0, r.stderr
        assert "fine now" in r.stdout
        lines = [ln for ln in r.stdout.splitlines() if "retrying" in ln]
        assert len(lines) == 1, r.stdout
        assert re.fullmatch(r"· retrying in 0\.[0-2] s \(overloaded error, attempt 1/3\)", lines[0]), lines
        assert "{" not in r.stdout
