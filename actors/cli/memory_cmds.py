"""`geode memory show|edit [--scope operator|chat:<platform>-<chat>|job:<name>|hook:<route>]`: the agent's
MEMORY.md files for people. ``show`` prints the files a session of the scope is given (the operator's adds a
trusted project's ``.geode/MEMORY.md`` for the current directory); ``edit`` opens the scope's own file in
``$VISUAL``/``$EDITOR``. Read and written directly: no daemon needed."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import typer

EXIT_USAGE = 2
memory_app = typer.Typer(help="The agent's memory (MEMORY.md per scope): show, edit.", no_args_is_help=True)
SCOPE_HELP = "operator (default) | chat:<platform>-<chat> | job:<name> | hook:<route>"


def _cap_and_projects(home_root: Path) -> tuple[int, tuple[str, ...]]:
    from geode.config_schema import GeodeConfig
    from geode.config_source import ConfigSource
    from geode.home import GeodeHome
    from geode.memory.settings import MAX_BYTES
    from geode.protocol.errors import GeodeError

    try:
        cfg = ConfigSource(GeodeHome(home_root), GeodeConfig.from_raw, tree=True).snapshot
    except (GeodeError, OSError) as exc:
        typer.echo(f"note: config not read ({getattr(exc, 'message', '') or exc}): default cap", err=True)
        return MAX_BYTES, ()
    return cfg.memory.max_bytes, tuple(cfg.trust.projects)


def _checked(scope: str) -> str:
    from geode.memory.scopes import ScopeError, parse_scope

    try:
        parse_scope(scope)
    except ScopeError as exc:
        typer.echo(f"geode memory: {exc}", err=True)
        raise typer.Exit(EXIT_USAGE) from None
    if not scope:
        typer.echo("geode memory: give a scope (sessions without one have no memory)", err=True)
        raise typer.Exit(EXIT_USAGE)
    return scope


@memory_app.command("show")
def show(scope: str = typer.Option("operator", "--scope", help=SCOPE_HELP)) -> None:
    """Print the scope's MEMORY.md file(s) as a session of it loads them."""
    from geode.home import GeodeHome
    from geode.memory.files import load
    from geode.memory.prompt_block import trusted_workspace
    from geode.memory.scopes import memory_paths

    home = GeodeHome.from_env()
    scope = _checked(scope)
    cap, projects = _cap_and_projects(home.root)
    ws = Path.cwd()
    trusted = scope == "operator" and trusted_workspace(ws, projects)
    for path in memory_paths(scope, home.root, workspace=ws, trusted=trusted):
        loaded = load(path, cap)
        if loaded is None:
            typer.echo(f"== {path} (absent)")
            continue
        state = f"{loaded.size} of {cap} bytes"
        if loaded.truncated:
            state += ", PAST THE CAP: sessions load only its beginning"
        typer.echo(f"== {path} ({state})")
        typer.echo(loaded.text.rstrip("\n"))


@memory_app.command("edit")
def edit(scope: str = typer.Option("operator", "--scope", help=SCOPE_HELP)) -> None:
    """Open the scope's own MEMORY.md in $VISUAL or $EDITOR (created empty if absent)."""
    from geode.home import GeodeHome
    from geode.memory.scopes import writable_path

    home = GeodeHome.from_env()
    path = writable_path(_checked(scope), home.root)
    assert path is not None  # every named scope has one
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not path.exists():
        path.touch(mode=0o600)
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    try:
        rc = subprocess.call([*shlex.split(editor), str(path)])
    except OSError as exc:
        typer.echo(f"geode memory edit: cannot run {editor!r}: {exc.strerror}", err=True)
        raise typer.Exit(1) from None
    cap, _ = _cap_and_projects(home.root)
    size = path.stat().st_size
    typer.echo(f"{path}: {size} of {cap} bytes")
    if size > cap:
        typer.echo(f"warning: past the cap ([memory] max_bytes = {cap}): sessions load only its beginning")
    if rc:
        raise typer.Exit(rc)


def register(app: typer.Typer) -> None:
    app.add_typer(memory_app, name="memory")
