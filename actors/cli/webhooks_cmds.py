"""`geode webhooks [--json]` and `geode webhooks replay DELIVERY [--route R]`: the webhook routes and their
counters from the webhooks child (``webhooks.routes``), or with no daemon (or the child off) the routes of
config.toml with the intake counts read from the records directly; a replay asks the child to re-run a stored
delivery under a new delivery id (``webhooks.replay``) and prints its turn id and status url."""

from __future__ import annotations

import json
from typing import Any, NoReturn

import typer

EXIT_USAGE, EXIT_DOWN = 2, 1
JSON_OPT = typer.Option(False, "--json", help="machine-readable object")

group = typer.Typer(
    help="Webhook routes and their counters; `replay DELIVERY` re-runs a stored delivery.",
    invoke_without_command=True,
    no_args_is_help=False,
)


def _fail(command: str, message: str, code: int) -> NoReturn:
    typer.echo(f"geode {command}: {' '.join(str(message).split())}", err=True)
    raise typer.Exit(code)


@group.callback()
def routes(ctx: typer.Context, as_json: bool = JSON_OPT) -> None:
    """Every route: path, authentication, delivery chat and counters (accepted, replayed, rejected by reason,
    rate-limited, queued, open). With no daemon: the configured routes and the intakes the records hold."""
    if ctx.invoked_subcommand is not None:
        return
    from actors.cli.webhooks_view import gather, route_lines
    from geode.home import GeodeHome
    from geode.protocol.errors import GeodeError

    try:
        detail = gather(GeodeHome.from_env())
    except GeodeError as exc:  # unreadable records, a broken config: one line
        _fail("webhooks", exc.message or str(exc), EXIT_DOWN)
    if as_json:
        typer.echo(json.dumps(detail, default=str))
        return
    for line in route_lines(detail):
        typer.echo(line)


@group.command("replay")
def replay(
    delivery: str = typer.Argument(..., metavar="DELIVERY", help="a stored delivery id"),
    route: str = typer.Option("", "--route", metavar="R", help="its route (when two routes share the id)"),
    as_json: bool = JSON_OPT,
) -> None:
    """Re-run a stored delivery under a new delivery id (``<id>.replay-<n>``): prints the new turn id and
    its status url. Needs the daemon with the webhooks child."""
    from geode.protocol import webhooks as wh

    if not delivery.strip() or len(delivery) > 256:
        _fail("webhooks replay", f"{delivery[:80]!r} is not a delivery id", EXIT_USAGE)
    reply = wh.ReplayReply.model_validate(_ask_replay(wh.Replay(delivery_id=delivery, route=route)))
    if as_json:
        typer.echo(json.dumps(reply.model_dump(mode="json")))
        return
    typer.echo(f"replayed {reply.route}/{delivery} as delivery {reply.delivery_id}: turn {reply.turn_id}")
    typer.echo(f"status {_on_listener(reply.status_url)}")


def _on_listener(path: str) -> str:
    """The status url on the configured listener (``http://<listen><path>``); the path alone when the
    config does not say (a reverse proxy serves it under its own host)."""
    from actors.cli.webhooks_view import listen_of
    from geode.home import GeodeHome

    listen = listen_of(GeodeHome.from_env())
    return f"http://{listen}{path}" if listen and path.startswith("/") else path


def _ask_replay(body: Any) -> dict[str, Any]:
    """The child's reply; exit 1 when the daemon or the child is down, exit 2 when it refuses (no such
    delivery, an ambiguous one, a full queue)."""
    from actors.tree.client import client_bus, is_running
    from geode.home import GeodeHome
    from geode.protocol import webhooks as wh
    from geode.protocol.errors import GeodeError

    home = GeodeHome.from_env()
    if not is_running(home):
        _fail(
            "webhooks replay",
            f"the daemon is not running (GEODE_HOME={home.root}): start it with `geode serve`",
            1,
        )
    try:
        with client_bus(home) as bus:
            return dict(bus.transport.call("webhooks", wh.REPLAY, body, timeout_s=15.0))
    except GeodeError as exc:
        if exc.code.value in ("bad_request", "not_found", "conflict"):
            _fail("webhooks replay", exc.message or str(exc), EXIT_USAGE)
        hint = " (is `[webhooks] listen` set?)"
        _fail("webhooks replay", f"the webhooks child does not answer{hint}: {exc}", EXIT_DOWN)


def register(app: typer.Typer) -> None:
    app.add_typer(group, name="webhooks")
