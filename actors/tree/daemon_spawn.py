"""Spawn the detached daemon (``python -m actors.tree.daemon_main``) with nothing but the standard library and
:mod:`geode.home`: `geode serve` spawns it before it imports the bus and pydantic to wait for the tree."""

from __future__ import annotations

import os
import subprocess
import sys

from geode.home import GeodeHome


def serve_out_offset(home: GeodeHome) -> int:
    """The size of ``serve.out`` now: a start's own output is what follows it (every start appends)."""
    try:
        return (home.logs_dir / "serve.out").stat().st_size
    except OSError:
        return 0


def spawn_daemon(home: GeodeHome, *, single_process: bool = False) -> subprocess.Popen[bytes]:
    """Start ``geode serve --foreground``'s entry without the CLI (``actors.tree.daemon_main``) detached, its
    output appended to ``serve.out``; not waited for."""
    home.ensure()
    args = [sys.executable, "-m", "actors.tree.daemon_main"]
    if single_process:
        args.append("--single-process")
    out = open(home.logs_dir / "serve.out", "ab")  # handed to the child
    env = {**os.environ, "GEODE_HOME": str(home.root)}
    try:
        return subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=out, stderr=out, env=env, start_new_session=True
        )
    finally:
        out.close()
