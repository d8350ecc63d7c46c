"""The untrusted-project line `geode ask` and the chat print once at their start (without typer: `ask` runs
without it; `geode trust` is the command that says how to trust the directory)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from geode.protocol.errors import GeodeError

if TYPE_CHECKING:
    from geode.home import GeodeHome
    from geode.home_paths import HomePaths

PROJECT_FILES = (".geode/config.toml", ".mcp.json")  # geode.tools.mcp.trust.PROJECT_FILES


def _any_project_file(cwd: str) -> bool:
    """Whether ``cwd`` or a parent (up to the user's home, excluded, or ``/``) holds a project MCP file: the
    directories ``untrusted_project_note`` looks at, by file checks only, without importing it (its config
    editing: tomllib, logging)."""
    here, home = os.path.realpath(cwd), os.path.realpath(os.path.expanduser("~"))
    while here != home:
        if any(os.path.isfile(os.path.join(here, name)) for name in PROJECT_FILES):
            return True
        parent = os.path.dirname(here)
        if parent == here:
            return False
        here = parent
    return False


def note_untrusted_project(home: GeodeHome | HomePaths) -> None:
    """Once at the start of ``geode ask`` / ``geode chat``: the untrusted-project line on stderr, if any. No
    project MCP file from here up (the common case, file checks only): nothing to say, no config read."""
    try:
        if not _any_project_file(os.getcwd()):
            return
    except OSError:
        return
    from geode.home import full_home
    from geode.tools.mcp.trust import untrusted_project_note

    home = full_home(home)
    try:
        if untrusted_project_note(os.getcwd(), [], home_root=home.root) is None:
            return
    except (GeodeError, OSError):
        return
    from geode.config_schema import GeodeConfig  # its models cost a CLI ~50 ms
    from geode.config_source import ConfigSource

    try:
        projects = ConfigSource(home, GeodeConfig.from_raw).snapshot.trust.projects
        note = untrusted_project_note(os.getcwd(), projects, home_root=home.root)
    except (GeodeError, OSError):
        return
    if note:
        print(f"geode: {note}", file=sys.stderr, flush=True)
