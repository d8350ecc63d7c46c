"""`geode` (interactive chat), `geode ask "PROMPT"` (one shot) and `geode doctor`: the thin CLI.

The CLI composes nothing itself: it talks to the daemon's control socket (starting the daemon when it is
not running) and renders the turn's stream. Exit codes of ``ask``: 0 success, 1 the turn ended with any
other termination reason (printed), 2 nothing to resume, 3 the daemon is unreachable, 4 the client stopped
waiting but the turn continues (or may) in the daemon (its id is printed), 77 a call needed approval and
nobody could be asked (no terminal; the ways to allow it are printed), 130 cancelled.
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any

import typer

from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol.errors import GeodeError, NotFound
from geode.visible_text import visible

SUCCESS = {"natural", "forced_text"}
EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_CONTINUES, EXIT_CANCELLED = 1, 2, 3, 4, 130
CANCEL_WAIT_S = 1.0  # the chat after Ctrl-C: wait this long for the cancelled turn's end, then prompt again

_RESUME = typer.Option(None, "--resume", help="resume session ID (alone: pick from recent sessions)")
_CONTINUE = typer.Option(False, "--continue", help="continue the most recent session")
PICK = ""  # ``--resume`` given without an id (main.py rewrites a bare ``--resume`` to ``--resume=``)
_MODEL = typer.Option(None, "--model", help="model for this session (e.g. claude-sonnet-5)")
_FORMAT = typer.Option(
    "text", "--output-format", help="text, json (as --json) or stream-json (one JSON event per line)"
)
_SKIP = typer.Option(
    False, "--dangerously-skip-permissions", help="approve every tool call of this connection without asking"
)


def _connect(  # type: ignore[no-untyped-def]
    home: GeodeHome,
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


def _pick(cl: Any, home: GeodeHome, *, tty: bool) -> str:
    from actors.cli.reattach import pick_session

    sessions = cl.request(c.SESSIONS, {}).get("sessions", [])
    picked = pick_session(home, sessions, tty=tty, out=sys.stdout)
    if picked is None:
        cl.close()
        raise _NothingPicked("not a terminal" if not tty else "nothing picked")
    return picked


def _connect_or_exit(home: GeodeHome, **kw: Any):  # type: ignore[no-untyped-def]
    """``_connect`` with the CLI's exits: 2 nothing to resume / nothing picked, 3 daemon unavailable."""
    from actors.cli.trust_cmds import note_untrusted_project

    note_untrusted_project(home)  # once per ask/chat start: project MCP servers ignored until `geode trust`
    try:
        return _connect(home, **kw)
    except _NothingPicked as exc:
        if str(exc) == "not a terminal":
            typer.echo("geode: not a terminal: pick one of these with `geode --resume ID`", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    except NotFound as exc:
        typer.echo(f"geode: cannot resume: {exc.message}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    except GeodeError as exc:
        typer.echo(f"geode: daemon unavailable: {exc}", err=True)
        raise typer.Exit(EXIT_UNAVAILABLE) from exc


def exit_code(result: dict[str, Any]) -> int:
    reason = result.get("termination_reason", "")
    if reason in SUCCESS:
        return 0
    return EXIT_CANCELLED if reason == "user_cancelled" else EXIT_FAILED


def ask(
    prompt: str = typer.Argument(..., help="the prompt"),
    as_json: bool = typer.Option(False, "--json", help="print the result object as JSON"),
    resume: str | None = _RESUME,
    cont: bool = _CONTINUE,
    model: str | None = _MODEL,
    skip: bool = _SKIP,
    timeout: float = typer.Option(3600.0, "--timeout", help="seconds to wait for the turn"),
    output_format: str = _FORMAT,
) -> None:
    """Run one prompt and exit: 0 success; 1 the turn ended otherwise (reason printed); 2 nothing to
    resume; 3 daemon unavailable; 4 the client stopped waiting but the turn continues in the daemon (its
    id and session are printed: `geode --resume SESSION` follows it); 77 a call needed approval and nobody
    could be asked (no terminal); 130 cancelled."""
    opts: dict[str, Any] = {"resume": resume, "cont": cont, "model": model, "skip": skip, "timeout": timeout}
    run_ask(prompt, as_json=as_json, output_format=output_format, **opts)


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
        typer.echo(f"geode: the prompt is not UTF-8 text ({bad}); nothing was sent", err=True)
        raise typer.Exit(EXIT_USAGE)
    from actors.cli.ask_json import answer_object, continues_object
    from actors.cli.stream_json import open_stream

    stream = open_stream(output_format)  # stream-json: one JSON line per event (exit 2 for a bad format)
    as_json = as_json or output_format == "json"
    home = GeodeHome.from_env()
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
            typer.echo(json.dumps(gave_up))
        typer.echo(f"geode: {exc.explain()}", err=True)
        raise typer.Exit(EXIT_CONTINUES) from exc
    except GeodeError as exc:
        typer.echo(f"geode: {exc}", err=True)
        raise typer.Exit(EXIT_UNAVAILABLE) from exc
    except KeyboardInterrupt:  # outside the stream read (prompt request, rendering): still cancel the turn
        try:
            cl.cancel()  # no turn id: the session's running turn
        except GeodeError:
            pass
        typer.echo("geode: cancelled", err=True)
        raise typer.Exit(EXIT_CANCELLED) from None
    finally:
        renderer.end()
        cl.close()
    code = unasked.exit_code(exit_code(result))
    if stream is not None:
        stream.result(answer_object(home, cl.session_id, result, unasked.tools, code))
    elif as_json:
        typer.echo(json.dumps(answer_object(home, cl.session_id, result, unasked.tools, code)))
    elif result.get("text") and not renderer.streamed:
        typer.echo(visible(str(result["text"])))
    if unasked.tools:
        typer.echo(unasked.message(), err=True)
    if code != 0 and exit_code(result) != 0:
        typer.echo(
            f"geode: turn ended: {result.get('termination_reason')}" + _why(result),
            err=True,
        )
    raise typer.Exit(code)


def chat(resume: str | None, cont: bool, model: str | None, skip: bool, *, repl: bool = False) -> None:
    """Interactive chat: a spinner while the model works (terminal only), streamed text, tool lines,
    approvals; Ctrl-C cancels the running turn and returns to the prompt at once; slash commands
    (actors/cli/chat_commands.py)."""
    home = GeodeHome.from_env()
    cl = _connect_or_exit(
        home, model=model, skip=skip, tty=sys.stdin.isatty(), resume=resume, cont=cont, repl=repl
    )
    w = cl.welcome
    typer.echo(
        f"geode · {w.get('model')} ({w.get('provider')}) · session {cl.session_id} · {w.get('workspace')}"
    )
    typer.echo("type a prompt; exit or Ctrl-D quits; Ctrl-C cancels a running turn")
    if not repl:  # --repl: the tree runs in this process, with this shell's env
        from actors.cli.env_note import env_mismatch_note

        note = env_mismatch_note(home)
        if note:
            typer.echo(note)
    if isinstance(sys.stdin, io.TextIOWrapper):  # a line that is not UTF-8 is refused below, not a traceback
        sys.stdin.reconfigure(errors="surrogateescape")
    from actors.cli.chat_input import line_reader
    from actors.cli.chat_session import ChatSession

    terminal = sys.stdin.isatty() and sys.stdout.isatty()
    session = ChatSession(
        cl,
        home,
        reconnect=lambda m: _connect(  # /clear: a GeodeError is said by the command, the chat goes on
            home, model=m, skip=skip, tty=sys.stdin.isatty(), resume=None, cont=False, repl=repl
        ),
        read=line_reader(home.root, terminal=terminal),
        live=sys.stdout.isatty(),
        cancel_wait_s=CANCEL_WAIT_S,
        reattach=lambda client: _reattach(client, home),
        why=_why,
    )
    try:
        if resume is not None or cont:
            _reattach(cl, home)
        session.loop()
    finally:
        session.cl.close()


def _reattach(cl: Any, home: GeodeHome) -> None:
    """``--continue`` / ``--resume``: where the session is (last exchanges, an answer given while away)."""
    from actors.cli.reattach import show_where_you_are
    from actors.cli.render import Renderer, ask_terminal

    renderer = Renderer()
    try:
        result = show_where_you_are(
            cl, home, renderer=renderer, on_approval=ask_terminal, on_interrupt=lambda: True
        )
    except GeodeError as exc:
        renderer.end()
        typer.echo(f"geode: {exc}", err=True)
        return
    renderer.end()
    if result is not None:
        if result.get("text") and not renderer.streamed:
            typer.echo(f"⏺ {visible(str(result['text']))}")
        reason = result.get("termination_reason")
        if reason not in SUCCESS:
            typer.echo(f"· turn ended: {reason}" + _why(result))


def _version(value: bool) -> None:
    if value:
        from actors.control import geode_version

        typer.echo(f"geode {geode_version()}")
        raise typer.Exit(0)


def root(
    ctx: typer.Context,
    print_prompt: str | None = typer.Option(
        None, "-p", "--print", help="run PROMPT once, print the answer and exit (same as `geode ask`)"
    ),
    resume: str | None = _RESUME,
    cont: bool = _CONTINUE,
    model: str | None = _MODEL,
    skip: bool = _SKIP,
    repl: bool = typer.Option(False, "--repl", help="no daemon: run the whole tree in this process"),
    output_format: str = _FORMAT,
    version: bool = typer.Option(
        False, "--version", is_eager=True, callback=_version, help="print the version and exit"
    ),
) -> None:
    """GEODE agent host. With no command: interactive chat with the daemon."""
    if ctx.invoked_subcommand is not None:
        return
    if print_prompt is not None:
        run_ask(print_prompt, resume=resume, cont=cont, model=model, skip=skip, output_format=output_format)
        return
    if not repl:
        chat(resume, cont, model, skip)
        return
    from actors.cli.repl import run_in_process_tree

    try:
        run_in_process_tree(GeodeHome.from_env(), lambda: chat(resume, cont, model, skip, repl=True))
    except GeodeError as exc:
        typer.echo(f"geode: {exc.message or exc}", err=True)
        raise typer.Exit(EXIT_UNAVAILABLE) from exc


def doctor(as_json: bool = typer.Option(False, "--json", help="machine-readable report")) -> None:
    """Check config, provider keys (never printed), the control socket and the daemon's version."""
    from actors.cli.doctor import run_checks

    checks = run_checks(GeodeHome.from_env())
    if as_json:
        typer.echo(json.dumps({"ok": all(ch["ok"] for ch in checks), "checks": checks}))
    else:
        for ch in checks:
            mark = "·" if ch.get("unused") else "!" if ch.get("warn") else "✓" if ch["ok"] else "✗"
            typer.echo(f"{mark} {ch['name']:<16} {ch['detail']}")
    raise typer.Exit(0 if all(ch["ok"] or ch.get("warn") for ch in checks) else 1)


def register(app: typer.Typer) -> None:
    app.callback(invoke_without_command=True)(root)
    app.command()(ask)
    app.command()(doctor)


def _why(result: dict[str, Any]) -> str:
    """`` (<the turn's error>)``, escaped (it may quote model text), or ""."""
    return f" ({visible(str(result['error']), one_line=True)})" if result.get("error") else ""
