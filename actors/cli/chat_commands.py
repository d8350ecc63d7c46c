"""The interactive chat's slash commands: what ``/help`` lists, the parser, and each command's handler.

A line is a command when its first word is ``/name`` (letters, digits, ``-``, ``_``; no second ``/``, so a
prompt that starts with a path such as ``/etc/hosts`` still goes to the model). A known command runs here and
never reaches the model; an unknown one prints ``unknown command: /x (try /help)``. Handlers get the
:class:`ChatSession` (its control client, the model, the turn runner) and print to stdout.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Protocol

import typer

from geode.protocol import control as c
from geode.protocol.errors import GeodeError


class ChatSession(Protocol):
    """What a handler uses of the chat (:class:`actors.cli.chat_session.ChatSession`)."""

    cl: Any  # the control client (actors.cli.client.ControlClient)
    model: str
    provider: str

    def run_turn(self, line: str, *, compact: bool = False) -> dict[str, Any] | None: ...

    def new_session(self) -> None: ...

    def pick(self) -> str | None: ...

    def reattach(self) -> None: ...


# name -> (argument, what it does); /help prints them in this order, completion offers them
COMMANDS: dict[str, tuple[str, str]] = {
    "help": ("", "list these commands"),
    "compact": ("", "summarize the session now; the next turns start from the summary"),
    "memory": ("", "show this session's memory (MEMORY.md)"),
    "skills": ("", "list the skills a session here is offered"),
    "status": ("", "this session, its model and the daemon"),
    "model": ("<exact id>", "the model of the next turns (no id: the current one)"),
    "clear": ("", "start a new session"),
    "resume": ("[id]", "switch to a stored session (no id: pick from the recent ones)"),
    "quit": ("", "leave the chat (also: exit, Ctrl-D)"),
}
_SLASH = re.compile(r"^/(?P<name>[A-Za-z][A-Za-z0-9_-]{0,31})(?:\s+(?P<arg>.*))?$", re.DOTALL)


@dataclass(frozen=True)
class Slash:
    """A known command and its argument (stripped; "" when none)."""

    name: str
    arg: str = ""


@dataclass(frozen=True)
class Unknown:
    """``/name`` that is no command: said so, never sent to the model."""

    name: str

    @property
    def message(self) -> str:
        return f"unknown command: /{self.name} (try /help)"


def parse(line: str) -> Slash | Unknown | None:
    """The command on ``line``, or None when the line is a prompt for the model."""
    m = _SLASH.match(line.strip())
    if m is None:
        return None
    name = m.group("name").lower()
    if name not in COMMANDS:
        return Unknown(m.group("name"))
    return Slash(name, (m.group("arg") or "").strip())


def help_text() -> str:
    width = max(len(f"/{n} {a}".strip()) for n, (a, _) in COMMANDS.items())
    rows = [f"  {f'/{n} {a}'.strip():<{width}}  {what}" for n, (a, what) in COMMANDS.items()]
    return "commands:\n" + "\n".join(rows) + "\nany other line goes to the model"


def run(chat: ChatSession, cmd: Slash) -> bool:
    """Run ``cmd``; False when the chat should end (``/quit``)."""
    if cmd.name == "quit":
        return False
    handler = _HANDLERS[cmd.name]
    try:
        handler(chat, cmd.arg)
    except GeodeError as exc:
        typer.echo(f"geode: /{cmd.name}: {exc.message or exc}", err=True)
    return True


def _help(chat: ChatSession, arg: str) -> None:
    typer.echo(help_text())


def _compact(chat: ChatSession, arg: str) -> None:
    result = chat.run_turn("/compact", compact=True)
    if result is not None and result.get("text"):
        typer.echo(f"· {result['text']}")


def _memory(chat: ChatSession, arg: str) -> None:
    from actors.cli.memory_cmds import show

    show(scope="operator")  # the chat's sessions are the operator's own (their scope: geode.memory.scopes)


def _skills(chat: ChatSession, arg: str) -> None:
    from actors.cli.skills_cmds import skills

    skills(as_json=False, workspace=str(chat.cl.welcome.get("workspace") or "") or None)


def _status(chat: ChatSession, arg: str) -> None:
    w = chat.cl.welcome
    sid = chat.cl.session_id
    typer.echo(f"session   {sid}")
    typer.echo(f"model     {chat.model} ({chat.provider})")
    typer.echo(f"workspace {w.get('workspace')}")
    rows = chat.cl.request(c.SESSIONS, {}).get("sessions", [])
    mine = next((s for s in rows if s.get("session_id") == sid), None)
    if mine is None:
        typer.echo("stored    nothing yet (no turn has run)")
    else:
        typer.echo(f"stored    {mine.get('message_count', 0)} messages, {mine.get('status', '?')}")
    typer.echo(f"daemon    {_daemon_line(chat.cl.request(c.STATUS, {}))}")


def _daemon_line(status: dict[str, Any]) -> str:
    tree = status.get("tree") or {}
    kids = tree.get("children") or []
    if not kids:
        return f"no answer from the supervisor ({tree.get('message', 'unknown')})"
    down = [str(k.get("name")) for k in kids if k.get("state") != "running"]
    line = f"{len(kids) - len(down)} of {len(kids)} children running"
    return line + (f"; not running: {', '.join(down)}" if down else "")


def _model(chat: ChatSession, arg: str) -> None:
    if not arg:
        typer.echo(f"model: {chat.model} ({chat.provider}); /model <exact id> changes it")
        return
    out = chat.cl.request(c.MODEL, {"model": arg})
    chat.model, chat.provider = str(out["model"]), str(out["provider"])
    chat.cl.handshake_body["model"] = chat.model  # a re-handshake (control restarted) keeps it
    typer.echo(f"· the next turns use {chat.model} ({chat.provider})")


def _clear(chat: ChatSession, arg: str) -> None:
    chat.new_session()
    typer.echo(f"· new session {chat.cl.session_id}")


def _resume(chat: ChatSession, arg: str) -> None:
    sid = arg or chat.pick()
    if not sid:
        typer.echo("· nothing picked; still in session " + str(chat.cl.session_id))
        return
    out = chat.cl.request(c.RESUME, {"session_id": sid})
    chat.cl.session_id = out["session_id"]
    typer.echo(f"· resumed session {chat.cl.session_id}")
    chat.reattach()


_HANDLERS = {
    "help": _help,
    "compact": _compact,
    "memory": _memory,
    "skills": _skills,
    "status": _status,
    "model": _model,
    "clear": _clear,
    "resume": _resume,
}
