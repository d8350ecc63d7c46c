"""`geode serve` with plain options (``--foreground``, ``--single-process``, and a worker host's
``--role worker --connect … --server-key … [--children …] [--roots …] [--host …]``, each at most once) without
the typer app: the same steps, messages and exit codes as :func:`actors.cli.serve_cmds.serve`, but typer and
every command module (0.4-1.8 s under load; a foreground supervisor keeps them for its life) are never
imported, and the daemon is spawned before the bus and pydantic (which only the wait for its children needs)
are imported.

Anything else (``--help``, an unknown or repeated option, a role that is neither, the worker's options without
``--role worker``, a value that starts with ``-``) returns None: the typer app parses it, with its usage
errors and its help, as before.
"""

from __future__ import annotations

import sys
from typing import NoReturn

PLAIN = frozenset({"--foreground", "--single-process"})
# the worker role's options (serve_cmds.serve's), with typer's defaults
VALUED = {
    "--role": "main",
    "--connect": "",
    "--server-key": "",
    "--children": "loop",
    "--roots": "",
    "--host": "",
}
WORKER_ONLY = ("--connect", "--server-key", "--roots", "--host")


def plain_serve_args(args: list[str]) -> tuple[bool, bool, dict[str, str]] | None:
    """``(foreground, single_process, the valued options)`` for plain options after ``serve`` (``--opt value``
    or ``--opt=value``), else None (the typer way)."""
    seen: set[str] = set()
    values = dict(VALUED)
    i = 0
    while i < len(args):
        name, eq, value = args[i].partition("=")
        if name in seen:
            return None
        seen.add(name)
        if name in PLAIN and not eq:
            i += 1
            continue
        if name not in VALUED:
            return None
        if not eq:
            if i + 1 >= len(args):
                return None
            value = args[i + 1]
        i += 1 if eq else 2
        if value.startswith("-"):
            return None
        values[name] = value
    if values["--role"] not in ("main", "worker"):
        return None
    if values["--role"] == "main" and any(values[k] for k in WORKER_ONLY):
        return None
    return "--foreground" in seen, "--single-process" in seen, values


def worker_role_error(connect: str, server_key: str, children: str, roots: str, host: str) -> str | None:
    """Check the worker role's options and put them in this process's environment (``serve --foreground``,
    here or in the daemon started from here, reads them there); the one line to print (exit 78) when wrong."""
    import os

    from actors.bus.host_keys import read_peer_key
    from actors.tree.worker_role import WorkerRole, default_host
    from geode.protocol.errors import ConfigError

    try:
        if not connect or not server_key:
            raise ConfigError("--role worker needs --connect tcp://MAIN:PORT and --server-key")
        worker = WorkerRole.parse(
            host=host or default_host(),
            connect=connect,
            server_key=read_peer_key(server_key),
            children=tuple(x.strip() for x in children.split(",") if x.strip()),
            roots=tuple(x.strip() for x in roots.split(",") if x.strip()),
        )
    except ConfigError as exc:
        return f"geode serve: {exc.message or exc}"
    os.environ.update(worker.env())
    return None


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


def serve_exit(foreground: bool, single_process: bool, values: dict[str, str]) -> NoReturn:
    """:func:`serve` (a worker host's role checked and set first), then exit with its code (as the typer
    command's ``typer.Exit``)."""
    if values["--role"] == "worker":
        v = values
        error = worker_role_error(
            v["--connect"], v["--server-key"], v["--children"], v["--roots"], v["--host"]
        )
        if error is not None:
            print(error, file=sys.stderr, flush=True)
            raise SystemExit(78)
    raise SystemExit(serve(foreground, single_process))
