"""`geode scripted-provider` (serve a scenario over the Anthropic/OpenAI wires) and `geode providers`."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import typer


def scripted_provider(
    scenario: Path = typer.Option(
        None, "--scenario", "-s", exists=True, dir_okay=False, help="JSON/TOML scenario"
    ),
    function: str = typer.Option(None, "--function", "-f", help="module:callable of the recorded request"),
    port: int = typer.Option(0, "--port", "-p", help="TCP port on 127.0.0.1 (0 = any free port)"),
) -> None:
    """Serve a scripted LLM endpoint; prints its base URL, then serves until SIGINT/SIGTERM."""
    import importlib

    from geode.testing.scenario import load_scenario
    from geode.testing.scripted import ScriptedServer

    if (scenario is None) == (function is None):
        raise typer.BadParameter("give exactly one of --scenario FILE or --function module:callable")
    if function is not None:
        module, _, attr = function.partition(":")
        try:
            source = getattr(importlib.import_module(module), attr or "reply")
        except (ImportError, AttributeError) as exc:  # a typo in the README's command: one line, no traceback
            raise typer.BadParameter(f"{function}: {exc}", param_hint="--function") from None
    else:
        source = load_scenario(scenario)
    try:
        server = ScriptedServer(source, port=port).start()
    except OSError as exc:  # e.g. the port is taken (a second scripted provider)
        raise typer.BadParameter(f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}") from None
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    typer.echo(server.base_url, color=False)
    typer.echo(f"# ANTHROPIC_BASE_URL={server.base_url}  OPENAI_BASE_URL={server.openai_base_url}", err=True)
    try:
        done.wait()
    finally:
        server.stop()


def providers(
    model: str = typer.Option(None, "--model", "-m", help="model id (default: GEODE_MODEL / config)"),
) -> None:
    """Which providers are usable (no secrets printed) and what the model resolves to."""
    from geode.providers.report import provider_report
    from geode.providers.selection import resolve_settings

    for status in provider_report():
        typer.echo(status.line())
    s = resolve_settings(model)
    typer.echo(f"model {s.model} -> {s.provider} ({s.wire}) at {s.base_url}")


def register(app: typer.Typer) -> None:
    app.command("scripted-provider")(scripted_provider)
    app.command("providers")(providers)
