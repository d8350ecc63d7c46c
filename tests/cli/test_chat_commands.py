"""The interactive chat's slash command parser, help and completion, and its history file (no tree)."""

from __future__ import annotations

import stat
from pathlib import Path

from actors.cli.chat_commands import Slash, Unknown, help_text, parse
from actors.cli.chat_input import command_matches, history_path


def test_commands_parse_and_a_path_goes_to_the_model() -> None:
    assert parse("/model  claude-opus-4-8 ") == Slash("model", "claude-opus-4-8")
    assert parse("  /HELP") == Slash("help", "")
    assert parse("/resume s-0123\n") == Slash("resume", "s-0123")
    assert parse("/foo") == Unknown("foo") and Unknown("foo").message == "unknown command: /foo (try /help)"
    assert parse("/etc/hosts: what is in it?") is None  # a path goes to the model
    assert parse("hello /help") is None and parse("/") is None


def test_completion_and_help_list_every_command() -> None:
    assert command_matches("/co") == ["/compact"] and command_matches("/compact x") == []
    assert command_matches("hi") == [] and "/resume" in command_matches("/")
    text = help_text()
    for name in ("help", "compact", "memory", "skills", "status", "model", "clear", "resume"):
        assert f"/{name}" in text


def test_the_history_file_is_private(tmp_path: Path) -> None:
    path = history_path(tmp_path)
    path.write_text("secret prompt\n")
    path.chmod(0o644)
    assert stat.S_IMODE(history_path(tmp_path).stat().st_mode) == 0o600
