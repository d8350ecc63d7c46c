"""`geode schedule add|list|show|rm|pause|resume|run-now|runs`: operator-defined jobs, sent to the scheduler
child (``schedule.*``); with no daemon, `list`, `show` and `runs` read the occurrence ledger directly and the
others say the daemon is down (exit 1). Bad input is one line and exit 2, and nothing is stored."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, NoReturn

import typer

EXIT_USAGE, EXIT_DOWN = 2, 1
JSON_OPT = typer.Option(False, "--json", help="machine-readable object")

group = typer.Typer(
    help="Scheduled jobs: add, list, show, rm, pause, resume, run-now, runs.", no_args_is_help=True
)


def _fail(command: str, message: str, code: int) -> NoReturn:
    typer.echo(f"geode schedule {command}: {' '.join(str(message).split())}", err=True)
    raise typer.Exit(code)


def _echo_json(obj: Any) -> None:
    typer.echo(json.dumps(obj, default=str))


def _ask(command: str, type_: str, body: Any) -> dict[str, Any]:
    """The scheduler's reply; one line and exit 1 when the daemon is down or the scheduler does not answer,
    exit 2 when it refuses the request (bad input, no such job)."""
    from actors.tree.client import client_bus, is_running
    from geode.home import GeodeHome
    from geode.protocol.errors import GeodeError

    home = GeodeHome.from_env()
    if not is_running(home):
        _fail(command, f"the daemon is not running (GEODE_HOME={home.root}): start it with `geode serve`", 1)
    try:
        with client_bus(home) as bus:
            return dict(bus.transport.call("scheduler", type_, body, timeout_s=15.0))
    except GeodeError as exc:
        if exc.code.value in ("bad_request", "not_found", "conflict"):
            _fail(command, exc.message or str(exc), EXIT_USAGE)
        _fail(command, f"the scheduler does not answer ({exc})", EXIT_DOWN)


def _job_name(command: str, name: str) -> str:
    from geode.schedule.occurrences import JOB_NAME

    if not re.fullmatch(JOB_NAME, name):
        _fail(
            command, f"{name!r} is not a job name: letters, digits, _ . - (a letter or digit first), <= 64", 2
        )
    return name


def add(
    name: str = typer.Argument(..., metavar="NAME", help="letters, digits, _ . - ; at most 64"),
    cron: str = typer.Option(None, "--cron", metavar="EXPR", help="standard 5-field cron, in --tz"),
    every: str = typer.Option(None, "--every", metavar="DUR", help="an interval: 90s, 5m, 1h30m, 1d"),
    at: str = typer.Option(None, "--at", metavar="TIME", help="one instant, ISO 8601 (no offset: in --tz)"),
    tz: str = typer.Option("UTC", "--tz", metavar="ZONE", help="IANA time zone, e.g. Europe/Berlin"),
    prompt: str = typer.Option(..., "--prompt", metavar="TEXT", help="what the job asks the model"),
    model: str = typer.Option(None, "--model", help="default: the configured model"),
    budget: float = typer.Option(None, "--budget", metavar="S", help="time budget in seconds (300)"),
    deliver: str = typer.Option(
        None, "--deliver", metavar="PLATFORM:CHAT", help="a bound chat for the reply"
    ),
    session: str = typer.Option(None, "--session", metavar="new|named", help="a new session per run (new)"),
    session_name: str = typer.Option(None, "--session-name", metavar="NAME", help="the named session"),
    overlap: str = typer.Option(None, "--overlap", metavar="skip|queue_one|allow", help="default skip"),
    catch_up: str = typer.Option(None, "--catch-up", metavar="skip|once|all", help="default once"),
    catch_up_max: int = typer.Option(None, "--catch-up-max", metavar="N", help="for all: at most N (10)"),
    jitter: int = typer.Option(None, "--jitter", metavar="S", help="a delay in [0, S) per instant"),
    allow_tool: list[str] = typer.Option(
        [], "--allow-tool", metavar="TOOL", help="a tool it may use (repeat)"
    ),
    workspace: str = typer.Option(None, "--workspace", metavar="DIR", help="default workspaces/job-NAME"),
    paused: bool = typer.Option(False, "--paused", help="store it paused"),
    replace: bool = typer.Option(False, "--replace", help="redefine a job of the same name"),
    as_json: bool = JSON_OPT,
) -> None:
    """Add an operator-defined job (checked here, then by the scheduler; nothing is stored on bad input)."""
    from geode.protocol import schedule as m

    given = {
        "cron": cron,
        "every": every,
        "at": at,
        "model": model,
        "budget_s": budget,
        "deliver": deliver,
        "session": session or ("named" if session_name else None),
        "session_name": session_name,
        "overlap": overlap,
        "catch_up": catch_up,
        "catch_up_max": catch_up_max,
        "jitter_s": jitter,
        "allowed_tools": list(allow_tool) or None,
        "workspace": _absolute(workspace),
    }
    job = {"name": name, "tz": tz, "prompt": prompt, **{k: v for k, v in given.items() if v is not None}}
    if paused:
        job["paused"] = True
    _check_locally(job)
    reply = m.AddReply.model_validate(
        _ask("add", m.ADD, m.AddJob(job=job, origin="operator", replace=replace))
    )
    if as_json:
        _echo_json(reply.job.model_dump(mode="json"))
        return
    from actors.cli.schedule_view import utc_shown, when_text

    nxt = utc_shown(reply.job.next_instant) or "none"
    typer.echo(f"added job {name}: {when_text(reply.job)} · next {nxt}")


def _absolute(workspace: str | None) -> str | None:
    from pathlib import Path

    if not workspace:
        return None
    path = Path(workspace).expanduser()  # a relative one is refused as given (by parse_job), never resolved
    return str(path.resolve()) if path.is_absolute() else workspace


def _check_locally(job: dict[str, Any]) -> None:
    """What this process can check: the definition (cron, zone, interval, policies), an ``at`` ahead of
    now, and a delivery chat among the config's bindings (when the config reads); one line, exit 2."""
    from datetime import UTC, datetime

    from geode.schedule.jobs import JobError, check_new, parse_job

    try:
        spec = parse_job(job)
        check_new(spec, datetime.now(UTC), bound_chats=_bound_chats())
    except JobError as exc:
        _fail("add", exc.message or str(exc), EXIT_USAGE)


def _bound_chats() -> set[str] | None:
    """The daemon's bound chats (``platform:channel``) from the tree's config, or None when it cannot be read
    here (the scheduler checks again)."""
    from geode.config_schema import GeodeConfig
    from geode.config_source import ConfigSource
    from geode.home import GeodeHome
    from geode.protocol.errors import GeodeError

    try:
        cfg = ConfigSource(GeodeHome.from_env(), GeodeConfig.from_raw, tree=True).snapshot
    except (GeodeError, OSError):
        return None
    return {f"{b.platform}:{b.channel_id}" for b in cfg.messengers.bindings}


def list_jobs(as_json: bool = JSON_OPT) -> None:
    """Every job: next instant, last outcome and lag (the ledger read directly when the daemon is down)."""
    from actors.cli.schedule_view import Ledger, ask_jobs, job_lines, job_summaries, local_view, read_ledger

    home, up = _home_up()
    views = ask_jobs(home) if up else None
    source = "scheduler"
    if views is None:
        if up:
            typer.echo("note: the scheduler does not answer; reading the ledger", err=True)
        entries = _read("list", lambda: read_ledger(home, Ledger.entries, []))
        views, source = [local_view(e) for e in entries], "ledger"
    items = _read("list", lambda: job_summaries(home, views))
    if as_json:
        _echo_json({"jobs": items, "source": source})
        return
    for line in job_lines(items):
        typer.echo(line)


def show(
    name: str = typer.Argument(..., metavar="NAME"),
    limit: int = typer.Option(20, "--limit", help="its newest runs (1..500)"),
    as_json: bool = JSON_OPT,
) -> None:
    """One job: its definition, state, next instant and newest runs."""
    from actors.cli.schedule_view import Ledger, job_summaries, local_view, read_ledger, run_lines, runs_json

    _job_name("show", name)
    _limit("show", limit)
    home, _up = _home_up()

    def find(ledger: Ledger) -> Any:
        return next((e for e in ledger.entries() if e.cursor.job_id == name), None)

    entry = _read("show", lambda: read_ledger(home, find, None))
    if entry is None:
        _fail("show", f"no job named {name!r} (see `geode schedule list`)", EXIT_USAGE)
    views = [v for v in (_maybe_ask(home) or []) if v.entry.cursor.job_id == name] or [local_view(entry)]
    item = _read("show", lambda: job_summaries(home, views))[0]
    runs = _read("show", lambda: read_ledger(home, lambda ledger: ledger.runs(name, limit), None))
    if as_json:
        _echo_json({"job": item, **runs_json(runs, limit)})
        return
    d = entry.job.definition
    typer.echo(f"job {name} ({d.get('origin', 'operator')}): {item['when']} · {item['state']}")
    typer.echo(f"next {item.get('next_instant') or 'none'} · created {entry.job.created_at.isoformat()}")
    for key in (
        "prompt",
        "model",
        "budget_s",
        "deliver",
        "session",
        "session_name",
        "overlap",
        "catch_up",
        "allowed_tools",
        "workspace",
    ):
        if d.get(key) is not None:
            typer.echo(f"  {key}: {json.dumps(d[key], default=str)}")
    for line in run_lines(runs, limit):
        typer.echo(line)


def runs(
    name: str = typer.Argument(None, metavar="[NAME]", help="one job's runs (default: every job's)"),
    show_occ: str = typer.Option(None, "--show", metavar="OCCURRENCE", help="one occurrence and its answer"),
    limit: int = typer.Option(50, "--limit", help="at most this many, newest first (1..500)"),
    as_json: bool = JSON_OPT,
) -> None:
    """Occurrences, newest first: outcome, lag (instant → lanes acknowledged the submit) and turn id; with
    --show OCCURRENCE, that occurrence's turn and its answer. Read from the ledger (no daemon needed)."""
    from actors.cli.schedule_view import answer_lines, answer_of, read_ledger, run_lines, runs_json

    home = _home_up()[0]
    if show_occ is not None:
        from geode.protocol.errors import NotFound

        try:
            item = _read("runs", lambda: read_ledger(home, lambda ledger: answer_of(ledger, show_occ), None))
        except (ValueError, NotFound) as exc:  # not an occurrence id, or none such in the ledger
            _fail("runs", getattr(exc, "message", "") or str(exc), EXIT_USAGE)
        if item is None:
            _fail("runs", f"no occurrence {show_occ}: nothing is recorded in {home.records_dir}", EXIT_USAGE)
        if as_json:
            _echo_json(item)
            return
        for line in answer_lines(item):
            typer.echo(line)
        return
    if name is not None:
        _job_name("runs", name)
    _limit("runs", limit)
    from geode.records.schedule_models import Runs

    got = _read("runs", lambda: read_ledger(home, lambda ledger: ledger.runs(name, limit), Runs()))
    if as_json:
        _echo_json(runs_json(got, limit))
        return
    for line in run_lines(got, limit):
        typer.echo(line)


def _simple(command: str, type_name: str, reply_line: str) -> Any:
    def run(name: str = typer.Argument(..., metavar="NAME"), as_json: bool = JSON_OPT) -> None:
        from geode.protocol import schedule as m

        msg = getattr(m, type_name)
        body = {"rm": m.RemoveJob, "pause": m.PauseJob, "resume": m.ResumeJob}[command](
            name=_job_name(command, name)
        )
        reply = _ask(command, msg, body)
        if as_json:
            _echo_json(reply)
        elif command == "rm" and not reply.get("removed"):
            _fail(command, f"no job named {name!r}", EXIT_USAGE)
        else:
            typer.echo(reply_line.format(name=name))

    run.__doc__ = {
        "rm": "Remove a job (its runs stay in the ledger until retention).",
        "pause": "Pause a job: no new instant fires until `geode schedule resume`.",
        "resume": "Resume a paused or failure-disabled job.",
    }[command]
    return run


def run_now(
    name: str = typer.Argument(..., metavar="NAME"),
    request_id: str = typer.Option(None, "--request-id", help="retry a run-now as the same run (its id)"),
    as_json: bool = JSON_OPT,
) -> None:
    """Run a job once now; prints its request id (`--request-id` with it again is the same run)."""
    import uuid

    from geode.protocol import schedule as m
    from geode.schedule.occurrences import REQUEST_ID

    rid = request_id or f"cli-{uuid.uuid4().hex[:20]}"
    if not re.fullmatch(REQUEST_ID, rid):
        _fail("run-now", f"{rid!r} is not a request id (letters, digits, _ . : -; at most 64)", EXIT_USAGE)
    reply = m.RunNowReply.model_validate(
        _ask("run-now", m.RUN_NOW, m.RunNow(name=_job_name("run-now", name), request_id=rid))
    )
    if as_json:
        _echo_json({**reply.model_dump(mode="json"), "request_id": rid})
        return
    occ = reply.occurrence
    again = " (already asked: the same run)" if reply.duplicate else ""
    typer.echo(f"run-now {name}: occurrence {occ.occurrence_id} · turn {occ.turn_id}{again}")
    typer.echo(f"request id {rid} (`--request-id {rid}` retries it as the same run)")


def _home_up() -> tuple[Any, bool]:
    from actors.tree.client import is_running
    from geode.home import GeodeHome

    home = GeodeHome.from_env()
    return home, is_running(home)


def _maybe_ask(home: Any) -> Any:
    from actors.cli.schedule_view import ask_jobs
    from actors.tree.client import is_running

    return ask_jobs(home) if is_running(home) else None


def _read(command: str, fn: Callable[[], Any]) -> Any:
    """``fn()`` (a read of the records) with unreadable records as one line and exit 1."""
    from geode.protocol.errors import GeodeError, NotFound

    try:
        return fn()
    except NotFound:
        raise
    except GeodeError as exc:
        _fail(command, exc.message or str(exc), EXIT_DOWN)


def _limit(command: str, limit: int) -> None:
    if not 1 <= limit <= 500:
        _fail(command, f"--limit must be between 1 and 500, not {limit}", EXIT_USAGE)


group.command("add")(add)
group.command("list")(list_jobs)
group.command("show")(show)
group.command("rm")(_simple("rm", "REMOVE", "removed job {name} (its runs stay in the ledger)"))
group.command("pause")(_simple("pause", "PAUSE", "paused job {name}"))
group.command("resume")(_simple("resume", "RESUME", "resumed job {name}"))
group.command("run-now")(run_now)
group.command("runs")(runs)


def register(app: typer.Typer) -> None:
    app.add_typer(group, name="schedule")
