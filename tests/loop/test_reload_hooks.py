"""On a real tree the loop workers run the `[[hooks.UserPromptSubmit]]` tables of config.toml, and
`geode reload` makes a config edit (here: removing a blocking hook) take effect for new turns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.actors.tree_kit import geode, scripted_tree

BLOCK = """
[[hooks.UserPromptSubmit]]
command = "echo 'prompts are paused by policy' >&2; exit 2"
"""


def test_a_prompt_hook_blocks_until_reload_removes_it(tmp_path: Path) -> None:
    def reply(_req: Any) -> Any:
        return {"text": "answered"}

    with scripted_tree(tmp_path, reply, extra=BLOCK) as (home, server):
        blocked = geode(home, "ask", "hello", timeout=60)
        assert blocked.returncode == 1, (blocked.stdout, blocked.stderr)
        assert "input_blocked" in blocked.stderr and server.requests == []
        without = home.config_file.read_text().replace(BLOCK, "")
        assert "UserPromptSubmit" not in without
        home.config_file.write_text(without)
        assert geode(home, "reload", timeout=30).returncode == 0
        ok = geode(home, "ask", "hello", timeout=60)
        assert ok.returncode == 0, ok.stderr
        assert "answered" in ok.stdout
