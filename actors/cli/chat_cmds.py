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

from actors.cli.ask_run import (  # noqa: F401  (the chat's and the tests' names for them)
    EXIT_CANCELLED,
    EXIT_CONTINUES,
    EXIT_FAILED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
    PICK,
    SUCCESS,
    _connect,
    _connect_or_exit,
    _why,
    exit_code,
    run_ask,
)
from geode.home import GeodeHome
from geode.protocol.errors import GeodeError
from geode.visible_text import visible

CANCEL_WAIT_S = 1.0  # the chat after Ctrl-C: wait this long for the cancelled turn's end, then prompt again

_RESUME = typer.Option(None, "--resume", help="resume session ID (alone: pick from recent sessions)")
_CONTINUE = typer.Option(False, "--continue", help="continue the most recent session")
_MODEL = typer.Option(None, "--model", help="model for this session (e.g. claude-sonnet-5)")
_FORMAT = typer.Option(
    "text", "--output-format", help="text, json (as --json) or stream-json (one JSON event per line)"
)
_SKIP = typer.Option(
    False, "--dangerously-skip-permissions", help="approve every tool call of this connection without asking"
)


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
