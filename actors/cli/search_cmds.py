"""`geode search QUERY [--json] [--limit N] [--rebuild]`: past sessions and memory files found by words,
through the store child's search index (the operator's scope: every session); ``--rebuild`` builds the index
again from the records first."""

from __future__ import annotations

import os
import time
from typing import Any

import typer

from actors.cli.records_cmds import HOME_OPT, JSON_OPT, _print_json
from geode.home import GeodeHome
from geode.protocol.errors import GeodeError
from geode.protocol.search import MAX_LIMIT, SearchHit
from geode.visible_text import visible

OPERATOR = "operator"  # the CLI is the operator: it sees every scope


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


def _line(h: SearchHit) -> str:
    where = f"memory {h.path}" if h.kind == "memory" else f"{h.session_id} {h.turn_id}"
    snippet = visible(" ".join(h.snippet.split()), one_line=True)
    return f"{_when(h.at):16}  {visible(where, one_line=True)}  {h.scope or '-'}\n    {snippet}"


def search(
    query: str = typer.Argument("", help="words to find (all must match; word* matches a prefix)"),
    as_json: bool = JSON_OPT,
    limit: int = typer.Option(10, "--limit", help=f"at most this many results (1..{MAX_LIMIT})"),
    rebuild: bool = typer.Option(False, "--rebuild", help="build the index again from the records first"),
    home: str | None = HOME_OPT,
) -> None:
    """Search past sessions (your messages and the final answers) and memory files."""
    from actors.bus import Bus
    from actors.tree.client import is_running
    from geode.records.search_client import SearchClient

    if not 1 <= limit <= MAX_LIMIT:
        typer.echo(f"error: --limit must be between 1 and {MAX_LIMIT}, not {limit}", err=True)
        raise typer.Exit(2)
    if not query.strip() and not rebuild:
        typer.echo("error: give words to search for (or --rebuild)", err=True)
        raise typer.Exit(2)
    gh = GeodeHome.from_env(home)
    if not is_running(gh):
        if rebuild:
            typer.echo(
                "error: no daemon runs for this GEODE_HOME: the store child rebuilds the index; start "
                "`geode serve` first",
                err=True,
            )
            raise typer.Exit(1)
        _offline(gh, query, limit, as_json)
        return
    bus = Bus(f"cli-{os.getpid()}", 1, gh).start()
    try:
        client = SearchClient(bus.transport)
        out: dict[str, Any] = {}
        if rebuild:
            done = client.rebuild()
            out["rebuilt"] = done.model_dump(mode="json")
            if not as_json:
                typer.echo(
                    f"index rebuilt from the records: {done.turns} turns, {done.memory_files} memory files "
                    f"in {done.seconds:.2f}s",
                    err=bool(query.strip()),
                )
        if query.strip():
            hits = client.query(query, OPERATOR, limit)
            out["hits"] = [h.model_dump(mode="json") for h in hits]
            if not as_json:
                for h in hits:
                    typer.echo(_line(h))
                if not hits:
                    typer.echo("no matches", err=True)
    except GeodeError as exc:
        hint = (
            " (is `geode serve` running for this GEODE_HOME?)"
            if exc.code.value in ("timeout", "unavailable")
            else ""
        )
        typer.echo(f"error: {exc.message or exc}{hint}", err=True)
        raise typer.Exit(1) from None
    finally:
        bus.stop()
    if as_json:
        _print_json(out)


def _offline(gh: GeodeHome, query: str, limit: int, as_json: bool) -> None:
    """No daemon: the index file read directly, read-only, as the store child last left it."""
    import sqlite3

    from geode.records.search_feed import FILE_NAME
    from geode.records.search_index import SearchIndex
    from geode.records.search_service import hit_message

    index = SearchIndex(gh.records_dir / FILE_NAME)
    try:
        index.open_readonly()
        found = index.query(query, OPERATOR, limit)
    except sqlite3.Error as exc:
        typer.echo(f"error: cannot read the search index ({exc}); `geode serve` builds it", err=True)
        raise typer.Exit(1) from None
    except GeodeError as exc:
        typer.echo(f"error: {exc.message or exc}", err=True)
        raise typer.Exit(2) from None
    finally:
        index.close()
    typer.echo("note: no daemon runs: read from the index file as the store last left it", err=True)
    hits = [hit_message(h) for h in found]
    if as_json:
        _print_json({"hits": [h.model_dump(mode="json") for h in hits]})
        return
    for h in hits:
        typer.echo(_line(h))
    if not hits:
        typer.echo("no matches", err=True)


def register(app: typer.Typer) -> None:
    app.command("search")(search)
