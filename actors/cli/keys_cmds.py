"""`geode keys init|show`: this host's CURVE key pair for tcp between hosts (``$GEODE_HOME/keys/``)."""

from __future__ import annotations

import typer

from geode.home import GeodeHome

keys_app = typer.Typer(help="this host's CURVE key pair (tcp between hosts)", no_args_is_help=True)


@keys_app.command("init")
def init(force: bool = typer.Option(False, "--force", help="replace an existing key pair")) -> None:
    """Create keys/host.secret (0600) and keys/host.pub; print the public key."""
    from actors.bus import host_keys
    from geode.protocol.errors import ConfigError

    home = GeodeHome.from_env()
    try:
        pub = host_keys.create(home, force=force)
    except ConfigError as exc:
        typer.echo(f"geode keys: {exc.message or exc}", err=True)
        raise typer.Exit(1) from exc
    typer.echo(pub)
    typer.echo(f"key pair written to {home.keys_dir}", err=True)


@keys_app.command("show")
def show() -> None:
    """Print this host's public key (one line): add it to main's \\[bus.curve] authorized_keys."""
    from actors.bus import host_keys
    from geode.protocol.errors import ConfigError

    home = GeodeHome.from_env()
    try:
        pair = host_keys.load(home)
    except ConfigError as exc:
        typer.echo(f"geode keys: {exc.message or exc}", err=True)
        raise typer.Exit(1) from exc
    if pair is None:
        typer.echo(f"geode keys: no key pair in {home.keys_dir}; run geode keys init", err=True)
        raise typer.Exit(1)
    typer.echo(pair[0])


def register(app: typer.Typer) -> None:
    app.add_typer(keys_app, name="keys")
