"""`geode serve` with plain options (``--foreground``, ``--single-process``, each at most once) without the
typer app: the same steps, messages and exit codes as :func:`actors.cli.serve_cmds.serve`, but typer and every
command module (0.4-1.8 s under load) are never imported, and the daemon is spawned before the bus and
pydantic (which only the wait for its children needs) are imported.

Anything else (``--role``, ``--help``, an unknown or repeated option) returns None: the typer app parses it,
with its usage errors and its help, as before.
"""

from __future__ import annotations

import sys
from typing import NoReturn

PLAIN = frozenset({"--foreground", "--single-process"})


def plain_serve_args(args: list[str]) -> tuple[bool, bool] | None:
    """``(foreground, single_process)`` for plain options after ``serve``, else None (the typer way)."""
    if len(set(args)) != len(args) or not set(args) <= PLAIN:
        return None
    return "--foreground" in args, "--single-process" in args


def serve(foreground: bool, single_process: bool) -> int:
    """What ``serve_cmds.serve`` does for the main role: the exit code (printed lines on the same streams)."""
    from geode.home import GeodeHome

    home = GeodeHome.from_env()
    if foreground:
        from actors.tree.serve import run_foreground

        return run_foreground(home, single_process=single_process)
    from actors.tree.instance_lock import InstanceLock

    home.ensure()
    lock = InstanceLock(home.lock_file)
    if lock.is_held():
        from actors.tree.serve import EXIT_ALREADY_RUNNING, already_running_message

        print(already_running_message(home, lock.holder_pid()), file=sys.stderr, flush=True)
        return EXIT_ALREADY_RUNNING
    from actors.tree.daemon_spawn import serve_out_offset, spawn_daemon

    offset = serve_out_offset(home)
    try:
        spawned = (spawn_daemon(home, single_process=single_process), offset)
    except Exception as exc:  # what start_daemon_reporting says of a start that failed to spawn
        print(str(getattr(exc, "message", "") or exc), file=sys.stderr, flush=True)
        return 1
    from actors.cli.daemon_start import start_daemon_reporting  # the bus and pydantic: while the tree starts

    rc, message = start_daemon_reporting(home, single_process=single_process, spawned=spawned)
    print(message, file=sys.stderr if rc != 0 else sys.stdout, flush=True)  # a failure: its own lines
    return rc


def serve_exit(foreground: bool, single_process: bool) -> NoReturn:
    """:func:`serve`, then exit with its code (as the typer command's ``typer.Exit``)."""
    raise SystemExit(serve(foreground, single_process))
