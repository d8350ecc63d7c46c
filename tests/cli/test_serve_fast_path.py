"""`geode serve` with plain options spawns the daemon without building the typer app (issue 34): the modules
imported before ``python -m actors.tree.daemon_main`` is spawned are counted in a fresh interpreter (not
timed), and its refusal says and exits what the typer command says and exits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from actors.tree.instance_lock import InstanceLock
from geode.home import GeodeHome

# Measured as below (GEODE_HOME fresh, no daemon) when the fast path landed: 117 modules in all, 13 ours (the
# daemon is spawned before the bus and pydantic are imported to wait for it). The typer way (GEODE_CLI_HOT=0)
# imported 494 and 139 before the spawn: typer, click, rich, zmq, pydantic and every command module.
# Round 3 of issue 34 (the venv's plain .pth: no editable finder at start; geode.home takes its names from
# geode.home_paths): 99 and 14.
CEILINGS = {("serve",): (99, 14), ("serve", "--single-process"): (99, 14)}

# The command runs until it would spawn the daemon; there it prints sys.modules and ends (nothing is spawned).
_AT_SPAWN = """
import json, os, subprocess, sys
sys.argv = ["geode", *json.loads(sys.argv[1])]

class AtSpawn(subprocess.Popen):
    def __init__(self, args, *a, **k):
        if "actors.tree.daemon_main" in list(args):
            print(json.dumps({"args": list(args)[1:], "modules": sorted(sys.modules)}), file=sys.__stderr__)
            sys.__stderr__.flush()
            os._exit(0)
        super().__init__(args, *a, **k)

subprocess.Popen = AtSpawn
from actors.cli.main import main
main()
"""


def _run(code: str, argv: tuple[str, ...], home: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code, json.dumps(list(argv))],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "GEODE_HOME": str(home), **env},
        cwd=home.parent,
    )


@pytest.mark.parametrize("argv", sorted(CEILINGS))
def test_serve_spawns_the_daemon_before_typer_or_any_command_module(
    argv: tuple[str, ...], tmp_path: Path
) -> None:
    out = _run(_AT_SPAWN, argv, tmp_path / "home")
    last = (out.stderr.strip().splitlines() or [""])[-1]
    assert last.startswith("{"), f"geode {' '.join(argv)} never spawned the daemon:\n{out.stderr}"
    seen = json.loads(last)
    assert seen["args"] == ["-m", "actors.tree.daemon_main", *argv[1:]]
    modules = seen["modules"]
    heavy: tuple[str, ...] = ("typer", "click", "rich", "zmq", "pydantic", "actors.bus")
    heavy += ("actors.cli.serve_cmds", "actors.cli.chat_cmds", "actors.cli.records_cmds")
    assert [m for m in modules if m.startswith(heavy)] == []
    total_ceiling, ours_ceiling = CEILINGS[argv]
    ours = [m for m in modules if m.split(".")[0] in ("geode", "actors")]
    assert len(ours) <= ours_ceiling, f"geode {' '.join(argv)} imports {len(ours)} of our modules: {ours}"
    assert len(modules) <= total_ceiling, f"geode {' '.join(argv)} imports {len(modules)} modules"


_GEODE = (
    "import json, sys; sys.argv = ['geode', *json.loads(sys.argv[1])]; "
    "from actors.cli.main import main; main()"
)


@pytest.mark.parametrize("argv", [("serve",), ("serve", "--single-process")])
def test_serve_refused_while_the_home_is_held_as_the_typer_command_refuses(
    argv: tuple[str, ...], tmp_path: Path
) -> None:
    home = GeodeHome(tmp_path / "home")
    home.ensure()
    lock = InstanceLock(home.lock_file)
    assert lock.acquire()
    try:
        fast = _run(_GEODE, argv, home.root)
        full = _run(_GEODE, argv, home.root, GEODE_CLI_HOT="0")
    finally:
        lock.release()
    assert fast.returncode == full.returncode == 3, fast.stderr + full.stderr
    assert "already running" in fast.stderr and str(home.root) in fast.stderr
    assert (fast.stdout, fast.stderr) == (full.stdout, full.stderr)


def test_unusual_serve_arguments_go_the_typer_way(tmp_path: Path) -> None:
    """``--help``, an unknown option and an unknown role are typer's: help, usage error."""
    home = tmp_path / "home"
    helped = _run(_GEODE, ("serve", "--help"), home)
    assert helped.returncode == 0 and "--single-process" in helped.stdout and "--role" in helped.stdout
    bogus = _run(_GEODE, ("serve", "--bogus"), home)
    assert bogus.returncode == 2 and "No such option" in bogus.stderr
    role = _run(_GEODE, ("serve", "--role", "boss"), home)
    assert role.returncode == 2 and "--role is main or worker" in role.stderr


def _worker_argv(tmp_path: Path, *more: str) -> tuple[str, ...]:
    import zmq

    public, _ = zmq.curve_keypair()
    while public.startswith(b"-"):  # Z85 has '-': a value like an option goes the typer way, 1 key in 85
        public, _ = zmq.curve_keypair()
    return (
        "serve",
        "--role",
        "worker",
        "--connect=tcp://127.0.0.1:9",
        "--server-key",
        public.decode(),
        *more,
    )


def test_a_worker_host_spawns_its_daemon_without_typer_with_its_role_in_the_environment(
    tmp_path: Path,
) -> None:
    """`geode serve --role worker …` (a worker host) goes the plain way too: no typer, click, rich or command
    module before the daemon is spawned, and the role reaches the daemon through the environment as before."""
    argv = _worker_argv(tmp_path, "--children", "loop,executor", "--roots", str(tmp_path), "--host", "w-1")
    env = '{k: v for k, v in os.environ.items() if k.startswith("GEODE_")}'
    code = _AT_SPAWN.replace(
        '"modules": sorted(sys.modules)', f'"modules": sorted(sys.modules), "env": {env}'
    )
    out = _run(code, argv, tmp_path / "home")
    last = (out.stderr.strip().splitlines() or [""])[-1]
    assert last.startswith("{"), f"the worker host never spawned its daemon:\n{out.stderr}"
    seen = json.loads(last)
    heavy = (
        "typer",
        "click",
        "rich",
        "actors.cli.serve_cmds",
        "actors.cli.chat_cmds",
        "actors.cli.records_cmds",
    )
    assert [m for m in seen["modules"] if m.startswith(heavy)] == []
    role = {k.removeprefix("GEODE_"): v for k, v in seen["env"].items() if k != "GEODE_HOME"}
    assert "worker" in role.values() and "w-1" in role.values() and "loop,executor" in role.values(), role
    assert "tcp://127.0.0.1:9" in role.values() and str(tmp_path) in role.values(), role


@pytest.mark.parametrize(
    "argv",
    [
        ("serve", "--role", "worker", "--connect", "tcp://127.0.0.1:9"),  # no --server-key
        ("serve", "--role=worker", "--connect", "tcp://127.0.0.1:9", "--server-key", "not-a-key"),
        ("serve", "--role", "worker", "--server-key", "@/nonexistent/host.pub", "--connect", "tcp://h:1"),
    ],
)
def test_a_worker_hosts_bad_options_are_refused_as_the_typer_command_refuses(
    argv: tuple[str, ...], tmp_path: Path
) -> None:
    fast = _run(_GEODE, argv, tmp_path / "home")
    full = _run(_GEODE, argv, tmp_path / "home", GEODE_CLI_HOT="0")
    assert fast.returncode == full.returncode == 78, fast.stderr + full.stderr
    assert fast.stderr.startswith("geode serve: ") and (fast.stdout, fast.stderr) == (
        full.stdout,
        full.stderr,
    )


def test_worker_options_without_the_worker_role_or_with_a_dash_value_go_the_typer_way(tmp_path: Path) -> None:
    from actors.cli.serve_fast import plain_serve_args

    assert plain_serve_args(["--connect", "tcp://h:1"]) is None  # typer: "need --role worker", exit 2
    assert plain_serve_args(["--role", "worker", "--host", "-x"]) is None  # click may read it otherwise
    assert plain_serve_args(["--role", "worker", "--role", "worker"]) is None
    assert plain_serve_args(["--role"]) is None
    assert plain_serve_args(["--foreground=1"]) is None
    got = plain_serve_args(["--foreground", "--role=worker", "--connect", "tcp://h:1"])
    assert got is not None and got[:2] == (True, False) and got[2]["--connect"] == "tcp://h:1"
    assert got[2]["--children"] == "loop"  # typer's default
    needs = _run(_GEODE, ("serve", "--connect", "tcp://h:1"), tmp_path / "home")
    assert needs.returncode == 2 and "need --role worker" in needs.stderr
