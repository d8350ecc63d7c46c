"""`geode` entry point: one typer app; each command group lives in its own module with ``register(app)``."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:  # imported in build_app: `geode mcp` answers its host before typer is loaded
    import argparse

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


class _NotHot(Exception):
    """Not a plain hot command line: let the typer app parse it (its usage errors, its help)."""


def _hot_parser() -> argparse.ArgumentParser:
    """`geode ask`'s parser (argparse imported here: `status` and `--version` never parse with it)."""
    import argparse

    class HotParser(argparse.ArgumentParser):
        def error(self, message: str) -> NoReturn:
            raise _NotHot(message)

    def fixed_width(prog: str) -> argparse.HelpFormatter:  # the default asks shutil for the terminal's width
        return argparse.HelpFormatter(prog, width=100)

    p = HotParser(prog="geode ask", add_help=False, allow_abbrev=False, formatter_class=fixed_width)
    p.add_argument("prompt")
    p.add_argument("--json", dest="as_json", action="store_true")
    p.add_argument("--resume", default=None)
    p.add_argument("--continue", dest="cont", action="store_true")
    p.add_argument("--model", default=None)
    p.add_argument("--dangerously-skip-permissions", dest="skip", action="store_true")
    p.add_argument("--timeout", type=float, default=3600.0)
    p.add_argument("--output-format", dest="output_format", default=argparse.SUPPRESS)  # stream_json.FORMATS
    return p


def _ask_args(argv: list[str]) -> dict[str, Any] | None:
    """``geode ask`` options as ``run_ask`` keywords (the same options as ``chat_cmds.ask``), or None for
    anything else (``--help``, a usage error): those go through the typer app as before."""
    if any(a in ("--help", "-h") for a in argv[: argv.index("--") if "--" in argv else len(argv)]):
        return None
    try:
        return vars(_hot_parser().parse_args(argv))
    except _NotHot:
        return None


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
