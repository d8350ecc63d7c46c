"""`geode trust [PATH]`, `--list`, `--remove PATH`: which project directories may start their MCP servers
(bound to the directory as it is, approving the servers it defines; run again to approve new ones)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from actors.cli.project_note import note_untrusted_project  # noqa: F401  (its old home)
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError, GeodeError

if TYPE_CHECKING:
    from geode.config_schema import GeodeConfig

EXIT_USAGE, EXIT_RESTART_FAILED = 2, 1


def trust(
    path: str | None = typer.Argument(None, help="project directory (default: the current directory)"),
    show: bool = typer.Option(False, "--list", help="list the trusted project directories and their state"),
    remove: str | None = typer.Option(None, "--remove", metavar="PATH", help="stop trusting PATH"),
) -> None:
    """Trust a project directory: its .geode/config.toml and .mcp.json MCP servers are loaded (they run
    commands on this machine). Recorded in $GEODE_HOME/config.toml (trust.projects) and bound to that very
    directory (device, inode, owner) in $GEODE_HOME/trust.json with the servers it defines now: a server
    added or changed later waits for approval (`geode trust PATH` again approves it). A running daemon
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
        raise typer.Exit(restart_executor(home))


def _list(home: GeodeHome) -> None:
    from geode.tools.mcp.trust_bind import trust_states

    states = trust_states(home.config_file, home.root)
    if not states:
        typer.echo(f"no trusted projects (in {home.config_file})")
    for entry, state in states:
        typer.echo(f"{entry}: {state}")


def _add(home: GeodeHome, directory: str) -> bool:
    from geode.tools.mcp.trust_bind import trust_project

    report = trust_project(home.config_file, home.root, directory)
    where = report.path
    typer.echo(f"{'trusted' if report.added else 'already trusted'}: {where}")
    if report.rebound:
        typer.echo(f"  the directory changed since it was trusted ({report.rebound}): trusted as it is now")
    for line in project_server_lines(where, home):
        typer.echo(f"  {line}")
    for name, why in report.approved:
        what = "new" if why == "new" else "changed what it runs"
        typer.echo(f"  approved MCP server {name} ({what})")
    for name in report.withdrawn:
        typer.echo(f"  MCP server {name} is no longer defined: its approval is withdrawn")
    return report.changed


def _remove(home: GeodeHome, directory: str) -> bool:
    from geode.tools.mcp.trust_bind import untrust_project

    where, changed = untrust_project(home.config_file, home.root, directory)
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


def restart_executor(home: GeodeHome, command: str = "geode trust") -> int:
    """A running daemon restarts its executor child, which re-reads config.toml and the trusted projects
    (``command`` names the CLI command in the failure line)."""
    from actors.tree.client import is_running, restart_child

    if not is_running(home):
        typer.echo("the daemon is not running: the change applies when `geode serve` starts")
        return 0
    from actors.tree.config_sections import check_home_config
    from geode.config_file import remember_good

    report = check_home_config(home)
    if report.ok:  # children read the tree's checked copy (docs/runtime.md): the restarted one reads this
        remember_good(home, report.source)
    try:
        restart_child(home, "executor")
    except GeodeError as exc:
        typer.echo(
            f"{command}: the daemon did not restart its executor ({exc}); run `geode restart executor`",
            err=True,
        )
        return EXIT_RESTART_FAILED
    typer.echo("restarting the daemon's executor so its MCP servers follow the change")
    return 0


def trust_notes(home: GeodeHome, config: GeodeConfig, cwd: str | None = None) -> list[str]:
    """The untrusted-project line for ``cwd`` and the catalogue's notes (bad trusted entries, clashes)."""
    from geode.tools.mcp.catalogue import load_mcp_catalogue
    from geode.tools.mcp.trust import untrusted_project_note

    out: list[str] = []
    try:
        note = untrusted_project_note(cwd or os.getcwd(), config.trust.projects, home_root=home.root)
        out.extend([note] if note else [])
        out.extend(load_mcp_catalogue(config, home_root=home.root, dotenv=home.load_dotenv()).notes)
    except (GeodeError, OSError):  # a bad global config is reported by the config check itself
        pass
    return out


def register(app: typer.Typer) -> None:
    app.command()(trust)
