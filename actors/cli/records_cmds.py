"""`geode sessions`, `timeline`, `receipts`: the records read directly (read-only, no bus: with the daemon
down or beside it); `geode reconcile`, `geode store-stats`: the store child over the bus."""

from __future__ import annotations

import getpass
import json
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import typer
from pydantic import ValidationError

from geode.home import GeodeHome
from geode.protocol.errors import GeodeError, NotFound
from geode.protocol.store import ListReceipts, ListSessions
from geode.records.models import TimelineRow
from geode.records.reader import RecordReader
from geode.records.store_client import StoreClient
from geode.visible_text import visible, visible_json

HOME_OPT = typer.Option(
    None, "--home", help="GEODE_HOME of the running tree (default: $GEODE_HOME or ~/.geode)"
)
JSON_OPT = typer.Option(False, "--json", help="print JSON")


def _most(model: type[ListSessions] | type[ListReceipts]) -> int:
    """The largest ``limit`` one store request accepts (the protocol model's bound)."""
    return next(int(m.le) for m in model.model_fields["limit"].metadata if getattr(m, "le", None))


MAX_SESSIONS, MAX_RECEIPTS = _most(ListSessions), _most(ListReceipts)


@contextmanager
def _client(home: str | None, timeout_s: float = 5.0) -> Iterator[StoreClient]:
    from actors.bus import Bus

    gh = GeodeHome.from_env(home)
    bus = Bus(f"cli-{os.getpid()}", 1, gh).start()
    try:
        yield StoreClient(bus.transport, timeout_s=timeout_s, attempts=2)
    finally:
        bus.stop()


def _run(home: str | None, fn: Callable[[StoreClient], Any]) -> Any:
    try:
        with _client(home) as client:
            return fn(client)
    except ValidationError as exc:  # a bad argument: one line, exit 2 (never a pydantic traceback)
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()))
        typer.echo(f"error: invalid {where or 'argument'}: {first.get('msg', exc)}", err=True)
        raise typer.Exit(2) from None
    except GeodeError as exc:
        hint = (
            " (is `geode serve` running for this GEODE_HOME?)"
            if exc.code.value in ("timeout", "unavailable")
            else ""
        )
        typer.echo(f"error: {exc}{hint}", err=True)
        raise typer.Exit(1) from None


def _read(home: str | None, fn: Callable[[RecordReader], Any], empty: Any) -> Any:
    """``fn`` over a read-only handle on the home's records (no daemon needed, no bus connection). A home
    where nothing was recorded yet reads as ``empty`` (said on stderr); unreadable records: a line, exit 1."""
    gh = GeodeHome.from_env(home)
    try:
        with RecordReader.for_home(gh) as reader:
            return fn(reader)
    except NotFound as exc:
        typer.echo(f"note: {exc.message or exc}", err=True)
        return empty
    except GeodeError as exc:
        typer.echo(f"error: {exc.message or exc}", err=True)
        raise typer.Exit(1) from None


def _ts(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


def _print_json(obj: Any) -> None:
    sys.stdout.write(visible_json(json.dumps(obj, ensure_ascii=False, indent=2, default=str)) + "\n")


def _check_limit(limit: int, most: int) -> None:
    if not 1 <= limit <= most:
        typer.echo(f"error: --limit must be between 1 and {most}, not {limit}", err=True)
        raise typer.Exit(2)


def _more(shown: int, more: bool, as_json: bool) -> None:
    """The marker line of a cut listing (asked with one more than --limit); on stderr with --json."""
    if more:
        typer.echo(f"showing {shown} of more than {shown}; --limit to see more", err=as_json)


def sessions(
    home: str | None = HOME_OPT,
    as_json: bool = JSON_OPT,
    limit: int = typer.Option(200, "--limit", help=f"at most this many (1..{MAX_SESSIONS})"),
) -> None:
    """Sessions in the record store, most recently updated first."""
    from geode.sessions.transcript import first_prompt

    _check_limit(limit, MAX_SESSIONS)
    rows = _read(home, lambda r: r.sessions(limit=limit + 1), [])
    more = len(rows) > limit
    rows = rows[:limit]
    root = GeodeHome.from_env(home).root
    prompts = {r.session_id: first_prompt(root, r.session_id) for r in rows}
    if as_json:
        _print_json([r.model_dump(mode="json") | {"first_prompt": prompts[r.session_id]} for r in rows])
        _more(len(rows), more, as_json)
        return
    head = f"{'SESSION':36} {'STATUS':10} {'SEQ':>5} {'MSGS':>5} {'UNRESOLVED':>10}  {'UPDATED':19}"
    typer.echo(f"{head}  PROMPT")
    for r in rows:
        prompt = visible(" ".join(prompts[r.session_id].split()), one_line=True)
        typer.echo(
            f"{r.session_id:36} {r.status.value:10} {r.seq:>5} {r.message_count:>5} "
            f"{r.unresolved_receipts:>10}  {_ts(r.updated_at):19}  {prompt[:60] or '-'}"
        )
    _more(len(rows), more, as_json)


def timeline(
    session: str = typer.Argument(..., help="session id"),
    home: str | None = HOME_OPT,
    as_json: bool = JSON_OPT,
    jsonl: bool = typer.Option(False, "--jsonl", help="export as JSON lines"),
) -> None:
    """A session's timeline (observation rows; corrupt rows are flagged)."""
    rows = _read(home, lambda r: r.timeline(session), [])
    if as_json:
        _print_json([r.model_dump(mode="json") for r in rows])
        return
    if jsonl:
        for r in rows:
            sys.stdout.write(visible_json(json.dumps(r.model_dump(mode="json"), ensure_ascii=False)) + "\n")
        return
    for r in rows:
        typer.echo(_timeline_line(r))


def _timeline_line(r: TimelineRow) -> str:
    """One text row: seq, time, kind, then the tool's name (a tool row) before its payload, which is cut."""
    flag = " CORRUPT" if r.corrupt else ""
    payload = dict(r.event.payload)
    tool = payload.pop("tool_name", None)
    name = f"{visible(tool, one_line=True)} " if isinstance(tool, str) else ""
    text = visible_json(json.dumps(payload if name else r.event.payload, ensure_ascii=False))
    return f"{r.seq:>5} {_ts(r.event.ts)} {r.event.kind:24}{flag} {name}{text[:120]}"


def receipts(
    uncertain: bool = typer.Option(False, "--uncertain", help="only receipts waiting for reconciliation"),
    session: str | None = typer.Option(None, "--session", help="only this session"),
    home: str | None = HOME_OPT,
    as_json: bool = JSON_OPT,
    limit: int = typer.Option(200, "--limit", help=f"at most this many, newest first (1..{MAX_RECEIPTS})"),
) -> None:
    """Effect receipts, newest first (a line says so when there are more than --limit)."""
    _check_limit(limit, MAX_RECEIPTS)
    ask = {"session_id": session, "uncertain_only": uncertain, "limit": limit + 1}
    rows = _read(home, lambda r: r.receipts(**ask), [])
    more = len(rows) > limit
    rows = rows[:limit]
    if as_json:
        _print_json([r.model_dump(mode="json") for r in rows])
        _more(len(rows), more, as_json)
        return
    typer.echo(f"{'OPERATION':40} {'STATE':11} {'TOOL':16} {'OWNER':14} SESSION / NOTE")
    for r in rows:
        note = visible(r.uncertain_reason or r.outcome or "", one_line=True)
        typer.echo(
            f"{r.operation_id:40} {r.state.value:11} {visible(r.identity.tool_name, one_line=True):16} "
            f"{r.owner:14} {visible(r.identity.session_id, one_line=True)} {note}"
        )
    _more(len(rows), more, as_json)


def reconcile(
    op_id: str = typer.Argument(..., help="operation id"),
    outcome: str = typer.Option(..., "--outcome", help="applied | not-applied"),
    note: str = typer.Option("", "--note", help="why (kept with the receipt)"),
    home: str | None = HOME_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Record an operator's verdict on an uncertain effect."""
    if outcome not in ("applied", "not-applied", "not_applied"):
        typer.echo("error: --outcome must be applied or not-applied", err=True)
        raise typer.Exit(2)
    by = f"cli:{getpass.getuser()}"
    r = _run(home, lambda c: c.reconcile(op_id, outcome=outcome, by=by, note=note))
    if as_json:
        _print_json(r.model_dump(mode="json"))
        return
    typer.echo(f"{r.operation_id}: reconciled as {r.outcome} by {r.reconciled_by}")


def store_stats(home: str | None = HOME_OPT) -> None:
    """Record store counters (map size, entries, group-commit batches, evidence failures) as JSON."""
    _print_json(_run(home, lambda c: c.stats()))


def register(app: typer.Typer) -> None:
    app.command("sessions")(sessions)
    app.command("timeline")(timeline)
    app.command("receipts")(receipts)
    app.command("reconcile")(reconcile)
    app.command("store-stats")(store_stats)
