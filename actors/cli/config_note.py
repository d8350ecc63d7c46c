"""The CLI's one line about a broken ``config.toml``: what is wrong (file, line and byte; or the key and what
it must be) and that a running daemon keeps serving on its last good config. ``geode stop``, ``status`` and
``restart`` go on without the file."""

from __future__ import annotations

import logging
import sys

from geode.config_file import last_good_path, read_config
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError

SELF_REPORTING = frozenset({"serve", "reload", "doctor", "trust", "mcp", "--help", "-h", "--version"})
LIFE_CYCLE = frozenset({"status", "stop", "restart"})  # work with any config: the socket is all they need


def config_problem(home: GeodeHome) -> str | None:
    """The config file's first problem in one line, or None when it is fine. A file byte-identical to the
    running tree's last good copy is fine without the typed check (which costs the CLI ~200 ms of imports)."""
    try:
        raw, source = read_config(home.config_file)
        try:
            if source and last_good_path(home).read_bytes() == source:
                return None
        except OSError:
            pass
        from actors.tree.config_sections import TreeSettings

        TreeSettings.from_raw(raw)
    except ConfigError as exc:
        message = exc.message or str(exc)
        prefix = str(home.config_file)
        return message if message.startswith(prefix) else f"{prefix}: {message}"
    return None


def note_broken_config(argv: list[str]) -> None:
    """Say once on stderr that the config is broken, for a command that does not report it itself. With
    no tree running only ``status``, ``stop`` and ``restart`` say it here: a command that starts the daemon
    gets the start's own one-line refusal."""
    if argv[:1] and argv[0] in SELF_REPORTING:
        return
    from actors.tree.client import is_running

    home = GeodeHome.from_env()
    running = is_running(home)
    if not running and not (argv[:1] and argv[0] in LIFE_CYCLE):
        return
    problem = config_problem(home)
    if problem is None:
        return
    logging.getLogger("geode.config").addHandler(logging.NullHandler())  # said here, not again per read
    then = "the daemon keeps serving on its last good config; fix the file, then `geode reload`"
    print(
        f"geode: warning: {problem}; {then if running else 'the daemon cannot start until it is fixed'}",
        file=sys.stderr,
        flush=True,
    )
