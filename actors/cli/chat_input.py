"""The chat's prompt line: on a terminal, prompt_toolkit (line editing, Up/Down through the history kept
across runs in ``$GEODE_HOME/chat_history`` (0600), Tab completing the slash commands); without one (stdin or
stdout not a terminal) the plain ``input()``. prompt_toolkit is imported here only, on the chat's path.

Both raise ``EOFError`` on Ctrl-D and ``KeyboardInterrupt`` on Ctrl-C, as ``input()`` does. The approval
prompt does not come through here: it keeps its own line reader (whole request shown, Enter denies)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from actors.cli.chat_commands import COMMANDS

HISTORY_FILE = "chat_history"


def history_path(home_root: Path) -> Path:
    """``$GEODE_HOME/chat_history``, created private (0600) before anything is written to it."""
    path = home_root / HISTORY_FILE
    fd = os.open(path, os.O_CREAT | os.O_APPEND | os.O_WRONLY, 0o600)
    os.close(fd)
    os.chmod(path, 0o600)
    return path


def command_matches(text: str) -> list[str]:
    """The commands completing ``text`` (the line before the cursor): ``/co`` → ``/compact``; a line with a
    space in it, or not starting with ``/``, completes nothing."""
    if not text.startswith("/") or " " in text:
        return []
    return [f"/{n}" for n in COMMANDS if f"/{n}".startswith(text.lower())]


def line_reader(home_root: Path, *, terminal: bool) -> Callable[[str], str]:
    """A function reading one line after a prompt string: prompt_toolkit's on a terminal, else ``input``."""
    if not terminal:
        return input
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import Completer, Completion
    from prompt_toolkit.history import FileHistory

    class SlashCompleter(Completer):
        def get_completions(self, document: Any, complete_event: Any) -> Iterable[Completion]:
            text = document.text_before_cursor
            for name in command_matches(text):
                yield Completion(name, start_position=-len(text), display_meta=COMMANDS[name[1:]][1])

    session: PromptSession[str] = PromptSession(
        history=FileHistory(str(history_path(home_root))),
        completer=SlashCompleter(),
        complete_while_typing=False,  # Tab completes; typing a prompt never pops a menu
        enable_history_search=False,
    )
    return lambda prompt: session.prompt(prompt)
