"""`geode` entry point: one typer app; each command group lives in its own module with ``register(app)``."""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported in build_app: `geode mcp` answers its host before typer is loaded
    import typer

# Command modules, each exposing ``register(app: typer.Typer) -> None``.
COMMAND_MODULES = (
    "actors.cli.serve_cmds",  # serve, status, stop, restart
    "actors.cli.records_cmds",  # sessions, timeline, receipts, reconcile
    "actors.cli.provider_cmds",  # scripted-provider
    "actors.cli.chat_cmds",  # interactive chat, ask, doctor
    "actors.cli.messengers_view",  # messengers
    "actors.cli.mcp_servers_view",  # mcp-servers
    "actors.cli.mcp_cmds",  # mcp (dispatched early by main())
    "actors.cli.trust_cmds",  # trust
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


def build_app() -> typer.Typer:
    import typer

    _plain_flags()
    app = typer.Typer(add_completion=False, no_args_is_help=False, help="GEODE agent host")
    for name in COMMAND_MODULES:  # our own modules: one that fails to import is a bug, not a missing command
        importlib.import_module(name).register(app)
    return app


def main() -> None:
    if sys.argv[1:2] == ["mcp"]:  # an MCP host waits on initialize: no typer, no CLI modules first
        from actors.cli.mcp_cmds import main as mcp_main

        raise SystemExit(mcp_main(sys.argv[2:]))
    build_app()(args=optional_resume(sys.argv[1:]), prog_name="geode")


if __name__ == "__main__":
    main()
