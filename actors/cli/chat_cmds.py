"""`geode` (interactive chat), `geode ask "PROMPT"` (one shot) and `geode doctor`: the thin CLI.

The CLI composes nothing itself: it talks to the daemon's control socket (starting the daemon when it is
not running) and renders the turn's stream. Exit codes of ``ask``: 0 success, 1 the turn ended with any
other termination reason (printed), 2 nothing to resume, 3 the daemon is unreachable, 130 cancelled.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import typer

from geode.home import GeodeHome
from geode.protocol import control as c
from geode.protocol.errors import GeodeError, NotFound

SUCCESS = {"natural", "forced_text"}
EXIT_FAILED, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_CANCELLED = 1, 2, 3, 130

_RESUME = typer.Option(None, "--resume", help="resume session ID")
_CONTINUE = typer.Option(False, "--continue", help="continue the most recent session")
_MODEL = typer.Option(None, "--model", help="model for this session (e.g. claude-sonnet-5)")
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
    from actors.cli.daemon_start import ensure_daemon
    from actors.control import geode_version

    if not repl:
        ensure_daemon(home)
    cl = ControlClient(home, client_version=geode_version())
    cl.connect(model=model, is_tty=tty, dangerously_skip_permissions=skip, mode="REPL" if repl else "IPC")
    if resume or cont:
        out = cl.request(c.RESUME, {"session_id": resume, "continue": cont})
        cl.session_id = out["session_id"]
    return cl


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
) -> None:
    """Run one prompt and exit: 0 on success, non-zero with the termination reason otherwise."""
    from actors.cli.render import Renderer, ask_terminal

    home = GeodeHome.from_env()
    tty = sys.stdin.isatty()
    renderer = Renderer(quiet=as_json)
    try:
        cl = _connect(home, model=model, skip=skip, tty=tty, resume=resume, cont=cont)
    except NotFound as exc:
        typer.echo(f"geode: cannot resume: {exc.message}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    except GeodeError as exc:
        typer.echo(f"geode: daemon unavailable: {exc}", err=True)
        raise typer.Exit(EXIT_UNAVAILABLE) from exc
    approve = ask_terminal if (tty and not as_json) else (lambda _data: "n")  # no terminal: deny
    try:
        result = cl.run_prompt(
            prompt, on_event=renderer, on_approval=approve, timeout_s=timeout, on_interrupt=lambda: True
        )
    except GeodeError as exc:
        typer.echo(f"geode: {exc}", err=True)
        raise typer.Exit(EXIT_UNAVAILABLE) from exc
    finally:
        renderer.end()
        cl.close()
    code = exit_code(result)
    if as_json:
        out = {
            "text": result.get("text", ""),
            "session_id": cl.session_id,
            "turn_id": result.get("turn_id"),
            "termination_reason": result.get("termination_reason"),
            "tool_calls": renderer.tool_calls,
            "tool_call_count": result.get("tool_calls", len(renderer.tool_calls)),
            "rounds": result.get("rounds", 0),
            "usage": result.get("usage", {}),
            "error": result.get("error"),
            "exit_code": code,
        }
        typer.echo(json.dumps(out))
    elif result.get("text") and not renderer.streamed:
        typer.echo(result["text"])
    if code != 0:
        typer.echo(
            f"geode: turn ended: {result.get('termination_reason')}"
            + (f" ({result['error']})" if result.get("error") else ""),
            err=True,
        )
    raise typer.Exit(code)


def chat(resume: str | None, cont: bool, model: str | None, skip: bool, *, repl: bool = False) -> None:
    """Interactive chat: streamed text, tool lines, approvals; Ctrl-C cancels the running turn."""
    from actors.cli.render import Renderer, ask_terminal

    home = GeodeHome.from_env()
    try:
        cl = _connect(
            home, model=model, skip=skip, tty=sys.stdin.isatty(), resume=resume, cont=cont, repl=repl
        )
    except NotFound as exc:
        typer.echo(f"geode: cannot resume: {exc.message}", err=True)
        raise typer.Exit(EXIT_USAGE) from exc
    except GeodeError as exc:
        typer.echo(f"geode: daemon unavailable: {exc}", err=True)
        raise typer.Exit(EXIT_UNAVAILABLE) from exc
    w = cl.welcome
    typer.echo(
        f"geode · {w.get('model')} ({w.get('provider')}) · session {cl.session_id} · {w.get('workspace')}"
    )
    typer.echo("type a prompt; exit or Ctrl-D quits; Ctrl-C cancels a running turn")
    try:
        while True:
            try:
                line = input("> ")
            except (EOFError, KeyboardInterrupt):
                typer.echo("")
                break
            if line.strip() in ("exit", "quit", "/quit", "q"):
                break
            if not line.strip():
                continue
            renderer = Renderer()
            try:
                result = cl.run_prompt(
                    line, on_event=renderer, on_approval=ask_terminal, on_interrupt=lambda: True
                )
            except GeodeError as exc:
                renderer.end()
                typer.echo(f"geode: {exc}", err=True)
                continue
            except KeyboardInterrupt:  # outside the stream read: still cancel, then back to the prompt
                renderer.end()
                try:
                    cl.cancel()
                except GeodeError:
                    pass
                typer.echo("· cancelled")
                continue
            renderer.end()
            reason = result.get("termination_reason")
            if reason not in SUCCESS:
                typer.echo(
                    f"· turn ended: {reason}" + (f" ({result['error']})" if result.get("error") else "")
                )
    finally:
        cl.close()


def root(
    ctx: typer.Context,
    resume: str | None = _RESUME,
    cont: bool = _CONTINUE,
    model: str | None = _MODEL,
    skip: bool = _SKIP,
    repl: bool = typer.Option(False, "--repl", help="no daemon: run the whole tree in this process"),
) -> None:
    """GEODE agent host. With no command: interactive chat with the daemon."""
    if ctx.invoked_subcommand is not None:
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
            typer.echo(f"{'✓' if ch['ok'] else '✗'} {ch['name']:<16} {ch['detail']}")
    raise typer.Exit(0 if all(ch["ok"] or ch.get("warn") for ch in checks) else 1)


def register(app: typer.Typer) -> None:
    app.callback(invoke_without_command=True)(root)
    app.command()(ask)
    app.command()(doctor)
