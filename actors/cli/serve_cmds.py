"""`geode serve`, `geode status`, `geode stop`, `geode restart CHILD`: the daemon's life cycle."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, NoReturn

import typer

from geode.home import GeodeHome

if TYPE_CHECKING:
    from geode.protocol.runtime import TreeStatus


def serve(
    foreground: bool = typer.Option(False, "--foreground", help="run in this process (supervisord, systemd)"),
    single_process: bool = typer.Option(False, "--single-process", help="all actors in one process (inproc)"),
    role: str = typer.Option("main", "--role", help="main (the whole tree) or worker (another host)"),
    connect: str = typer.Option("", "--connect", help="worker: main's \\[bus] listen, tcp://MAIN:PORT"),
    server_key: str = typer.Option("", "--server-key", help="worker: main's public key, z85 or @path"),
    children: str = typer.Option("loop", "--children", help="worker: loop and/or executor (comma-separated)"),
    roots: str = typer.Option("", "--roots", help="worker: absolute workspace roots its executor serves"),
    host: str = typer.Option("", "--host", help="worker: this host's name on main (default: hostname)"),
) -> None:
    """Start the supervisor tree (daemonized unless --foreground; waits until every child is ready)."""
    home = GeodeHome.from_env()
    if role not in ("main", "worker"):
        typer.echo(f"geode serve: --role is main or worker, got {role!r}", err=True)
        raise typer.Exit(2)
    if role == "worker":
        _enter_worker_role(connect, server_key, children, roots, host)
    elif connect or server_key or roots or host:
        typer.echo("geode serve: --connect/--server-key/--roots/--host need --role worker", err=True)
        raise typer.Exit(2)
    if foreground:
        from actors.tree.serve import run_foreground

        raise typer.Exit(run_foreground(home, single_process=single_process))
    from actors.cli.daemon_start import start_daemon_reporting
    from actors.tree.instance_lock import InstanceLock
    from actors.tree.serve import EXIT_ALREADY_RUNNING, already_running_message

    home.ensure()
    lock = InstanceLock(home.lock_file)
    if lock.is_held():
        typer.echo(already_running_message(home, lock.holder_pid()), err=True)
        raise typer.Exit(EXIT_ALREADY_RUNNING)
    rc, message = start_daemon_reporting(home, single_process=single_process)  # a failure: its own lines
    typer.echo(message, err=rc != 0)
    raise typer.Exit(rc)


def _enter_worker_role(connect: str, server_key: str, children: str, roots: str, host: str) -> None:
    """Check the worker role's options (one line and exit 78 when wrong) and put them in this process's
    environment: ``serve --foreground`` (here or the daemon started from here) reads them from there."""
    from actors.cli.serve_fast import worker_role_error

    error = worker_role_error(connect, server_key, children, roots, host)
    if error is not None:
        typer.echo(error, err=True)
        raise typer.Exit(78)


def status(as_json: bool = typer.Option(False, "--json", help="machine-readable object")) -> None:
    """Show every child: pid, incarnation, state, uptime, restarts, RSS and PSS. Exit 1 when not running."""
    from actors.tree.instance_lock import InstanceLock

    home = GeodeHome.from_env()
    if not InstanceLock(home.lock_file).is_held():  # nothing holds the home: said without the bus's imports
        _not_running(home, as_json)
    from actors.tree.client import in_process_tree, tree_status
    from geode.protocol.errors import GeodeError

    if (inside := in_process_tree(home)) is not None:  # running, but no supervisor socket to ask
        _in_process(inside, as_json)
        return
    try:
        st = tree_status(home)
    except GeodeError as exc:
        typer.echo(f"geode: the supervisor does not answer: {exc}", err=True)
        raise typer.Exit(1) from exc
    if st is None:
        _not_running(home, as_json)
    from actors.cli.hosts_view import executor_hosts, hosts_detail, hosts_lines
    from actors.cli.lanes_view import lanes_detail, lanes_lines
    from actors.cli.messengers_view import messengers_detail, poller_lines

    names = {c.name for c in st.children}  # a worker host (--role worker) has no lanes, no messengers
    lanes = lanes_detail(home) if "lanes" in names else None
    talk = messengers_detail(home) if "messengers" in names else None
    hosts = hosts_detail(lanes, executor_hosts(home)) if "lanes" in names else []  # main: worker hosts
    jobs = _schedule(home, "scheduler" in names) if "lanes" in names else []  # none: nothing shown
    hooks = _webhooks(home) if "webhooks" in names else None  # only when the child is configured
    if as_json:
        out = {"running": True, **st.model_dump(), "lanes": lanes, "hosts": hosts}
        out["messengers"] = talk.get("platforms", []) if talk is not None else None
        if jobs:
            out["schedule"] = jobs
        if "webhooks" in names:
            out["webhooks"] = hooks
        typer.echo(json.dumps(out))
        return
    mode = " single-process" if st.single_process else ""
    typer.echo(f"supervisor pid {st.pid} incarnation {st.incarnation} {st.state}{mode}")
    for line in _tree_lines(st):
        typer.echo(line)
    shown = [*lanes_lines(lanes), *hosts_lines(hosts), *poller_lines(talk)] if "lanes" in names else []
    for line in shown:
        typer.echo(line)
    if jobs:
        from actors.cli.schedule_view import status_lines

        for line in status_lines(jobs):
            typer.echo(line)
    if "webhooks" in names:
        from actors.cli.webhooks_view import status_lines as webhook_lines

        for line in webhook_lines(hooks):
            typer.echo(line)


def _not_running(home: GeodeHome, as_json: bool) -> NoReturn:
    if as_json:
        typer.echo(json.dumps({"running": False, "children": []}))
    else:
        typer.echo(f"geode is not running (GEODE_HOME={home.root})")
    raise typer.Exit(1)


def _schedule(home: GeodeHome, ask_scheduler: bool) -> list[dict[str, Any]]:
    """Per scheduled job: next instant, last outcome and lag (the ledger read directly; [] when none)."""
    from actors.cli.schedule_view import status_summaries

    return status_summaries(home, ask_scheduler)


def _webhooks(home: GeodeHome) -> dict[str, Any] | None:
    """The webhooks child's status detail (listen, routes, counters, last error), or None: not answering."""
    from actors.cli.webhooks_view import status_detail

    return status_detail(home)


def _in_process(inside: str, as_json: bool) -> None:
    """`geode status` of a tree inside another command's process (`geode mcp`): it runs, children unlisted."""
    if as_json:
        typer.echo(json.dumps({"running": True, "in_process": inside, "children": []}))
        return
    typer.echo(f"{inside}; its children are threads of that process, with no supervisor to list them")
    typer.echo("`geode sessions`, `geode receipts` and `geode timeline` read its records")


def _tree_lines(st: TreeStatus) -> list[str]:
    """The children's table, then the zygote, the supervisor and the tree's total memory (MiB)."""
    from actors.cli.tree_table import tree_lines  # the light `geode status` prints the same table

    return tree_lines(st.model_dump())


def stop() -> None:
    """Stop the tree gracefully (bounded); leaves no process and no socket behind."""
    from actors.tree.client import is_running, stop_tree

    home = GeodeHome.from_env()
    if not is_running(home):
        typer.echo("geode is not running")
        return
    from actors.cli.supervised import notice_for_home

    notice = notice_for_home(home)  # under supervisord a stop is undone by its respawn: say so
    if notice:
        typer.echo(notice, err=True)
    if not stop_tree(home):
        typer.echo("geode did not stop in time", err=True)
        raise typer.Exit(1)
    typer.echo("geode stopped")


def restart(child: str = typer.Argument(..., help="child name, e.g. store or loop-1")) -> None:
    """Restart one child: graceful stop, then a new incarnation."""
    from actors.tree.client import is_running, restart_child
    from geode.protocol.errors import GeodeError, NotFound

    home = GeodeHome.from_env()
    if not is_running(home):
        typer.echo("geode is not running", err=True)
        raise typer.Exit(1)
    try:
        restart_child(home, child)
    except NotFound as exc:
        typer.echo(f"geode: {exc.message}", err=True)
        raise typer.Exit(2) from exc
    except GeodeError as exc:
        typer.echo(f"geode: {exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(f"restarting {child}")


def reload(
    dry_run: bool = typer.Option(False, "--dry-run", help="print what would change; apply nothing"),
) -> None:
    """Check config.toml and $GEODE_HOME/.env and have every child apply them without a restart command:
    messengers restart themselves, the executor reloads hooks and MCP servers, loop workers use the new
    \\[loop], \\[verify] and providers from their next turn. Prints what it applied and what needs
    `geode serve` again."""
    from actors.cli.reload_cmd import reload_daemon

    raise typer.Exit(reload_daemon(GeodeHome.from_env(), echo=typer.echo, dry_run=dry_run))


def register(app: typer.Typer) -> None:
    app.command()(serve)
    app.command()(status)
    app.command()(stop)
    app.command()(restart)
    app.command()(reload)
