"""`geode reload [--dry-run]`: check config.toml, print what changes against what the tree runs on (per
area, and what needs `geode serve` again), then have every child apply it and wait for their confirmations.

Children are told in two rounds: first store, executor, control and messengers (the executor reloads its
hooks and MCP hub, the messengers child restarts itself), then the loop workers, which ask for the new
catalogue, and lanes, which tells the remote loop workers to ask for it too."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from geode.home import GeodeHome

EXIT_CONFIG = 78
RELOAD_WAIT_S = 75.0  # a messengers restart waits for its posts under way (55 s at most), then reconnects
ASK_AGAIN_S = 1.0  # the event is a PUB: a child that has not confirmed by then is told again
ROUNDS = (["store", "executor", "control", "messengers", "scheduler", "webhooks"], ["loop", "lanes"])


def reload_daemon(
    home: GeodeHome, *, echo: Callable[..., None], dry_run: bool = False, wait_s: float = RELOAD_WAIT_S
) -> int:
    """Refuse an invalid config (exit 78, one line per problem, nothing changes); print the difference; unless
    ``dry_run``, write the tree's copy and have every running child apply it (0 once all confirmed)."""
    from actors.tree.client import is_running
    from actors.tree.config_sections import TreeSettings, check_home_config
    from geode.config_file import remember_good
    from geode.config_reload import LOOP, diff_config, env_digests, remember_env, remembered_env
    from geode.config_source import ConfigSource

    prog = "geode reload --dry-run" if dry_run else "geode reload"
    report = check_home_config(home)
    for line in report.warnings:
        echo(f"{prog}: warning: {line}", err=True)
    if not report.ok:
        for line in report.errors:
            echo(f"{prog}: {line}", err=True)
        echo(f"{prog}: config not re-read; the daemon keeps its current one", err=True)
        return EXIT_CONFIG
    if not is_running(home):
        echo("geode is not running; `geode serve` reads the config when it starts", err=True)
        return 1
    old = ConfigSource(home, TreeSettings.from_raw, tree=True).snapshot  # the tree's copy
    new = TreeSettings.from_raw(report.config)
    change = diff_config(old, new, remembered_env(home), env_digests(home.load_dotenv()))
    if dry_run:
        for line in change.lines():
            echo(f"would apply: {line}" if not line.startswith(("needs", "nothing")) else line)
        return 0
    remember_good(home, report.source)  # the children's source from now on (and a broken file's fallback)
    remember_env(home)
    stamp, asked = uuid.uuid4().hex, time.time()
    end = time.monotonic() + wait_s
    missing, errors = [], []
    for kinds in ROUNDS:
        m, e = _round(home, stamp, kinds, end)
        missing += m
        errors += e
    for line in change.lines():
        echo(line)
    if LOOP in change.areas or change.env_keys:
        errors += _new_sessions(home, asked, echo)
    for line in errors:
        echo(f"{prog}: {line}", err=True)
    if missing:
        echo(
            f"{prog}: not confirmed within {wait_s:g}s by {', '.join(missing)} (see {home.logs_dir})",
            err=True,
        )
    return 1 if missing or errors else 0


def _new_sessions(home: GeodeHome, asked: float, echo: Callable[..., None]) -> list[str]:
    """What new sessions use now, as the loop workers published it when they applied the reload."""
    from actors.cli.provider_view import describe
    from geode.providers.live import daemon_view

    view = daemon_view(home)
    if view is None or float(view.get("at", 0)) < asked:
        return []
    if view.get("problem"):
        return [f"new sessions will fail: {view['problem']}"]
    echo(f"new sessions use {describe(view)}")
    return []


def _round(home: GeodeHome, stamp: str, kinds: list[str], end: float) -> tuple[list[str], list[str]]:
    """Tell the running children of ``kinds``; wait for each to confirm (or to have restarted). Returns the
    children that did not within the deadline, and the errors those that did reported."""
    from actors.tree.client import ENDPOINT, client_bus
    from geode.protocol import runtime

    with client_bus(home) as bus:
        asked = runtime.ReloadAsked.model_validate(
            bus.transport.call(ENDPOINT, runtime.TREE_RELOAD, runtime.ReloadTree(stamp=stamp, children=kinds))
        ).asked
        pending, errors, told_at = set(asked), [], time.monotonic()
        while pending and time.monotonic() < end:
            state = runtime.ReloadState.model_validate(
                bus.transport.call(ENDPOINT, runtime.TREE_RELOAD_STATE, runtime.ReloadQuery(stamp=stamp))
            )
            for got in state.confirmed:
                if got.name in pending and got.error:
                    errors.append(f"{got.name}: kept its config: {got.error}")
                pending.discard(got.name)
            pending.difference_update(state.restarted)
            if pending and time.monotonic() - told_at > ASK_AGAIN_S:
                again = runtime.ReloadTree(stamp=stamp, children=sorted(pending))
                bus.transport.call(ENDPOINT, runtime.TREE_RELOAD, again)
                told_at = time.monotonic()
            if pending:
                time.sleep(0.05)
    return sorted(pending), errors
