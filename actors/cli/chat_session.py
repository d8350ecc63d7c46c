"""The interactive chat's loop: read a line (:mod:`actors.cli.chat_input`), run a slash command
(:mod:`actors.cli.chat_commands`) or send the line to the model as a turn (spinner, streamed text, tool
lines, approvals; Ctrl-C cancels the running turn and returns to the prompt at once)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer

from actors.cli import chat_commands
from geode.home import GeodeHome
from geode.lone_surrogates import undecodable
from geode.protocol.errors import GeodeError

QUIT = ("exit", "quit", "q")
SUCCESS = {"natural", "forced_text"}


class ChatSession:
    """One chat: its control client (replaced by ``/clear``), how to reach the daemon again, the model."""

    def __init__(
        self,
        cl: Any,
        home: GeodeHome,
        *,
        reconnect: Callable[[str | None], Any],
        read: Callable[[str], str],
        live: bool,
        cancel_wait_s: float,
        reattach: Callable[[Any], None],
        why: Callable[[dict[str, Any]], str],
    ) -> None:
        self.cl, self.home, self._reconnect, self.read = cl, home, reconnect, read
        self.live, self.cancel_wait_s, self._reattach, self._why = live, cancel_wait_s, reattach, why
        self.model = str(cl.welcome.get("model", ""))
        self.provider = str(cl.welcome.get("provider", ""))

    def loop(self) -> None:
        while True:
            try:
                line = self.read("> ")
            except (EOFError, KeyboardInterrupt):
                typer.echo("")
                return
            if line.strip() in QUIT:
                return
            if not line.strip():
                continue
            bad = undecodable(line)
            if bad:
                typer.echo(f"geode: that line is not UTF-8 text ({bad}); nothing was sent", err=True)
                continue
            cmd = chat_commands.parse(line)
            if isinstance(cmd, chat_commands.Unknown):
                typer.echo(cmd.message)
            elif cmd is not None:
                if not chat_commands.run(self, cmd):
                    return
            else:
                self.run_turn(line)

    def run_turn(self, line: str, *, compact: bool = False) -> dict[str, Any] | None:
        """One turn (``compact``: the session's compaction); its result, None when it did not end here."""
        from actors.cli.render import Renderer
        from actors.cli.spinner import Spinner

        renderer = Renderer(spinner=Spinner(sys.stdout).start() if self.live else None)
        try:
            result = self.cl.run_prompt(
                line,
                on_event=renderer,
                on_approval=renderer.ask,  # Ctrl-C at the prompt cancels the turn; then the spinner again
                on_interrupt=lambda: True,
                cancel_wait_s=self.cancel_wait_s,  # Ctrl-C: back to the prompt within this, whatever happens
                compact=compact,
            )
        except GeodeError as exc:
            renderer.end()
            explain = getattr(exc, "explain", None)  # reattach.TurnContinues: which turn goes on
            typer.echo(f"geode: {explain() if explain else exc}", err=True)
            return None
        except KeyboardInterrupt:  # outside the stream read: still cancel, then back to the prompt
            renderer.end()
            try:
                self.cl.cancel()
            except GeodeError:
                pass
            typer.echo("· turn ended: user_cancelled")
            return None
        renderer.end()
        reason = result.get("termination_reason")
        if reason not in SUCCESS:
            typer.echo(f"· turn ended: {reason}" + self._why(result))
        return dict(result)

    def new_session(self) -> None:
        """``/clear``: a new connection, hence a new session (the model chosen with ``/model`` kept)."""
        fresh = self._reconnect(self.model or None)
        self.cl.close()
        self.cl = fresh

    def pick(self) -> str | None:
        from actors.cli.reattach import pick_session
        from geode.protocol import control as c

        sessions = self.cl.request(c.SESSIONS, {}).get("sessions", [])
        return pick_session(self.home, sessions, tty=sys.stdin.isatty(), out=sys.stdout)

    def reattach(self) -> None:
        self._reattach(self.cl)
