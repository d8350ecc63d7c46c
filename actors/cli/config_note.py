"""The CLI's one line about a broken ``config.toml``: what is wrong (file, line and byte; or the key and what
it must be) and that a running daemon keeps serving on its last good config. ``geode stop``, ``status`` and
``restart`` go on without the file."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from geode.home_paths import HomePaths

if TYPE_CHECKING:
    from geode.home import GeodeHome

SELF_REPORTING = frozenset({"serve", "reload", "doctor", "trust", "mcp", "--help", "-h", "--version"})
LIFE_CYCLE = frozenset({"status", "stop", "restart"})  # work with any config: the socket is all they need


def config_problem(home: GeodeHome | HomePaths) -> str | None:
    """The config file's first problem in one line, or None when it is fine (``geode.config_file``). An absent
    or empty file is the defaults, which every tree starts on: fine without the typed check (~140 ms)."""
    from geode.config_bytes import known_good

    if known_good(home):
        return None
    from geode.config_file import file_problem
    from geode.home import full_home

    def builder() -> Callable[[dict[str, Any]], object]:
        from actors.tree.config_sections import TreeSettings

        return TreeSettings.from_raw

    return file_problem(full_home(home), builder)


def note_broken_config(argv: list[str]) -> None:
    """Say once on stderr that the config is broken, for a command that does not report it itself. With
    no tree running only ``status``, ``stop`` and ``restart`` say it here: a command that starts the daemon
    gets the start's own one-line refusal."""
    if argv[:1] and argv[0] in SELF_REPORTING:
        return
    from actors.tree.instance_lock import InstanceLock  # not actors.tree.client: its bus costs `ask` ~100 ms

    home = HomePaths.from_env()  # strings: no pathlib before `geode ask`'s first message
    running = InstanceLock(home.lock_file).is_held()
    if not running and not (argv[:1] and argv[0] in LIFE_CYCLE):
        return
    problem = config_problem(home)
    if problem is None:
        return
    import logging

    logging.getLogger("geode.config").addHandler(logging.NullHandler())  # said here, not again per read
    then = "the daemon keeps serving on its last good config; fix the file, then `geode reload`"
    print(
        f"geode: warning: {problem}; {then if running else 'the daemon cannot start until it is fixed'}",
        file=sys.stderr,
        flush=True,
    )
