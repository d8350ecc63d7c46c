"""`geode mcp-servers [list] | add | remove`: the MCP servers of the global config.toml, edited with its
comments kept; a running daemon restarts its executor so the change applies at once."""

from __future__ import annotations

import typer

from actors.cli.mcp_servers_view import mcp_servers
from actors.cli.trust_cmds import EXIT_USAGE, restart_executor
from geode.home import GeodeHome
from geode.protocol.errors import ConfigError

group = typer.Typer(
    help="MCP servers: list what the executor runs (the default), add or remove servers in config.toml.",
    no_args_is_help=False,
)


@group.callback(invoke_without_command=True)
def default(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="machine-readable object")
) -> None:
    """List the MCP servers the executor runs (as `geode mcp-servers list`); add / remove edit config.toml."""
    if ctx.invoked_subcommand is None:
        mcp_servers(as_json)


def add(
    name: str = typer.Argument(..., metavar="NAME", help="server name: letters, digits, _ and -, at most 32"),
    command: list[str] = typer.Argument(None, help="after --: the command and its arguments", metavar="CMD"),
    env: list[str] = typer.Option([], "--env", "-e", metavar="K=V", help="environment variable (repeat)"),
    read_only: list[str] = typer.Option([], "--read-only", metavar="TOOL", help="a read-only tool (repeat)"),
    resource_key: list[str] = typer.Option(
        [], "--resource-key", metavar="KEY", help="lock key: the server's other tools may run (repeat)"
    ),
    cwd: str = typer.Option(None, "--cwd", help="directory the server starts in"),
    json_entry: str = typer.Option(None, "--json", metavar="ENTRY", help="one mcpServers entry as JSON"),
    force: bool = typer.Option(False, "--force", help="replace a server of the same name"),
) -> None:
    r"""Add an MCP server to $GEODE_HOME/config.toml (comments kept; a running daemon starts it now).

    A stdio command after `--` (geode mcp-servers add fs -- npx -y @modelcontextprotocol/server-filesystem
    /srv) or a whole mcpServers entry (--json '{"type": "http", "url": "http://127.0.0.1:8931/mcp"}'), written
    as \[mcp.servers.NAME]. A running daemon restarts its executor so the server starts at once.
    """
    from geode.tools.mcp.config_edit import add_server, parse_env, parse_json_entry, stdio_entry

    home = GeodeHome.from_env()
    options = bool(env or read_only or resource_key or cwd)
    try:
        if json_entry is not None:
            if command or options:
                raise ConfigError("--json is the whole entry: give no command and no --env/--read-only/--cwd")
            entry = parse_json_entry(json_entry)
        else:
            entry = stdio_entry(
                list(command or []),
                env=parse_env(env),
                cwd=cwd,
                read_only_tools=read_only,
                resource_keys=resource_key,
            )
        replaced = add_server(home.config_file, name, entry, force=force)
    except ConfigError as exc:
        typer.echo(f"geode mcp-servers add: {exc.message}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    typer.echo(f"{'replaced' if replaced else 'added'} MCP server {name} in {home.config_file}")
    raise typer.Exit(restart_executor(home, "geode mcp-servers"))


def remove(name: str = typer.Argument(..., metavar="NAME", help="the server's name")) -> None:
    r"""Remove an MCP server from $GEODE_HOME/config.toml (comments kept; a running daemon stops it now).

    Deletes its \[mcp.servers.NAME] or \[mcpServers.NAME] tables and their sub-tables.
    """
    from geode.tools.mcp.config_edit import remove_server

    home = GeodeHome.from_env()
    try:
        remove_server(home.config_file, name)
    except ConfigError as exc:
        typer.echo(f"geode mcp-servers remove: {exc.message}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    typer.echo(f"removed MCP server {name} from {home.config_file}")
    raise typer.Exit(restart_executor(home, "geode mcp-servers"))


group.command("list")(mcp_servers)
group.command("add")(add)
group.command("remove")(remove)


def register(app: typer.Typer) -> None:
    app.add_typer(group, name="mcp-servers")
