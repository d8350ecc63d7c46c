"""`geode` entry point: one typer app; each command group lives in its own module with ``register(app)``."""

from __future__ import annotations

import importlib

import typer

# Command modules, each exposing ``register(app: typer.Typer) -> None``.
COMMAND_MODULES = (
    "actors.cli.serve_cmds",  # serve, status, stop, restart
    "actors.cli.records_cmds",  # sessions, timeline, receipts, reconcile
    "actors.cli.provider_cmds",  # scripted-provider
    "actors.cli.chat_cmds",  # interactive chat, ask, doctor
)


def build_app() -> typer.Typer:
    app = typer.Typer(add_completion=False, no_args_is_help=False, help="GEODE agent host")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        mod.register(app)
    return app


def main() -> None:
    build_app()()


if __name__ == "__main__":
    main()
