"""The CLI views that ask one child of the running tree (`geode messengers`, `geode mcp-servers`): one
request over a client bus, exit 1 when the tree or that child does not answer, JSON or text lines."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import typer
from pydantic import BaseModel

from geode.home import GeodeHome
from geode.protocol.errors import GeodeError


def ask_child(
    home: GeodeHome, child: str, type_: str, body: BaseModel, reply: type[BaseModel], timeout_s: float
) -> dict[str, Any] | None:
    """``child``'s answer to one request, as JSON-able data, or None when it does not answer."""
    from actors.tree.client import client_bus

    try:
        with client_bus(home) as bus:
            raw = bus.transport.call(child, type_, body, timeout_s=timeout_s)
    except GeodeError:
        return None
    return reply.model_validate(raw).model_dump(mode="json")


def show(
    child: str,
    detail_of: Callable[[GeodeHome], dict[str, Any] | None],
    lines_of: Callable[[dict[str, Any]], list[str]],
    as_json: bool,
) -> None:
    """Print ``detail_of(home)`` as JSON or as ``lines_of`` it; exit 1 when the tree or ``child`` is down."""
    from actors.tree.client import is_running

    home = GeodeHome.from_env()
    if not is_running(home):
        typer.echo(f"geode is not running (GEODE_HOME={home.root})", err=True)
        raise typer.Exit(1)
    detail = detail_of(home)
    if detail is None:
        typer.echo(f"geode: the {child} child does not answer", err=True)
        raise typer.Exit(1)
    if as_json:
        typer.echo(json.dumps(detail))
        return
    for line in lines_of(detail):
        typer.echo(line)
