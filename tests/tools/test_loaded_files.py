"""Which writes are the "files GEODE executes or loads as instructions" approval class (tree proof:
tests/tools/test_trust_tree.py)."""

from __future__ import annotations

from pathlib import Path

from geode.config_schema import GeodeConfig
from geode.tools.builtin.catalogue import BUILTIN_SPECS
from geode.tools.loaded_files import EXECUTES, INSTRUCTIONS, kind_of, write_class

SPECS = {s.name: s for s in BUILTIN_SPECS}


def test_kinds_by_name_and_place(tmp_path: Path) -> None:
    ws = tmp_path
    assert kind_of(ws / ".mcp.json") == EXECUTES and kind_of(ws / ".geode" / "config.toml") == EXECUTES
    assert kind_of(ws / ".claude" / "settings.local.json") == EXECUTES
    for rel in (
        "GEODE.md",
        "sub/geode.md",
        ".geode/rules/x.md",
        "skills/a/SKILL.md",
        "MEMORY.md",
        "HEARTBEAT.md",
    ):
        assert kind_of(ws / rel) == INSTRUCTIONS, rel
    for rel in ("notes.md", "rules/x.md", "settings.json", "config.toml", "mcp.json"):
        assert kind_of(ws / rel) is None, rel
    assert kind_of(ws / "hooks.json", [ws / "hooks.json"]) == EXECUTES  # a configured claude_settings file


def test_a_symlink_to_a_loaded_file_and_only_file_changing_builtins(tmp_path: Path) -> None:
    (tmp_path / "GEODE.md").write_text("x")
    (tmp_path / "innocent.txt").symlink_to(tmp_path / "GEODE.md")
    args = {"file_path": "innocent.txt", "content": "y"}
    shown = write_class(SPECS["write_file"], args, ("file_path",), tmp_path, GeodeConfig())
    assert shown == f"{INSTRUCTIONS}: {tmp_path / 'GEODE.md'}"
    assert write_class(SPECS["read_file"], args, ("file_path",), tmp_path, GeodeConfig()) == ""
    settings = GeodeConfig.from_raw({"hooks": {"claude_settings": str(tmp_path / "cc.json")}})
    edit = {"file_path": str(tmp_path / "cc.json"), "old_string": "a", "new_string": "b"}
    assert write_class(SPECS["edit_file"], edit, ("file_path",), tmp_path, settings).startswith(EXECUTES)
