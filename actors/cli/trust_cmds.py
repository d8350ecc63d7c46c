"""`geode trust [PATH]`, `--list`, `--remove PATH`: which project directories may start their MCP servers."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from geode.home import GeodeHome
from geode.protocol.errors import ConfigError, GeodeError

EXIT_USAGE, EXIT_RESTART_FAILED = 2, 1


def trust(
    path: str | None = typer.Argument(None, help="project directory (default: the current directory)"),
    show: bool = typer.Option(False, "--list", help="list the trusted project directories"),
    remove: str | None = typer.Option(None, "--remove", metavar="PATH", help="stop trusting PATH"),
) -> None:
    """Trust a project directory: its .geode/config.toml and .mcp.json MCP servers are loaded (they run
    commands on this machine). Recorded in $GEODE_HOME/config.toml (trust.projects); a running daemon
    restarts its executor so the change takes effect."""
    home = GeodeHome.from_env()
    if sum((show, remove is not None, path is not None)) > 1:
        typer.echo("geode trust: give one of PATH, --list or --remove PATH", err=True)
        raise typer.Exit(EXIT_USAGE)
    try:
        if show:
            _list(home)
            return
        if remove is not None:
            changed = _remove(home, remove)
        else:
            changed = _add(home, path or os.getcwd())
    except ConfigError as exc:
        typer.echo(f"geode trust: {exc.message}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    if changed:
        raise typer.Exit(_restart_executor(home))


def _list(home: GeodeHome) -> None:
    from geode.tools.mcp.trust import read_trust_list

    projects = read_trust_list(home.config_file)
    if not projects:
        typer.echo(f"no trusted projects (in {home.config_file})")
    for entry in projects:
        typer.echo(entry if Path(entry).is_dir() else f"{entry} (missing)")


def _add(home: GeodeHome, directory: str) -> bool:
    from geode.tools.mcp.trust import trust_add

    where, changed = trust_add(home.config_file, directory)
    typer.echo(f"{'trusted' if changed else 'already trusted'}: {where}")
    for line in project_server_lines(where, home):
        typer.echo(f"  {line}")
    return changed


def _remove(home: GeodeHome, directory: str) -> bool:
    from geode.tools.mcp.trust import trust_remove

    where, changed = trust_remove(home.config_file, directory)
    typer.echo(f"no longer trusted: {where}" if changed else f"not trusted (nothing to change): {where}")
    return changed


def project_server_lines(project: Path, home: GeodeHome) -> list[str]:
    """What trusting ``project`` loads: one line per project file with its servers, or a line saying none."""
    from geode.tools.mcp.config import iter_mcp_entries
    from geode.tools.mcp.trust import project_config_files, read_project_file

    lines: list[str] = []
    for file in project_config_files(project, home_root=home.root):
        try:
            entries = iter_mcp_entries(read_project_file(file), origin=str(project))
        except ConfigError as exc:
            lines.append(f"{exc.message} (its servers will be ignored)")
            continue
        ok = [name for name, item in entries if not isinstance(item, ConfigError)]
        bad = [item.message for _name, item in entries if isinstance(item, ConfigError)]
        if ok:
            lines.append(f"{file.relative_to(project)}: MCP servers {', '.join(ok)}")
        lines.extend(f"{m} (ignored)" for m in bad)
    return lines or ["no .geode/config.toml or .mcp.json with MCP servers here (yet)"]


def _restart_executor(home: GeodeHome) -> int:
    """A running daemon restarts its executor child, which re-reads config.toml and the trusted projects."""
    from actors.tree.client import is_running, restart_child

    if not is_running(home):
        typer.echo("the daemon is not running: the change applies when `geode serve` starts")
        return 0
    try:
        restart_child(home, "executor")
    except GeodeError as exc:
        typer.echo(
            f"geode trust: the daemon did not restart its executor ({exc}); run `geode restart executor`",
            err=True,
        )
        return EXIT_RESTART_FAILED
    typer.echo("restarting the daemon's executor so its MCP servers follow the change")
    return 0


def trust_notes(home: GeodeHome, config: dict[str, Any], cwd: str | None = None) -> list[str]:
    """The untrusted-project line for ``cwd`` and the catalogue's notes (bad trusted entries, clashes)."""
    from geode.tools.mcp.catalogue import load_mcp_catalogue
    from geode.tools.mcp.trust import untrusted_project_note

    out: list[str] = []
    try:
        note = untrusted_project_note(cwd or os.getcwd(), config, home_root=home.root)
        out.extend([note] if note else [])
        out.extend(load_mcp_catalogue(config, home_root=home.root).notes)
    except (GeodeError, OSError):  # a bad global config is reported by the config check itself
        pass
    return out


def note_untrusted_project(home: GeodeHome) -> None:
    """Once at the start of ``geode ask`` / ``geode chat``: the untrusted-project line on stderr, if any."""
    from geode.tools.mcp.trust import untrusted_project_note

    try:
        note = untrusted_project_note(os.getcwd(), home.load_config(), home_root=home.root)
    except (GeodeError, OSError):
        return
    if note:
        typer.echo(f"geode: {note}", err=True)


def register(app: typer.Typer) -> None:
    app.command()(trust)
