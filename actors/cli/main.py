"""`geode` entry point: one typer app; each command group lives in its own module with ``register(app)``."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported in build_app: `geode mcp` answers its host before typer is loaded
    import typer

EXIT_CONFIG = 78  # EX_CONFIG: a command whose config is broken
HOT_ENV = "GEODE_CLI_HOT"  # "0": `geode ask` and the chat go through the typer app too (tests compare both)

# Command modules, each exposing ``register(app: typer.Typer) -> None``.
COMMAND_MODULES = (
    "actors.cli.serve_cmds",  # serve, status, stop, restart
    "actors.cli.records_cmds",  # sessions, timeline, receipts, reconcile
    "actors.cli.provider_cmds",  # scripted-provider
    "actors.cli.chat_cmds",  # interactive chat, ask, doctor
    "actors.cli.messengers_view",  # messengers
    "actors.cli.mcp_servers_cmds",  # mcp-servers [list], add, remove
    "actors.cli.mcp_cmds",  # mcp (dispatched early by main())
    "actors.cli.trust_cmds",  # trust
    "actors.cli.keys_cmds",  # keys init, keys show
)
# Imported only when the command line may need them (not for another command, e.g. `geode status`).
LAZY_COMMAND_MODULES = (
    "actors.cli.schedule_cmds",  # schedule add|list|show|rm|pause|resume|run-now|runs
    "actors.cli.webhooks_cmds",  # webhooks [--json], webhooks replay
    "actors.cli.search_cmds",  # search QUERY [--json] [--limit N] [--rebuild]
    "actors.cli.memory_cmds",  # memory show|edit [--scope S]
    "actors.cli.skills_cmds",  # skills [--json]
    "actors.cli.top_cmds",  # top [--once] [--json]: the metrics page, live
)


def _plain_flags() -> None:
    """Flags show as plain flags in ``--help`` (typer's rich help prints ``<bool>`` beside each one)."""
    from typer.core import TyperOption

    if getattr(TyperOption, "_geode_plain_flags", False):
        return
    shown = TyperOption.display_type_rich

    def display_type_rich(self: TyperOption, ctx):  # type: ignore[no-untyped-def]
        return None if self.is_flag else shown(self, ctx)

    TyperOption.display_type_rich = display_type_rich  # type: ignore[method-assign]
    TyperOption._geode_plain_flags = True  # type: ignore[attr-defined]


def optional_resume(argv: list[str]) -> list[str]:
    """A bare ``--resume`` (last, or followed by another option) means "pick a session": ``--resume=``."""
    out = list(argv)
    for i, arg in enumerate(out):
        if arg == "--":
            break
        if arg == "--resume" and (i + 1 == len(out) or out[i + 1].startswith("-")):
            out[i] = "--resume="
    return out


def build_app(argv: list[str] | None = None) -> typer.Typer:
    """The whole command line; given ``argv`` whose first word names an eagerly registered command, the
    lazy command modules are left out (that command never reaches them)."""
    import typer

    _plain_flags()
    app = typer.Typer(add_completion=False, no_args_is_help=False, help="GEODE agent host")
    for name in COMMAND_MODULES:  # our own modules: one that fails to import is a bug, not a missing command
        importlib.import_module(name).register(app)
    eager = {str(c.name or getattr(c.callback, "__name__", "")) for c in app.registered_commands}
    eager = {n.replace("_", "-") for n in eager} | {g.name or "" for g in app.registered_groups}
    if not argv or argv[0] not in eager:
        for name in LAZY_COMMAND_MODULES:
            importlib.import_module(name).register(app)
    return app


# `geode ask`'s options (``chat_cmds.ask``'s) as ``run_ask`` keywords: flags, and options taking a value.
ASK_FLAGS = {"--json": "as_json", "--continue": "cont", "--dangerously-skip-permissions": "skip"}
ASK_VALUES = {
    "--resume": "resume",
    "--model": "model",
    "--timeout": "timeout",
    "--output-format": "output_format",
}
ASK_DEFAULTS: dict[str, Any] = {"as_json": False, "resume": None, "cont": False, "model": None, "skip": False}


def _negative_number(arg: str) -> bool:
    """``-5`` or ``-.5``: argparse's negative-number pattern (an argument, not an option)."""
    whole, dot, frac = arg[1:].partition(".")
    if dot:
        return frac.isdecimal() and (whole == "" or whole.isdecimal())
    return whole.isdecimal()


def _an_argument(arg: str) -> bool:
    """Whether argparse would read ``arg`` as an argument (a value or the prompt), not as an option."""
    if not arg.startswith("-") or arg == "-":
        return True
    return arg.partition("=")[0] not in ASK_FLAGS.keys() | ASK_VALUES.keys() and (
        _negative_number(arg) or " " in arg
    )


def _ask_args(argv: list[str]) -> dict[str, Any] | None:
    """``geode ask`` options as ``run_ask`` keywords (the same options as ``chat_cmds.ask``), or None for
    anything else (``--help``, a usage error, anything unusual): those go through the typer app as before.

    Hand-parsed: argparse (with gettext and locale) was ~2 ms of `geode ask`'s start (issue 34). It reads
    what the argparse parser it replaced read, the same way (tests/cli/test_ask_parse.py compares them);
    a line that parser would have refused, or read another way, is None here."""
    out: dict[str, Any] = {**ASK_DEFAULTS, "timeout": 3600.0}
    prompt: str | None = None
    args = iter(argv)
    for arg in args:
        if arg == "--":  # the rest are arguments: the prompt alone
            rest = list(args)
            if prompt is not None or len(rest) != 1 or rest[0] == "--":
                return None
            prompt = rest[0]
            break
        if _an_argument(arg):
            if prompt is not None:
                return None
            prompt = arg
            continue
        name, eq, value = arg.partition("=")
        if name in ASK_FLAGS and not eq:
            out[ASK_FLAGS[name]] = True
            continue
        if name not in ASK_VALUES:
            return None
        if not eq:
            given = next(args, None)
            if given is None or given == "--" or not _an_argument(given):
                return None
            value = given
        out[ASK_VALUES[name]] = value
    if prompt is None:
        return None
    try:
        out["timeout"] = float(out["timeout"])
    except ValueError:
        return None
    return {"prompt": prompt, **out}


def _run_hot(argv: list[str]) -> bool:
    """``geode ask …``, ``geode status [--json]`` and bare ``geode`` (the chat) without building the typer app
    (every command module, typer's rich help): False when ``argv`` is not one of them."""
    if not argv:
        from actors.cli.chat_cmds import chat

        return _exit_as_typer(lambda: chat(None, False, None, False))
    if argv[0] == "status" and argv[1:] in ([], ["--json"]):  # a tree running: no bus (status_light)
        from actors.cli.status_light import status

        return _exit_as_typer(lambda: status(as_json=argv[1:] == ["--json"]))
    if argv[0] == "serve":  # plain options: the daemon spawned without typer and the command modules
        from actors.cli.serve_fast import plain_serve_args, serve_exit

        if (plain := plain_serve_args(argv[1:])) is not None:
            return _exit_as_typer(lambda: serve_exit(*plain))
    if argv[0] != "ask":
        return False
    kwargs = _ask_args(optional_resume(argv[1:]))
    if kwargs is None:
        return False
    from actors.cli.ask_run import run_ask

    return _exit_as_typer(lambda: run_ask(kwargs.pop("prompt"), **kwargs))


def _exit_as_typer(fn: Callable[[], None]) -> bool:
    """Run a command function as the typer app would: ``typer.Exit(code)`` exits with ``code``; Ctrl-C
    outside the command's own handling is click's ``Aborted!`` (exit 1). Typer is not imported for it (a
    command that raises ``typer.Exit`` has imported typer; `geode ask` raises ``SystemExit``)."""
    try:
        fn()
    except KeyboardInterrupt:
        print("\nAborted!", file=sys.stderr)
        raise SystemExit(1) from None
    except BrokenPipeError:  # `geode status | head`: click's quiet exit 1, no traceback
        sys.stdout = None  # type: ignore[assignment]  # nothing flushed at exit into the closed pipe
        raise SystemExit(1) from None
    except Exception as exc:
        typer_exit = getattr(sys.modules.get("typer"), "Exit", None)
        if typer_exit is not None and isinstance(exc, typer_exit):
            raise SystemExit(exc.exit_code) from None
        raise
    return True


def main() -> None:
    argv = sys.argv[1:]
    if argv == ["--version"]:  # the version alone: no command module, no config, no typer
        from actors.cli.daemon_link import client_version

        print(f"geode {client_version()}")
        return
    if argv == ["--help"] and os.environ.get(HOT_ENV, "1") != "0":  # the stored page: no command module
        from actors.cli.help_page import print_page

        print_page()
        return
    if argv[:1] == ["mcp"]:  # an MCP host waits on initialize: no typer, no CLI modules first
        from actors.cli.mcp_cmds import main as mcp_main

        raise SystemExit(mcp_main(argv[1:]))
    from actors.cli.config_note import note_broken_config
    from geode.protocol.errors import ConfigError

    try:
        note_broken_config(argv)
        if os.environ.get(HOT_ENV, "1") != "0" and _run_hot(argv):
            return
        args = optional_resume(argv)
        build_app(args)(args=args, prog_name="geode")
    except ConfigError as exc:  # a config a command needs is broken: its one line, never a traceback
        print(f"geode: {exc.message or exc}", file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def entry() -> None:
    """The `geode` console script: :func:`main`; the short client commands end without the interpreter's
    teardown (:mod:`actors.cli.quick_exit`)."""
    from actors.cli.quick_exit import QUICK_COMMANDS, run_then_exit

    if sys.argv[1:2] and sys.argv[1] in QUICK_COMMANDS:
        run_then_exit(main)
    main()


if __name__ == "__main__":
    entry()
