"""The untrusted-project line `geode ask` and the chat print once at their start (without typer: `ask` runs
without it; `geode trust` is the command that says how to trust the directory)."""

from __future__ import annotations

import os
import sys

from geode.home import GeodeHome
from geode.protocol.errors import GeodeError


def note_untrusted_project(home: GeodeHome) -> None:
    """Once at the start of ``geode ask`` / ``geode chat``: the untrusted-project line on stderr, if any. No
    project MCP file from here up (the common case, file checks only): nothing to say, no config read."""
    from geode.tools.mcp.trust import untrusted_project_note

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
