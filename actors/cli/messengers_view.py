"""`geode messengers` and the messenger part of `geode status`: each platform's poller (state, last good poll,
cursor, messages in / ignored / replies out, last error) and each binding with its current session."""

from __future__ import annotations

from typing import Any

import typer

from actors.cli.child_view import ask_child, show
from actors.cli.messengers_lines import WAITING, binding_lines, poller_lines  # noqa: F401  (their old home)
from geode.home import GeodeHome
from geode.protocol import messengers as messengers_msg


def messengers_detail(home: GeodeHome, timeout_s: float = 2.0) -> dict[str, Any] | None:
    """``messenger.bindings`` of the running tree (bindings and pollers), or None when it does not answer."""
    query, reply = messengers_msg.BindingsQuery(), messengers_msg.BindingsReply
    return ask_child(home, "messengers", messengers_msg.BINDINGS, query, reply, timeout_s)


def messengers(as_json: bool = typer.Option(False, "--json", help="machine-readable object")) -> None:
    """List the messenger bindings with their sessions and each platform's poller (exit 1: not running)."""
    show("messengers", messengers_detail, lambda d: [*binding_lines(d), *poller_lines(d)], as_json)


def register(app: typer.Typer) -> None:
    app.command("messengers")(messengers)
