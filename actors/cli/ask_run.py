"""`geode ask "PROMPT"` (and ``geode -p``): connect to the daemon, send one prompt, stream its events, exit
with the turn's code; the chat connects through :func:`connect_or_exit` too.

No typer here (its option declarations live in ``actors/cli/chat_cmds.py``): `geode ask` runs from
``actors/cli/main.py`` without it. Exit codes: 0 success, 1 the turn ended with any other termination
reason (printed), 2 nothing to resume, 3 the daemon is unreachable, 4 the client stopped waiting but the
turn continues (or may) in the daemon (its id is printed), 77 a call needed approval and nobody could be
asked (no terminal; the ways to allow it are printed), 130 cancelled. An exit is ``SystemExit(code)``.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

from actors.cli import wire_data as c
from geode.home_paths import HomePaths
from geode.protocol.errors import GeodeError, NotFound
from geode.visible_text import visible

SUCCESS = {"natural", "forced_text"}
EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_CONTINUES, EXIT_CANCELLED = 1, 2, 3, 4, 130
PICK = ""  # ``--resume`` given without an id (main.py rewrites a bare ``--resume`` to ``--resume=``)

if TYPE_CHECKING:  # `geode ask` holds its home as HomePaths (strings): pathlib only past the first message
    from geode.home import GeodeHome


def _echo(message: str, *, err: bool = False) -> None:
    """A line on stdout (or stderr), flushed, as ``typer.echo`` writes it."""
    print(message, file=sys.stderr if err else sys.stdout, flush=True)


def _connect(  # type: ignore[no-untyped-def]
    home: GeodeHome | HomePaths,
    *,
    model: str | None,
    skip: bool,
    tty: bool,
    resume: str | None,
    cont: bool,
    repl: bool = False,
):
    from actors.cli.client import ControlClient
    from actors.cli.daemon_link import client_version, connect_daemon

    cl = ControlClient(home, client_version=client_version())
    hello: dict[str, Any] = {"model": model, "is_tty": tty, "dangerously_skip_permissions": skip}
    if repl:
        cl.connect(**hello, mode="REPL")
    else:  # one round trip when the daemon runs; else start it (or wait for it), then handshake
        connect_daemon(cl, **hello, mode="IPC")
    if resume == PICK and not cont:
        resume = _pick(cl, home, tty=tty)
    if resume or cont:
        out = cl.request(c.RESUME, {"session_id": resume, "continue": cont})
        cl.session_id = out["session_id"]
    return cl


class _NothingPicked(Exception):
    """A bare ``--resume`` picked no session (or could not ask: not a terminal)."""


def _pick(cl: Any, home: GeodeHome | HomePaths, *, tty: bool) -> str:
    from actors.cli.reattach import pick_session
    from geode.home import full_home

    sessions = cl.request(c.SESSIONS, {}).get("sessions", [])
    picked = pick_session(full_home(home), sessions, tty=tty, out=sys.stdout)
    if picked is None:
        cl.close()
        raise _NothingPicked("not a terminal" if not tty else "nothing picked")
    return picked


def _connect_or_exit(home: GeodeHome | HomePaths, **kw: Any):  # type: ignore[no-untyped-def]
    """``_connect`` with the CLI's exits: 2 nothing to resume / nothing picked, 3 daemon unavailable."""
    from actors.cli.project_note import note_untrusted_project

    note_untrusted_project(home)  # once per ask/chat start: project MCP servers ignored until `geode trust`
    try:
        return _connect(home, **kw)
    except _NothingPicked as exc:
        if str(exc) == "not a terminal":
            _echo("geode: not a terminal: pick one of these with `geode --resume ID`", err=True)
        raise SystemExit(EXIT_USAGE) from exc
    except NotFound as exc:
        _echo(f"geode: cannot resume: {exc.message}", err=True)
        raise SystemExit(EXIT_USAGE) from exc
    except GeodeError as exc:
        _echo(f"geode: daemon unavailable: {exc}", err=True)
        raise SystemExit(EXIT_UNAVAILABLE) from exc


def exit_code(result: dict[str, Any]) -> int:
    reason = result.get("termination_reason", "")
    if reason in SUCCESS:
        return 0
    return EXIT_CANCELLED if reason == "user_cancelled" else EXIT_FAILED


def run_ask(
    prompt: str,
    *,
    as_json: bool = False,
    resume: str | None = None,
    cont: bool = False,
    model: str | None = None,
    skip: bool = False,
    timeout: float = 3600.0,
    output_format: str = "text",
) -> None:
    """``geode ask`` and ``geode -p``: one prompt, streamed, then exit with the turn's code."""
    from actors.cli.reattach import TurnContinues
    from actors.cli.render import Renderer, ask_terminal
    from actors.cli.unasked import Unasked
    from geode.lone_surrogates import undecodable

    bad = undecodable(prompt)  # argv bytes that are not UTF-8 (surrogateescape): say so, send nothing
    if bad:
        _echo(f"geode: the prompt is not UTF-8 text ({bad}); nothing was sent", err=True)
        raise SystemExit(EXIT_USAGE)
    from actors.cli.ask_json import answer_object, continues_object
    from actors.cli.stream_json import open_stream

    stream = open_stream(output_format)  # stream-json: one JSON line per event (exit 2 for a bad format)
    as_json = as_json or output_format == "json"
    home = HomePaths.from_env()
    tty = sys.stdin.isatty()
    renderer = Renderer(quiet=as_json or stream is not None)
    cl = _connect_or_exit(home, model=model, skip=skip, tty=tty, resume=resume, cont=cont)
    unasked = Unasked("--json does not ask" if tty else "no terminal")
    approve = ask_terminal if (tty and not as_json) else unasked  # nobody to ask: said so, not "denied"
    on_event = renderer if stream is None else stream.start(cl, approve, skip=skip)
    answer = approve if stream is None else stream.approver(approve)  # stream-json: each answer a line too
    try:
        result = cl.run_prompt(
            prompt, on_event=on_event, on_approval=answer, timeout_s=timeout, on_interrupt=lambda: True
        )
    except TurnContinues as exc:  # the client gave up, the turn did not: say which turn, exit 4
        gave_up = continues_object(exc.turn_id, exc.session_id, exc.accepted, exc.message, EXIT_CONTINUES)
        if stream is not None:
            stream.result(gave_up)
        elif as_json:
            _echo(json.dumps(gave_up))
        _echo(f"geode: {exc.explain()}", err=True)
        raise SystemExit(EXIT_CONTINUES) from exc
    except GeodeError as exc:
        _echo(f"geode: {exc}", err=True)
        raise SystemExit(EXIT_UNAVAILABLE) from exc
    except KeyboardInterrupt:  # outside the stream read (prompt request, rendering): still cancel the turn
        try:
            cl.cancel()  # no turn id: the session's running turn
        except GeodeError:
            pass
        _echo("geode: cancelled", err=True)
        raise SystemExit(EXIT_CANCELLED) from None
    finally:
        renderer.end()
        cl.close()
    code = unasked.exit_code(exit_code(result))
    if stream is not None or as_json:  # the answer object reads the turn's records: the full home
        from geode.home import full_home
    if stream is not None:
        stream.result(answer_object(full_home(home), cl.session_id, result, unasked.tools, code))
    elif as_json:
        _echo(json.dumps(answer_object(full_home(home), cl.session_id, result, unasked.tools, code)))
    elif result.get("text") and not renderer.streamed:
        _echo(visible(str(result["text"])))
    if unasked.tools:
        _echo(unasked.message(), err=True)
    if code != 0 and exit_code(result) != 0:
        _echo(
            f"geode: turn ended: {result.get('termination_reason')}" + _why(result),
            err=True,
        )
    raise SystemExit(code)


def _why(result: dict[str, Any]) -> str:
    """`` (<the turn's error>)``, escaped (it may quote model text), or ""."""
    return f" ({visible(str(result['error']), one_line=True)})" if result.get("error") else ""
